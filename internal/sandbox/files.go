package sandbox

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"time"

	"github.com/dal-runtime/dal/internal/digest"
	"github.com/dal-runtime/dal/internal/safefs"
)

// Export writes a capture for a bundle:
//
//	diffDir/changes.json  the changes ([WriteChanges])
//	diffDir/files/...     created and modified files, symlinks and
//	                      directories, with modes and mtimes
//	preDir/files/...      pre-images of modified and deleted entries, from
//	                      the lower view (the untouched workspace)
//
// Files of the mirror may be hard links to the upper layer, which must not
// change afterwards (it is discarded); a file whose setuid, setgid or file
// capabilities were stripped ([Change.Stripped]) is copied instead, without
// them. Both directories are created; they should be empty. Preconditions
// as for [Capture].
func Export(cfg Config, changes []Change, diffDir, preDir string) error {
	if err := exportCfg(cfg, changes, diffDir, preDir); err != nil {
		return fmt.Errorf("export the workspace changes: %w", err)
	}
	return nil
}

func exportCfg(cfg Config, changes []Change, diffDir, preDir string) error {
	upper, err := safefs.OpenOneMount(Upper(cfg))
	if err != nil {
		return err
	}
	defer upper.Close()
	lower, err := openView(cfg.lowers())
	if err != nil {
		return err
	}
	defer lower.close()
	return export(upper, lower, changes, diffDir, preDir)
}

func export(upper *safefs.Dir, lower view, changes []Change, diffDir, preDir string) error {
	if err := Validate(changes); err != nil {
		return err
	}
	var mirrors [2]*safefs.Dir
	for i, d := range []string{filepath.Join(diffDir, "files"), filepath.Join(preDir, "files")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
		m, err := safefs.OpenOneMount(d)
		if err != nil {
			return err
		}
		defer m.Close()
		mirrors[i] = m
	}
	files, pre := mirrors[0], mirrors[1]
	var dirs dirMetas
	for _, c := range changes {
		if a := c.After(); a != nil {
			fi, err := upper.Lstat(c.Path)
			if err != nil || kindOf(fi) != a.Kind {
				return fmt.Errorf("the upper layer no longer holds %s as captured", c.Path)
			}
			link := len(c.Stripped) == 0 && fi.Mode()&(fs.ModeSetuid|fs.ModeSetgid) == 0
			m := metaOf(fi)
			m.mode = a.Mode
			if a.Kind == KindFile {
				m.mode &^= fs.ModeSetuid | fs.ModeSetgid
			}
			if err := copyInto(upper, c.Path, fi, files, MirrorPath(c.Path), link, m, &dirs); err != nil {
				return err
			}
		}
		if b := c.Before(); b != nil {
			d, fi, err := lower.find(c.Path)
			if err != nil {
				return err
			}
			if fi == nil || kindOf(fi) != b.Kind {
				return fmt.Errorf("the workspace changed during the run at %s: its pre-image is gone", c.Path)
			}
			if err := copyInto(d, c.Path, fi, pre, MirrorPath(c.Path), false, metaOf(fi), &dirs); err != nil {
				return err
			}
		}
	}
	if err := dirs.apply(); err != nil {
		return err
	}
	return WriteChanges(filepath.Join(diffDir, "changes.json"), changes)
}

// meta is what is set on an entry dal puts somewhere: mode bits (not on a
// symlink), times, and, with chown, the invoking user as its owner.
type meta struct {
	mode         fs.FileMode
	atime, mtime time.Time
	chown        bool
}

func metaOf(fi fs.FileInfo) meta {
	m := meta{mode: fi.Mode() & modeBits, mtime: fi.ModTime(), atime: fi.ModTime()}
	if st := safefs.Stat(fi); st != nil {
		m.atime = time.Unix(st.Atim.Unix())
	}
	return m
}

// invoker is the owner of what Apply and Revert create in a workspace: the
// real uid and gid of this process, the user who ran dal-exec (never the
// owner the entry had in the capture layer, which is the agent's).
// change is false when the process creates files as that user anyway.
func invoker() (uid, gid int, change bool) {
	uid, gid = os.Getuid(), os.Getgid()
	return uid, gid, uid != os.Geteuid() || gid != os.Getegid()
}

// copyInto copies the entry rel of src (lstat'ed as fi) to the new path
// drel of dst, creating dst's parents; a directory's metadata is queued in
// dirs.
func copyInto(src *safefs.Dir, rel string, fi fs.FileInfo, dst *safefs.Dir, drel string, link bool, m meta, dirs *dirMetas) error {
	if err := dst.MkdirAll(path.Dir(drel), 0o755); err != nil {
		return err
	}
	if fi.IsDir() {
		if err := dst.Mkdir(drel, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
			return err
		}
		*dirs = append(*dirs, dirMeta{dst, drel, m})
		return nil
	}
	_, err := copyEntry(src, rel, fi, dst, drel, link, m)
	return err
}

