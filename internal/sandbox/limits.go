package sandbox

import (
	"errors"
	"fmt"
	"strconv"

	"golang.org/x/sys/unix"
)

// Limits are the resource limits of the agent's tree, each a resource
// limit (setrlimit) every process of the tree inherits; 0 is no limit.
// They are not a control group's: this is the fallback the kernel always
// offers, per process where a cgroup's would be per tree.
type Limits struct {
	// Memory is each process's data size (RLIMIT_DATA: its heap and
	// private writable mappings, not what it maps read-only or shares);
	// an allocation past it fails (ENOMEM). The private tmpfs mounts
	// (/tmp, /var/tmp, /run, /dev/shm) hold a quarter of it each, so
	// together no more than it.
	Memory int64 `json:"memory,omitempty"`
	// Pids caps the tasks (processes and threads) of the agent's uid
	// (RLIMIT_NPROC); a fork past it fails (EAGAIN). The kernel counts
	// them in the agent's user namespace, so rootless it is the sandbox's
	// tree (the init's threads among them); uid 0 is exempt, so as root
	// it is not enforced.
	Pids int64 `json:"pids,omitempty"`
	// FileSize is the largest file the tree may write (RLIMIT_FSIZE): a
	// write past it fails (EFBIG) after SIGXFSZ, which kills a process
	// that does not handle it.
	FileSize int64 `json:"file_size,omitempty"`
}

// tmpfsSize is the size= option of each private tmpfs: a quarter of the
// memory limit, "" without one (the kernel's default, half the RAM).
func (l Limits) tmpfsSize() string {
	if l.Memory <= 0 {
		return ""
	}
	return ",size=" + strconv.FormatInt(max(l.Memory/4, 1<<20), 10)
}

// any reports whether l limits anything.
func (l Limits) any() bool { return l.Memory > 0 || l.Pids > 0 || l.FileSize > 0 }

// limitAgent sets l on the agent, pid, which the calling thread started
// traced (PTRACE_TRACEME) and which is stopped at its exec, before its
// first instruction: what it starts inherits them, and the init keeps its
// own (its Go runtime maps its heap 64 MiB at a time, which a data limit
// would count). Each limit is lowered only, never above what the init
// was given. With detach, the agent is not traced further: it waits for
// the exec stop and lets the agent go.
func limitAgent(pid int, l Limits, detach bool) error {
	if !l.any() {
		return nil
	}
	for _, r := range []struct {
		res  int
		name string
		v    int64
	}{{unix.RLIMIT_DATA, "data size", l.Memory}, {unix.RLIMIT_NPROC, "processes", l.Pids}, {unix.RLIMIT_FSIZE, "file size", l.FileSize}} {
		if r.v <= 0 {
			continue
		}
		var old unix.Rlimit
		if err := unix.Prlimit(pid, r.res, nil, &old); err != nil {
			return fmt.Errorf("sandbox: read the agent's %s limit: %v", r.name, err)
		}
		lim := min(uint64(r.v), old.Max) // RLIM_INFINITY is the largest
		if err := unix.Prlimit(pid, r.res, &unix.Rlimit{Cur: min(lim, old.Cur), Max: lim}, nil); err != nil {
			return fmt.Errorf("sandbox: set the agent's %s limit: %v", r.name, err)
		}
	}
	if !detach {
		return nil
	}
	for {
		var ws unix.WaitStatus
		_, err := unix.Wait4(pid, &ws, unix.WALL, nil)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return fmt.Errorf("sandbox: wait for the agent's start: %v", err)
		}
		if !ws.Stopped() {
			return errors.New("sandbox: the agent ended before it started")
		}
		return unix.PtraceDetach(pid)
	}
}
