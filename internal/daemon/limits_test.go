package daemon

import (
	"bufio"
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dal-runtime/dal/internal/wire"
)

func startWith(t *testing.T, lim Limits) *Server {
	t.Helper()
	srv, err := Listen(filepath.Join(t.TempDir(), "dald.sock"), Options{Limits: lim})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Shutdown(context.Background()) })
	return srv
}

// TestPerSessionLimits fills each per-session limit: the refusal names the
// limit's flag, the session carries one "limit" drift entry, and the
// session goes on working below the limit.
func TestPerSessionLimits(t *testing.T) {
	cases := []struct {
		name string
		lim  Limits
		// fill sends requests until one is refused and returns that error.
		fill func(c *wire.Client, srv *Server, id string) error
		flag string
	}{
		{"ticks", Limits{Ticks: 10}, func(c *wire.Client, _ *Server, id string) error {
			for {
				if _, err := c.Call(wire.Request{Op: wire.OpTicksPut, Session: id, Kinds: make([]byte, 3), Values: make([]int64, 3)}); err != nil {
					return err
				}
			}
		}, "max-ticks"},
		{"report timers", Limits{Ticks: 10}, func(c *wire.Client, _ *Server, id string) error {
			_, err := c.Call(wire.Request{Op: wire.OpReport, Session: id, Timers: make([][2]int64, 11)})
			return err
		}, "max-ticks"},
		{"draws", Limits{DrawBytes: 100}, func(c *wire.Client, _ *Server, id string) error {
			for {
				if _, err := c.Call(wire.Request{Op: wire.OpDrawsPut, Session: id, Label: "os.urandom", Data: make([]byte, 30)}); err != nil {
					return err
				}
			}
		}, "max-draw-bytes"},
		{"spawns", Limits{Spawns: 3}, func(c *wire.Client, _ *Server, id string) error {
			for {
				if _, err := c.Call(wire.Request{Op: wire.OpSpawn, Session: id}); err != nil {
					return err
				}
			}
		}, "max-spawns"},
		{"streams", Limits{Streams: 3}, func(_ *wire.Client, srv *Server, id string) error {
			for {
				c, _, err := wire.Dial(srv.Path(), wire.Request{Role: wire.RoleShim, Session: id, Token: tokenOf(id), Stream: "0"})
				if err != nil {
					return err
				}
				defer c.Close()
			}
		}, "max-streams"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := startWith(t, tc.lim)
			ex, id := execClientMode(t, srv, "logged")
			c, _ := shim(t, srv, id, "0")
			err := tc.fill(c, srv, id)
			if !errors.Is(err, wire.ErrRemote) || !strings.Contains(err.Error(), "dald --"+tc.flag) {
				t.Fatalf("refusal %v does not name --%s", err, tc.flag)
			}
			// Refused again, but noted once.
			tc.fill(c, srv, id)
			d, err := ex.Call(wire.Request{Op: wire.OpSessionDump, Session: id})
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for _, dr := range d.Drift {
				if dr.What == "limit" && strings.Contains(dr.Detail, tc.flag) {
					n++
				}
			}
			if n != 1 {
				t.Fatalf("drift %+v: want one limit entry naming --%s", d.Drift, tc.flag)
			}
			// The session still answers.
			if _, err := c.Call(wire.Request{Op: wire.OpScheduleFetch, Session: id}); err != nil {
				t.Fatalf("session broken after the refusal: %v", err)
			}
		})
	}
}

