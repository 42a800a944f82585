package sandbox

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Export writes a capture for a bundle:
//
//	diffDir/changes.json  the changes ([WriteChanges])
//	diffDir/files/...     created and modified files, symlinks and
//	                      directories, with modes, owners and mtimes
//	preDir/files/...      pre-images of modified and deleted entries, from
//	                      the lower view (the untouched workspace)
//
// Files of the mirror may be hard links to the upper layer, which must not
// change afterwards (it is discarded). Both directories are created; they
// should be empty. Preconditions as for [Capture].
func Export(cfg Config, changes []Change, diffDir, preDir string) error {
	if err := export(Upper(cfg), view(cfg.lowers()), changes, diffDir, preDir); err != nil {
		return fmt.Errorf("export the workspace changes: %w", err)
	}
	return nil
}

func export(upper string, lower view, changes []Change, diffDir, preDir string) error {
	if err := Validate(changes); err != nil {
		return err
	}
	files, pre := filepath.Join(diffDir, "files"), filepath.Join(preDir, "files")
	for _, d := range []string{files, pre} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	var dirs dirMetas
	for _, c := range changes {
		rel := filepath.FromSlash(c.Path)
		if a := c.after(); a != nil {
			src := filepath.Join(upper, rel)
			fi, err := os.Lstat(src)
			if err != nil || kindOf(fi) != a.Kind {
				return fmt.Errorf("the upper layer no longer holds %s as captured", c.Path)
			}
			if err := copyInto(src, fi, filepath.Join(files, rel), true, &dirs); err != nil {
				return err
			}
		}
		if b := c.before(); b != nil {
			src, fi, err := lower.find(c.Path)
			if err != nil {
				return err
			}
			if fi == nil || kindOf(fi) != b.Kind {
				return fmt.Errorf("the workspace changed during the run at %s: its pre-image is gone", c.Path)
			}
			if err := copyInto(src, fi, filepath.Join(pre, rel), false, &dirs); err != nil {
				return err
			}
		}
	}
	if err := dirs.apply(); err != nil {
		return err
	}
	return WriteChanges(filepath.Join(diffDir, "changes.json"), changes)
}

// copyInto copies the entry src (lstat'ed as fi) to the new path dst,
// creating dst's parents; a directory's metadata is queued in dirs.
func copyInto(src string, fi fs.FileInfo, dst string, link bool, dirs *dirMetas) error {
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	if fi.IsDir() {
		if err := os.Mkdir(dst, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
			return err
		}
		*dirs = append(*dirs, dirMeta{dst, fi})
		return nil
	}
	_, err := copyEntry(src, fi, dst, link)
	return err
}

// copyEntry creates dst (which must not exist) as a copy of the file or
// symlink src, lstat'ed as fi: content, mode, owner (when root) and mtime.
// With link it first tries a hard link. It returns the content hash it
// copied ("" when linked).
func copyEntry(src string, fi fs.FileInfo, dst string, link bool) (string, error) {
	if fi.Mode()&fs.ModeSymlink != 0 {
		t, err := os.Readlink(src)
		if err != nil {
			return "", err
		}
		if err := os.Symlink(t, dst); err != nil {
			return "", err
		}
		return hashBytes([]byte(t)), setMeta(dst, fi, false)
	}
	if link && os.Link(src, dst) == nil {
		return "", nil
	}
	in, err := os.Open(src)
	if err != nil {
		return "", err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	_, err = io.Copy(io.MultiWriter(out, h), in)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(dst)
		return "", err
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil)), setMeta(dst, fi, true)
}

// setMeta gives p fi's owner (when root), mode bits (not for symlinks) and
// times.
func setMeta(p string, fi fs.FileInfo, chmod bool) error {
	st, _ := fi.Sys().(*syscall.Stat_t)
	if st != nil && os.Geteuid() == 0 {
		if err := os.Lchown(p, int(st.Uid), int(st.Gid)); err != nil && !errors.Is(err, fs.ErrPermission) {
			return err
		}
	}
	if chmod {
		if err := unix.Chmod(p, unixMode(fi.Mode())); err != nil {
			return &os.PathError{Op: "chmod", Path: p, Err: err}
		}
	}
	mt := fi.ModTime()
	at := mt
	if st != nil {
		at = time.Unix(st.Atim.Unix())
	}
	ts := []unix.Timespec{unix.NsecToTimespec(at.UnixNano()), unix.NsecToTimespec(mt.UnixNano())}
	if err := unix.UtimesNanoAt(unix.AT_FDCWD, p, ts, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return &os.PathError{Op: "utimes", Path: p, Err: err}
	}
	return nil
}

// dirMeta is a directory whose metadata is set once its content is in.
type dirMeta struct {
	path string
	fi   fs.FileInfo
}

type dirMetas []dirMeta

// apply sets the queued metadata, deepest first (a directory's mtime
// changes with its content, and a read-only one cannot receive it).
func (d dirMetas) apply() error {
	sort.SliceStable(d, func(i, j int) bool { return d[i].path > d[j].path })
	for _, m := range d {
		if err := setMeta(m.path, m.fi, true); err != nil {
			return err
		}
	}
	return nil
}

