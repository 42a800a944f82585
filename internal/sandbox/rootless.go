package sandbox

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// rootless reports whether the sandboxes of this process are rootless:
// when dal-exec is not root, [Command] adds a user namespace in which the
// caller's uid and gid are mapped to themselves (one id each, setgroups
// denied), and the init, holding the namespace's capabilities, mounts what
// it mounts as root does. The
// kernel then differs in two ways this package follows: overlayfs is
// mounted with userxattr and keeps its marks (opaque directories) in
// user.overlay.* xattrs instead of trusted.overlay.*, and it leaves its
// work directory's "work" entry unreadable to the caller (mode 0), which
// [Cmd.Wait] makes removable again.
func rootless() bool { return os.Geteuid() != 0 }

// opaqueXattr is the xattr that marks an opaque directory in the overlays
// of this process. Only that one is honoured when reading a layer: under
// trusted.* an agent could otherwise set user.overlay.opaque through the
// overlay on a directory of its upper layer, a mark the overlay ignores
// and Capture would not.
func opaqueXattr() string {
	if rootless() {
		return "user.overlay.opaque"
	}
	return "trusted.overlay.opaque"
}

// userNamespaces says, in one sentence, why this kernel will not give an
// unprivileged process a usable user namespace, or returns nil. procSys is
// /proc/sys (a parameter for tests). It reads the three settings
// distributions use: Debian's kernel.unprivileged_userns_clone, the
// generic user.max_user_namespaces, and Ubuntu's AppArmor restriction
// (kernel.apparmor_restrict_unprivileged_userns), under which the
// namespace is made but holds no capabilities, so the overlay would fail
// with a bare "operation not permitted".
func userNamespaces(procSys string) error {
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(procSys, name))
		if err != nil {
			return ""
		}
		return strings.TrimSpace(string(b))
	}
	const fix = "run dal-exec as root, or allow them: sudo sysctl -w %s=%s (and in /etc/sysctl.d/ to keep it)"
	switch {
	case read("kernel/unprivileged_userns_clone") == "0":
		return fmt.Errorf("dal-exec runs the agent in a user namespace when it is not root, and this kernel forbids unprivileged ones (kernel.unprivileged_userns_clone=0): "+fix,
			"kernel.unprivileged_userns_clone", "1")
	case read("user/max_user_namespaces") == "0":
		return fmt.Errorf("dal-exec runs the agent in a user namespace when it is not root, and this kernel allows none (user.max_user_namespaces=0): "+fix,
			"user.max_user_namespaces", "10000")
	case read("kernel/apparmor_restrict_unprivileged_userns") == "1":
		return fmt.Errorf("dal-exec runs the agent in a user namespace when it is not root, and AppArmor restricts unprivileged ones (kernel.apparmor_restrict_unprivileged_userns=1): "+fix+", or give dal-exec an AppArmor profile with the userns rule",
			"kernel.apparmor_restrict_unprivileged_userns", "0")
	}
	return nil
}
