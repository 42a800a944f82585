package sandbox

import "golang.org/x/sys/unix"

const auditArch = unix.AUDIT_ARCH_AARCH64

// legacyCalls: arm64 has only the *at calls.
var legacyCalls []watched
