package checkpoint

import (
	"errors"
	"fmt"
	"io/fs"
	"syscall"
)

// Sentinels, checked with errors.Is.
var (
	// ErrNotFound: no checkpoint has the id.
	ErrNotFound = errors.New("checkpoint not found")
	// ErrAmbiguous: the id prefix matches several runs.
	ErrAmbiguous = errors.New("checkpoint id is ambiguous")
	// ErrDamaged: an archive or a manifest does not match its hashes.
	ErrDamaged = errors.New("checkpoint is damaged")
	// ErrOutside: an artifact would be restored outside the destination.
	ErrOutside = errors.New("artifact outside the destination")
	// ErrDiskFull: the disk ran out of space (or quota).
	ErrDiskFull = errors.New("the disk is full")
)

// DamagedError says what in a checkpoint does not match its manifest.
type DamagedError struct {
	ID     string // run/seq
	Reason string // e.g. "artifact out/a.md has sha256 …, the manifest says …"
}

func (e *DamagedError) Error() string {
	return fmt.Sprintf("checkpoint %s is damaged: %s; restore an earlier checkpoint", e.ID, e.Reason)
}

func (e *DamagedError) Is(target error) bool { return target == ErrDamaged }

// ManifestError is a run's manifest.json that cannot be trusted. The run's
// archives are left alone; Repair rebuilds the manifest from them.
type ManifestError struct {
	Run    string
	Reason string
	Newer  bool // written by a newer dal: not damaged, just unreadable here
}

func (e *ManifestError) Error() string {
	if e.Newer {
		return fmt.Sprintf("the manifest of run %s cannot be read: %s; use a newer dal-exec", e.Run, e.Reason)
	}
	return fmt.Sprintf("the manifest of run %s is damaged: %s; its archives are kept: `dal-exec checkpoint repair %s` rebuilds it from them", e.Run, e.Reason, e.Run)
}

func (e *ManifestError) Is(target error) bool { return target == ErrDamaged && !e.Newer }

// writeErr turns a failed write into one sentence, naming a full disk.
func writeErr(what string, err error) error {
	var errno syscall.Errno
	if errors.As(err, &errno) && (errno == syscall.ENOSPC || errno == syscall.EDQUOT) {
		return fmt.Errorf("%s: %w (%v): free space there and try again; nothing was lost", what, ErrDiskFull, errno)
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return fmt.Errorf("%s: %s: %w", what, pe.Path, pe.Err)
	}
	return fmt.Errorf("%s: %w", what, err)
}
