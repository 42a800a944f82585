package checkpoint

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/dal-runtime/dal/internal/plural"
	"github.com/dal-runtime/dal/internal/safefs"
)

// RestoreOptions tunes Restore.
type RestoreOptions struct {
	// Paths restores only these artifacts: exact artifact paths or
	// directories holding some. Empty: all of them.
	Paths []string
	// MaxBytes refuses a restore of more bytes than this (0:
	// DefaultRestoreMaxBytes), before anything is decompressed.
	MaxBytes int64
}

// DefaultRestoreMaxBytes is the most a restore writes unless told more.
const DefaultRestoreMaxBytes = 16 << 30

// Restored is what Restore did.
type Restored struct {
	Checkpoint Checkpoint
	Dir        string     // the destination
	Artifacts  []Artifact // the files written, in checkpoint order
	State      []byte     // compact JSON, "null" when none
}

// Restore writes checkpoint id's artifacts into dest (default: the run's
// workspace, created if missing) at their paths, and returns its state.
// Everything is checked before the destination is touched: the archive's
// and every artifact's SHA-256, and that no path leaves dest (an absolute
// path, "..", or any symlink on the way is refused, ErrOutside: dest is a
// workspace an agent wrote, and nothing there is followed). The
// artifacts are decompressed into a staging directory inside dest and each
// is then renamed into place, so every file is either its old or its
// restored content. Files of the destination that are not in the
// checkpoint are left alone.
func (s *Store) Restore(id, dest string, opts RestoreOptions) (*Restored, error) {
	unlock, err := s.lock(false)
	if err != nil {
		return nil, err
	}
	defer unlock()
	c, err := s.get(id)
	if err != nil {
		return nil, err
	}
	if dest == "" {
		dest = c.Run.Workspace
	}
	if dest, err = filepath.Abs(dest); err != nil {
		return nil, err
	}
	sel, err := selectArtifacts(&c, opts.Paths)
	if err != nil {
		return nil, err
	}
	for i, a := range c.Artifacts {
		if sel[i] && !localPath(a.Path) {
			return nil, fmt.Errorf("%w: artifact %s of checkpoint %s would be written outside %s; nothing was restored (name the other artifacts to restore only them)", ErrOutside, a.Path, c.ID, dest)
		}
	}
	max := opts.MaxBytes
	if max <= 0 {
		max = DefaultRestoreMaxBytes
	}
	var total int64
	for i, a := range c.Artifacts {
		if sel[i] {
			total += a.Size
		}
	}
	if total > max {
		return nil, fmt.Errorf("checkpoint %s would restore %d bytes, more than the limit of %d; nothing was restored (raise the limit, or name fewer artifacts)", c.ID, total, max)
	}
	if err := checkArchiveHash(&c); err != nil {
		return nil, err
	}
	cannot := "cannot restore into " + dest
	if err := os.MkdirAll(dest, 0o755); err != nil {
		return nil, writeErr(cannot, err)
	}
	root, err := safefs.Open(dest)
	if err != nil {
		return nil, writeErr(cannot, err)
	}
	defer root.Close()
	for i, a := range c.Artifacts {
		if sel[i] {
			if err := checkTarget(root, a.Path, dest); err != nil {
				return nil, err
			}
		}
	}

	stage := ".dal-restore-" + randHex()
	if err := root.Mkdir(stage, 0o700); err != nil {
		return nil, writeErr(cannot, err)
	}
	defer root.RemoveAll(stage)
	f, err := os.Open(c.ArchivePath)
	if err != nil {
		return nil, fmt.Errorf("checkpoint %s: %w", c.ID, err)
	}
	defer f.Close()
	state, err := extract(bufio.NewReaderSize(f, 1<<20), c.ID, &c.Entry, func(i int) bool { return sel[i] },
		func(i int, r io.Reader) error { return stageFile(root, path.Join(stage, strconv.Itoa(i)), r) })
	if err != nil {
		var pe putError
		if errors.As(err, &pe) {
			return nil, writeErr(cannot, pe.err)
		}
		return nil, err
	}

	res := &Restored{Checkpoint: c, Dir: dest, State: state}
	for i, a := range c.Artifacts {
		if !sel[i] {
			continue
		}
		if err := place(root, path.Join(stage, strconv.Itoa(i)), a); err != nil {
			done := "nothing else was restored"
			if len(res.Artifacts) > 0 {
				done = fmt.Sprintf("%s before it %s restored", plural.Count(len(res.Artifacts), "artifact", "artifacts"), plural.Verb(len(res.Artifacts), "was", "were"))
			}
			return res, fmt.Errorf("%s: %v; %s", cannot, writeErr(a.Path, err), done)
		}
		res.Artifacts = append(res.Artifacts, a)
	}
	return res, nil
}

