package sysvirt

import (
	"golang.org/x/sys/unix"
)

// pidfds keeps one pidfd per traced process for the timed waits, which
// duplicate the descriptors they watch with pidfd_getfd: opening and
// closing a pidfd per wait was a third of a ready wait's cost.
//
// Lifetimes: a process's pidfd is opened by its first wait and dropped at
// its exec and at its exit (the tracer's stops, under Supervisor.mu).
// Dropping never closes: the fd goes to stale, which the next wait closes
// (serveWait, on the one goroutine that calls Supervisor.Handle), so
// a ready wait's pidfd is never closed, and its number reused, under it.
// A real wait, which runs on a goroutine of its own past that point, gets
// its own copy (dupPidfd). A pidfd names the process, not its pid: one
// whose process ended makes pidfd_getfd fail (ESRCH), never reach a new
// process that took the pid; the cache is keyed by *proc, which a new
// process never shares.
//
// Only the pidfd is cached, never a duplicated descriptor: holding a copy
// of a process's socket or pipe past the call would keep it open after
// the process closed it (no EOF for the pipe's reader, no FIN for the
// peer), and its number may name another file by the next call.
type pidfds struct {
	open  map[*proc]int
	stale []int
}

// get returns p's pidfd, opening it on first use; -1 when the process is
// gone. Callers hold mu and run on the goroutine that calls Handle.
func (c *pidfds) get(p *proc) int {
	if fd, ok := c.open[p]; ok {
		return fd
	}
	fd, err := unix.PidfdOpen(p.tgid, 0) // close-on-exec, always
	if err != nil {
		return -1
	}
	if c.open == nil {
		c.open = map[*proc]int{}
	}
	c.open[p] = fd
	return fd
}

// drop forgets p's pidfd, at its exec or exit; it is closed later (see
// pidfds). Callers hold mu.
func (c *pidfds) drop(p *proc) {
	if fd, ok := c.open[p]; ok {
		delete(c.open, p)
		c.stale = append(c.stale, fd)
	}
}

// takeStale returns the pidfds dropped since the last call, for the
// caller to close. Callers hold mu and run on the goroutine that calls
// Handle.
func (c *pidfds) takeStale() []int {
	stale := c.stale
	c.stale = nil
	return stale
}

// dupPidfd returns a copy of pidfd the caller owns and must close, for a
// goroutine that outlives the notification being served; -1 on failure.
func dupPidfd(pidfd int) int {
	fd, err := unix.FcntlInt(uintptr(pidfd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return -1
	}
	return fd
}
