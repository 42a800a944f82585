package gate

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestQueue: a request waits for its one verdict; a second answer is
// refused; an unanswered one is denied by timeout.
func TestQueue(t *testing.T) {
	q := NewQueue("agent.sh")
	r := q.Add(Request{Kind: "exec", Summary: "git push"})
	if p := q.Pending(); len(p) != 1 || p[0].ID != r.ID || p[0].Run != "agent.sh" {
		t.Fatalf("pending: %+v", p)
	}
	go q.Decide(r.ID, Verdict{Approve: true, By: "test"})
	if v := q.Wait(context.Background(), r.ID); !v.Approve || v.By != "test" || v.At.IsZero() {
		t.Fatalf("verdict %+v", v)
	}
	if err := q.Decide(r.ID, Verdict{}); !errors.Is(err, ErrUnknown) {
		t.Fatalf("second answer: %v", err)
	}
	r2 := q.Add(Request{Kind: "http"})
	ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
	defer cancel()
	if v := q.Wait(ctx, r2.ID); v.Approve || v.By != "timeout" {
		t.Fatalf("timed out: %+v", v)
	}
	if len(q.Pending()) != 0 {
		t.Fatal("a timed-out request is still pending")
	}
}

// TestSocket: another process of the same user lists and decides over
// the socket, and the verdict names it.
func TestSocket(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "gate")
	q := NewQueue("python3 agent.py")
	s, err := Serve(q, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	r := q.Add(Request{Kind: "http", Summary: "POST https://x/y", Input: map[string]any{"kind": "http"}})
	ls := List(context.Background(), dir)
	if len(ls) != 1 || len(ls[0].Pending) != 1 || ls[0].Pending[0].ID != r.ID || ls[0].Run != "python3 agent.py" {
		t.Fatalf("list: %+v", ls)
	}
	done := make(chan Verdict)
	go func() { done <- q.Wait(context.Background(), r.ID) }()
	if err := Decide(context.Background(), dir, r.ID, false, "a test", "not today\nsecond line"); err != nil {
		t.Fatal(err)
	}
	v := <-done
	if v.Approve || !strings.HasPrefix(v.By, "uid ") || !strings.HasSuffix(v.By, " via a test") || v.Reason != "not today" {
		t.Fatalf("verdict %+v", v)
	}
	if err := Decide(context.Background(), dir, r.ID, true, "a test", ""); !errors.Is(err, ErrUnknown) {
		t.Fatalf("deciding again: %v", err)
	}
	if err := Decide(context.Background(), dir, "999999999.1", true, "a test", ""); err == nil || !strings.Contains(err.Error(), "no running dal-exec holds") {
		t.Fatalf("a run that is gone: %v", err)
	}
	if err := Decide(context.Background(), dir, "../../x", true, "a test", ""); err == nil || !strings.Contains(err.Error(), "is not a request ID") {
		t.Fatalf("a bad ID: %v", err)
	}
}

// TestSandboxedPeerCannotDecide: a process in another PID namespace (as
// the agent is) connects but is refused. A user namespace of its own lets
// it make one without root too.
func TestSandboxedPeerCannotDecide(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "gate")
	q := NewQueue("agent")
	s, err := Serve(q, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	r := q.Add(Request{Kind: "exec"})
	script := `import socket, sys
c = socket.socket(socket.AF_UNIX); c.connect(sys.argv[1])
try:
    c.sendall(b'{"op":"decide","id":"` + r.ID + `","approve":true}\n')
except OSError:
    pass  # refused and closed before reading
print(c.makefile().readline().strip())`
	out, err := exec.Command("unshare", "--user", "--map-root-user", "--pid", "--fork", "python3", "-c", script, s.Path()).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "another PID namespace") {
		t.Fatalf("%v: %s", err, out)
	}
	if len(q.Pending()) != 1 {
		t.Fatal("the sandboxed peer decided")
	}
}

// TestDirRefused: a planted symbolic link, or a directory open to
// others, is not used for the socket.
func TestDirRefused(t *testing.T) {
	base := t.TempDir()
	target := filepath.Join(base, "elsewhere")
	os.Mkdir(target, 0o700)
	link := filepath.Join(base, "gate")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	if _, err := Serve(NewQueue("x"), link); err == nil || !strings.Contains(err.Error(), "not a private directory of yours") {
		t.Fatalf("symlink: %v", err)
	}
	open := filepath.Join(base, "open")
	os.Mkdir(open, 0o777)
	os.Chmod(open, 0o777)
	if _, err := Serve(NewQueue("x"), open); err == nil {
		t.Fatal("a directory open to others was used")
	}
	if m, _ := filepath.Glob(filepath.Join(target, "*")); len(m) != 0 {
		t.Fatalf("something was created through the link: %v", m)
	}
}