// Apply applies a capture exported to diffDir to workspace, as an ordinary
// run would have left it. It refuses, changing nothing, when the workspace
// is not at the run's pre-run state on every changed path ([AtPre]).
func Apply(workspace, diffDir string, changes []Change) error {
	if err := AtPre(workspace, changes); err != nil {
		return fmt.Errorf("apply the run's changes to %s: %w", workspace, err)
	}
	if err := replace(workspace, filepath.Join(diffDir, "files"), changes, OpDeleted, Change.after); err != nil {
		return fmt.Errorf("apply the run's changes to %s: %w", workspace, err)
	}
	return nil
}

// Revert restores workspace to its exact pre-run state from the
// pre-images in preDir. It refuses, changing nothing, when the workspace is
// not exactly at the run's post-run state on every changed path ([AtPost]).
func Revert(workspace, preDir string, changes []Change) error {
	if err := AtPost(workspace, changes); err != nil {
		return fmt.Errorf("revert %s: %w", workspace, err)
	}
	if err := replace(workspace, filepath.Join(preDir, "files"), changes, OpCreated, Change.before); err != nil {
		return fmt.Errorf("revert %s: %w", workspace, err)
	}
	return nil
}

// replace removes the entries of changes with operation gone (deepest
// first), then puts want(change) from the mirror src at every other path
// (parents first), then sets directory metadata.
func replace(ws, src string, changes []Change, gone string, want func(Change) *Entry) error {
	safe := safeDirs{root: ws, ok: map[string]bool{}}
	for i := len(changes) - 1; i >= 0; i-- {
		c := changes[i]
		if c.Op != gone {
			continue
		}
		if err := safe.check(c.Path); err != nil {
			return err
		}
		p := filepath.Join(ws, filepath.FromSlash(c.Path))
		if err := os.Remove(p); err != nil && !isAbsent(err) {
			return err
		}
	}
	var dirs dirMetas
	for _, c := range changes {
		w := want(c)
		if w == nil {
			continue
		}
		if err := safe.check(c.Path); err != nil {
			return err
		}
		if err := place(ws, c.Path, filepath.Join(src, filepath.FromSlash(c.Path)), *w, &dirs); err != nil {
			return err
		}
	}
	return dirs.apply()
}

// place puts the entry w, whose copy is at src, at root/rel, replacing
// what is there (an empty directory, or a non-directory).
func place(root, rel, src string, w Entry, dirs *dirMetas) error {
	dst := filepath.Join(root, filepath.FromSlash(rel))
	fi, err := os.Lstat(src)
	if err != nil || kindOf(fi) != w.Kind {
		return fmt.Errorf("the copy of %s is missing from %s", rel, filepath.Dir(strings.TrimSuffix(src, filepath.FromSlash(rel))))
	}
	cur, err := os.Lstat(dst)
	if err != nil && !isAbsent(err) {
		return err
	}
	if w.Kind == KindDir {
		if cur != nil && !cur.IsDir() {
			if err := os.Remove(dst); err != nil {
				return err
			}
			cur = nil
		}
		if cur == nil {
			if err := os.Mkdir(dst, 0o700); err != nil {
				return err
			}
		}
		*dirs = append(*dirs, dirMeta{dst, fi})
		return nil
	}
	if w.Kind == KindFile && cur != nil && cur.Mode().IsRegular() {
		// Rewrite in place: the file keeps its inode, as when a program
		// edits it, and ext4 rewrites far faster than it creates.
		h, err := rewrite(src, fi, dst)
		if err != nil {
			return err
		}
		if h != w.Hash {
			return fmt.Errorf("the copy of %s does not match its recorded hash", rel)
		}
		return nil
	}
	if cur != nil {
		if err := os.Remove(dst); err != nil {
			return err
		}
	}
	h, err := copyEntry(src, fi, dst, false)
	if err != nil {
		return err
	}
	if h != w.Hash {
		return fmt.Errorf("the copy of %s does not match its recorded hash", rel)
	}
	return nil
}

// rewrite replaces the content and metadata of the existing regular file
// dst with those of src, lstat'ed as fi, and returns the hash it wrote.
func rewrite(src string, fi fs.FileInfo, dst string) (string, error) {
	in, err := os.Open(src)
	if err != nil {
		return "", err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	_, err = io.Copy(io.MultiWriter(out, h), in)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", err
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil)), setMeta(dst, fi, true)
}

// safeDirs makes sure the parents of a changed path are real directories
// inside root, so a crafted change list cannot write through a symlink.
type safeDirs struct {
	root string
	ok   map[string]bool
}

func (s *safeDirs) check(rel string) error {
	dir := path.Dir(rel)
	for dir != "." && !s.ok[dir] {
		fi, err := os.Lstat(filepath.Join(s.root, filepath.FromSlash(dir)))
		if err == nil && !fi.IsDir() {
			return fmt.Errorf("%s: a parent of %s is not a directory", dir, rel)
		}
		if err == nil {
			s.ok[dir] = true
		}
		dir = path.Dir(dir)
	}
	return nil
}

