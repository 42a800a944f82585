package sandbox

import (
	"errors"
	"fmt"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// kernelFeature is a kernel interface the sandbox needs, how to tell it is
// there, and the first Linux release that has it.
type kernelFeature struct {
	name, since string
	// virt: only the syscall layer needs it.
	virt    bool
	present func() bool
}

// seccompGetActionAvail and the user-notification action
// (linux/seccomp.h).
const (
	seccompGetActionAvail = 2
	seccompRetUserNotif   = 0x7fc00000
)

var kernelFeatures = []kernelFeature{
	{name: "seccomp user notification", since: "5.0", present: func() bool {
		action := uint32(seccompRetUserNotif)
		_, _, errno := unix.Syscall(unix.SYS_SECCOMP, seccompGetActionAvail, 0, uintptr(unsafe.Pointer(&action)))
		return errno == 0
	}},
	{name: "pidfd_open", since: "5.3", virt: true, present: func() bool {
		fd, err := unix.PidfdOpen(os.Getpid(), 0)
		if err == nil {
			unix.Close(fd)
		}
		return !errors.Is(err, unix.ENOSYS)
	}},
	{name: "pidfd_getfd", since: "5.6", virt: true, present: func() bool {
		_, err := unix.PidfdGetfd(-1, 0, 0)
		return !errors.Is(err, unix.ENOSYS)
	}},
	{name: "process_vm_readv", since: "3.2 with CONFIG_CROSS_MEMORY_ATTACH", virt: true, present: func() bool {
		_, err := unix.ProcessVMReadv(os.Getpid(), nil, nil, 0)
		return !errors.Is(err, unix.ENOSYS)
	}},
}

// checkKernel says, in one sentence, which interface the sandbox (virt:
// with the syscall layer) needs and this kernel lacks, and what works
// without it. A seccomp filter around dal-exec that refuses these calls
// (a container's default profile) reads the same.
func checkKernel(virt bool) error {
	for _, f := range kernelFeatures {
		if (f.virt && !virt) || f.present() {
			continue
		}
		return fmt.Errorf("this kernel lacks %s (Linux %s or later; or a seccomp profile around dal-exec refuses it): dal's sandbox cannot run here; `dal-exec run --mode default` works without it, with virtual time and seeded randomness for Python and Node only (other programs' clock and random are not captured)", f.name, f.since)
	}
	return nil
}