// copyEntry creates drel in dst (which must not exist) as a copy of the
// file or symlink srel of src, lstat'ed as fi, with the metadata m. With
// link it first tries a hard link (and m is not applied). It returns the
// content hash it copied ("" when linked).
func copyEntry(src *safefs.Dir, srel string, fi fs.FileInfo, dst *safefs.Dir, drel string, link bool, m meta) (string, error) {
	if fi.Mode()&fs.ModeSymlink != 0 {
		t, err := src.Readlink(srel)
		if err != nil {
			return "", err
		}
		if err := dst.Symlink(t, drel); err != nil {
			return "", err
		}
		if m.chown {
			uid, gid, _ := invoker()
			if err := dst.Lchown(drel, uid, gid); err != nil {
				return "", err
			}
		}
		return digest.Bytes([]byte(t)), dst.Lutimes(drel, m.atime, m.mtime)
	}
	if link && src.Link(srel, dst, drel) == nil {
		return "", nil
	}
	in, err := src.Open(srel)
	if err != nil {
		return "", err
	}
	defer in.Close()
	out, err := dst.Create(drel, 0o600)
	if err != nil {
		return "", err
	}
	h, err := fill(out, in, m)
	if err != nil {
		dst.Remove(drel)
		return "", err
	}
	return h, nil
}

// fill copies in to the new or truncated file out, sets m on it, closes
// it, and returns the hash of what it wrote.
func fill(out, in *os.File, m meta) (string, error) {
	h := sha256.New()
	err := copySparse(out, in, h)
	if err == nil && m.chown {
		// Before the mode: chown clears setuid and setgid.
		uid, gid, _ := invoker()
		err = out.Chown(uid, gid)
	}
	if err == nil {
		err = out.Chmod(m.mode)
	}
	if err == nil {
		err = safefs.SetTimes(out, m.atime, m.mtime)
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", err
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil)), nil
}

// dirMeta is a directory whose metadata is set once its content is in.
type dirMeta struct {
	d   *safefs.Dir
	rel string
	m   meta
}

type dirMetas []dirMeta

// apply sets the queued metadata, deepest first (a directory's mtime
// changes with its content, and a read-only one cannot receive it).
func (ds dirMetas) apply() error {
	sort.SliceStable(ds, func(i, j int) bool { return ds[i].rel > ds[j].rel })
	for _, x := range ds {
		if x.m.chown {
			uid, gid, _ := invoker()
			if err := x.d.Lchown(x.rel, uid, gid); err != nil {
				return err
			}
		}
		if err := x.d.Chmod(x.rel, x.m.mode); err != nil {
			return err
		}
		if err := x.d.Lutimes(x.rel, x.m.atime, x.m.mtime); err != nil {
			return err
		}
	}
	return nil
}

// Apply applies a capture exported to diffDir to workspace, as an ordinary
// run would have left it, except that no file gets setuid, setgid or file
// capabilities, and what Apply creates belongs to the user who runs it. It
// refuses, changing nothing, when the workspace is not at the run's
// pre-run state on every changed path ([AtPre]).
func Apply(workspace, diffDir string, changes []Change) error {
	if err := applyTo(workspace, filepath.Join(diffDir, "files"), changes, true); err != nil {
		return fmt.Errorf("apply the run's changes to %s: %w", workspace, err)
	}
	return nil
}

// Revert restores workspace to its exact pre-run state from the
// pre-images in preDir. It refuses, changing nothing, when the workspace is
// not exactly at the run's post-run state on every changed path ([AtPost]).
func Revert(workspace, preDir string, changes []Change) error {
	if err := applyTo(workspace, filepath.Join(preDir, "files"), changes, false); err != nil {
		return fmt.Errorf("revert %s: %w", workspace, err)
	}
	return nil
}

