package sandbox

import "golang.org/x/sys/unix"

const auditArch = unix.AUDIT_ARCH_AARCH64

// compatArch is the 32-bit ABI a 64-bit process can also call.
const compatArch = unix.AUDIT_ARCH_ARM

// legacyCalls: arm64 has only the *at calls.
var legacyCalls []watched
