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

// The private home. The agent runs as the caller and would read what the
// caller can: ~/.ssh, ~/.aws, ~/.netrc, dal's own signing key. A sandbox
// given a [Home] ([Config.HideHome]) covers the caller's home directory and
// /root with an empty, read-only tmpfs, as bubblewrap's --tmpfs $HOME does,
// and shows in it, at their own paths, only:
//
//   - the short allow-list [HomeAllowList] (git's configuration), read-only;
//   - the toolchains the agent's PATH points into under the home
//     (pyenv, nvm, cargo and rustup, ~/go/bin, ~/.local), read-only, with
//     what they need there (see toolchainDirs);
//   - what the user names: Home.ReadOnly (--ro-bind) read-only,
//     Home.Writable (--bind) read-write;
//   - dal's own files the agent uses (the shims, dal-exec), read-only;
//   - in a direct sandbox, the agent's working directory, read-write, as
//     the run would have it.
//
// A direct sandbox's private /tmp shows the host's, but keeps the agent's
// writes but for its working directory's (see HideHome).
//
// Whatever is shown, dal's signing key and its directory (Home.Secrets)
// are not: an empty read-only directory or file covers each, even below a
// bind of a parent. As root, the host's password hashes and SSH host keys
// (rootSecrets) are covered too: the agent, uid 0 without capabilities,
// would otherwise read them as their owner.

// HomeAllowList are the paths below a hidden home shown read-only by
// default, when they exist.
var HomeAllowList = []string{".gitconfig", ".config/git"}

// rootSecrets are the host's files only root reads that an agent running
// as uid 0 would read as their owner. Globs.
var rootSecrets = []string{"/etc/shadow", "/etc/shadow-", "/etc/gshadow", "/etc/gshadow-",
	"/etc/security/opasswd", "/etc/ssh/ssh_host_*_key", "/etc/ssl/private"}

// Home is what a sandbox hides of the caller's home directories and what
// it shows there; see [Config.HideHome].
type Home struct {
	// Dir is the caller's home directory ($HOME); "" or "/" hides only
	// /root.
	Dir string
	// Path is the agent's PATH: the toolchains it points into under a
	// hidden home stay visible, read-only.
	Path string
	// ReadOnly and Writable are absolute host paths the user shows the
	// agent at their own places (--ro-bind, --bind), anywhere.
	ReadOnly, Writable []string
	// Need are dal's own files the agent uses (the shims, dal-exec,
	// dald's socket) and the agent's program, shown read-only when under
	// a hidden home.
	Need []string
	// Secrets are paths never shown, even below a bind: dal's signing key
	// and its directory.
	Secrets []string
	// Workdir, in a direct sandbox, is the agent's working directory,
	// shown read-write when under a hidden home or the private /tmp.
	Workdir string
}

