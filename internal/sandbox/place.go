package sandbox

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// Place writes src as the regular file rel (slash-separated, relative to
// the workspace) of a finished run, as if the agent had written it last:
// into the capture layer, so [Capture], [Export], Apply and Revert treat it
// like any file the agent wrote. A whiteout on the way is replaced by a
// directory that hides what was below it (opaque), as overlayfs would have
// made it. The overlay must not be mounted (the sandbox has exited).
func Place(cfg Config, rel string, src io.Reader, mode fs.FileMode) error {
	clean := path.Clean(rel)
	if rel == "" || path.IsAbs(rel) || clean != rel || clean == "." || clean == ".." || strings.HasPrefix(clean, "../") {
		return fmt.Errorf("place %q: not a clean path inside the workspace", rel)
	}
	upper := Upper(cfg)
	lower := view(cfg.lowers())
	parts := strings.Split(clean, "/")
	for i := range parts[:len(parts)-1] {
		dir := strings.Join(parts[:i+1], "/")
		p := filepath.Join(upper, filepath.FromSlash(dir))
		fi, err := os.Lstat(p)
		switch {
		case err == nil && fi.IsDir():
			continue
		case err == nil:
			// A whiteout or a file of the agent's stands where the
			// directory must be: the new directory hides the layers below.
			if err := os.Remove(p); err != nil {
				return fmt.Errorf("place %s: %w", rel, err)
			}
			if err := os.Mkdir(p, 0o755); err != nil {
				return fmt.Errorf("place %s: %w", rel, err)
			}
			if err := setOpaque(p); err != nil {
				return fmt.Errorf("place %s: mark %s opaque: %w", rel, dir, err)
			}
		case isAbsent(err):
			perm := fs.FileMode(0o755)
			if _, lfi, lerr := lower.find(dir); lerr == nil && lfi != nil && lfi.IsDir() {
				perm = lfi.Mode().Perm()
			}
			if err := os.Mkdir(p, perm); err != nil {
				return fmt.Errorf("place %s: %w", rel, err)
			}
			if err := os.Chmod(p, perm); err != nil {
				return fmt.Errorf("place %s: %w", rel, err)
			}
		default:
			return fmt.Errorf("place %s: %w", rel, err)
		}
	}
	target := filepath.Join(upper, filepath.FromSlash(clean))
	if fi, err := os.Lstat(target); err == nil && fi.IsDir() {
		return fmt.Errorf("the run left a directory at %s, where the file is to be placed", rel)
	}
	tmp := target + ".dal-place"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, mode.Perm())
	if err != nil {
		return fmt.Errorf("place %s: %w", rel, err)
	}
	_, err = io.Copy(f, src)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp, mode.Perm())
	}
	if err == nil {
		err = os.Rename(tmp, target)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("place %s: %w", rel, err)
	}
	return nil
}

// setOpaque marks an upper-layer directory as hiding the layers below,
// with the xattr overlayfs uses (trusted.* as root, user.* otherwise).
func setOpaque(p string) error {
	err := unix.Lsetxattr(p, "trusted.overlay.opaque", []byte("y"), 0)
	if err == nil {
		return nil
	}
	return unix.Lsetxattr(p, "user.overlay.opaque", []byte("y"), 0)
}
