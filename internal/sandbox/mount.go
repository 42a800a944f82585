package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"golang.org/x/sys/unix"
)

// attach is a detached mount waiting for its place.
type attach struct {
	fd     int
	target string
	file   bool // the mount point is a file
}

// mountAll builds the sandbox's mount tree in the init's fresh mount
// namespace. Order matters: the overlay, the binds and the device nodes
// are made as detached mounts while the real tree is still writable and
// visible (before /tmp and /dev are covered), then / becomes read-only and
// nodev, then the sandbox's own /tmp, /dev and /proc and the detached
// mounts go on top.
func mountAll(sp *spec) error {
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("sandbox: make the mounts private: %v", err)
	}
	sockets, err := hostSockets(sp.HostPID)
	if err != nil {
		return err
	}
	ovl, err := overlay(sp)
	if err != nil {
		return err
	}
	atts := []attach{{fd: ovl, target: sp.Workspace}}
	binds, err := bindAll(sp)
	if err != nil {
		unix.Close(ovl)
		return err
	}
	atts = append(atts, binds...)
	for _, s := range sp.Sockets {
		a, err := bindSocket(s)
		if err != nil {
			return err
		}
		atts = append(atts, a)
	}
	more, err := shown(sp)
	if err != nil {
		return err
	}
	atts = append(atts, more...)
	devs, err := cloneDevices()
	if err != nil {
		return err
	}
	// nodev everywhere: a device node on the host's tree (or planted in
	// the workspace) opens nothing; only the sandbox's /dev has devices.
	if err := unix.MountSetattr(unix.AT_FDCWD, "/", unix.AT_RECURSIVE, &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY | unix.MOUNT_ATTR_NODEV}); err != nil {
		closeDevices(devs)
		return fmt.Errorf("sandbox: make the filesystem read-only: %v", err)
	}
	if sp.PrivateTmp {
		if fi, err := os.Stat("/tmp"); err == nil && fi.IsDir() {
			if err := unix.Mount("tmpfs", "/tmp", "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=1777"+sp.Limits.tmpfsSize()); err != nil {
				closeDevices(devs)
				return fmt.Errorf("sandbox: mount a private /tmp: %v", err)
			}
		}
		if err := mountPrivateDirs(sp.Limits.tmpfsSize()); err != nil {
			closeDevices(devs)
			return err
		}
	}
	if err := mountDev(devs, sp.Virtual, sp.Limits.tmpfsSize()); err != nil {
		return err
	}
	if err := mountProc(); err != nil {
		return err
	}
	if sp.Virtual.Random {
		if err := seedProcRandom(sp.Virtual.Seed); err != nil {
			return err
		}
	}
	if sp.Virtual.Clock {
		if err := virtualProcClock(sp.Virtual.EpochNS, sp.Virtual.MonoNS); err != nil {
			return err
		}
	}
	// Parents before children: a bind may sit inside the workspace or the
	// workspace inside a bind.
	if err := attachAll(atts); err != nil {
		return err
	}
	if err := finishHomes(sp); err != nil {
		return err
	}
	return maskSockets(sockets, sp)
}

// bindAll clones sp's Binds (read-only) and WritableBinds as detached
// mounts, and makes the private homes that hide sp.Hidden.
func bindAll(sp *spec) ([]attach, error) {
	atts, err := hideHomes(sp)
	if err != nil {
		return nil, err
	}
	for i, list := range [][]string{sp.Binds, sp.WritableBinds} {
		for _, b := range list {
			a, err := bind(b, b, i == 0, true)
			if err != nil {
				closeAttaches(atts)
				return nil, fmt.Errorf("the bind path %s cannot be bound into the sandbox: %v", b, err)
			}
			atts = append(atts, a)
		}
	}
	return atts, nil
}

// shown takes detached mounts of what sp shows at targets of their own:
// its SocketsAt and Mounts.
func shown(sp *spec) ([]attach, error) {
	var atts []attach
	fail := func(err error) ([]attach, error) {
		closeAttaches(atts)
		return nil, err
	}
	for _, m := range sp.SocketsAt {
		a, err := bindSocket(m.Source)
		if err != nil {
			return fail(err)
		}
		a.target = filepath.Clean(m.Target)
		atts = append(atts, a)
	}
	for _, m := range sp.Mounts {
		a, err := bind(m.Source, m.Target, m.ReadOnly, false)
		if err != nil {
			return fail(fmt.Errorf("sandbox: %s cannot be shown at %s: %v", m.Source, m.Target, err))
		}
		atts = append(atts, a)
	}
	return atts, nil
}

