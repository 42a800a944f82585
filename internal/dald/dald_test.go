package dald

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/dal-runtime/dal/internal/promtest"
	"github.com/dal-runtime/dal/internal/wire"
)

// syncBuffer is dald's log, written by its goroutines and read by the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// startDald runs dald in this process with a real eBPF tracer and returns
// its socket and metrics address once it has told systemd's notification
// socket it is ready.
func startDald(t *testing.T) (sock, metricsAddr string, log *syncBuffer) {
	dir := t.TempDir()
	notify := filepath.Join(dir, "notify")
	ready, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: notify, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer ready.Close()
	t.Setenv("NOTIFY_SOCKET", notify)
	sock, metricsAddr, log = filepath.Join(dir, "dald.sock"), promtest.FreePort(t), &syncBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- App(io.Discard, log).RunContext(ctx, []string{"dald", "--socket", sock, "--metrics-addr", metricsAddr,
			"--no-go-metrics", "--no-process-metrics"})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("dald: %v\n%s", err, log.String())
		}
	})
	buf := make([]byte, 256)
	for {
		n, err := ready.Read(buf)
		if err != nil {
			t.Fatalf("dald never said it was ready: %v\n%s", err, log.String())
		}
		if strings.Contains(string(buf[:n]), "READY=1") {
			return sock, metricsAddr, log
		}
	}
}

// attached asks dald's status whether the tracer's hooks are attached.
func attached(t *testing.T, sock string) bool {
	t.Helper()
	cl, _, err := wire.Dial(sock, wire.Request{Role: wire.RoleCtl})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	rep, err := cl.Call(wire.Request{Op: wire.OpStatus})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Tracing {
		t.Fatalf("dald does not trace (these tests need root and a kernel with BTF): %s", rep.Reason)
	}
	return rep.Attached
}

// scrapedAttached returns the dal_tracer_attached line of /metrics.
func scrapedAttached(t *testing.T, addr string) string {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(body)) {
		if strings.HasPrefix(line, "dal_tracer_attached ") {
			return strings.TrimSpace(line)
		}
	}
	t.Fatalf("/metrics has no dal_tracer_attached:\n%s", body)
	return ""
}

// TestTracerAttachedOnlyWithTracedSession runs dald with its real tracer:
// its hooks are detached while no session is traced, attached from a
// session's trace.start to its end, and status, /metrics and a real
// Prometheus scraping it say so.
func TestTracerAttachedOnlyWithTracedSession(t *testing.T) {
	if testing.Short() {
		t.Skip("attaches the eBPF tracer: skipped under -short (testing.Short())")
	}
	sock, addr, _ := startDald(t)
	if attached(t, sock) {
		t.Error("status: hooks attached before any session")
	}
	if got := scrapedAttached(t, addr); got != "dal_tracer_attached 0" {
		t.Errorf("/metrics before any session: %q", got)
	}

	// A session that is not traced attaches nothing.
	exec, _, err := wire.Dial(sock, wire.Request{Role: wire.RoleExec})
	if err != nil {
		t.Fatal(err)
	}
	defer exec.Close()
	open, err := exec.Call(wire.Request{Op: wire.OpSessionOpen, Mode: "logged"})
	if err != nil {
		t.Fatal(err)
	}
	if attached(t, sock) {
		t.Error("status: hooks attached for a session that is not traced")
	}

	// trace.start tracks this process (the connection's peer); it never
	// execs, so nothing is counted, but the session is traced.
	rep, err := exec.Call(wire.Request{Op: wire.OpTraceStart, Session: open.Session, FromExec: 1})
	if err != nil || !rep.Tracing {
		t.Fatalf("trace.start: %+v, %v", rep, err)
	}
	if !attached(t, sock) {
		t.Error("status: hooks detached while a session is traced")
	}
	if got := scrapedAttached(t, addr); got != "dal_tracer_attached 1" {
		t.Errorf("/metrics while a session is traced: %q", got)
	}
	prom := promtest.Start(t, addr)
	prom.WaitFor(`dal_tracer_attached{job="dal"} == 1`)

	if _, err := exec.Call(wire.Request{Op: wire.OpSessionClose, Session: open.Session}); err != nil {
		t.Fatal(err)
	}
	if attached(t, sock) {
		t.Error("status: hooks attached after the traced session closed")
	}
	if got := scrapedAttached(t, addr); got != "dal_tracer_attached 0" {
		t.Errorf("/metrics after the traced session closed: %q", got)
	}
	prom.WaitFor(`dal_tracer_attached{job="dal"} == 0`)
}
