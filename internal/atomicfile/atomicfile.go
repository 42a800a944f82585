// Package atomicfile replaces files whole: a reader (or a crash) sees the
// old content or the new, never a part of it. SyncDir makes the replacement
// itself (a rename, a creation) durable.
package atomicfile

import (
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// TempInfix is in the name of every temporary file Write makes (".NAME" +
// TempInfix + random): what a crash can leave behind, for cleaners to find.
const TempInfix = ".tmp-"

// Write fills a temporary file beside path, gives it mode perm, syncs it
// to disk and renames it over path. On any error the temporary file is
// removed and path is left as it was.
func Write(path string, perm fs.FileMode, fill func(io.Writer) error) (err error) {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+TempInfix+"*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	if err = fill(f); err != nil {
		return err
	}
	if err = f.Chmod(perm); err != nil {
		return err
	}
	if err = f.Sync(); err != nil {
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}

// WriteFile is Write of b.
func WriteFile(path string, b []byte, perm fs.FileMode) error {
	return Write(path, perm, func(w io.Writer) error {
		_, err := w.Write(b)
		return err
	})
}

// SyncDir fsyncs the directory dir, so that the entries created, renamed
// or removed in it survive a crash. It follows a symbolic link at dir.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
