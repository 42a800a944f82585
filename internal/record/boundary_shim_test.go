package record

import (
	"strings"
	"testing"

	"github.com/dal-runtime/dal/internal/runner"
	"github.com/dal-runtime/dal/vclock"
)

// TestShimCPUClocksAreRealNotEscapes: what a shim reports as cpu_clock (a
// CPU-time clock or resource usage, real in every language as the syscall
// layer leaves them) is listed under real and leaves the clock captured;
// an unserved clock read is an escape and does not.
func TestShimCPUClocksAreRealNotEscapes(t *testing.T) {
	for _, c := range []struct {
		name     string
		unserved map[string]int64
		real     map[string]int64
		escapes  int
		captured bool
	}{
		{"cpu clocks only", map[string]int64{"cpu_clock/time.process_time": 2, "cpu_clock/os.times": 1},
			map[string]int64{"cpu_clock/time.process_time": 4, "cpu_clock/os.times": 2}, 0, true},
		{"and a real clock read", map[string]int64{"cpu_clock/process.cpuUsage": 1, "clock/time.clock_gettime(11)": 1},
			map[string]int64{"cpu_clock/process.cpuUsage": 2}, 2, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			clock := &vclock.File{Streams: []vclock.StreamLog{
				{Stream: "0", Runtime: "python 3.11.7", Reads: 10, Unserved: c.unserved},
				{Stream: "0.1", Runtime: "node v20", Reads: 5, Unserved: c.unserved},
			}}
			b := newBoundary(boundaryInput{clock: clock, mode: "strict", trace: &runner.Trace{Tracing: true}})
			if len(b.Real) != len(c.real) {
				t.Errorf("real = %v, want %v", b.Real, c.real)
			}
			for k, n := range c.real {
				if b.Real[k] != n {
					t.Errorf("real[%q] = %d, want %d", k, b.Real[k], n)
				}
			}
			if len(b.Escapes) != c.escapes {
				t.Errorf("%d escapes, want %d: %v", len(b.Escapes), c.escapes, b.Escapes)
			}
			for _, e := range b.Escapes {
				if strings.Contains(e.Detail, "cpu_clock") || strings.Contains(e.Detail, "process.cpuUsage") {
					t.Errorf("a CPU clock is listed as an escape: %s", e.Detail)
				}
			}
			if got := b.Categories["clock"].Captured; got != c.captured {
				t.Errorf("clock captured = %v, want %v", got, c.captured)
			}
		})
	}
}
