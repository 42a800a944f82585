package sandbox

import (
	"fmt"
	"unsafe"

	"github.com/dal-runtime/dal/internal/seccompbpf"
	"golang.org/x/sys/unix"
)

// The kernel-sharing filter refuses what namespaces do not scope, as
// Docker's default seccomp profile does: the kernel keyrings (add_key,
// request_key, keyctl), where the agent would read the caller's session
// keyring and leave keys that outlive the run, and AF_VSOCK sockets, whose
// port space is the host's whatever the network namespace. Each fails with
// EPERM, in the agent's whole tree and through the 32-bit ABI too; an old
// 32-bit program's socketcall(SYS_SOCKET) is refused whatever its family,
// which the filter cannot read (a newer one calls socket itself). It is a
// filter of its own, stacked on the thread that forks the agent before the
// watcher's: the kernel runs every filter and the strictest answer wins,
// so an EPERM here stands over the watcher's notification.

// afVsock is AF_VSOCK (linux/socket.h).
const afVsock = 40

// socketcallSocket is socketcall's SYS_SOCKET (linux/net.h).
const socketcallSocket = 1

// kernelSharingFilter builds the program.
func kernelSharingFilter() []unix.SockFilter {
	b := seccompbpf.New()
	b.Load(seccompbpf.OffArch)
	b.Jump(seccompbpf.JeqK, auditArch, "native", "")
	b.Jump(seccompbpf.JeqK, compatArch, "", "allow")
	b.Load(seccompbpf.OffNr)
	for _, nr := range compatKeyCalls {
		b.Jump(seccompbpf.JeqK, nr, "deny", "")
	}
	b.Jump(seccompbpf.JeqK, compatSocketcall, "", "compat-socket")
	b.Load(seccompbpf.OffArgs)
	b.Jump(seccompbpf.JeqK, socketcallSocket, "deny", "allow")
	b.Label("compat-socket")
	b.Jump(seccompbpf.JeqK, compatSocket, "", "allow")
	b.Load(seccompbpf.OffArgs)
	b.Jump(seccompbpf.JeqK, afVsock, "deny", "allow")

	b.Label("native")
	b.Load(seccompbpf.OffNr)
	for _, nr := range []uint32{unix.SYS_ADD_KEY, unix.SYS_REQUEST_KEY, unix.SYS_KEYCTL} {
		b.Jump(seccompbpf.JeqK, nr, "deny", "")
	}
	b.Jump(seccompbpf.JeqK, unix.SYS_SOCKET, "", "allow")
	// The family is an int: its low half alone, as the kernel reads it.
	b.Load(seccompbpf.OffArgs)
	b.Jump(seccompbpf.JeqK, afVsock, "deny", "allow")
	b.Label("allow")
	b.Ret(unix.SECCOMP_RET_ALLOW)
	b.Label("deny")
	b.Ret(unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM))
	return b.Assemble()
}

// refuseKernelSharing installs the kernel-sharing filter on the calling
// thread, which must be locked and have no_new_privs set or
// CAP_SYS_ADMIN; what it forks inherits the filter.
func refuseKernelSharing() error {
	f := kernelSharingFilter()
	prog := unix.SockFprog{Len: uint16(len(f)), Filter: &f[0]}
	if _, _, errno := unix.RawSyscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, 0, uintptr(unsafe.Pointer(&prog))); errno != 0 {
		return fmt.Errorf("sandbox: refuse the kernel keyrings and AF_VSOCK (seccomp): %v", errno)
	}
	return nil
}
