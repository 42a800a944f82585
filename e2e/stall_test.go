package e2e

import (
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestServerThatNeverAnswers: an agent whose LLM call has a 1 s timeout,
// against a server that never answers, is held (its response is owed)
// until the stall limit, then times out; dal says the stall limit decided
// it (an escape in syscalls.json); the replay reproduces the timeout.
func TestServerThatNeverAnswers(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv.Listener = l
	srv.Start()
	t.Cleanup(func() { close(release); srv.Close() })
	addr := l.Addr().String()
	agent := filepath.Join(t.TempDir(), "agent.py")
	os.WriteFile(agent, []byte(`import os, time, urllib.request
t0 = time.monotonic()
try:
    urllib.request.urlopen(urllib.request.Request(os.environ["LLM_BASE"] + "/chat/completions", data=b"{}"), timeout=1).read()
    print("answered")
except Exception as e:
    print("gave up after", round(time.monotonic() - t0, 3), "s:", type(e).__name__)
`), 0o644)
	ws, out := t.TempDir(), filepath.Join(t.TempDir(), "b")
	r := dalExec(t, []string{"LLM_BASE=http://" + addr + "/v1"}, "record", "--stall-limit", "2s", "--keep-env", "LLM_BASE",
		"--allow-loopback", addr, "--workspace", ws, "--out", out, "--", "python3", agent)
	if r.code != 0 || !strings.HasPrefix(r.stdout, "gave up after") || !strings.Contains(r.stdout, "TimeoutError") {
		t.Fatalf("record: exit %d, stdout %q, want the agent's own timeout\n%s", r.code, r.stdout, r.stderr)
	}
	sys, err := os.ReadFile(filepath.Join(out, "syscalls.json"))
	if err != nil || !strings.Contains(string(sys), "stall") {
		t.Errorf("syscalls.json names no stall escape: %s", sys)
	}
	if !strings.Contains(r.stderr, "stall limit") {
		t.Errorf("record did not say the stall limit decided the timeout:\n%s", r.stderr)
	}
	rep := dalExec(t, nil, "replay", "--workspace", ws, out)
	if !strings.Contains(rep.stdout, "ok     stdout") {
		t.Errorf("the replay did not reproduce the timeout:\n%s\n%s", rep.stdout, rep.stderr)
	}
}