// applyTo checks the workspace's state and moves it to the other one:
// forward (Apply) from the mirror of the run's results, or back (Revert)
// from the mirror of pre-images. A journal beside the workspace lasts
// while it works ([Recover]); an earlier one is recovered first. When a
// step fails, what was done is undone from the other side's mirror if the
// bundle has it, and the error says which state the workspace is left at.
func applyTo(workspace, mirror string, changes []Change, forward bool) error {
	if findJournal(workspace) != "" {
		if _, err := Recover(workspace); err != nil {
			return err
		}
	}
	ws, err := safefs.Open(workspace)
	if err != nil {
		return err
	}
	defer ws.Close()
	op, check, gone, want := "revert", atPost, OpCreated, Change.Before
	origin := "post-run"
	if forward {
		op, check, gone, want = "apply", atPre, OpDeleted, applied
		origin = "pre-run"
	}
	if err := check(ws, changes); err != nil {
		return err
	}
	src, err := safefs.OpenOneMount(mirror)
	if err != nil {
		return err
	}
	defer src.Close()
	abs, _ := filepath.Abs(workspace)
	absMirror, _ := filepath.Abs(mirror)
	j := &journal{V: 1, Op: op, Workspace: abs, Mirror: absMirror, Undo: otherMirror(absMirror), PID: os.Getpid(), Changes: changes}
	jf, err := openJournal(j)
	if err != nil {
		return err
	}
	err = replace(ws, src, changes, gone, want)
	if errors.Is(err, errInterrupted) {
		jf.Close()
		return err
	}
	if err == nil {
		if ferr := finish(jf); ferr != nil {
			return fmt.Errorf("the workspace is at its new state, but the journal %s could not be removed (%v): remove it", jf.Name(), ferr)
		}
		return nil
	}
	if j.Undo != "" {
		if uerr := converge(ws, j.Undo, changes, !forward); uerr == nil && check(ws, changes) == nil {
			if finish(jf) == nil {
				return fmt.Errorf("%w; nothing was changed: the workspace is back at its %s state", err, origin)
			}
		}
	}
	jf.Close()
	return fmt.Errorf("%w; the workspace is partly changed: dal-exec recover completes or undoes it (journal %s)", err, jf.Name())
}

// replace removes the entries of changes with operation gone (deepest
// first), then puts want(change) from the mirror src at every other path
// (parents first), then sets directory metadata. The state was checked
// ([atState]): every parent on the way is a real directory.
func replace(ws, src *safefs.Dir, changes []Change, gone string, want func(Change) *Entry) error {
	steps := 0
	interrupted := func() bool {
		steps++
		return interruptAfter > 0 && steps > interruptAfter
	}
	for i := len(changes) - 1; i >= 0; i-- {
		c := changes[i]
		if c.Op != gone {
			continue
		}
		if interrupted() {
			return errInterrupted
		}
		if err := ws.Remove(c.Path); err != nil && !isAbsent(err) {
			return err
		}
	}
	var dirs dirMetas
	for _, c := range changes {
		w := want(c)
		if w == nil {
			continue
		}
		if interrupted() {
			return errInterrupted
		}
		if err := place(ws, src, c.Path, *w, &dirs); err != nil {
			return err
		}
	}
	return dirs.apply()
}

// place puts the entry w, whose copy is rel in src, at rel in ws,
// replacing what is there (an empty directory, or a non-directory). Its
// mode is w's; its times are the copy's.
func place(ws, src *safefs.Dir, rel string, w Entry, dirs *dirMetas) error {
	fi, err := src.Lstat(MirrorPath(rel))
	if err != nil || kindOf(fi) != w.Kind {
		return fmt.Errorf("the copy of %s is missing from %s", rel, src.Name())
	}
	m := metaOf(fi)
	m.mode, m.chown = w.Mode, true
	cur, err := ws.Lstat(rel)
	if err != nil && !isAbsent(err) {
		return err
	}
	if err != nil {
		cur = nil
	}
	if w.Kind == KindDir {
		if cur != nil && !cur.IsDir() {
			if err := ws.Remove(rel); err != nil {
				return err
			}
			cur = nil
		}
		m.chown = cur == nil
		if cur == nil {
			if err := ws.Mkdir(rel, 0o700); err != nil {
				return err
			}
		}
		*dirs = append(*dirs, dirMeta{ws, rel, m})
		return nil
	}
	if w.Kind == KindFile && cur != nil && cur.Mode().IsRegular() && nlink(cur) == 1 {
		// Rewrite in place: the file keeps its inode and owner, as when
		// a program edits it, and ext4 rewrites far faster than it
		// creates. A file with other hard links is replaced instead, so
		// they keep their content.
		m.chown = false
		h, err := rewrite(src, ws, rel, m)
		if err != nil {
			return err
		}
		if h != w.Hash {
			return fmt.Errorf("the copy of %s does not match its recorded hash", rel)
		}
		return nil
	}
	if cur != nil {
		if err := ws.Remove(rel); err != nil {
			return err
		}
	}
	h, err := copyEntry(src, MirrorPath(rel), fi, ws, rel, false, m)
	if err != nil {
		return err
	}
	if h != w.Hash {
		return fmt.Errorf("the copy of %s does not match its recorded hash", rel)
	}
	return nil
}

