package runner

import (
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// rawChildren reads pid's children from /proc, as the kernel lists them.
func rawChildren(t *testing.T, pid int) []int {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/task/" + strconv.Itoa(pid) + "/children")
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	for _, f := range strings.Fields(string(b)) {
		n, _ := strconv.Atoi(f)
		out = append(out, n)
	}
	return out
}

// startTree starts sh -c script and returns it; the test kills and reaps
// it at the end.
func startTree(t *testing.T, script string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("sh", "-c", script)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, p := range descendants(cmd.Process.Pid) {
			(&os.Process{Pid: p}).Kill()
		}
		cmd.Process.Kill()
		cmd.Wait()
	})
	return cmd
}

// TestDescendants: a tree's processes are listed children first, and one
// that exited and waits to be reaped is left out.
func TestDescendants(t *testing.T) {
	// sh starts a sleep and another sh, which starts a sleep.
	cmd := startTree(t, "sleep 100 & sh -c 'sleep 100 & wait' & wait")
	var got []int
	for len(got) < 3 {
		runtime.Gosched()
		got = descendants(cmd.Process.Pid)
	}
	if len(got) != 3 {
		t.Fatalf("descendants = %v, want 3 processes", got)
	}
	direct := rawChildren(t, cmd.Process.Pid)
	slices.Sort(direct)
	first := slices.Clone(got[:2])
	slices.Sort(first)
	if !slices.Equal(first, direct) {
		t.Errorf("descendants %v do not list sh's children %v first", got, direct)
	}
	for _, p := range got {
		if zombie(p) {
			t.Errorf("%d is listed but a zombie", p)
		}
	}
}

// TestZombieLeftOut: a child that exited but that its parent (here a
// sleep that never waits) has not reaped is not a process left running.
func TestZombieLeftOut(t *testing.T) {
	cmd := startTree(t, "true & exec sleep 100")
	pid := cmd.Process.Pid
	var z int
	for z == 0 {
		runtime.Gosched()
		if c := rawChildren(t, pid); len(c) == 1 && zombie(c[0]) {
			z = c[0]
		}
	}
	if got := descendants(pid); len(got) != 0 {
		t.Errorf("descendants = %v, want none (%d is a zombie)", got, z)
	}
	if zombie(pid) {
		t.Errorf("the running sleep %d reads as a zombie", pid)
	}
	if zombie(1 << 30) {
		t.Error("a pid that does not exist reads as a zombie")
	}
}

// TestInheritedLeftOut: a child this process had before the run started
// (NoteInherited) is not the agent's. As in a real run, a shell starts a
// sleep and execs the test binary, which inherits the sleep as a child of
// its main thread.
func TestInheritedLeftOut(t *testing.T) {
	if v := os.Getenv("DAL_RUNNER_INHERITED"); v != "" {
		inheritedChild(t, v)
		return
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sh", "-c", `sleep 100 & DAL_RUNNER_INHERITED=$! exec "$0" -test.run='^TestInheritedLeftOut$' -test.v`, self)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestInheritedLeftOut") {
		t.Fatalf("the exec'd test: %v\n%s", err, out)
	}
}

// inheritedChild is TestInheritedLeftOut in the exec'd process: v is the
// pid of the child it was handed.
func inheritedChild(t *testing.T, v string) {
	pid, err := strconv.Atoi(v)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		(&os.Process{Pid: pid}).Kill()
		var ws unix.WaitStatus
		unix.Wait4(pid, &ws, 0, nil)
	}()
	if !slices.Contains(rawChildren(t, os.Getpid()), pid) {
		t.Fatalf("the shell's sleep %d is not this process's child", pid)
	}
	if !slices.Contains(descendants(os.Getpid()), pid) {
		t.Fatalf("before NoteInherited, the child %d is not among the descendants", pid)
	}
	NoteInherited()
	if !isInherited(pid) {
		t.Errorf("%d, a child before NoteInherited, is not inherited", pid)
	}
	if slices.Contains(descendants(os.Getpid()), pid) {
		t.Errorf("the inherited child %d is listed among the descendants", pid)
	}
}
