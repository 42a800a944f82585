//go:build linux && (amd64 || arm64)

package ebpf

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unsafe"

	cebpf "github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"
)

// These tests load the real programs and drive real processes through the
// hooks: they need root with BTF, which every dal test machine has. A test
// that cannot run fails with the reason.

var nextSession atomic.Uint32

func newSession() uint32 { return 1000 + nextSession.Add(1) }

// skipShort skips a test that loads eBPF programs into the kernel under
// go test -short (make test-short): the unit tests' tier.
func skipShort(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("loads eBPF programs into the kernel: skipped under -short (testing.Short())")
	}
}

func openTracer(t testing.TB, opts Options) *Tracer {
	t.Helper()
	skipShort(t)
	tr, err := Open(opts)
	if err != nil {
		t.Fatalf("boundary tracer unavailable (these tests need root and a kernel with BTF): %v", err)
	}
	t.Cleanup(func() {
		if err := tr.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return tr
}

func need(t testing.TB, path string) string {
	t.Helper()
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("this test needs %s: %v", path, err)
	}
	return path
}

// gated is a command held behind a gate: a shell that reads one line from
// stdin, then execs the command. Tracking the shell with countFromExec=1
// counts the command from its execve, as `strace -f -c` does.
type gated struct {
	cmd    *exec.Cmd
	gate   io.WriteCloser
	stderr bytes.Buffer
}

func startGated(t testing.TB, dir string, argv ...string) *gated {
	t.Helper()
	g, err := newGated(dir, argv...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.kill)
	return g
}

func newGated(dir string, argv ...string) (*gated, error) {
	g := &gated{cmd: exec.Command("/bin/sh", append([]string{"-c", `read line && exec "$@"`, "gate"}, argv...)...)}
	g.cmd.Dir = dir
	g.cmd.Stderr = &g.stderr
	w, err := g.cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	g.gate = w
	if err := g.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %v: %w", argv, err)
	}
	return g, nil
}

func (g *gated) kill() { _ = g.cmd.Process.Kill(); _ = g.cmd.Wait() }

// open opens the gate and waits for the command.
func (g *gated) open() error {
	if _, err := g.gate.Write([]byte("go\n")); err != nil {
		return err
	}
	g.gate.Close()
	if err := g.cmd.Wait(); err != nil {
		return fmt.Errorf("%v: %w\n%s", g.cmd.Args, err, g.stderr.String())
	}
	return nil
}

func (g *gated) run(t testing.TB) {
	t.Helper()
	if err := g.open(); err != nil {
		t.Fatal(err)
	}
}

// runTracked runs argv in dir as a member of session and returns its counts.
func runTracked(t testing.TB, tr *Tracer, session uint32, dir string, argv ...string) *Counts {
	t.Helper()
	g := startGated(t, dir, argv...)
	if err := tr.Track(g.cmd.Process.Pid, session, 1); err != nil {
		t.Fatal(err)
	}
	g.run(t)
	c, err := tr.Counts(session)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// straceCounts runs argv under `strace -f -c` in dir and returns its table.
func straceCounts(t testing.TB, dir string, argv ...string) map[string]uint64 {
	t.Helper()
	out := filepath.Join(t.TempDir(), "strace.txt")
	cmd := exec.Command(need(t, "/usr/bin/strace"), append([]string{"-f", "-c", "-o", out, "--"}, argv...)...)
	cmd.Dir = dir
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("strace %v: %v\n%s", argv, err, msg)
	}
	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	counts, err := parseStraceSummary(f)
	if err != nil {
		t.Fatal(err)
	}
	return counts
}