// HideHome makes cfg hide the home directories h describes: it sets
// cfg.Hidden and cfg.Secrets and adds to cfg.Binds and cfg.WritableBinds
// what shows through. A home that a bind of the user's holds whole stays
// visible (secrets aside); a workspace or working directory that holds a
// home is refused, since the agent would see all of it.
func (cfg *Config) HideHome(h Home) error {
	for _, p := range append(slices.Clone(h.ReadOnly), h.Writable...) {
		if !filepath.IsAbs(p) {
			return fmt.Errorf("the path %q shown in the sandbox is not absolute", p)
		}
		if _, err := os.Stat(p); err != nil {
			return fmt.Errorf("%s cannot be shown in the sandbox: %v (--ro-bind and --bind name existing paths)", p, unwrapPath(err))
		}
	}
	homes := []string{"/root"}
	if d := filepath.Clean(h.Dir); filepath.IsAbs(d) && d != "/" && d != "/root" {
		homes = append(homes, d)
	}
	inside := cfg.Workspace
	if cfg.Direct {
		inside = h.Workdir
	}
	var hidden []string
	for _, home := range homes {
		if fi, err := os.Stat(home); err != nil || !fi.IsDir() {
			continue
		}
		if slices.ContainsFunc(append(slices.Clone(h.ReadOnly), h.Writable...), func(b string) bool { return within(home, b) }) {
			continue // the user shows it whole
		}
		if inside != "" && within(home, inside) {
			what := "the workspace"
			if cfg.Direct {
				what = "the working directory"
			}
			return fmt.Errorf("%s %s holds the home directory %s, whose secrets the sandbox hides: run in a project directory below it, or pass --bind %s to show the whole home", what, inside, home, home)
		}
		hidden = append(hidden, home)
	}
	// A direct sandbox's private /tmp (Config.PrivateTmp) shows the
	// host's, but keeps what the agent writes: the working directory
	// there is bound over it, read-write, as under a hidden home. A
	// working directory or a bind that holds /tmp shows the host's whole.
	tmp := cfg.Direct && cfg.PrivateTmp
	if tmp && (within("/tmp", h.Workdir) || slices.ContainsFunc(append(slices.Clone(h.ReadOnly), h.Writable...), func(b string) bool { return within("/tmp", b) })) {
		cfg.PrivateTmp, tmp = false, false
	}
	under := func(p string) bool {
		return slices.ContainsFunc(hidden, func(home string) bool { return within(p, home) })
	}
	ro := slices.Clone(h.ReadOnly)
	for _, home := range hidden {
		for _, rel := range HomeAllowList {
			ro = append(ro, filepath.Join(home, rel))
		}
		for _, dir := range filepath.SplitList(h.Path) {
			if filepath.IsAbs(dir) && within(dir, home) && filepath.Clean(dir) != home {
				ro = append(ro, toolchainDirs(home, filepath.Clean(dir))...)
			}
		}
	}
	for _, p := range h.Need {
		if under(p) {
			ro = append(ro, p)
		}
	}
	rw := slices.Clone(h.Writable)
	if cfg.Direct && h.Workdir != "" && (under(h.Workdir) || (tmp && within(h.Workdir, "/tmp"))) {
		rw = append(rw, filepath.Clean(h.Workdir))
	}
	for _, p := range ro {
		if _, err := os.Stat(p); err == nil && !slices.Contains(cfg.Binds, p) {
			cfg.Binds = append(cfg.Binds, filepath.Clean(p))
		}
	}
	for _, p := range rw {
		if !slices.Contains(cfg.WritableBinds, p) {
			cfg.WritableBinds = append(cfg.WritableBinds, filepath.Clean(p))
		}
	}
	cfg.Hidden = hidden
	secrets := slices.Clone(h.Secrets)
	if os.Geteuid() == 0 {
		for _, g := range rootSecrets {
			m, _ := filepath.Glob(g)
			secrets = append(secrets, m...)
		}
	}
	for _, s := range secrets {
		if s == "" || !filepath.IsAbs(s) {
			continue
		}
		cfg.Secrets = append(cfg.Secrets, filepath.Clean(s))
		// The same file by its other name, when a link leads there.
		if r, err := filepath.EvalSymlinks(s); err == nil && r != filepath.Clean(s) {
			cfg.Secrets = append(cfg.Secrets, r)
		}
	}
	return nil
}

// toolchainDirs are the directories below home that the PATH entry dir
// (below home) needs: the whole of a version manager (pyenv's shims are
// scripts that run pyenv from its root), rustup's toolchains for cargo's
// proxies (not ~/.cargo, which holds the registry token), the libraries
// of ~/.local/bin's scripts, else the entry alone.
func toolchainDirs(home, dir string) []string {
	rel, _ := filepath.Rel(home, dir)
	at := func(rels ...string) []string {
		var out []string
		for _, r := range rels {
			out = append(out, filepath.Join(home, r))
		}
		return out
	}
	top, _, _ := strings.Cut(rel, "/")
	switch {
	case top == ".pyenv" || top == ".nvm" || top == ".rbenv" || top == ".rustup" || top == ".volta" || top == ".bun" || top == ".deno":
		return at(top)
	case within(rel, ".cargo/bin"):
		return at(".cargo/bin", ".rustup")
	case within(rel, ".local/bin"):
		return at(".local/bin", ".local/lib", ".local/share/pipx", ".local/share/uv")
	}
	return []string{dir}
}

