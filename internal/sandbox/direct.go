package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sys/unix"
)

// A direct sandbox ([Config.Direct]) is what `dal-exec run` puts an agent
// in: the agent reads and writes the host's files as it would without dal,
// and what it does there stays, but it is the first process of a pid
// namespace (pids repeat), has the host name "dal" and runs under the
// syscall layer, which needs the namespaces: its /dev/urandom and
// /dev/random are the seeded FIFOs, /proc shows its own tree and serves
// seeded UUIDs. dal's own files for the run (TMPDIR, dald's socket, the
// marks directory) show at fixed paths in a tmpfs over [Config.RunDir].

// checkDirect validates a direct sandbox's cfg in the caller.
func (cfg Config) checkDirect() error {
	if cfg.Staging == "" || !filepath.IsAbs(cfg.Staging) {
		return fmt.Errorf("the sandbox staging directory %q is not an absolute path", cfg.Staging)
	}
	if cfg.RunDir != "" && (!filepath.IsAbs(cfg.RunDir) || filepath.Clean(cfg.RunDir) == "/") {
		return fmt.Errorf("the run directory %q is not an absolute path below /", cfg.RunDir)
	}
	for _, m := range cfg.Mounts {
		if !filepath.IsAbs(m.Source) {
			return fmt.Errorf("the mount source %q is not absolute", m.Source)
		}
	}
	for _, m := range append(slices.Clone(cfg.Mounts), cfg.SocketsAt...) {
		if cfg.RunDir == "" || !within(m.Target, cfg.RunDir) || filepath.Clean(m.Target) == filepath.Clean(cfg.RunDir) {
			return fmt.Errorf("the mount target %s is not below the run directory %q: a direct sandbox shows dal's files only there", m.Target, cfg.RunDir)
		}
	}
	if err := cfg.checkBinds(); err != nil {
		return err
	}
	return checkSockets(nil, cfg.SocketsAt)
}

// mountDirect builds a direct sandbox's mounts in the init's fresh mount
// namespace: the run directory's tmpfs and what shows in it, a /proc for
// the new pid namespace and, when randomness is virtual, the seeded
// devices and /proc/sys/kernel/random. Nothing else of the host's tree
// changes.
func mountDirect(sp *spec) error {
	if err := mountDirectFixed(sp); err != nil {
		return err
	}
	return mountDirectRun(sp)
}

// mountDirectFixed makes the mounts of a direct sandbox that depend on its
// configuration only, not on the agent (an init from [Prestart] makes them
// before it knows the agent): private mounts, /proc, and the virtual
// clock's and randomness's files.
func mountDirectFixed(sp *spec) error {
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("sandbox: make the mounts private: %v", err)
	}
	if err := mountProc(); err != nil {
		return err
	}
	if sp.Virtual.Clock {
		if err := virtualProcClock(sp.Virtual.EpochNS, sp.Virtual.MonoNS); err != nil {
			return err
		}
	}
	if !sp.Virtual.Random {
		return nil
	}
	if err := seedHostDevices(sp.Virtual.Seed); err != nil {
		return err
	}
	return seedProcRandom(sp.Virtual.Seed)
}

// mountDirectRun makes the run directory's tmpfs and what shows in it,
// and the private homes with what shows through them (home.go).
func mountDirectRun(sp *spec) error {
	atts, err := shown(sp)
	if err != nil {
		return err
	}
	more, err := bindAll(sp)
	if err != nil {
		closeAttaches(atts)
		return err
	}
	atts = append(atts, more...)
	var socks []attach
	if sp.PrivateTmp {
		socks = tmpSockets(sp)
		if err := mountDirectTmp(sp); err != nil {
			closeAttaches(append(atts, socks...))
			return err
		}
	}
	if sp.RunDir != "" {
		if err := mountRunDir(sp.RunDir); err != nil {
			closeAttaches(append(atts, socks...))
			return err
		}
	}
	// Below the run directory's fresh tmpfs: nothing there but what the
	// init made.
	if err := attachAll(atts); err != nil {
		closeAttaches(socks)
		return err
	}
	attachSockets(socks)
	return finishHomes(sp)
}