// attachAll mounts atts at their targets, parents before children, making
// each mount point where the tree is writable, and closes them.
func attachAll(atts []attach) error {
	defer closeAttaches(atts)
	sort.SliceStable(atts, func(i, j int) bool {
		return strings.Count(atts[i].target, "/") < strings.Count(atts[j].target, "/")
	})
	for _, a := range atts {
		if err := mountPoint(a.target, a.file); err != nil {
			return fmt.Errorf("sandbox: no mount point for %s: %v", a.target, err)
		}
		if err := unix.MoveMount(a.fd, "", unix.AT_FDCWD, a.target, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
			return fmt.Errorf("sandbox: mount %s: %v", a.target, err)
		}
	}
	return nil
}

func closeAttaches(atts []attach) {
	for _, a := range atts {
		unix.Close(a.fd)
	}
}

// bind clones source (with its submounts when recursive) as a detached
// mount for target: nosuid and nodev, read-only when asked.
func bind(source, target string, readOnly, recursive bool) (attach, error) {
	flags := unix.OPEN_TREE_CLONE | unix.OPEN_TREE_CLOEXEC
	setFlags := uint(0)
	if recursive {
		flags |= unix.AT_RECURSIVE
		setFlags = unix.AT_RECURSIVE
	}
	fd, err := unix.OpenTree(unix.AT_FDCWD, source, uint(flags))
	if err != nil {
		return attach{}, err
	}
	attr := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV}
	if readOnly {
		attr.Attr_set |= unix.MOUNT_ATTR_RDONLY
	}
	if err := unix.MountSetattr(fd, "", unix.AT_EMPTY_PATH|setFlags, &attr); err != nil {
		unix.Close(fd)
		return attach{}, err
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return attach{}, err
	}
	return attach{fd: fd, target: filepath.Clean(target), file: st.Mode&unix.S_IFMT != unix.S_IFDIR}, nil
}