// hideHomes makes the detached mounts that hide sp.Hidden: an empty tmpfs
// each, writable until finishHomes has made the mount points of what
// shows through.
func hideHomes(sp *spec) ([]attach, error) {
	var atts []attach
	for _, h := range sp.Hidden {
		fd, err := emptyTmpfs("0755")
		if err != nil {
			closeAttaches(atts)
			return nil, fmt.Errorf("sandbox: a private home for %s: %v", h, err)
		}
		atts = append(atts, attach{fd: fd, target: filepath.Clean(h)})
	}
	return atts, nil
}

// finishHomes makes the hidden homes read-only (their mounts alone: what
// is bound below keeps its own) and covers the secrets. Run it once every
// mount is attached.
func finishHomes(sp *spec) error {
	for _, h := range sp.Hidden {
		if err := unix.MountSetattr(unix.AT_FDCWD, h, 0, &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY}); err != nil {
			return fmt.Errorf("sandbox: make the private home %s read-only: %v", h, err)
		}
	}
	if len(sp.Secrets) == 0 {
		return nil
	}
	empty, err := emptyTmpfs("0555")
	if err != nil {
		return fmt.Errorf("sandbox: cover dal's key: %v", err)
	}
	defer unix.Close(empty)
	if err := writeAt(empty, "file", nil); err != nil {
		return fmt.Errorf("sandbox: cover dal's key: %v", err)
	}
	if err := unix.MountSetattr(empty, "", unix.AT_EMPTY_PATH, &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY}); err != nil {
		return fmt.Errorf("sandbox: cover dal's key: %v", err)
	}
	for _, s := range sp.Secrets {
		if err := cover(empty, s); err != nil {
			return fmt.Errorf("sandbox: hide %s from the agent: %v", s, err)
		}
	}
	return nil
}

// cover mounts over p, when it shows in the sandbox, a clone of empty's
// root (p a directory) or of its file (anything else).
func cover(empty int, p string) error {
	fi, err := os.Stat(p)
	if errors.Is(err, os.ErrNotExist) || errors.Is(err, unix.ENOTDIR) {
		return nil // not shown
	}
	if errors.Is(err, os.ErrPermission) {
		return nil // not readable by the agent's ids either
	}
	if err != nil {
		return unwrapPath(err)
	}
	name := "file"
	if fi.IsDir() {
		name = ""
	}
	flags := uint(unix.OPEN_TREE_CLONE | unix.OPEN_TREE_CLOEXEC)
	if name == "" {
		flags |= unix.AT_EMPTY_PATH
	}
	fd, err := unix.OpenTree(empty, name, flags)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	return unix.MoveMount(fd, "", unix.AT_FDCWD, p, unix.MOVE_MOUNT_F_EMPTY_PATH)
}

// emptyTmpfs is a detached, empty, small tmpfs whose root has mode.
func emptyTmpfs(mode string) (int, error) {
	fs, err := unix.Fsopen("tmpfs", unix.FSOPEN_CLOEXEC)
	if err != nil {
		return -1, err
	}
	defer unix.Close(fs)
	for _, kv := range [][2]string{{"size", "1m"}, {"nr_inodes", "4096"}, {"mode", mode}} {
		if err := unix.FsconfigSetString(fs, kv[0], kv[1]); err != nil {
			return -1, fsError(fs, err)
		}
	}
	if err := unix.FsconfigCreate(fs); err != nil {
		return -1, fsError(fs, err)
	}
	return unix.Fsmount(fs, unix.FSMOUNT_CLOEXEC, unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV)
}
