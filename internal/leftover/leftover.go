// Package leftover removes what dead dal processes left behind: staging
// directories of runs killed with SIGKILL, a power cut or a full disk.
//
// A live process marks a directory it owns with [Hold]: an exclusive
// flock(2) on the directory itself (nothing is written into it, so a
// bundle's staging directory stays exactly its content), held until
// [Held.Release] or the process's death (the kernel drops the lock with the
// last fd). [Sweep], at the next start, removes the directories matching a
// pattern whose lock nobody holds and that are older than [Grace] (a run
// between its mkdir and its Hold is younger). A live run's directory is
// never removed: its lock is held.
//
// Sweep runs with dal's privileges in shared places (/var/tmp, /tmp), so
// it trusts nothing there: it only considers directories (never symlinks,
// Lstat) owned by the caller's uid, and removes them with os.RemoveAll,
// which does not follow symlinks inside.
package leftover

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Grace is how old an unlocked directory must be before Sweep removes it.
const Grace = 30 * time.Second

// Held is a directory marked as in use by this process.
type Held struct{ f *os.File }

// Hold marks dir (which this process just created) as in use until Release
// or the process's death.
func Hold(dir string) (*Held, error) {
	f, err := os.OpenFile(dir, os.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("mark %s as in use: %w", dir, err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("mark %s as in use: %w", dir, err)
	}
	return &Held{f: f}, nil
}

// Release drops the mark (the directory itself is the caller's to remove).
func (h *Held) Release() {
	if h != nil && h.f != nil {
		h.f.Close()
		h.f = nil
	}
}

// Sweep removes the directories in root whose names match pattern
// (filepath.Match syntax) that no live process holds, and returns their
// paths. Errors on single entries are skipped: a sweep never stops a run.
func Sweep(root, pattern string) []string {
	names, err := filepath.Glob(filepath.Join(root, pattern))
	if err != nil {
		return nil
	}
	uid := uint32(os.Getuid())
	var removed []string
	for _, p := range names {
		fi, err := os.Lstat(p)
		if err != nil || !fi.IsDir() {
			continue
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok || st.Uid != uid {
			continue
		}
		if !abandoned(p, fi) {
			continue
		}
		if err := os.RemoveAll(p); err == nil {
			removed = append(removed, p)
		}
	}
	return removed
}

// abandoned reports whether no live process holds dir.
func abandoned(dir string, fi fs.FileInfo) bool {
	if time.Since(fi.ModTime()) < Grace {
		return false
	}
	f, err := os.OpenFile(dir, os.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return false
	}
	defer f.Close()
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		return false // held: a live run
	}
	return true
}
