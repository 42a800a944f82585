package sandbox

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"path"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/dal-runtime/dal/internal/safefs"
)

// whiteoutMode is mknod's mode of an overlay whiteout (a 0:0 char device).
const whiteoutMode = unix.S_IFCHR

// Place writes src as the regular file rel (slash-separated, relative to
// the workspace) of a finished run, as if the agent had written it last:
// into the capture layer, so [Capture], [Export], Apply and Revert treat it
// like any file the agent wrote. A whiteout, a file or a symlink of the
// agent's on the way is replaced by a directory that hides what was below
// it (opaque), as overlayfs would have made it; nothing the agent left is
// followed. The file is written under a fresh random name beside rel
// (created O_EXCL|O_NOFOLLOW) and renamed over rel. The overlay must not be
// mounted (the sandbox has exited).
func Place(cfg Config, rel string, src io.Reader, mode fs.FileMode) error {
	clean := path.Clean(rel)
	if rel == "" || path.IsAbs(rel) || clean != rel || clean == "." || clean == ".." || strings.HasPrefix(clean, "../") || safefs.CheckPath(rel) != nil {
		return fmt.Errorf("place %q: not a clean path inside the workspace", rel)
	}
	upper, err := safefs.OpenOneMount(Upper(cfg))
	if err != nil {
		return fmt.Errorf("place %s: %w", rel, err)
	}
	defer upper.Close()
	lower, err := openView(cfg.lowers())
	if err != nil {
		return fmt.Errorf("place %s: %w", rel, err)
	}
	defer lower.close()
	if err := placeParents(upper, lower, clean); err != nil {
		return fmt.Errorf("place %s: %w", rel, err)
	}
	if fi, err := upper.Lstat(clean); err == nil && fi.IsDir() {
		return fmt.Errorf("the run left a directory at %s, where the file is to be placed", rel)
	}
	var b [8]byte
	rand.Read(b[:])
	tmp := path.Join(path.Dir(clean), "."+path.Base(clean)+".dal-place-"+hex.EncodeToString(b[:]))
	f, err := upper.Create(tmp, 0o600)
	if err != nil {
		return fmt.Errorf("place %s: %w", rel, err)
	}
	_, err = io.Copy(f, src)
	if err == nil {
		err = f.Chmod(mode.Perm())
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = upper.Rename(tmp, clean)
	}
	if err != nil {
		upper.Remove(tmp)
		return fmt.Errorf("place %s: %w", rel, err)
	}
	return nil
}

// placeParents makes every parent of rel a directory of the upper layer.
func placeParents(upper *safefs.Dir, lower view, rel string) error {
	parts := strings.Split(rel, "/")
	for i := range parts[:len(parts)-1] {
		dir := strings.Join(parts[:i+1], "/")
		fi, err := upper.Lstat(dir)
		switch {
		case err == nil && fi.IsDir():
			continue
		case err == nil:
			// A whiteout, a file or a symlink of the agent's stands where
			// the directory must be: the new directory hides the layers
			// below.
			if err := upper.Remove(dir); err != nil {
				return err
			}
			if err := upper.Mkdir(dir, 0o755); err != nil {
				return err
			}
			if err := setOpaque(upper, dir); err != nil {
				return fmt.Errorf("mark %s opaque: %w", dir, err)
			}
		case isAbsent(err):
			perm := fs.FileMode(0o755)
			if _, lfi, lerr := lower.find(dir); lerr == nil && lfi != nil && lfi.IsDir() {
				perm = lfi.Mode().Perm()
			}
			if err := upper.Mkdir(dir, perm); err != nil {
				return err
			}
			if err := upper.Chmod(dir, perm); err != nil {
				return err
			}
		default:
			return err
		}
	}
	return nil
}

// setOpaque marks an upper-layer directory as hiding the layers below,
// with the xattr overlayfs uses (see opaqueXattr).
func setOpaque(upper *safefs.Dir, dir string) error {
	return upper.Setxattr(dir, opaqueXattr(), []byte("y"))
}
