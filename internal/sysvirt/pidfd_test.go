package sysvirt

import (
	"bufio"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// fdHolder is a process that puts a file of the kind it is told under
// descriptor 9, replacing the one there, and says "ok"; "exec" runs it
// again in place. It is single-threaded, blocked reading its orders.
const fdHolder = `
import os, select, socket, sys
keep = []
def listening():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(); keep.append(s); return s
def connected(ready):
    a, b = socket.socketpair(); keep.extend([a, b])
    if ready:
        b.send(b"x")
    return a
def put(f):
    os.dup2(f.fileno(), 9)
def epoll(member):
    e = select.epoll(); e.register(member, select.EPOLLIN); keep.append(e); return e
print("ok", flush=True)
for line in sys.stdin:
    order = line.strip()
    if order == "ready": put(connected(True))
    elif order == "idle": put(connected(False))
    elif order == "listening": put(listening())
    elif order == "epoll-idle": put(epoll(connected(False)))
    elif order == "epoll-listening": put(epoll(listening()))
    elif order == "exec": os.execv(sys.executable, [sys.executable] + sys.argv)
    print("ok", flush=True)
`

// holder is a running fdHolder, traced by a supervisor.
type holder struct {
	pid   int
	s     *Supervisor
	in    io.WriteCloser
	out   *bufio.Reader
	trace chan int // Trace's result
}

// startHolder runs fdHolder under a supervisor's tracer, as the sandbox's
// init does (without a seccomp filter: the test looks at waits itself).
func startHolder(t *testing.T) *holder {
	t.Helper()
	script := filepath.Join(t.TempDir(), "holder.py")
	if err := os.WriteFile(script, []byte(fdHolder), 0o644); err != nil {
		t.Fatal(err)
	}
	h := &holder{s: New(testCfg, -1), trace: make(chan int, 1)}
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		cmd := exec.Command("python3", script)
		var err error
		if h.in, err = cmd.StdinPipe(); err != nil {
			started <- err
			return
		}
		out, err := cmd.StdoutPipe()
		if err != nil {
			started <- err
			return
		}
		h.out = bufio.NewReader(out)
		cmd.Stderr = os.Stderr
		cmd.SysProcAttr = &syscall.SysProcAttr{Ptrace: true}
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		h.pid = cmd.Process.Pid
		started <- nil
		h.trace <- h.s.Trace(h.pid)
	}()
	if err := <-started; err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		h.in.Close()
		<-h.trace
	})
	h.order(t, "")
	return h
}

// order sends one order (none: only reads the greeting) and waits for its
// "ok".
func (h *holder) order(t *testing.T, o string) {
	t.Helper()
	if o != "" {
		if _, err := io.WriteString(h.in, o+"\n"); err != nil {
			t.Fatalf("order %q: %v", o, err)
		}
	}
	if l, err := h.out.ReadString('\n'); err != nil || l != "ok\n" {
		t.Fatalf("order %q: the holder said %q (%v)", o, l, err)
	}
}

// pidfd returns the holder's cached pidfd, as a wait would get it.
func (h *holder) pidfd(t *testing.T) (*proc, int) {
	t.Helper()
	h.s.mu.Lock()
	defer h.s.mu.Unlock()
	p := h.s.procs[h.pid]
	if p == nil {
		t.Fatal("the supervisor does not know the holder")
	}
	fd := h.s.pidfds.get(p)
	if fd < 0 {
		t.Fatal("no pidfd for the holder")
	}
	return p, fd
}

// A wait's descriptor number is judged as the file it names at the call:
// the same number, reused for another kind of file between two waits
// through the same cached pidfd, gets the new file's verdict.
func TestWaitJudgesTheFileANumberNamesNow(t *testing.T) {
	h := startHolder(t)
	cases := []struct {
		order string
		epoll bool
		want  waitVerdict
	}{
		{"ready", false, waitReady},
		{"idle", false, waitReal},        // a connected socket is outstanding I/O
		{"listening", false, waitExpire}, // a listening one is not
		{"idle", false, waitReal},
		{"epoll-idle", true, waitReal},
		{"epoll-listening", true, waitExpire},
		{"ready", false, waitReady},
	}
	_, first := h.pidfd(t)
	for _, c := range cases {
		h.order(t, c.order)
		p, pidfd := h.pidfd(t)
		if pidfd != first {
			t.Fatalf("the pidfd changed from %d to %d without an exec", first, pidfd)
		}
		w := &waitCall{pid: h.pid, timeout: 1e9, epoll: -1}
		if c.epoll {
			w.epoll = 9
		} else {
			w.fds, w.events = []int{9}, []int16{unix.POLLIN | unix.POLLERR | unix.POLLHUP | unix.POLLNVAL}
		}
		l := look(w, p.tgid, pidfd)
		l.close()
		if l.verdict != c.want {
			t.Errorf("after %q: verdict %d, want %d", c.order, l.verdict, c.want)
		}
	}
}

// A process's cached pidfd is dropped at its exec and its exit; a dropped
// one is closed by a later wait, and one of a process that ended reaches
// no process at all.
func TestWaitPidfdDroppedAtExecAndExit(t *testing.T) {
	h := startHolder(t)
	p, before := h.pidfd(t)
	h.order(t, "exec") // answered by the new image: its exec stop is past
	h.s.mu.Lock()
	_, cached := h.s.pidfds.open[p]
	stale := append([]int(nil), h.s.pidfds.stale...)
	h.s.mu.Unlock()
	if cached || len(stale) != 1 || stale[0] != before {
		t.Fatalf("after the exec: cached %v, stale %v, want the pidfd %d stale only", cached, stale, before)
	}
	_, after := h.pidfd(t)
	h.s.mu.Lock()
	closing := h.s.pidfds.takeStale()
	h.s.mu.Unlock()
	for _, fd := range closing {
		unix.Close(fd)
	}
	// The new image's descriptor 9 is reachable through the new pidfd.
	h.order(t, "idle")
	d, err := unix.PidfdGetfd(after, 9, 0)
	if err != nil {
		t.Fatalf("pidfd_getfd through the pidfd opened after the exec: %v", err)
	}
	unix.Close(d)

	h.in.Close()
	if code := <-h.trace; code != 0 {
		t.Fatalf("the holder exited %d", code)
	}
	h.trace <- 0 // for the cleanup
	h.s.mu.Lock()
	_, cached = h.s.pidfds.open[p]
	stale = h.s.pidfds.takeStale()
	h.s.mu.Unlock()
	if cached || len(stale) != 1 || stale[0] != after {
		t.Fatalf("after the exit: cached %v, stale %v, want the pidfd %d stale only", cached, stale, after)
	}
	_, err = unix.PidfdGetfd(stale[0], 0, 0)
	unix.Close(stale[0])
	if !errors.Is(err, unix.ESRCH) {
		t.Fatalf("pidfd_getfd through the pidfd of an ended process: %v, want ESRCH", err)
	}
}
