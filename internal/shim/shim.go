// Package shim carries the Python and Node runtime shims inside the dal-exec
// binary and installs them where an agent's interpreter will load them.
//
// Installation extracts the embedded files into a content-addressed
// directory under the user's cache (or a private temporary directory when
// there is no usable cache). Nothing is installed into the agent's
// environment or site-packages: the runner points PYTHONPATH and
// NODE_OPTIONS at the directory.
//
// The shims are code every agent runs, first on its path, so the installed
// tree is checked before each use ([Install]): every directory and file is
// a real one (no symbolic link is followed), owned by the user and
// writable by nobody else; every shipped file is byte for byte the
// embedded one, every byte-compiled file the one compiled at installation
// (its hash is in the tree's manifest, .complete), and nothing else is
// there but the caches of other Python versions, which are removed. A tree
// that differs (an agent appended to sitecustomize.py during an unsandboxed
// run, say) is replaced by a fresh one in one rename. A tree that stats as
// it did when it last passed that check in full is taken as it is (its
// seal, seal.go). Limit: someone who can write the user's cache can also
// rewrite the manifest with the byte-compiled files, and the seal; the
// sandbox shows the tree read-only.
package shim

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/dal-runtime/dal/internal/embedfs"
	"github.com/dal-runtime/dal/internal/safefs"
	"golang.org/x/sys/unix"
)

//go:embed all:python all:node
var files embed.FS

// Dir is an installed shim tree.
type Dir string

// PythonPath is the directory to put first on PYTHONPATH.
func (d Dir) PythonPath() string { return filepath.Join(string(d), "python") }

// NodeRequire is the script to pass to node with --require.
func (d Dir) NodeRequire() string { return filepath.Join(string(d), "node", "dal-register.js") }

// shipped reports whether an embedded path belongs in the installed tree:
// tests and caches stay out.
func shipped(p string) bool {
	for _, part := range strings.Split(p, "/") {
		switch part {
		case "__pycache__", "tests", "test", "node_modules", ".v8":
			return false
		}
	}
	return !strings.HasSuffix(p, ".pyc")
}

// shippedTree is the embedded tree as installed, read once.
type shippedTree struct {
	files  map[string]string // path -> content (the binary's, not a copy)
	dirs   map[string]bool
	digest string
}

// shippedOnce reads the tree from the compiler's layout of files: the
// digest hashes each file's path, length and the content hash the
// compiler stored beside it, a few kilobytes rather than the 450 kB of
// shims, at every run.
var shippedOnce = sync.OnceValue(func() *shippedTree {
	t := &shippedTree{files: map[string]string{}, dirs: map[string]bool{}}
	h := sha256.New()
	for _, f := range embedfs.Files(&files) {
		p, dir := strings.CutSuffix(f.Name, "/")
		if !shipped(p) {
			continue
		}
		if dir {
			t.dirs[p] = true
			continue
		}
		t.files[p] = f.Data
		fmt.Fprintf(h, "%s\x00%d\x00", p, len(f.Data))
		h.Write(f.Hash[:])
	}
	t.digest = hex.EncodeToString(h.Sum(nil))[:16]
	return t
})

// Digest identifies the embedded shim files.
func Digest() string { return shippedOnce().digest }

// Install makes sure the shims are installed and intact, and returns
// their directory. It is safe to call concurrently, also from several
// processes.
func Install() (Dir, error) {
	var errs []error
	for _, base := range bases() {
		d, err := installIn(base)
		if err == nil {
			return d, nil
		}
		errs = append(errs, err)
	}
	return "", fmt.Errorf("install runtime shims: %w", errors.Join(errs...))
}

func bases() []string {
	var out []string
	if c, err := os.UserCacheDir(); err == nil {
		out = append(out, filepath.Join(c, "dal", "shims"))
	}
	return append(out, filepath.Join(os.TempDir(), fmt.Sprintf("dal-shims-%d", os.Getuid())))
}

