package sandbox

import "golang.org/x/sys/unix"

const auditArch = unix.AUDIT_ARCH_X86_64

// compatArch is the 32-bit ABI a 64-bit process can also call.
const compatArch = unix.AUDIT_ARCH_I386

// legacyCalls are the path-based write calls that only older ABIs have.
var legacyCalls = []watched{
	openCall(unix.SYS_OPEN, "open", -1, 0, 1),
	pathCall(unix.SYS_CREAT, "creat", -1, 0),
	pathCall(unix.SYS_MKDIR, "mkdir", -1, 0),
	pathCall(unix.SYS_RMDIR, "rmdir", -1, 0),
	pathCall(unix.SYS_UNLINK, "unlink", -1, 0),
	twoPathCall(unix.SYS_RENAME, "rename", -1, 0, -1, 1),
	pathCall(unix.SYS_LINK, "link", -1, 1),
	pathCall(unix.SYS_SYMLINK, "symlink", -1, 1),
	pathCall(unix.SYS_MKNOD, "mknod", -1, 0),
	pathCall(unix.SYS_CHMOD, "chmod", -1, 0),
	pathCall(unix.SYS_CHOWN, "chown", -1, 0),
	pathCall(unix.SYS_LCHOWN, "lchown", -1, 0),
	pathCall(unix.SYS_UTIME, "utime", -1, 0),
	pathCall(unix.SYS_UTIMES, "utimes", -1, 0),
	pathCall(unix.SYS_FUTIMESAT, "futimesat", 0, 1),
}

// The i386 ABI's numbers for the calls the kernel-sharing filter refuses
// (keyring.go): add_key, request_key, keyctl; socket; socketcall.
var compatKeyCalls = []uint32{286, 287, 288}

const (
	compatSocket     = 359
	compatSocketcall = 102
)
