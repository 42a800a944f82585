package bundle

import (
	"errors"
	"fmt"
	"syscall"
)

// Kinds of bundle errors, checked with errors.Is.
var (
	// ErrNotBundle: the path is missing or is not a dal bundle at all.
	ErrNotBundle = errors.New("not a dal bundle")
	// ErrVersion: the bundle has a format version this package does not read.
	ErrVersion = errors.New("unknown bundle format version")
	// ErrCorrupt: a file of the bundle was modified, added, removed or
	// damaged, or the signature does not verify. Error.File names it.
	ErrCorrupt = errors.New("bundle modified or corrupted")
	// ErrUntrusted: the bundle is intact but signed by a key the reader
	// does not trust (OpenOptions.TrustedKey, OpenOptions.Trust).
	ErrUntrusted = errors.New("bundle signed by an untrusted key")
	// ErrLimit: an archive bundle exceeds an extraction limit
	// (OpenOptions.Limits); nothing of it is kept.
	ErrLimit = errors.New("bundle exceeds an extraction limit")
	// ErrNotEndorsed: the bundle's head is not the one its Endorsement
	// names (the cause of an ErrCorrupt error).
	ErrNotEndorsed = errors.New("bundle head not the one endorsed")
	// ErrExists: the output (a bundle, an archive or a key) already exists.
	ErrExists = errors.New("already exists")
)

// Error is a problem with one bundle. Its message is one sentence for a
// user; File names the bundle file at fault.
type Error struct {
	Bundle string // the bundle's path as given
	File   string // slash-separated path inside the bundle ("" for the bundle as a whole)
	Kind   error  // ErrNotBundle, ErrVersion, ErrCorrupt, ErrUntrusted or ErrLimit
	Err    error  // underlying cause, or nil
	msg    string
}

func (e *Error) Error() string { return e.msg }

// Is reports whether target is e's Kind.
func (e *Error) Is(target error) bool { return target == e.Kind }

// Unwrap returns the underlying cause.
func (e *Error) Unwrap() error { return e.Err }

// corrupt reports a damaged file of bundle b: "bundle B: FILE WHAT: the
// bundle was modified or corrupted".
func corrupt(b, file string, cause error, format string, args ...any) *Error {
	return &Error{Bundle: b, File: file, Kind: ErrCorrupt, Err: cause,
		msg: fmt.Sprintf("bundle %s: %s %s: the bundle was modified or corrupted", b, file, fmt.Sprintf(format, args...))}
}

// writeErr wraps a failure to write what inside bundle (or archive) out,
// with a plain sentence for a full disk.
func writeErr(out, what string, err error) error {
	var errno syscall.Errno
	if errors.As(err, &errno) && (errno == syscall.ENOSPC || errno == syscall.EDQUOT) {
		return fmt.Errorf("bundle %s: the disk is full (writing %s: %w): free space there and try again", out, what, errno)
	}
	return fmt.Errorf("bundle %s: writing %s: %w", out, what, err)
}
