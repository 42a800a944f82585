package metrics

import (
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkRecord prices the calls on dald's hot paths against a bare
// atomic add, the floor any counter pays. Compare within one run.
func BenchmarkRecord(b *testing.B) {
	m := New(Options{})
	var floor atomic.Uint64
	for _, bb := range []struct {
		name string
		fn   func()
	}{
		{"baseline-atomic-add", func() { floor.Add(1) }},
		{"AddSyscalls", func() { m.AddSyscalls(CategoryNetwork, 1) }},
		{"AddClockReads", func() { m.AddClockReads(1) }},
		{"ObserveReplay", func() { m.ObserveReplay(0.8) }},
		{"ObserveRevert", func() { m.ObserveRevert(3 * time.Millisecond) }},
		{"SessionStartedEnded", func() { m.SessionStarted(); m.SessionEnded() }},
	} {
		b.Run(bb.name, func(b *testing.B) {
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					bb.fn()
				}
			})
		})
	}
}

// BenchmarkScrape prices one /metrics request with and without the Go and
// process collectors.
func BenchmarkScrape(b *testing.B) {
	for _, bb := range []struct {
		name string
		opts Options
	}{
		{"dal-only", Options{BPFStats: sampleBPF}},
		{"with-go-and-process", Options{GoCollector: true, ProcessCollector: true, BPFStats: sampleBPF}},
	} {
		h := New(bb.opts).Handler()
		b.Run(bb.name, func(b *testing.B) {
			for b.Loop() {
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
				if rec.Code != http.StatusOK {
					b.Fatal(rec.Code)
				}
			}
		})
	}
}
