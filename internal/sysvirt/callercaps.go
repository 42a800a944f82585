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
// init's uid and no capabilities; capabilities are per thread, so the
// walk runs on its goroutine's thread, locked, with the effective set
// emptied, and the set is put back after.

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