// Restore prepares the pre-run state of workspace for a replay without
// touching it, and returns the state it found it at ("pre-run" or
// "post-run"). It builds layer (created; it must be empty or missing) as an
// overlay layer to stack over the workspace — Config{Workspace: workspace,
// Lower: []string{layer, workspace}} — showing the pre-run state: empty but
// for the root's attributes at the pre-run state; whiteouts of created
// paths and pre-images from preDir at the post-run state. Anything else is
// an error naming the first differing path. Whiteouts need CAP_MKNOD.
func Restore(workspace, preDir string, changes []Change, layer string) (string, error) {
	if err := os.MkdirAll(layer, 0o700); err != nil {
		return "", fmt.Errorf("create the replay layer: %w", err)
	}
	rfi, err := os.Lstat(workspace)
	if err != nil {
		return "", fmt.Errorf("the workspace %s is not readable: %w", workspace, err)
	}
	// The top layer's root gives the overlay root its attributes.
	root := dirMetas{{layer, rfi}}
	preErr := AtPre(workspace, changes)
	if preErr == nil {
		return "pre-run", root.apply()
	}
	postErr := AtPost(workspace, changes)
	if postErr != nil {
		var pe, qe *StateError
		if errors.As(preErr, &pe) && errors.As(postErr, &qe) {
			return "", fmt.Errorf("the workspace %s is at neither the run's pre-run state (%s: %s) nor its post-run state (%s: %s): put it back, or replay a self-contained bundle",
				workspace, pe.Path, pe.Why, qe.Path, qe.Why)
		}
		return "", postErr
	}
	if err := buildLayer(workspace, filepath.Join(preDir, "files"), changes, layer); err != nil {
		return "", fmt.Errorf("build the replay layer: %w", err)
	}
	return "post-run", root.apply()
}

func buildLayer(ws, pre string, changes []Change, layer string) error {
	byPath := make(map[string]Change, len(changes))
	for _, c := range changes {
		byPath[c.Path] = c
	}
	// hidden: an ancestor already hides everything below it.
	hidden := func(rel string) bool {
		for d := path.Dir(rel); d != "."; d = path.Dir(d) {
			if a, ok := byPath[d]; ok && (a.Op == OpCreated || a.Op == OpModified && a.Pre.Kind != KindDir) {
				return true
			}
		}
		return false
	}
	made := map[string]bool{".": true}
	var dirs dirMetas
	parents := func(rel string) error {
		var todo []string
		for d := path.Dir(rel); !made[d]; d = path.Dir(d) {
			todo = append(todo, d)
		}
		for i := len(todo) - 1; i >= 0; i-- {
			d := todo[i]
			fi, err := os.Lstat(filepath.Join(ws, filepath.FromSlash(d)))
			if err != nil || !fi.IsDir() {
				return fmt.Errorf("the workspace has no directory %s", d)
			}
			if err := os.Mkdir(filepath.Join(layer, filepath.FromSlash(d)), 0o700); err != nil {
				return err
			}
			dirs = append(dirs, dirMeta{filepath.Join(layer, filepath.FromSlash(d)), fi})
			made[d] = true
		}
		return nil
	}
	for _, c := range changes {
		if hidden(c.Path) {
			continue
		}
		if err := parents(c.Path); err != nil {
			return err
		}
		dst := filepath.Join(layer, filepath.FromSlash(c.Path))
		b := c.before()
		if b == nil {
			if err := unix.Mknod(dst, unix.S_IFCHR, 0); err != nil {
				return &os.PathError{Op: "mknod whiteout", Path: dst, Err: err}
			}
			continue
		}
		src := filepath.Join(pre, filepath.FromSlash(c.Path))
		fi, err := os.Lstat(src)
		if err != nil || kindOf(fi) != b.Kind {
			return fmt.Errorf("the pre-image of %s is missing", c.Path)
		}
		if b.Kind == KindDir {
			if err := os.Mkdir(dst, 0o700); err != nil {
				return err
			}
			dirs = append(dirs, dirMeta{dst, fi})
			made[c.Path] = true
			if c.Op == OpModified && c.Kind != KindDir {
				if err := unix.Setxattr(dst, "trusted.overlay.opaque", []byte("y"), 0); err != nil {
					return &os.PathError{Op: "mark opaque", Path: dst, Err: err}
				}
			}
			continue
		}
		// A copy, not a link: the recorded mode is set below, and the
		// bundle's own files must not change.
		if _, err := copyEntry(src, fi, dst, false); err != nil {
			return err
		}
	}
	if err := dirs.apply(); err != nil {
		return err
	}
	// Modes come from the change list, not from the pre-image on disk: an
	// extracted archive does not keep them.
	for _, c := range changes {
		b := c.before()
		if b == nil || b.Kind == KindSymlink || hidden(c.Path) {
			continue
		}
		if err := os.Chmod(filepath.Join(layer, filepath.FromSlash(c.Path)), b.Mode); err != nil {
			return err
		}
	}
	return nil
}
