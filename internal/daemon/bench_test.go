package daemon

import (
	"context"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/dal-runtime/dal/internal/wire"
)

// BenchmarkRoundTrip measures one request/reply over the socket (a tick
// prefetch page of 16), reporting p50 and p99 latencies.
func BenchmarkRoundTrip(b *testing.B) {
	srv, err := Listen(filepath.Join(b.TempDir(), "d.sock"), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Shutdown(context.Background())
	ex, _, _ := wire.Dial(srv.Path(), wire.Request{Role: wire.RoleExec})
	defer ex.Close()
	rep, _ := ex.Call(wire.Request{Op: wire.OpSessionOpen, Mode: "strict"})
	sh, _, _ := wire.Dial(srv.Path(), wire.Request{Role: wire.RoleShim, Session: rep.Session, Token: rep.Token})
	defer sh.Close()
	req := wire.Request{Op: wire.OpTicksFetch, Session: rep.Session, Max: 16}
	lat := make([]time.Duration, 0, b.N)
	for b.Loop() {
		t := time.Now()
		if _, err := sh.Call(req); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t))
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds()), "p50-ns")
	b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds()), "p99-ns")
}

// BenchmarkSession measures a whole session's control traffic: exec
// connect, open, one shim hello and report, dump, close.
func BenchmarkSession(b *testing.B) {
	srv, err := Listen(filepath.Join(b.TempDir(), "d.sock"), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Shutdown(context.Background())
	start := time.Now()
	for b.Loop() {
		ex, _, err := wire.Dial(srv.Path(), wire.Request{Role: wire.RoleExec})
		if err != nil {
			b.Fatal(err)
		}
		rep, _ := ex.Call(wire.Request{Op: wire.OpSessionOpen, Mode: "strict"})
		sh, _, err := wire.Dial(srv.Path(), wire.Request{Role: wire.RoleShim, Session: rep.Session, Token: rep.Token})
		if err != nil {
			b.Fatal(err)
		}
		sh.Call(wire.Request{Op: wire.OpReport, Session: rep.Session, Reads: 1})
		sh.Close()
		ex.Call(wire.Request{Op: wire.OpSessionDump, Session: rep.Session})
		ex.Call(wire.Request{Op: wire.OpSessionClose, Session: rep.Session})
		ex.Close()
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "sessions/s")
}