// bindSocket clones exactly the socket file at p, never its directory,
// read-only as a mount (connecting needs no write access to the mount),
// not following a final symbolic link.
func bindSocket(p string) (attach, error) {
	fd, err := unix.OpenTree(unix.AT_FDCWD, p, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_SYMLINK_NOFOLLOW)
	if err != nil {
		return attach{}, fmt.Errorf("the socket %s cannot be shown in the sandbox: %v", p, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFSOCK {
		unix.Close(fd)
		return attach{}, fmt.Errorf("%s is not a Unix socket: pass the socket's own path", p)
	}
	attr := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY | unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV | unix.MOUNT_ATTR_NOEXEC}
	if err := unix.MountSetattr(fd, "", unix.AT_EMPTY_PATH, &attr); err != nil {
		unix.Close(fd)
		return attach{}, fmt.Errorf("sandbox: make the socket %s read-only: %v", p, err)
	}
	return attach{fd: fd, target: filepath.Clean(p), file: true}, nil
}

// overlay creates the workspace overlay as a detached mount.
func overlay(sp *spec) (int, error) {
	fsfd, err := unix.Fsopen("overlay", unix.FSOPEN_CLOEXEC)
	if err != nil {
		return -1, fmt.Errorf("overlayfs is not available (%v): dal needs it to capture the workspace", err)
	}
	defer unix.Close(fsfd)
	set := func(k, v string) error {
		if err := unix.FsconfigSetString(fsfd, k, v); err != nil {
			return fsError(fsfd, err)
		}
		return nil
	}
	for i, l := range sp.Lower {
		err := set("lowerdir+", l)
		if err == nil {
			continue
		}
		if i > 0 || !errors.Is(err, unix.EINVAL) {
			return -1, fmt.Errorf("the lower layer %s cannot be part of an overlay: %v", l, err)
		}
		// Before Linux 6.8: one joined lowerdir, ':' escaped.
		var esc []string
		for _, l := range sp.Lower {
			esc = append(esc, strings.ReplaceAll(l, ":", `\:`))
		}
		if err := set("lowerdir", strings.Join(esc, ":")); err != nil {
			return -1, fmt.Errorf("the workspace %s cannot be the lower layer of an overlay: %v", sp.Workspace, err)
		}
		break
	}
	for _, kv := range [][2]string{{"upperdir", sp.Upper}, {"workdir", sp.Work}} {
		if err := set(kv[0], kv[1]); err != nil {
			return -1, fmt.Errorf("the staging directory %s cannot hold the overlay's %s (it must not be on overlayfs): %v",
				filepath.Dir(sp.Upper), kv[0], err)
		}
	}
	// Plain layers that Capture can read: no redirects, no metadata-only
	// copy-ups, no index.
	opts := [][2]string{{"redirect_dir", "off"}, {"metacopy", "off"}, {"index", "off"}}
	if sp.Rootless {
		// In a user namespace overlayfs keeps its marks in user.overlay.*
		// xattrs, and refuses "off" with them; "nofollow" neither makes
		// nor follows redirects, which is the same here.
		if err := unix.FsconfigSetFlag(fsfd, "userxattr"); err != nil {
			return -1, fmt.Errorf("sandbox: overlay option userxattr: %v", fsError(fsfd, err))
		}
		opts[0][1] = "nofollow"
	}
	for _, kv := range opts {
		if err := set(kv[0], kv[1]); err != nil {
			return -1, fmt.Errorf("sandbox: overlay option %s=%s: %v", kv[0], kv[1], err)
		}
	}
	if err := unix.FsconfigCreate(fsfd); err != nil {
		return -1, fmt.Errorf("the workspace overlay cannot be created over %s with its upper layer in %s: %v",
			sp.Workspace, filepath.Dir(sp.Upper), fsError(fsfd, err))
	}
	mfd, err := unix.Fsmount(fsfd, unix.FSMOUNT_CLOEXEC, unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV)
	if err != nil {
		return -1, fmt.Errorf("sandbox: mount the workspace overlay: %v", err)
	}
	return mfd, nil
}

// fsError adds the kernel's message from a filesystem context to err.
func fsError(fsfd int, err error) error {
	buf := make([]byte, 512)
	var msgs []string
	for {
		n, rerr := unix.Read(fsfd, buf)
		if rerr != nil || n <= 0 {
			break
		}
		m := strings.TrimSpace(string(buf[:n]))
		m = strings.TrimPrefix(strings.TrimPrefix(m, "e "), "w ")
		msgs = append(msgs, m)
	}
	if len(msgs) == 0 {
		return err
	}
	return fmt.Errorf("%w (%s)", err, strings.Join(msgs, "; "))
}

// lastPIDFile is the new pid namespace's ns_last_pid, open for writing.
var lastPIDFile *os.File

// mountProc mounts a proc for the new pid namespace and makes its
// system-wide knobs read-only, as container runtimes do: uid 0 without
// capabilities may still write most of /proc/sys.
func mountProc() error {
	if err := unix.Mount("proc", "/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("sandbox: mount /proc: %v", err)
	}
	// Opened before /proc/sys turns read-only, for setLastPID.
	if f, err := os.OpenFile("/proc/sys/kernel/ns_last_pid", os.O_WRONLY|unix.O_CLOEXEC, 0); err == nil {
		lastPIDFile = f
	}
	for _, p := range []string{"/proc/sys", "/proc/sysrq-trigger", "/proc/irq", "/proc/bus", "/proc/fs"} {
		if _, err := os.Lstat(p); err != nil {
			continue
		}
		if err := unix.Mount(p, p, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return fmt.Errorf("sandbox: bind %s: %v", p, err)
		}
		if err := unix.MountSetattr(unix.AT_FDCWD, p, unix.AT_RECURSIVE, &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY}); err != nil {
			return fmt.Errorf("sandbox: make %s read-only: %v", p, err)
		}
	}
	return nil
}

// mountPoint makes sure target exists; it can only create it where the
// tree is writable (the private /tmp).
func mountPoint(target string, file bool) error {
	fi, err := os.Stat(target)
	if err == nil {
		if fi.IsDir() == !file {
			return nil
		}
		return errors.New("the mount point's kind differs")
	}
	if file {
		if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
			return unwrapPath(err)
		}
		f, err := os.OpenFile(target, os.O_CREATE|os.O_WRONLY, 0o600)
		if err != nil {
			return unwrapPath(err)
		}
		return f.Close()
	}
	return unwrapPath(os.MkdirAll(target, 0o755))
}
