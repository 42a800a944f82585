package runner

import (
	"errors"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/dal-runtime/dal/internal/sandbox"
	"github.com/dal-runtime/dal/internal/termsafe"
	"golang.org/x/sys/unix"
)

// allowedCPUs returns the CPUs dal-exec may run on.
func allowedCPUs() ([]int, error) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return nil, err
	}
	var out []int
	for c := 0; c < len(set)*64; c++ {
		if set.IsSet(c) {
			out = append(out, c)
		}
	}
	return out, nil
}

// startPinned starts cmd with its CPU affinity set to cpus (nil: inherited).
// The affinity is set on the forking thread, so the agent has it from its
// first instruction and every thread and child inherits it.
func startPinned(cmd *exec.Cmd, cpus []int) error {
	if len(cpus) == 0 {
		return cmd.Start()
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	restore, err := sandbox.PinThread(cpus)
	if err != nil {
		return err
	}
	err = cmd.Start()
	if rerr := restore(); rerr != nil && err == nil {
		err = rerr
	}
	return err
}

// becomeSubreaper makes orphaned descendants of the agent reparent to
// dal-exec, so the whole tree can be found and killed.
func becomeSubreaper() error {
	return unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
}

// inherited are the children dal-exec had when it started: a shell that
// execs it hands over the children it had (the writer of a process
// substitution). They are not the agent's: neither killed nor counted.
var inherited = struct {
	sync.Mutex
	pids map[int]bool
}{pids: map[int]bool{}}

// NoteInherited records the children this process has, before it starts
// any: call it first thing.
func NoteInherited() {
	pid := strconv.Itoa(os.Getpid())
	b, err := os.ReadFile("/proc/" + pid + "/task/" + pid + "/children")
	if err != nil {
		return
	}
	inherited.Lock()
	defer inherited.Unlock()
	for _, f := range strings.Fields(string(b)) {
		if c, err := strconv.Atoi(f); err == nil {
			inherited.pids[c] = true
		}
	}
}

// isInherited reports whether pid is a child dal-exec started with.
func isInherited(pid int) bool {
	inherited.Lock()
	defer inherited.Unlock()
	return inherited.pids[pid]
}

// descendants lists the PIDs below pid, children before grandchildren, read
// from /proc/<pid>/task/*/children; not a sandbox's init that is ending in
// the background ([sandbox.Exiting]), nor what is below it, nor a child
// dal-exec started with (NoteInherited), nor one that has exited and waits
// to be reaped (a zombie: not running, with no children; reapOrphans
// collects it).
func descendants(pid int) []int {
	var out []int
	queue := []int{pid}
	seen := map[int]bool{pid: true}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		tasks, _ := os.ReadDir("/proc/" + strconv.Itoa(p) + "/task")
		for _, t := range tasks {
			b, err := os.ReadFile("/proc/" + strconv.Itoa(p) + "/task/" + t.Name() + "/children")
			if err != nil {
				continue
			}
			for _, f := range strings.Fields(string(b)) {
				c, err := strconv.Atoi(f)
				if err == nil && !seen[c] && !sandbox.Exiting(c) && !isInherited(c) && !zombie(c) {
					seen[c] = true
					out = append(out, c)
					queue = append(queue, c)
				}
			}
		}
	}
	return out
}

// signalTree sends SIGKILL to the agent's process group and to every
// descendant of dal-exec: the agent's tree, including processes that left
// the group and reparented to dal-exec as subreaper. It does not reap, so it
// may run while the agent is still being waited for. It returns how many
// processes it signalled. Preconditions: the agent is dal-exec's only child
// (one run per process), so every descendant belongs to it.
func signalTree(agent int, group bool) int {
	n := 0
	if group {
		syscall.Kill(-agent, syscall.SIGKILL)
	}
	for _, p := range descendants(os.Getpid()) {
		if syscall.Kill(p, syscall.SIGKILL) == nil {
			n++
		}
	}
	return n
}

// IsTerminal reports whether f, a reader or a writer, is a terminal: an
// *os.File that [termsafe.IsTerminal] says is one (the agent's stdin
// decides its process group here; the command line draws a progress bar
// only on a terminal).
func IsTerminal(f any) bool {
	file, ok := f.(*os.File)
	if !ok {
		return false
	}
	return termsafe.IsTerminal(int(file.Fd()))
}

// cleanupTree kills and reaps whatever the agent left behind once it has
// been waited for. A parent's death does not stop its children from
// forking, so it repeats until nothing is left. It returns how many
// processes it killed.
func cleanupTree() int {
	n := 0
	for range 100 {
		pids := descendants(os.Getpid())
		if len(pids) == 0 {
			break
		}
		for _, p := range pids {
			if syscall.Kill(p, syscall.SIGKILL) == nil {
				n++
			}
		}
		reapOrphans(true)
	}
	reapOrphans(false)
	return n
}

// zombie reports whether pid has exited and waits to be reaped.
func zombie(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// The state follows the command name, which may hold ") ".
	i := strings.LastIndexByte(string(b), ')')
	return i >= 0 && strings.HasPrefix(string(b[i:]), ") Z")
}

// reapOrphans collects exited processes that reparented to dal-exec; with
// block it waits for at least one.
func reapOrphans(block bool) {
	flags := unix.WNOHANG
	if block {
		flags = 0
	}
	for {
		var ws unix.WaitStatus
		pid, err := unix.Wait4(-1, &ws, flags, nil)
		if pid <= 0 || errors.Is(err, unix.ECHILD) {
			return
		}
		inherited.Lock()
		delete(inherited.pids, pid) // reaped: its pid may be reused
		inherited.Unlock()
		flags = unix.WNOHANG
	}
}