// TestTracer shares one tracer between parallel subtests (sessions are
// independent by design) and detaches it before any benchmark runs.
func TestTracer(t *testing.T) {
	tr := openTracer(t, Options{})
	t.Run("parallel", func(t *testing.T) {
		t.Run("MatchesStrace", func(t *testing.T) { t.Parallel(); testMatchesStrace(t, tr) })
		t.Run("OutsideNotCounted", func(t *testing.T) { t.Parallel(); testOutsideNotCounted(t, tr) })
		t.Run("Grandchild", func(t *testing.T) { t.Parallel(); testGrandchild(t, tr) })
		t.Run("CountFromSecondExec", func(t *testing.T) { t.Parallel(); testCountFromSecondExec(t, tr) })
		t.Run("Threads", func(t *testing.T) { t.Parallel(); testThreads(t, tr) })
		t.Run("Events", func(t *testing.T) { t.Parallel(); testEvents(t, tr) })
		t.Run("ExitedProcess", func(t *testing.T) { t.Parallel(); testExitedProcess(t, tr) })
		t.Run("ExitAndForgetRelease", func(t *testing.T) { t.Parallel(); testExitAndForgetRelease(t, tr) })
		t.Run("UntrackStopsCounting", func(t *testing.T) { t.Parallel(); testUntrack(t, tr) })
		t.Run("ConcurrentSessions", func(t *testing.T) { t.Parallel(); testConcurrentSessions(t, tr) })
	})
	l, err := tr.Losses()
	if err != nil {
		t.Fatal(err)
	}
	if l != (Losses{}) {
		t.Errorf("losses after the tests: %+v, want none", l)
	}
}

func testMatchesStrace(t *testing.T, tr *Tracer) {
	py := need(t, "/usr/bin/python3")
	script := `
import os, time, random, tempfile, shutil
d = tempfile.mkdtemp(dir=".")
p = os.path.join(d, "f")
for i in range(100):
    with open(p, "w") as f:
        f.write(str(random.random()))
    os.stat(p)
    time.sleep(0)
os.urandom(16)
shutil.rmtree(d)
`
	tests := []struct {
		name string
		argv []string
	}{
		{"dd", []string{need(t, "/bin/dd"), "if=/dev/zero", "of=/dev/null", "bs=1", "count=100000"}},
		{"python", []string{py, "-c", script}},
		{"grandchild", []string{"/bin/sh", "-c", `/bin/sh -c "/bin/cat /dev/null"; true`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			got := runTracked(t, tr, newSession(), dir, tc.argv...)
			want := straceCounts(t, dir, tc.argv...)
			if diff := compareCounts(got.Syscalls, want); diff != "" {
				t.Errorf("traced counts differ from strace -f -c:\n%s", diff)
			}
		})
	}
}

// compareCounts lists the syscalls whose counts differ by more than 1%.
// strace does not list exit and exit_group (they never return), the tracer
// counts them at entry.
func compareCounts(got, strace map[string]uint64) string {
	var diffs []string
	for name := range mergeKeys(got, strace) {
		g, s := got[name], strace[name]
		if _, listed := strace[name]; !listed && (name == "exit_group" || name == "exit") {
			continue
		}
		d := max(g, s) - min(g, s)
		if d*100 > s { // more than 1% (exact below 100 calls)
			diffs = append(diffs, fmt.Sprintf("  %-20s traced %8d  strace %8d", name, g, s))
		}
	}
	slices.Sort(diffs)
	return strings.Join(diffs, "\n")
}

func mergeKeys(a, b map[string]uint64) map[string]bool {
	m := map[string]bool{}
	for k := range a {
		m[k] = true
	}
	for k := range b {
		m[k] = true
	}
	return m
}

func testOutsideNotCounted(t *testing.T, tr *Tracer) {
	busy := exec.Command(need(t, "/bin/dd"), "if=/dev/zero", "of=/dev/null", "bs=1", "count=300000")
	if err := busy.Start(); err != nil {
		t.Fatal(err)
	}
	defer busy.Wait()
	s := newSession()
	g := startGated(t, t.TempDir(), "/bin/dd", "if=/dev/zero", "of=/dev/null", "bs=1", "count=1000")
	if err := tr.Track(g.cmd.Process.Pid, s, 1); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); g.run(t) }()
	for range 100000 { // this process is busy too, outside the session
		unix.Getppid()
	}
	<-done
	c, err := tr.Counts(s)
	if err != nil {
		t.Fatal(err)
	}
	if c.Syscalls["getppid"] != 0 {
		t.Errorf("getppid of an untracked process counted %d times", c.Syscalls["getppid"])
	}
	if r := c.Syscalls["read"]; r < 1000 || r > 1100 {
		t.Errorf("session read count %d, want dd's ~1003 (an untracked dd ran 300000 reads alongside)", r)
	}
}