func TestSessionAndConnectionLimits(t *testing.T) {
	srv := startWith(t, Limits{Sessions: 1, Conns: 3})
	_, id := execClient(t, srv) // connection 1, session 1
	other, _, err := wire.Dial(srv.Path(), wire.Request{Role: wire.RoleExec})
	if err != nil { // connection 2
		t.Fatal(err)
	}
	defer other.Close()
	if _, err := other.Call(wire.Request{Op: wire.OpSessionOpen, Mode: "strict"}); err == nil || !strings.Contains(err.Error(), "dald --max-sessions") {
		t.Fatalf("second session: %v", err)
	}
	shim(t, srv, id, "0") // connection 3
	_, _, err = wire.Dial(srv.Path(), wire.Request{Role: wire.RoleCtl})
	if err == nil || !strings.Contains(err.Error(), "dald already serves 3 clients") || !strings.Contains(err.Error(), "dald --max-conns") {
		t.Fatalf("fourth connection: %v", err)
	}
}

// TestIdleConnectionsCloseSessionConnectionsDoNot: a client that holds no
// session is closed after the idle timeout with a reply saying so; a
// shim and a dal-exec of an open session, silent for longer, are not; when
// the session closes, its shim's connection is closed too.
func TestIdleConnectionsCloseSessionConnectionsDoNot(t *testing.T) {
	srv := startWith(t, Limits{IdleTimeout: 50 * time.Millisecond})
	ex, id := execClient(t, srv)
	sh, _ := shim(t, srv, id, "0")
	ctl, err := net.Dial("unix", srv.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer ctl.Close()
	r := bufio.NewReader(ctl)
	ctl.Write(frame(mustEncode(wire.Request{Op: wire.OpHello, ID: 1, Proto: wire.Proto, Role: wire.RoleCtl})))
	if body, err := wire.ReadFrame(r, wire.DefaultMaxFrame); err != nil {
		t.Fatal(err)
	} else if rep, _ := wire.DecodeReply(body); !rep.OK {
		t.Fatalf("hello %+v", rep)
	}
	// Wait for the idle client's notice: no clock involved in the test.
	body, err := wire.ReadFrame(r, wire.DefaultMaxFrame)
	if err != nil {
		t.Fatalf("idle client got no notice: %v", err)
	}
	rep, _ := wire.DecodeReply(body)
	if rep.OK || rep.ID != 0 || !strings.Contains(rep.Err, "dald --idle-timeout") {
		t.Fatalf("idle notice %+v", rep)
	}
	if _, err := r.ReadByte(); err == nil {
		t.Fatal("idle connection left open")
	}
	// Both session connections were idle at least as long, and still work.
	if _, err := sh.Call(wire.Request{Op: wire.OpTicksPut, Session: id, Kinds: []byte{0}, Values: []int64{1}}); err != nil {
		t.Fatalf("shim of an open session closed as idle: %v", err)
	}
	if _, err := ex.Call(wire.Request{Op: wire.OpSessionClose, Session: id}); err != nil {
		t.Fatalf("dal-exec of an open session closed as idle: %v", err)
	}
	if _, err := sh.Call(wire.Request{Op: wire.OpTicksPut, Session: id, Kinds: []byte{0}, Values: []int64{1}}); err == nil {
		t.Fatal("a shim's connection outlived its session")
	}
}

func heapInUse() int64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapInuse)
}

// runtimeHeld is the memory the Go runtime holds from the OS: all it
// mapped less the heap pages it returned.
func runtimeHeld() int64 {
	m := []metrics.Sample{{Name: "/memory/classes/total:bytes"}, {Name: "/memory/classes/heap/released:bytes"}}
	metrics.Read(m)
	return int64(m[0].Value.Uint64() - m[1].Value.Uint64())
}

// rssKiB reads VmRSS of this process.
func rssKiB(t *testing.T) int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return n
		}
	}
	t.Fatal("no VmRSS in /proc/self/status")
	return 0
}