func installIn(base string) (Dir, error) {
	if err := os.MkdirAll(base, 0o700); err != nil {
		return "", err
	}
	if err := checkOwned(base); err != nil {
		return "", err
	}
	final := filepath.Join(base, Digest())
	if sealed(final, sealWindow) == nil {
		return Dir(final), nil
	}
	if lines, err := verify(final); err == nil {
		// Best effort: without a seal the next run checks in full again.
		seal(final, lines)
		return Dir(final), nil
	}
	tmp, err := os.MkdirTemp(base, ".extract-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	if err := extract(tmp); err != nil {
		return "", err
	}
	err = os.Rename(tmp, final)
	if err == nil {
		// A new build's first run: the trees of builds long unused go.
		prune(base, time.Now())
		return Dir(final), nil
	}
	if _, err := verify(final); err == nil {
		return Dir(final), nil // another process installed it meanwhile
	}
	// A tree that is not what dal installed: swap the fresh one in, in one
	// step, and remove the other (deferred, under its new name).
	if err := unix.Renameat2(unix.AT_FDCWD, tmp, unix.AT_FDCWD, final, unix.RENAME_EXCHANGE); err != nil {
		return "", fmt.Errorf("replace the altered shims in %s: %w", final, err)
	}
	return Dir(final), nil
}

// Trees of other builds are removed when a build installs its own, which
// happens once per build: those installed more than pruneAge ago, except
// the keepOthers newest. A build whose tree was removed installs it again
// on its next run; what an agent of it already loaded is not affected.
const (
	pruneAge   = 24 * time.Hour
	keepOthers = 3
)

// prune removes the trees of other builds in base by the rule above, and
// their seals, best effort. Only directories named as a digest are taken
// (never followed: a link so named is left), and they are removed one
// name at a time from descriptors (safefs), never through a link.
func prune(base string, now time.Time) {
	d, err := safefs.Open(base)
	if err != nil {
		return
	}
	defer d.Close()
	entries, err := d.ReadDir(".")
	if err != nil {
		return
	}
	type tree struct {
		name string
		mod  time.Time
	}
	var others []tree
	for _, e := range entries {
		if !e.IsDir() || !isDigest(e.Name()) || e.Name() == Digest() {
			continue
		}
		if fi, err := e.Info(); err == nil {
			others = append(others, tree{e.Name(), fi.ModTime()})
		}
	}
	slices.SortFunc(others, func(a, b tree) int { return b.mod.Compare(a.mod) })
	for i, t := range others {
		if i < keepOthers || now.Sub(t.mod) < pruneAge {
			continue
		}
		// The seal first: a tree without one is checked in full.
		d.Remove("." + t.name + ".seal")
		d.RemoveAll(t.name)
	}
}

// isDigest reports whether name is a tree's name: 16 lowercase hex digits.
func isDigest(name string) bool {
	if len(name) != 16 {
		return false
	}
	for _, c := range name {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// extract writes the shipped files into dir, byte-compiles the Python
// shim and writes the manifest, .complete, last.
func extract(dir string) error {
	tree := shippedOnce()
	for p := range tree.dirs {
		if err := os.MkdirAll(filepath.Join(dir, filepath.FromSlash(p)), 0o755); err != nil {
			return err
		}
	}
	for p, b := range tree.files {
		if err := os.WriteFile(filepath.Join(dir, filepath.FromSlash(p)), []byte(b), 0o644); err != nil {
			return err
		}
	}
	precompile(dir)
	var manifest strings.Builder
	manifest.WriteString(Digest() + " " + manifestVersion + "\n")
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		// Whatever the umask: writable by the user alone.
		if d.IsDir() {
			return os.Chmod(p, 0o755)
		}
		if !d.Type().IsRegular() {
			return fmt.Errorf("%s is not a regular file", p)
		}
		if err := os.Chmod(p, 0o644); err != nil {
			return err
		}
		rel := filepath.ToSlash(p[len(dir)+1:])
		if _, ok := tree.files[rel]; ok {
			return nil // shipped: checked against the embedded copy
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		fmt.Fprintf(&manifest, "%s %s\n", hex.EncodeToString(sum[:]), rel)
		return nil
	})
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, completeName), []byte(manifest.String()), 0o644); err != nil {
		return err
	}
	return os.Chmod(dir, 0o755)
}

