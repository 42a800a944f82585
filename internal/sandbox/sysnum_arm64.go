package sandbox

import "golang.org/x/sys/unix"

const auditArch = unix.AUDIT_ARCH_AARCH64

// compatArch is the 32-bit ABI a 64-bit process can also call.
const compatArch = unix.AUDIT_ARCH_ARM

// legacyCalls: arm64 has only the *at calls.
var legacyCalls []watched

// The 32-bit ARM ABI's numbers for the calls the kernel-sharing filter
// refuses (keyring.go): add_key, request_key, keyctl; socket. ARM EABI
// has no socketcall (noSyscall never matches).
var compatKeyCalls = []uint32{309, 310, 311}

const (
	compatSocket     = 281
	compatSocketcall = noSyscall
)

// noSyscall is a number no system call has.
const noSyscall = 0xffffffff