func testGrandchild(t *testing.T, tr *Tracer) {
	s := newSession()
	c := runTracked(t, tr, s, t.TempDir(), "/bin/sh", "-c", `/bin/sh -c "/bin/cat /dev/null"; true`)
	var execs []string
	for _, e := range tr.Events(s) {
		if e.Kind == "exec" {
			execs = append(execs, e.Detail)
		}
	}
	if want := []string{"/bin/sh", "/bin/sh", "/bin/cat"}; !slices.Equal(execs, want) {
		t.Errorf("exec events %q, want %q", execs, want)
	}
	if c.Syscalls["execve"] != 3 {
		t.Errorf("execve counted %d times, want 3", c.Syscalls["execve"])
	}
	if c.Categories[Process] == 0 || c.Categories[Filesystem] == 0 {
		t.Errorf("categories %v: want process and filesystem", c.Categories)
	}
}

// testCountFromSecondExec is the sandboxed record path: the tracked process
// re-execs (a sandbox init), which forks the agent that execs. Only the
// agent counts, from its execve.
func testCountFromSecondExec(t *testing.T, tr *Tracer) {
	s := newSession()
	init := `/bin/cat /dev/null; /bin/true; exit 0`
	g := startGated(t, t.TempDir(), "/bin/sh", "-c", init)
	if err := tr.Track(g.cmd.Process.Pid, s, 2); err != nil {
		t.Fatal(err)
	}
	g.run(t)
	c, err := tr.Counts(s)
	if err != nil {
		t.Fatal(err)
	}
	// The init shell (exec 1) forks two children, each exec'ing (exec 2):
	// both count; the shell's own wait4 and clone do not.
	if c.Syscalls["execve"] != 2 {
		t.Errorf("execve counted %d times, want 2 (one per forked child)", c.Syscalls["execve"])
	}
	for _, name := range []string{"wait4", "clone", "clone3", "vfork", "fork"} {
		if c.Syscalls[name] != 0 {
			t.Errorf("%s counted %d times: the init shell must not count", name, c.Syscalls[name])
		}
	}
	var execs []string
	for _, e := range tr.Events(s) {
		execs = append(execs, e.Kind+" "+e.Detail)
	}
	if want := []string{"exec /bin/cat", "exec /bin/true"}; !slices.Equal(execs, want) {
		t.Errorf("events %q, want %q", execs, want)
	}
}

func testThreads(t *testing.T, tr *Tracer) {
	py := need(t, "/usr/bin/python3")
	s := newSession()
	script := `
import os, threading
def work():
    for _ in range(50):
        os.getppid()
th = threading.Thread(target=work)
th.start()
th.join()
`
	c := runTracked(t, tr, s, t.TempDir(), py, "-c", script)
	if c.Syscalls["getppid"] != 50 {
		t.Errorf("getppid from a thread counted %d times, want 50", c.Syscalls["getppid"])
	}
}