// completeName is the manifest: the digest and format on the first line,
// then "sha256hex path" for each file made at installation.
const (
	completeName    = ".complete"
	manifestVersion = "v2"
)

// errAltered says an installed tree is not what dal installed.
var errAltered = errors.New("the installed shims were altered")

// verify checks the tree at dir against the embedded files and its
// manifest, without following any symbolic link, and removes the caches
// of other Python versions. nil means the tree can be used as it is; then
// sealed is what the check saw, for [seal].
func verify(dir string) (sealed string, err error) {
	if err := checkOwned(dir); err != nil {
		return "", err
	}
	root, err := openDirAt(unix.AT_FDCWD, dir)
	if err != nil {
		return "", err
	}
	defer root.Close()
	m, st, err := readAt(int(root.Fd()), completeName, false)
	if err != nil {
		return "", err
	}
	first, rest, _ := strings.Cut(string(m), "\n")
	if first != Digest()+" "+manifestVersion {
		return "", errAltered
	}
	made := map[string]string{} // path -> hex sha256
	for _, l := range strings.Split(rest, "\n") {
		if l == "" {
			continue
		}
		sum, p, ok := strings.Cut(l, " ")
		if !ok {
			return "", errAltered
		}
		made[p] = sum
	}
	v := verifier{tree: shippedOnce(), made: made, seen: map[string]bool{}}
	v.sealed.WriteString(sealLine(&st, completeName))
	if err := v.dir(root, ""); err != nil {
		return "", err
	}
	// Everything expected is there.
	for p := range made {
		if !v.seen[p] {
			return "", errAltered
		}
	}
	for p := range v.tree.files {
		if !v.seen[p] {
			return "", errAltered
		}
	}
	for p := range v.tree.dirs {
		if !v.seen[p] {
			return "", errAltered
		}
	}
	return v.sealed.String(), nil
}

type verifier struct {
	tree   *shippedTree
	made   map[string]string // path -> hex sha256, from the manifest
	seen   map[string]bool
	sealed strings.Builder // the seal's lines of what it read
}

// dir checks the directory d, rel below the tree's root.
func (v *verifier) dir(d *os.File, rel string) error {
	fd := int(d.Fd())
	var own unix.Stat_t
	if err := unix.Fstat(fd, &own); err != nil {
		return err
	}
	v.sealed.WriteString(sealLine(&own, rel))
	names, err := d.Readdirnames(-1)
	if err != nil {
		return err
	}
	for _, name := range names {
		p := path.Join(rel, name)
		if p == completeName {
			continue
		}
		var st unix.Stat_t
		if err := unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return err
		}
		if int(st.Uid) != os.Getuid() || st.Mode&0o022 != 0 {
			return errAltered
		}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFDIR:
			if !v.expectedDir(p) {
				if foreignCache(p, true) {
					removeAt(fd, name)
					continue
				}
				return errAltered
			}
			sub, err := openDirAt(fd, name)
			if err != nil {
				return err
			}
			err = v.dir(sub, p)
			sub.Close()
			if err != nil {
				return err
			}
		case unix.S_IFREG:
			if err := v.file(fd, name, p); err != nil {
				if err == errAltered && foreignCache(p, false) {
					unix.Unlinkat(fd, name, 0)
					continue
				}
				return err
			}
		default:
			return errAltered
		}
		v.seen[p] = true
	}
	return nil
}

// expectedDir reports whether p is a directory of the installed tree.
func (v *verifier) expectedDir(p string) bool {
	if v.tree.dirs[p] {
		return true
	}
	for m := range v.made {
		if strings.HasPrefix(m, p+"/") {
			return true
		}
	}
	return false
}

