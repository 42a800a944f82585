package sandbox

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Securebits (linux/securebits.h): root gets no capabilities from exec or
// setuid, and nobody can turn that back on.
const (
	secbitNoroot             = 1 << 0
	secbitNorootLocked       = 1 << 1
	secbitNoSetuidFixup      = 1 << 2
	secbitNoSetuidFixupLock  = 1 << 3
	secbitKeepCapsLocked     = 1 << 5
	secbitNoCapAmbientRaise  = 1 << 6
	secbitNoCapAmbientLocked = 1 << 7
	lockedSecurebits         = secbitNoroot | secbitNorootLocked | secbitNoSetuidFixup | secbitNoSetuidFixupLock |
		secbitKeepCapsLocked | secbitNoCapAmbientRaise | secbitNoCapAmbientLocked
)

// dropPrivileges sets no_new_privs, locks the securebits and empties every
// capability set of the calling thread, which must be locked (the agent is
// forked from it; credentials are per thread, so the init's other threads
// keep theirs, out of the agent's reach since the init is not dumpable).
func dropPrivileges() error {
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("sandbox: set no_new_privs: %v", err)
	}
	if err := unix.Prctl(unix.PR_SET_SECUREBITS, lockedSecurebits, 0, 0, 0); err != nil {
		return fmt.Errorf("sandbox: lock the securebits: %v", err)
	}
	last := lastCap()
	for c := 0; c <= last; c++ {
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil && err != unix.EINVAL {
			return fmt.Errorf("sandbox: drop capability %d from the bounding set: %v", c, err)
		}
	}
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil && err != unix.EINVAL {
		return fmt.Errorf("sandbox: clear the ambient capabilities: %v", err)
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return fmt.Errorf("sandbox: drop the capabilities: %v", err)
	}
	return nil
}

// lastCap is the highest capability number the kernel knows.
func lastCap() int {
	b, err := os.ReadFile("/proc/sys/kernel/cap_last_cap")
	if err == nil {
		if n, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
			return n
		}
	}
	return 63
}