// mountDirectTmp gives the agent a /tmp of its own: an overlay whose lower
// layer is the host's /tmp and whose upper layer is a fresh tmpfs (sized
// by the limits). The agent reads what the host keeps there, as a run on
// the host's files does, but what it writes stays in the run: two runs'
// agents, both pid 100, no longer meet there (a JVM's
// /tmp/hsperfdata_USER/100). What must reach the host (the working
// directory, --bind, the sockets of tmpSockets) is attached over it
// afterwards. The run directory,
// when under /tmp, is made in it.
func mountDirectTmp(sp *spec) error {
	up, err := unix.Fsopen("tmpfs", unix.FSOPEN_CLOEXEC)
	if err != nil {
		return fmt.Errorf("sandbox: a private /tmp: %v", err)
	}
	defer unix.Close(up)
	opts := [][2]string{{"mode", "0700"}}
	if size := sp.Limits.tmpfsSize(); size != "" {
		opts = append(opts, [2]string{"size", strings.TrimPrefix(size, ",size=")})
	}
	for _, kv := range opts {
		if err := unix.FsconfigSetString(up, kv[0], kv[1]); err != nil {
			return fmt.Errorf("sandbox: a private /tmp: %v", fsError(up, err))
		}
	}
	if err := unix.FsconfigCreate(up); err != nil {
		return fmt.Errorf("sandbox: a private /tmp: %v", fsError(up, err))
	}
	layers, err := unix.Fsmount(up, unix.FSMOUNT_CLOEXEC, unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV)
	if err != nil {
		return fmt.Errorf("sandbox: a private /tmp: %v", err)
	}
	defer unix.Close(layers)
	// The overlay's root takes the upper directory's owner and mode:
	// /tmp's, sticky and open to all.
	if err := unix.Mkdirat(layers, "upper", 0o700); err != nil {
		return fmt.Errorf("sandbox: a private /tmp: %v", err)
	}
	if err := unix.Fchmodat(layers, "upper", 0o1777, 0); err != nil {
		return fmt.Errorf("sandbox: a private /tmp: %v", err)
	}
	if err := unix.Mkdirat(layers, "work", 0o700); err != nil {
		return fmt.Errorf("sandbox: a private /tmp: %v", err)
	}
	ov, err := unix.Fsopen("overlay", unix.FSOPEN_CLOEXEC)
	if err != nil {
		return fmt.Errorf("sandbox: a private /tmp needs overlayfs: %v", err)
	}
	defer unix.Close(ov)
	at := fmt.Sprintf("/proc/self/fd/%d/", layers)
	for _, kv := range [][2]string{{"lowerdir", "/tmp"}, {"upperdir", at + "upper"}, {"workdir", at + "work"}} {
		if err := unix.FsconfigSetString(ov, kv[0], kv[1]); err != nil {
			return fmt.Errorf("sandbox: a private /tmp over the host's: %s: %v", kv[0], fsError(ov, err))
		}
	}
	if sp.Rootless {
		if err := unix.FsconfigSetFlag(ov, "userxattr"); err != nil {
			return fmt.Errorf("sandbox: a private /tmp: overlay option userxattr: %v", fsError(ov, err))
		}
	}
	if err := unix.FsconfigCreate(ov); err != nil {
		return fmt.Errorf("sandbox: a private /tmp over the host's: %v", fsError(ov, err))
	}
	mfd, err := unix.Fsmount(ov, unix.FSMOUNT_CLOEXEC, unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV)
	if err != nil {
		return fmt.Errorf("sandbox: a private /tmp: %v", err)
	}
	defer unix.Close(mfd)
	if err := unix.MoveMount(mfd, "", unix.AT_FDCWD, "/tmp", unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
		return fmt.Errorf("sandbox: mount a private /tmp: %v", err)
	}
	if sp.RunDir != "" && within(sp.RunDir, "/tmp") {
		if err := os.MkdirAll(sp.RunDir, 0o755); err != nil {
			return fmt.Errorf("sandbox: the run directory in the private /tmp: %v", unwrapPath(err))
		}
	}
	return nil
}

// tmpSockets takes detached mounts of the Unix sockets bound under the
// host's /tmp (an ssh agent's, a dald's session socket), to show them over
// the private /tmp at their own paths: a connect reaches a socket only
// through its own inode, never through an overlay's. Those under a hidden
// home or a secret stay hidden, those under the run directory (another
// run's, in its own mount namespace) are not this run's; one that is gone
// or not a socket is left out. attachSockets attaches them.
func tmpSockets(sp *spec) []attach {
	f, err := os.Open("/proc/self/net/unix") // the host's network namespace: a direct sandbox shares it
	if err != nil {
		return nil
	}
	defer f.Close()
	paths, _ := parseUnixTable(f)
	var atts []attach
	for _, p := range paths {
		if !within(p, "/tmp") || (sp.RunDir != "" && within(p, sp.RunDir)) || slices.ContainsFunc(sp.Hidden, func(h string) bool { return within(p, h) }) ||
			slices.ContainsFunc(sp.Secrets, func(s string) bool { return within(p, s) }) {
			continue
		}
		if a, err := bindSocket(p); err == nil {
			atts = append(atts, a)
		}
	}
	return atts
}