// selectArtifacts marks the artifacts paths names (all when none).
func selectArtifacts(c *Checkpoint, paths []string) ([]bool, error) {
	sel := make([]bool, len(c.Artifacts))
	if len(paths) == 0 {
		for i := range sel {
			sel[i] = true
		}
		return sel, nil
	}
	for _, p := range paths {
		p = strings.TrimSuffix(filepath.ToSlash(filepath.Clean(p)), "/")
		found := false
		for i, a := range c.Artifacts {
			if a.Path == p || p == "." || strings.HasPrefix(a.Path, p+"/") {
				sel[i], found = true, true
			}
		}
		if !found {
			var have []string
			for _, a := range c.Artifacts {
				have = append(have, a.Path)
			}
			if len(have) > 8 {
				have = append(have[:8], "...")
			}
			return nil, fmt.Errorf("%w: checkpoint %s has no artifact %s (it has %s)", ErrNotFound, c.ID, p, strings.Join(have, ", "))
		}
	}
	return sel, nil
}

// localPath: a relative, /-separated path that stays below its root.
func localPath(p string) bool {
	return p != "" && !path.IsAbs(p) && !strings.Contains(p, "\\") && filepath.IsLocal(filepath.FromSlash(p))
}

// checkTarget refuses a target that is a directory, a parent that is not
// one, or a parent that is a symlink (wherever it points), before
// anything is written.
func checkTarget(root *safefs.Dir, p, dest string) error {
	parts := strings.Split(p, "/")
	for i := range parts {
		q := strings.Join(parts[:i+1], "/")
		fi, err := root.Lstat(q) // a symlink last is replaced, not followed
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return writeErr("cannot restore into "+dest, err)
		}
		last := i == len(parts)-1
		if last && fi.IsDir() {
			return fmt.Errorf("cannot restore %s into %s: a directory is in the way; nothing was restored", p, dest)
		}
		if !last && fi.Mode()&fs.ModeSymlink != 0 {
			return fmt.Errorf("%w: %s in %s is reached through a symlink, and dal follows none there (a symlink that leaves it could write anywhere); nothing was restored: replace %s by a directory", ErrOutside, p, dest, q)
		}
		if !last && !fi.IsDir() {
			return fmt.Errorf("cannot restore %s into %s: %s is not a directory; nothing was restored", p, dest, q)
		}
	}
	return nil
}

func stageFile(root *safefs.Dir, name string, r io.Reader) error {
	f, err := root.Create(name, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, r); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// place renames the staged file over the artifact's path.
func place(root *safefs.Dir, staged string, a Artifact) error {
	dir := path.Dir(a.Path)
	if dir != "." {
		if err := root.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}
	if err := root.Chmod(staged, fs.FileMode(a.Mode&0o777)); err != nil {
		return err
	}
	err := root.Rename(staged, a.Path)
	if errors.Is(err, syscall.EXDEV) {
		// The target's directory is another mount: copy beside it, then
		// rename there.
		tmp := path.Join(dir, ".dal-restore-"+randHex())
		if err = copyInRoot(root, staged, tmp, fs.FileMode(a.Mode&0o777)); err == nil {
			if err = root.Rename(tmp, a.Path); err != nil {
				root.Remove(tmp)
			}
		}
	}
	if err != nil {
		return err
	}
	if d, err := root.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
	return nil
}

func copyInRoot(root *safefs.Dir, src, dst string, mode fs.FileMode) error {
	in, err := root.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	if err := stageFile(root, dst, in); err != nil {
		root.Remove(dst)
		return err
	}
	return root.Chmod(dst, mode)
}

func randHex() string {
	var b [6]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