// TestFloodedSessionMemoryReturns floods one session at the default limits
// (ticks, draws, spawns, drift) until dald refuses, then closes it: dald's
// memory stays under the limits' bound while flooded and returns after.
// Server and client share this process; both are measured.
func TestFloodedSessionMemoryReturns(t *testing.T) {
	if testing.Short() {
		t.Skip("floods a session with gigabytes of frames (10 s, minutes under -race): skipped under -short (testing.Short())")
	}
	srv := startWith(t, Limits{})
	debug.FreeOSMemory()
	heap0, rss0, held0 := heapInUse(), rssKiB(t), runtimeHeld()

	ex, id := execClientMode(t, srv, "logged")
	sh, _ := shim(t, srv, id, "0")
	const batch = 256 << 10 // ticks per put: a 2.3 MiB frame
	kinds, values := make([]byte, batch), make([]int64, batch)
	for i := range values {
		values[i] = 1795342065885690700 + int64(i)
	}
	ticks := 0
	for {
		_, err := sh.Call(wire.Request{Op: wire.OpTicksPut, Session: id, Kinds: kinds, Values: values})
		if err != nil {
			if !strings.Contains(err.Error(), "dald --max-ticks") {
				t.Fatal(err)
			}
			break
		}
		ticks += batch
	}
	chunk := make([]byte, 1<<20)
	draws := 0
	for {
		_, err := sh.Call(wire.Request{Op: wire.OpDrawsPut, Session: id, Label: "os.urandom", Data: chunk})
		if err != nil {
			if !strings.Contains(err.Error(), "dald --max-draw-bytes") {
				t.Fatal(err)
			}
			break
		}
		draws += len(chunk)
	}
	spawns := 0
	for {
		if _, err := sh.Call(wire.Request{Op: wire.OpSpawn, Session: id}); err != nil {
			if !strings.Contains(err.Error(), "dald --max-spawns") {
				t.Fatal(err)
			}
			break
		}
		spawns++
	}
	heap1, rss1 := heapInUse(), rssKiB(t)

	sh.Close()
	ex.Close()
	// The session ends when its dal-exec's connection is gone.
	for srv.Clients() > 0 {
		runtime.Gosched()
	}
	debug.FreeOSMemory()
	heap2, rss2, held2 := heapInUse(), rssKiB(t), runtimeHeld()
	t.Logf("held %d ticks, %d MiB of draws, %d spawn names", ticks, draws>>20, spawns)
	t.Logf("heap in use: before %d MiB, flooded %d MiB, after close %d MiB", heap0>>20, heap1>>20, heap2>>20)
	t.Logf("RSS:         before %d MiB, flooded %d MiB, after close %d MiB", rss0>>10, rss1>>10, rss2>>10)
	t.Logf("held by the Go runtime: before %d MiB, after close %d MiB", held0>>20, held2>>20)

	if ticks != DefaultLimits.Ticks || draws < DefaultLimits.DrawBytes-len(chunk) || draws > DefaultLimits.DrawBytes {
		t.Fatalf("held %d ticks and %d bytes of draws, want the limits %d and %d", ticks, draws, DefaultLimits.Ticks, DefaultLimits.DrawBytes)
	}
	// Ticks take 9 bytes, draws 1, a reserved name a few hundred; slices
	// grow by up to twice their length.
	bound := int64(2*9*DefaultLimits.Ticks + 2*DefaultLimits.DrawBytes + 512*DefaultLimits.Spawns)
	if heap1-heap0 > bound {
		t.Errorf("flooded session grew the heap by %d MiB, over the limits' bound of %d MiB", (heap1-heap0)>>20, bound>>20)
	}
	if heap2-heap0 > 16<<20 {
		t.Errorf("heap after the session closed is %d MiB above where it started", (heap2-heap0)>>20)
	}
	if held2-held0 > 64<<20 {
		t.Errorf("the Go runtime holds %d MiB more from the OS after the session closed than before", (held2-held0)>>20)
	}
	switch {
	case raceDetector:
		// The race detector's shadow memory of the flooded heap stays
		// in RSS after the heap is returned (over 700 MiB here): RSS
		// measures the detector, so the runtime's own account above
		// is the check.
	case rss2-rss0 > 64<<10:
		t.Errorf("RSS after the session closed is %d MiB above where it started", (rss2-rss0)>>10)
	}
}