// file compares the file name in the directory open at dirfd with the
// embedded one or the manifest's hash.
func (v *verifier) file(dirfd int, name, p string) error {
	want, shippedFile := v.tree.files[p]
	sum, madeFile := v.made[p]
	if !shippedFile && !madeFile {
		return errAltered
	}
	b, st, err := readAt(dirfd, name, false)
	if err != nil {
		return err
	}
	v.sealed.WriteString(sealLine(&st, p))
	if shippedFile {
		if string(b) != want {
			return errAltered
		}
		return nil
	}
	got := sha256.Sum256(b)
	if hex.EncodeToString(got[:]) != sum {
		return errAltered
	}
	return nil
}

// foreignCache reports whether p is a cache Python writes beside the shim
// when an unsandboxed agent's interpreter differs from the one that
// byte-compiled it: a __pycache__ directory, or a .pyc file (or Python's
// temporary for one) in one. Not the shims' own: those are in the
// manifest, and a changed one is an alteration.
func foreignCache(p string, dir bool) bool {
	if !strings.HasPrefix(p, "python/") {
		return false
	}
	if dir {
		return path.Base(p) == "__pycache__"
	}
	return path.Base(path.Dir(p)) == "__pycache__" && strings.Contains(path.Base(p), ".pyc")
}

// removeAt removes the directory name below dirfd and what it holds,
// which must be plain files.
func removeAt(dirfd int, name string) {
	d, err := openDirAt(dirfd, name)
	if err != nil {
		return
	}
	names, _ := d.Readdirnames(-1)
	for _, n := range names {
		unix.Unlinkat(int(d.Fd()), n, 0)
	}
	d.Close()
	unix.Unlinkat(dirfd, name, unix.AT_REMOVEDIR)
}

// openDirAt opens the directory name below dirfd, not following a
// symbolic link.
func openDirAt(dirfd int, name string) (*os.File, error) {
	fd, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), name), nil
}

// readAt reads the regular file name in the directory open at dirfd, not
// following a symbolic link, and returns its stat, made before the read.
// own: only when it is the user's and writable by no one else.
func readAt(dirfd int, name string, own bool) ([]byte, unix.Stat_t, error) {
	var st unix.Stat_t
	fd, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, st, err
	}
	f := os.NewFile(uintptr(fd), name)
	defer f.Close()
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, st, err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG || (own && (int(st.Uid) != os.Getuid() || st.Mode&0o022 != 0)) {
		return nil, st, errAltered
	}
	// One read of the right size (and one to see the end).
	b := make([]byte, 0, st.Size+1)
	for {
		n, err := f.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF || n == 0 {
			return b, st, nil
		}
		if err != nil {
			return nil, st, err
		}
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
	}
}

// precompile compiles the Python shim with the default python3, and makes
// the Node shim's V8 code cache with the default node (node/codecache.js
// writes node/.v8/<version>-<arch>/), when there are such interpreters, so
// that agents do not each pay for compiling them -- notably inside a
// sandbox, where the shim directory is read-only. Best effort: without it
// they compile in memory.
func precompile(dir string) {
	if py, err := exec.LookPath("python3"); err == nil {
		cmd := exec.Command(py, "-m", "compileall", "-q", filepath.Join(dir, "python"))
		cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
		cmd.Run()
	}
	if node, err := exec.LookPath("node"); err == nil {
		cmd := exec.Command(node, filepath.Join(dir, "node", "codecache.js"))
		cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
		cmd.Run()
	}
}

// checkOwned refuses a directory someone else controls: the shims are code
// every agent runs. It does not follow a symbolic link.
func checkOwned(dir string) error {
	fi, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s is not a directory", dir)
	}
	if uid, ok := ownerUID(fi); ok && uid != os.Getuid() {
		return fmt.Errorf("%s belongs to uid %d, not to you", dir, uid)
	}
	if fi.Mode().Perm()&0o022 != 0 {
		return fmt.Errorf("%s is writable by others", dir)
	}
	return nil
}
