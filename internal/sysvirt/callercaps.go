package sysvirt

import (
	"runtime"
	"sync"

	"golang.org/x/sys/unix"
)

// The supervisor resolves and stats paths on a caller's behalf
// (statcall.go) with the caller's permissions, not its own: the sandbox's
// init (the supervisor's process) keeps its capabilities on every thread
// but the one that forks the agent, and a walk with CAP_DAC_OVERRIDE or
// CAP_DAC_READ_SEARCH would answer for a file in a directory the agent may
// not search (its size and times, that it exists). The agent runs with the
// init's uid and no capabilities; capabilities are per thread.
//
// The thread that receives the notifications ([Supervisor.ServeThread])
// drops those that let a walk past a permission check — CAP_DAC_OVERRIDE,
// CAP_DAC_READ_SEARCH and CAP_MAC_OVERRIDE — from its effective set for
// good, so a stat served there walks as the caller would with no capset
// at all. What it keeps (CAP_SYS_PTRACE above all, for process_vm_readv,
// pidfd_getfd and /proc of a process that is not dumpable) changes no
// walk outside /proc, and an answer that lands in /proc is never used
// (statcall.go). Anywhere else (a test calling Handle) the walk runs on
// its goroutine's thread, locked, with the effective set emptied, and the
// set is put back after: two capset calls, about 3 µs a stat.

// walkCaps are the capabilities that let a path's walk or stat past a
// permission check, as the two words of a capability set.
var walkCaps = [2]uint32{1<<unix.CAP_DAC_OVERRIDE | 1<<unix.CAP_DAC_READ_SEARCH, 1 << (unix.CAP_MAC_OVERRIDE - 32)}

// ServeThread locks the calling goroutine, the one that receives the
// listener's notifications and calls [Supervisor.Handle], to its thread
// and drops walkCaps from the thread's effective set. The returned
// function puts them back and unlocks. When the set cannot be lowered the
// thread stays as it was and stats lower it for each walk, as elsewhere.
func (s *Supervisor) ServeThread() (done func()) {
	runtime.LockOSThread()
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var saved [2]unix.CapUserData
	if unix.Capget(&hdr, &saved[0]) != nil {
		return runtime.UnlockOSThread
	}
	lowered := saved
	lowered[0].Effective &^= walkCaps[0]
	lowered[1].Effective &^= walkCaps[1]
	if lowered != saved && unix.Capset(&hdr, &lowered[0]) != nil {
		return runtime.UnlockOSThread
	}
	s.walker.Store(int32(unix.Gettid()))
	return func() {
		s.walker.Store(0)
		if lowered == saved || unix.Capset(&hdr, &saved[0]) == nil {
			runtime.UnlockOSThread()
		}
	}
}

// asCaller runs f, a walk for a caller, with the caller's permissions: at
// once on the serve thread, else as withoutCaps does. It reports false,
// without running f, when that cannot be had.
func (s *Supervisor) asCaller(f func()) bool {
	if w := s.walker.Load(); w != 0 && int32(unix.Gettid()) == w {
		f()
		return true
	}
	return withoutCaps(f)
}

// withoutCaps runs f with no effective capabilities on this thread. It
// reports false, without running f, when the set cannot be lowered. If
// the set cannot be raised again the goroutine stays locked to the
// lowered thread, which then ends with it rather than serve another
// goroutine.
func withoutCaps(f func()) bool {
	runtime.LockOSThread()
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	saved, err := threadCaps()
	if err != nil {
		runtime.UnlockOSThread()
		return false
	}
	if saved[0].Effective == 0 && saved[1].Effective == 0 {
		f()
		runtime.UnlockOSThread()
		return true
	}
	lowered := saved
	lowered[0].Effective, lowered[1].Effective = 0, 0
	if unix.Capset(&hdr, &lowered[0]) != nil {
		runtime.UnlockOSThread()
		return false
	}
	f()
	if unix.Capset(&hdr, &saved[0]) == nil {
		runtime.UnlockOSThread()
	}
	return true
}

// threadCaps are the capabilities of the supervisor's threads, read once:
// all but the init's locked thread (which runs no supervisor goroutine)
// keep the process's. Restoring them on a thread that had fewer fails
// (capset cannot raise above the permitted set), and that thread then
// stays locked, as above.
var threadCaps = sync.OnceValues(func() ([2]unix.CapUserData, error) {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var c [2]unix.CapUserData
	err := unix.Capget(&hdr, &c[0])
	return c, err
})