// attachSockets attaches the host's sockets tmpSockets took over the
// private /tmp, each where a socket still shows there: one whose
// directory went meanwhile (another run's private directory, removed as
// it ended) is left out, not made. It consumes atts.
func attachSockets(atts []attach) {
	defer closeAttaches(atts)
	for _, a := range atts {
		// /tmp is everyone's: never through a link someone made there.
		how := unix.OpenHow{Flags: unix.O_PATH | unix.O_NOFOLLOW | unix.O_CLOEXEC, Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS}
		fd, err := unix.Openat2(unix.AT_FDCWD, a.target, &how)
		if err != nil {
			continue
		}
		var st unix.Stat_t
		if unix.Fstat(fd, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFSOCK {
			unix.MoveMount(a.fd, "", fd, "", unix.MOVE_MOUNT_F_EMPTY_PATH|unix.MOVE_MOUNT_T_EMPTY_PATH) // gone meanwhile: left out
		}
		unix.Close(fd)
	}
}

// mountRunDir covers the host directory dir with a fresh tmpfs (mode
// 1777, like /tmp), reached without following a symbolic link: the host's
// /tmp, where the run directory lives, is everyone's.
func mountRunDir(dir string) error {
	fd, err := openNoLinks(dir)
	if err != nil {
		return fmt.Errorf("the run directory %s cannot be used: %v (remove it; dal makes it again)", dir, err)
	}
	defer unix.Close(fd)
	fs, err := unix.Fsopen("tmpfs", unix.FSOPEN_CLOEXEC)
	if err != nil {
		return fmt.Errorf("sandbox: tmpfs for the run directory: %v", err)
	}
	defer unix.Close(fs)
	if err := unix.FsconfigSetString(fs, "mode", "1777"); err != nil {
		return fmt.Errorf("sandbox: tmpfs for the run directory: %v", fsError(fs, err))
	}
	if err := unix.FsconfigCreate(fs); err != nil {
		return fmt.Errorf("sandbox: tmpfs for the run directory: %v", fsError(fs, err))
	}
	mfd, err := unix.Fsmount(fs, unix.FSMOUNT_CLOEXEC, unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV)
	if err != nil {
		return fmt.Errorf("sandbox: mount the run directory: %v", err)
	}
	defer unix.Close(mfd)
	if err := unix.MoveMount(mfd, "", fd, "", unix.MOVE_MOUNT_F_EMPTY_PATH|unix.MOVE_MOUNT_T_EMPTY_PATH); err != nil {
		return fmt.Errorf("sandbox: mount the run directory %s: %v", dir, err)
	}
	return nil
}

// openNoLinks opens the directory p as a path (O_PATH), refusing a
// symbolic link anywhere on the way.
func openNoLinks(p string) (int, error) {
	how := unix.OpenHow{Flags: unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC, Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS}
	fd, err := unix.Openat2(unix.AT_FDCWD, p, &how)
	if errors.Is(err, unix.ELOOP) {
		return -1, errors.New("it is a symbolic link or under one")
	}
	if errors.Is(err, unix.ENOTDIR) {
		return -1, errors.New("it is not a directory")
	}
	return fd, err
}

// seedHostDevices puts the seeded FIFOs (see seedDeviceAt) over the host's
// /dev/urandom and /dev/random, which a direct sandbox keeps. They live in
// a tmpfs attached nowhere else; the host's nodes are untouched.
func seedHostDevices(seed uint64) error {
	dir, err := detachedTmpfs()
	if err != nil {
		return fmt.Errorf("sandbox: a directory for the seeded devices: %v", err)
	}
	defer unix.Close(dir)
	for _, name := range []string{"random", "urandom"} {
		if err := seedDeviceAt(dir, name, seed); err != nil {
			return err
		}
		fd, err := unix.OpenTree(dir, name, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_SYMLINK_NOFOLLOW)
		if err != nil {
			return fmt.Errorf("sandbox: show the seeded /dev/%s: %v", name, err)
		}
		err = unix.MoveMount(fd, "", unix.AT_FDCWD, "/dev/"+name, unix.MOVE_MOUNT_F_EMPTY_PATH)
		unix.Close(fd)
		if err != nil {
			return fmt.Errorf("sandbox: show the seeded /dev/%s: %v", name, err)
		}
	}
	return nil
}

// Outside returns nil, or when the calling process runs in a sandbox of
// dal's ([Inside]) the sentence that says a sandbox cannot start there.
// A command that needs one checks it before anything else: in a sandbox
// the caller's home, where dal keeps its key, is hidden.
func Outside() error {
	if Inside() {
		return errors.New("dal's sandbox cannot start inside another (this is a dal-exec run, record or replay's agent, and the kernel lets one seccomp supervisor watch a process): start dal-exec outside it")
	}
	return nil
}

// Inside reports whether the calling process runs in a sandbox of dal's
// (a record's, a replay's or a run's): the first process of its pid
// namespace is a sandbox init. The kernel lets only one seccomp listener
// watch a process, so a sandbox cannot start there; the outer sandbox's
// syscall layer serves its processes instead.
func Inside() bool {
	b, err := os.ReadFile("/proc/1/cmdline")
	return err == nil && strings.HasPrefix(string(b), initArg+"\x00")
}