func testEvents(t *testing.T, tr *Tracer) {
	py := need(t, "/usr/bin/python3")
	s := newSession()
	ws := t.TempDir()
	outside := filepath.Join(t.TempDir(), "escaped.txt")
	if err := tr.SetWorkspace(s, ws); err != nil {
		t.Fatal(err)
	}
	script := fmt.Sprintf(`
import socket
c = socket.socket()
c.setblocking(False)
try:
    c.connect(("10.255.255.1", 80))
except OSError:
    pass
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
for _ in range(3):
    try:
        u.sendto(b"x", ("10.255.255.1", 53))
    except OSError:
        pass
with open("/dev/urandom", "rb") as f:
    f.read(16)
open("/proc/sys/kernel/random/uuid").read()
open("/proc/sys/kernel/random/boot_id").read()
open("/proc/sys/kernel/random/poolsize").read()
open("inside.txt", "w").write("ok")
open(%q, "w").write("out")
open("/dev/null", "w").write("")
`, outside)
	c := runTracked(t, tr, s, ws, py, "-c", script)
	want := []Event{
		{Kind: "connect", Detail: "10.255.255.1:80"},
		{Kind: "sendto", Detail: "10.255.255.1:53"},
		{Kind: "random_device", Detail: "/dev/urandom"},
		{Kind: "random_device", Detail: "/proc/sys/kernel/random/uuid"},
		{Kind: "random_device", Detail: "/proc/sys/kernel/random/boot_id"},
		{Kind: "write_outside", Detail: outside},
	}
	var got []Event
	for _, e := range tr.Events(s) {
		if e.Kind == "exec" {
			if e.Detail != py {
				t.Errorf("exec event %q, want %q", e.Detail, py)
			}
			continue
		}
		if e.PID <= 0 {
			t.Errorf("event %+v has no pid", e)
		}
		e.PID = 0
		got = append(got, e)
	}
	if !slices.Equal(got, want) {
		t.Errorf("events\n got %+v\nwant %+v", got, want)
	}
	if c.Syscalls["connect"] != 1 || c.Syscalls["sendto"] != 3 {
		t.Errorf("connect %d sendto %d, want 1 and 3", c.Syscalls["connect"], c.Syscalls["sendto"])
	}
	if c.Categories[Network] == 0 {
		t.Errorf("no network category in %v", c.Categories)
	}
}

func testExitedProcess(t *testing.T, tr *Tracer) {
	cmd := exec.Command("/bin/true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	err := tr.Track(cmd.Process.Pid, newSession(), 0)
	if !errors.Is(err, ErrNoProcess) {
		t.Fatalf("Track of an exited process: %v, want ErrNoProcess", err)
	}
	if !strings.Contains(err.Error(), "exited before tracking started") {
		t.Errorf("error %q does not say what happened", err)
	}
	if _, ok := taskEntry(t, tr, uint32(cmd.Process.Pid)); ok {
		t.Error("the exited process was left in the process map")
	}
}

func testExitAndForgetRelease(t *testing.T, tr *Tracer) {
	s := newSession()
	g := startGated(t, t.TempDir(), "/bin/sh", "-c", "/bin/true; /bin/true")
	pid := uint32(g.cmd.Process.Pid)
	if err := tr.Track(int(pid), s, 1); err != nil {
		t.Fatal(err)
	}
	key := kernelKey(t, tr, s)
	if st, ok := taskEntry(t, tr, pid); !ok || st.Session != key || st.ExecsLeft != 1 {
		t.Fatalf("process map entry %+v (present %v), want session %d with 1 exec left", st, ok, s)
	}
	g.run(t)
	if n := tasksOf(t, tr, s); n != 0 {
		t.Errorf("%d process map entries left after the session's processes exited", n)
	}
	if _, ok := taskEntry(t, tr, pid); ok {
		t.Errorf("pid %d still tracked after it exited", pid)
	}
	if c, err := tr.Counts(s); err != nil || c.Total == 0 {
		t.Fatalf("counts before Forget: %+v, %v", c, err)
	}
	slot := tr.lookup(s).slot
	if err := tr.Forget(s); err != nil {
		t.Fatal(err)
	}
	checkReleased(t, tr, map[uint32]uint32{key: slot})
	if _, err := tr.Counts(s); err == nil {
		t.Error("Counts of a forgotten session succeeded")
	}
	if ev := tr.Events(s); ev != nil {
		t.Errorf("events of a forgotten session: %v", ev)
	}
}

// testUntrack: after Untrack, neither the process nor what it forks counts,
// and the counts so far stay readable.
func testUntrack(t *testing.T, tr *Tracer) {
	s := newSession()
	g := startGated(t, t.TempDir(), "/bin/sh", "-c", "read second; /bin/true")
	if err := tr.Track(g.cmd.Process.Pid, s, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := g.gate.Write([]byte("first\n")); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); len(tr.Events(s)) == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the gated shell never exec'd")
		}
	}
	if err := tr.Untrack(s); err != nil {
		t.Fatal(err)
	}
	before, err := tr.Counts(s)
	if err != nil {
		t.Fatal(err)
	}
	if n := tasksOf(t, tr, s); n != 0 {
		t.Errorf("%d process map entries after Untrack", n)
	}
	if _, ok := taskEntry(t, tr, uint32(g.cmd.Process.Pid)); ok {
		t.Error("the running process is still tracked after Untrack")
	}
	if _, err := g.gate.Write([]byte("second\n")); err != nil {
		t.Fatal(err)
	}
	g.gate.Close()
	if err := g.cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	after, err := tr.Counts(s)
	if err != nil {
		t.Fatal(err)
	}
	if after.Total != before.Total || before.Syscalls["execve"] != 1 {
		t.Errorf("counted %d syscalls after Untrack (execve before: %d)", after.Total-before.Total, before.Syscalls["execve"])
	}
	if ev := tr.Events(s); len(ev) != 1 {
		t.Errorf("events %v: want only the shell's exec", ev)
	}
	if err := tr.Forget(s); err != nil {
		t.Fatal(err)
	}
}

