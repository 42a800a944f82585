package bundle

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"syscall"

	"github.com/dal-runtime/dal/internal/safefs"
	"golang.org/x/sys/unix"
)

// A bundle directory that a user other than the reader can write is
// copied into a private directory before it is verified, and everything
// after reads the copy: between the check of a hash and the use of the
// bytes (revert, replay, apply, show, diff read files by path, and an
// overlay reads a self-contained workspace whenever the agent does)
// another user could otherwise swap a file. A directory only the reader
// (or root) can write needs no copy.

// errExposed: the bundle tree can be written by another user (scanTree).
var errExposed = errors.New("the bundle can be written by another user")

// afterVerify, when set, is called with the directory every later read
// goes to, once Open has verified it (tests swap files there).
var afterVerify func(dir string)

// exposed reports whether another user than this process's effective one
// (or root) can change the entry fi of a bundle: it belongs to another
// user, or it is a directory or file its group or others may write. A
// symbolic link's own mode means nothing (its directory's does).
func exposed(fi fs.FileInfo) bool {
	uid, ok := owner(fi)
	if !ok || uid != os.Geteuid() && uid != 0 {
		return true
	}
	return fi.Mode()&fs.ModeSymlink == 0 && fi.Mode().Perm()&0o022 != 0
}

// owner is the uid that owns fi (from os.Lstat or a safefs.Dir).
func owner(fi fs.FileInfo) (int, bool) {
	switch st := fi.Sys().(type) {
	case *syscall.Stat_t:
		return int(st.Uid), true
	case *unix.Stat_t:
		return int(st.Uid), true
	}
	return 0, false
}

// exposedAncestor reports whether a directory above dir (absolute, no
// symbolic link in it) lets another user rename dir away and put another
// tree in its place: it belongs to another user than this one or root, or
// its group or others may write it and it is not sticky.
func exposedAncestor(dir string) bool {
	for d := filepath.Dir(dir); ; d = filepath.Dir(d) {
		fi, err := os.Lstat(d)
		if err != nil {
			return true
		}
		if uid, ok := owner(fi); !ok || uid != os.Geteuid() && uid != 0 {
			return true
		}
		if fi.Mode().Perm()&0o022 != 0 && fi.Mode()&fs.ModeSticky == 0 {
			return true
		}
		if d == "/" || d == "." {
			return false
		}
	}
}

// privatize copies the bundle directory (b.root) into a new private
// temporary directory, never following a symbolic link, within the
// extraction limits, and makes the copy the bundle's Dir and root; the
// original stays open as b.home, where replay outcomes are stored.
func (b *Bundle) privatize() error {
	tmp, err := os.MkdirTemp(b.opts.TempDir, "dal-bundle-")
	if err != nil {
		return fmt.Errorf("bundle %s can be written by other users, and copying it to a private directory failed: %w", b.Path, err)
	}
	dst, err := safefs.OpenOneMount(tmp)
	if err == nil {
		err = copyPrivate(b.root, dst, b.opts.Limits.withDefaults())
		dst.Close()
	}
	if err != nil {
		os.RemoveAll(tmp)
		var le *limitError
		if errors.As(err, &le) {
			return &Error{Bundle: b.Path, Kind: ErrLimit, Err: err, msg: fmt.Sprintf("bundle %s can be written by other users and is copied before use, but %s", b.Path, le.msg)}
		}
		return fmt.Errorf("bundle %s can be written by other users, and copying it to a private directory (%s) failed: %w: set TMPDIR, or make the bundle writable by you alone", b.Path, filepath.Dir(tmp), err)
	}
	b.home, b.root = b.root, nil
	b.Dir, b.tmp, b.Manifest = tmp, tmp, nil
	return b.openRoot()
}

// copyPrivate copies every directory, regular file and symbolic link of src
// into the empty dst, each file read once through its own descriptor.
func copyPrivate(src, dst *safefs.Dir, lim ExtractLimits) error {
	var n int
	var bytes int64
	return src.Walk("", func(rel string, fi fs.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if rel == "" {
			return nil
		}
		if n++; n > lim.MaxEntries {
			return &limitError{fmt.Sprintf("it holds more than %d entries (%s)", lim.MaxEntries, MaxExtractEntriesFlag)}
		}
		switch typ := fi.Mode().Type(); {
		case typ.IsDir():
			return dst.Mkdir(rel, 0o700)
		case typ&fs.ModeSymlink != 0:
			t, err := src.Readlink(rel)
			if err != nil {
				return err
			}
			return dst.Symlink(t, rel)
		case typ.IsRegular():
			in, err := src.Open(rel)
			if err != nil {
				return err
			}
			defer in.Close()
			out, err := dst.Create(rel, 0o600)
			if err != nil {
				return err
			}
			room := lim.MaxBytes - bytes
			w, err := io.Copy(out, io.LimitReader(in, room+1))
			bytes += w
			if cerr := out.Close(); err == nil {
				err = cerr
			}
			if err == nil && w > room {
				err = &limitError{fmt.Sprintf("it holds more than %d bytes (%s)", lim.MaxBytes, MaxExtractBytesFlag)}
			}
			return err
		case reserved(rel):
			return nil // replays/ holds only what loadReplays reads; the rest is reported there
		default:
			return &entryError{rel, fmt.Errorf("%s is a %s: bundles hold only regular files, symbolic links and directories", path.Clean(rel), kindName(typ))}
		}
	})
}

// PrivateParent reports whether dir (absolute, no symbolic link in it)
// and every directory above it let no other user rename what is below
// them away (exposedAncestor's test): a caller that opens many bundles
// of one directory checks it once and names it in
// OpenOptions.PrivateParent.
func PrivateParent(dir string) bool {
	return filepath.IsAbs(dir) && !exposedAncestor(filepath.Join(dir, "_"))
}

// exposedAbove is exposedAncestor(b.Dir), unless the caller checked
// b.Dir's parent already (OpenOptions.PrivateParent).
func (b *Bundle) exposedAbove() bool {
	if p := b.opts.PrivateParent; p != "" && filepath.Dir(b.Dir) == p {
		return false
	}
	return exposedAncestor(b.Dir)
}