func nlink(fi fs.FileInfo) uint64 {
	if st := safefs.Stat(fi); st != nil {
		return uint64(st.Nlink)
	}
	return 0
}

// rewrite replaces the content and metadata of the existing regular file
// rel of ws with those of rel in src, and returns the hash it wrote.
func rewrite(src, ws *safefs.Dir, rel string, m meta) (string, error) {
	in, err := src.Open(MirrorPath(rel))
	if err != nil {
		return "", err
	}
	defer in.Close()
	out, err := ws.OpenFile(rel, os.O_WRONLY|os.O_TRUNC)
	if err != nil {
		return "", err
	}
	return fill(out, in, m)
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
	if findJournal(workspace) != "" {
		if _, err := Recover(workspace); err != nil {
			return "", err
		}
	}
	if err := os.MkdirAll(layer, 0o700); err != nil {
		return "", fmt.Errorf("create the replay layer: %w", err)
	}
	ld, err := safefs.OpenOneMount(layer)
	if err != nil {
		return "", fmt.Errorf("create the replay layer: %w", err)
	}
	defer ld.Close()
	ws, err := safefs.Open(workspace)
	if err != nil {
		return "", fmt.Errorf("the workspace %s is not readable: %w", workspace, err)
	}
	defer ws.Close()
	rfi, err := ws.Lstat(".")
	if err != nil {
		return "", fmt.Errorf("the workspace %s is not readable: %w", workspace, err)
	}
	// The top layer's root gives the overlay root its attributes.
	root := dirMetas{{ld, ".", metaOf(rfi)}}
	preErr := atPre(ws, changes)
	if preErr == nil {
		return "pre-run", root.apply()
	}
	postErr := atPost(ws, changes)
	if postErr != nil {
		var pe, qe *StateError
		if errors.As(preErr, &pe) && errors.As(postErr, &qe) {
			return "", fmt.Errorf("the workspace %s is at neither the run's pre-run state (%s: %s) nor its post-run state (%s: %s)",
				workspace, pe.Path, pe.Why, qe.Path, qe.Why)
		}
		return "", postErr
	}
	pre, err := safefs.OpenOneMount(filepath.Join(preDir, "files"))
	if err != nil {
		return "", fmt.Errorf("build the replay layer: %w", err)
	}
	defer pre.Close()
	if err := buildLayer(ws, pre, changes, ld); err != nil {
		return "", fmt.Errorf("build the replay layer: %w", err)
	}
	return "post-run", root.apply()
}

func buildLayer(ws, pre *safefs.Dir, changes []Change, layer *safefs.Dir) error {
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
			fi, err := ws.Lstat(d)
			if err != nil || !fi.IsDir() {
				return fmt.Errorf("the workspace has no directory %s", d)
			}
			if err := layer.Mkdir(d, 0o700); err != nil {
				return err
			}
			dirs = append(dirs, dirMeta{layer, d, metaOf(fi)})
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
		b := c.Before()
		if b == nil {
			if err := layer.Mknod(c.Path, whiteoutMode, 0); err != nil {
				return fmt.Errorf("make the whiteout of %s: %w", c.Path, err)
			}
			continue
		}
		fi, err := pre.Lstat(MirrorPath(c.Path))
		if err != nil || kindOf(fi) != b.Kind {
			return fmt.Errorf("the pre-image of %s is missing", c.Path)
		}
		// Modes come from the change list, not from the pre-image on
		// disk: an extracted archive does not keep them.
		m := metaOf(fi)
		m.mode = b.Mode
		if b.Kind == KindDir {
			if err := layer.Mkdir(c.Path, 0o700); err != nil {
				return err
			}
			dirs = append(dirs, dirMeta{layer, c.Path, m})
			made[c.Path] = true
			if c.Op == OpModified && c.Kind != KindDir {
				if err := layer.Setxattr(c.Path, opaqueXattr(), []byte("y")); err != nil {
					return fmt.Errorf("mark %s opaque: %w", c.Path, err)
				}
			}
			continue
		}
		// A copy, not a link: the bundle's own files must not change.
		h, err := copyEntry(pre, MirrorPath(c.Path), fi, layer, c.Path, false, m)
		if err != nil {
			return err
		}
		if h != b.Hash {
			return fmt.Errorf("the pre-image of %s does not match its recorded hash", c.Path)
		}
	}
	return dirs.apply()
}