// testConcurrentSessions runs many short sessions at once, each worker
// reusing one session id round after round (Forget in between, every third
// time without reading the events first), and checks that every round
// counts exactly its own tree: a shell that runs /bin/true twice. The gate
// shell is tracked right after Start returns, often while the kernel has
// yet to report its exec of /bin/sh: that exec and the gate shell's startup
// (one getppid, one getpid) must not count, nor may anything of an earlier
// round.
func testConcurrentSessions(t *testing.T, tr *Tracer) {
	const workers, rounds = 8, 25
	want := map[string]uint64{"execve": 3, "getppid": 1, "getpid": 1}
	wantExecs := []string{"/bin/sh", "/bin/true", "/bin/true"}
	dir := t.TempDir()
	errs := make(chan error, workers)
	keys := make(chan [2]uint32, workers*rounds) // kernel key, slot
	for w := range workers {
		go func() {
			errs <- func() error {
				s := newSession()
				for r := range rounds {
					g, err := newGated(dir, "/bin/sh", "-c", "/bin/true; /bin/true")
					if err != nil {
						return err
					}
					if err := tr.Track(g.cmd.Process.Pid, s, 1); err != nil {
						g.kill()
						return err
					}
					if err := g.open(); err != nil {
						return err
					}
					if r%3 != 2 { // every third round is forgotten unread
						c, err := tr.Counts(s)
						if err != nil {
							return err
						}
						for name, n := range want {
							if c.Syscalls[name] != n {
								return fmt.Errorf("worker %d round %d: %s counted %d times, want %d", w, r, name, c.Syscalls[name], n)
							}
						}
						var execs []string
						for _, e := range tr.Events(s) {
							execs = append(execs, e.Detail)
						}
						if !slices.Equal(execs, wantExecs) {
							return fmt.Errorf("worker %d round %d: exec events %q, want %q", w, r, execs, wantExecs)
						}
					}
					ss := tr.lookup(s)
					if ss == nil {
						return fmt.Errorf("worker %d round %d: session %d is not registered", w, r, s)
					}
					keys <- [2]uint32{ss.key, ss.slot}
					if err := tr.Forget(s); err != nil {
						return err
					}
				}
				return nil
			}()
		}()
	}
	for range workers {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	close(keys)
	forgotten := map[uint32]uint32{}
	for k := range keys {
		if _, dup := forgotten[k[0]]; dup {
			t.Errorf("kernel key %d was handed out twice", k[0])
		}
		forgotten[k[0]] = k[1]
	}
	checkReleased(t, tr, forgotten)
}

// checkReleased checks that forgotten sessions (kernel key → counters
// slot) left nothing in the kernel: no settings, and no slot still theirs.
func checkReleased(t *testing.T, tr *Tracer, forgotten map[uint32]uint32) {
	t.Helper()
	var s boundarySession
	for key, slot := range forgotten {
		if err := tr.objs.Sessions.Lookup(key, &s); err == nil {
			t.Errorf("the settings of forgotten session key %d are left", key)
		}
		var owner uint32
		if err := tr.objs.SlotOwner.Lookup(slot, &owner); err != nil {
			t.Fatal(err)
		}
		if owner == key {
			t.Errorf("counters slot %d still belongs to forgotten session key %d", slot, key)
		}
	}
}

// taskEntry returns pid's process map entry, and whether it has one. The
// entry and the pid's tracked_pids bit must agree.
func taskEntry(t *testing.T, tr *Tracer, pid uint32) (boundaryTaskState, bool) {
	t.Helper()
	var st boundaryTaskState
	err := tr.objs.Tasks.Lookup(pid, &st)
	var word uint64
	if err := tr.objs.TrackedPids.Lookup(pid/64, &word); err != nil {
		t.Fatal(err)
	}
	if bit := word&(1<<(pid%64)) != 0; bit != (err == nil) {
		t.Errorf("pid %d: tracked_pids bit %v, process map entry %v", pid, bit, err == nil)
	}
	return st, err == nil
}

// kernelKey returns the key the kernel knows a registered session by.
func kernelKey(t *testing.T, tr *Tracer, session uint32) uint32 {
	t.Helper()
	ss := tr.lookup(session)
	if ss == nil {
		t.Fatalf("session %d is not registered", session)
	}
	return ss.key
}

func tasksOf(t *testing.T, tr *Tracer, session uint32) int {
	t.Helper()
	key := kernelKey(t, tr, session)
	var (
		pid uint32
		st  boundaryTaskState
		n   int
	)
	iter := tr.objs.Tasks.Iterate()
	for iter.Next(&pid, &st) {
		if st.Session == key {
			n++
		}
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestOpenUnprivileged runs Open as nobody, in a child copy of this test
// binary, and checks the one-sentence reason.
func TestOpenUnprivileged(t *testing.T) {
	if os.Getenv("DAL_EBPF_UNPRIVILEGED_CHILD") == "1" {
		_, err := Open(Options{})
		var ue *UnavailableError
		if !errors.As(err, &ue) {
			fmt.Printf("not an UnavailableError: %v\n", err)
			os.Exit(1)
		}
		fmt.Println(ue.Reason)
		os.Exit(0)
	}
	skipShort(t)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "dal-ebpf-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "ebpf.test")
	raw, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, raw, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-test.run", "^TestOpenUnprivileged$")
	cmd.Env = append(os.Environ(), "DAL_EBPF_UNPRIVILEGED_CHILD=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("unprivileged Open: %v\n%s", err, out)
	}
	if want := "needs root (or CAP_BPF and CAP_PERFMON)"; !strings.Contains(string(out), want) {
		t.Errorf("unprivileged Open said %q, want it to contain %q", out, want)
	}
}

// sysEnterRuns returns how often the tracer's sys_enter program has run
// (BPF statistics are on: Options.Stats).
func sysEnterRuns(t *testing.T, tr *Tracer) uint64 {
	t.Helper()
	st, err := tr.Stats()
	if err != nil {
		t.Fatal(err)
	}
	return st[0].RunCount
}

// attachedLinks counts the tracer's programs attached to their hooks, as
// the kernel lists its links.
func attachedLinks(t *testing.T, tr *Tracer) int {
	t.Helper()
	ours := map[cebpf.ProgramID]bool{}
	for _, p := range []*cebpf.Program{tr.objs.SysEnter, tr.objs.ProcessFork, tr.objs.ProcessExec, tr.objs.ProcessExit} {
		info, err := p.Info()
		if err != nil {
			t.Fatal(err)
		}
		id, _ := info.ID()
		ours[id] = true
	}
	n, err := countLinks(ours)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// countLinks counts the machine's links of the programs ours. Other
// processes' links are listed too: one being made meanwhile is not
// settled (EAGAIN, for as long as its attach takes) and one being freed
// is gone (ENOENT); neither is ours, which the test makes and frees
// itself, so both are passed over (link.Iterator stops at them).
func countLinks(ours map[cebpf.ProgramID]bool) (int, error) {
	const bpfLinkGetNextID = 31 // BPF_LINK_GET_NEXT_ID
	n := 0
	var attr struct{ start, next, flags uint32 }
	for {
		_, _, errno := unix.Syscall(unix.SYS_BPF, bpfLinkGetNextID, uintptr(unsafe.Pointer(&attr)), unsafe.Sizeof(attr))
		if errno == unix.ENOENT {
			return n, nil
		} else if errno != 0 {
			return 0, fmt.Errorf("get the next link ID after %d: %w", attr.start, errno)
		}
		attr.start = attr.next
		l, err := link.NewFromID(link.ID(attr.next))
		if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.ENOENT) {
			continue
		} else if err != nil {
			return 0, err
		}
		info, err := l.Info()
		l.Close()
		if err == nil && ours[info.Program] {
			n++
		}
	}
}

// TestHooksOnlyWhileFollowed checks that the programs are attached from a
// session's Track to its Untrack or Forget and not otherwise: with no
// session, the syscalls of this process do not run sys_enter at all.
func TestHooksOnlyWhileFollowed(t *testing.T) {
	tr := openTracer(t, Options{Stats: true})
	busy := func() {
		for range 10000 {
			unix.Getppid()
		}
	}
	detached := func(when string) {
		t.Helper()
		if tr.Attached() || attachedLinks(t, tr) != 0 {
			t.Errorf("%s: hooks attached (Attached %v, %d links)", when, tr.Attached(), attachedLinks(t, tr))
		}
		before := sysEnterRuns(t, tr)
		busy()
		if after := sysEnterRuns(t, tr); after != before {
			t.Errorf("%s: sys_enter ran %d times with no session followed", when, after-before)
		}
	}
	attached := func(when string) {
		t.Helper()
		if !tr.Attached() || attachedLinks(t, tr) != 4 {
			t.Errorf("%s: hooks not attached (Attached %v, %d links of 4)", when, tr.Attached(), attachedLinks(t, tr))
		}
		before := sysEnterRuns(t, tr)
		busy()
		if after := sysEnterRuns(t, tr); after-before < 10000 {
			t.Errorf("%s: sys_enter ran %d times for 10000 syscalls", when, after-before)
		}
	}
	detached("after Open")
	attaches := tr.Attaches()

	s1, s2 := newSession(), newSession()
	g1 := startGated(t, t.TempDir(), "/bin/true")
	if err := tr.Track(g1.cmd.Process.Pid, s1, 1); err != nil {
		t.Fatal(err)
	}
	attached("one session")
	if err := tr.SetWorkspace(s2, t.TempDir()); err != nil {
		t.Fatal(err)
	}
	g2 := startGated(t, t.TempDir(), "/bin/true")
	if err := tr.Track(g2.cmd.Process.Pid, s2, 1); err != nil {
		t.Fatal(err)
	}
	g1.run(t)
	g2.run(t)
	if err := tr.Untrack(s1); err != nil {
		t.Fatal(err)
	}
	attached("one of two sessions untracked")
	if err := tr.Forget(s2); err != nil {
		t.Fatal(err)
	}
	detached("the other forgotten")
	if c, err := tr.Counts(s1); err != nil || c.Syscalls["execve"] != 1 {
		t.Errorf("counts of the untracked session: %+v, %v: want them readable until Forget", c, err)
	}
	g3 := startGated(t, t.TempDir(), "/bin/true")
	if err := tr.Track(g3.cmd.Process.Pid, s1, 1); err != nil {
		t.Fatal(err)
	}
	attached("the untracked session tracked again")
	g3.run(t)
	if err := tr.Forget(s1); err != nil {
		t.Fatal(err)
	}
	detached("all forgotten")
	if n := tr.Attaches() - attaches; n != 2 {
		t.Errorf("attached %d times, want 2 (once per stretch with a session)", n)
	}
	if err := tr.SetWorkspace(s1, t.TempDir()); err != nil {
		t.Fatal(err)
	}
	detached("a session with a workspace, not tracked")
	if err := tr.Forget(s1); err != nil {
		t.Fatal(err)
	}
	// A Track that fails leaves the hooks as they were.
	cmd := exec.Command("/bin/true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	if err := tr.Track(cmd.Process.Pid, newSession(), 0); !errors.Is(err, ErrNoProcess) {
		t.Fatalf("Track of an exited process: %v", err)
	}
	detached("a failed Track")
}

// TestAttachWhileSessionsComeAndGo runs one long session while workers
// open and close short ones as fast as they can: the hooks stay attached
// as long as the long session is followed (its counts are exact), and are
// detached once the last session is gone.
func TestAttachWhileSessionsComeAndGo(t *testing.T) {
	tr := openTracer(t, Options{})
	const bytes = 200000
	long := newSession()
	g := startGated(t, t.TempDir(), need(t, "/bin/dd"), "if=/dev/zero", "of=/dev/null", "bs=1", "count="+fmt.Sprint(bytes))
	if err := tr.Track(g.cmd.Process.Pid, long, 1); err != nil {
		t.Fatal(err)
	}
	ddDone := make(chan error, 1)
	go func() { ddDone <- g.open() }()

	const workers, rounds = 4, 20
	dir := t.TempDir()
	errs := make(chan error, workers)
	for w := range workers {
		go func() {
			errs <- func() error {
				for r := range rounds {
					s := newSession()
					g, err := newGated(dir, "/bin/true")
					if err != nil {
						return err
					}
					if err := tr.Track(g.cmd.Process.Pid, s, 1); err != nil {
						g.kill()
						return err
					}
					if err := g.open(); err != nil {
						return err
					}
					c, err := tr.Counts(s)
					if err != nil {
						return err
					}
					if c.Syscalls["execve"] != 1 {
						return fmt.Errorf("worker %d round %d: execve counted %d times, want 1", w, r, c.Syscalls["execve"])
					}
					if err := tr.Forget(s); err != nil {
						return err
					}
					if !tr.Attached() {
						return fmt.Errorf("worker %d round %d: hooks detached while the long session is followed", w, r)
					}
				}
				return nil
			}()
		}()
	}
	for range workers {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	if err := <-ddDone; err != nil {
		t.Fatal(err)
	}
	c, err := tr.Counts(long)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"read", "write"} {
		if n := c.Syscalls[name]; n < bytes || n > bytes+100 {
			t.Errorf("%s counted %d times, want dd's %d and its start-up's few", name, n, bytes)
		}
	}
	if err := tr.Forget(long); err != nil {
		t.Fatal(err)
	}
	if tr.Attached() || attachedLinks(t, tr) != 0 {
		t.Errorf("hooks attached after every session was forgotten (%d links)", attachedLinks(t, tr))
	}
}

// TestExitedThreadsDoNotCount: the kernel hands an exited thread's stack
// (whose register frame keys the per-CPU thread cache) to the next thread
// it creates, of any process. A tracked process's threads call getppid and
// exit; then, while the session is still followed, an untracked process's
// threads call getpgid: none of those may count.
func TestExitedThreadsDoNotCount(t *testing.T) {
	py := need(t, "/usr/bin/python3")
	tr := openTracer(t, Options{})
	threads := func(call string, n int) string {
		return fmt.Sprintf(`
import os, sys, threading
def work():
    for _ in range(%d):
        os.%s
for _ in range(20):
    th = [threading.Thread(target=work) for _ in range(4)]
    for x in th: x.start()
    for x in th: x.join()
`, n, call)
	}
	// The gate shell execs python, which runs its threads, says so and
	// waits for a second line before it exits.
	cmd := exec.Command("/bin/sh", "-c", `read line && exec "$@"`, "gate", py, "-c",
		threads("getppid()", 10)+"print('done', flush=True)\nsys.stdin.readline()\n")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	s := newSession()
	if err := tr.Track(cmd.Process.Pid, s, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(stdin, "go\n"); err != nil {
		t.Fatal(err)
	}
	line := make([]byte, 5)
	if _, err := io.ReadFull(stdout, line); err != nil || string(line) != "done\n" {
		t.Fatalf("the tracked python said %q, %v", line, err)
	}
	untracked := exec.Command(py, "-c", threads("getpgid(0)", 100))
	if out, err := untracked.CombinedOutput(); err != nil {
		t.Fatalf("untracked python: %v\n%s", err, out)
	}
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	c, err := tr.Counts(s)
	if err != nil {
		t.Fatal(err)
	}
	if c.Syscalls["getppid"] != 800 || c.Syscalls["getpgid"] != 0 {
		t.Errorf("getppid %d (want 800, the tracked threads'), getpgid %d (want 0: the untracked threads')",
			c.Syscalls["getppid"], c.Syscalls["getpgid"])
	}
}
