// Package embedfs reads an embed.FS as the compiler laid it out: each
// file's name, its data without a copy, and the content hash the compiler
// stored beside it. A checksum over those hashes reads a few kilobytes
// where one over the contents reads them all (hundreds of kilobytes, a
// fraction of a millisecond at every start).
package embedfs

import (
	"embed"
	"unsafe"
)

// File is how the compiler lays out each file of an embed.FS (embed's
// unexported file type: "the compiler knows the layout of this struct"):
// an FS is a pointer to a slice of them, sorted by name, directories
// ending in a slash. Hash is a SHA-256 of Data made by the compiler, cut
// to 16 bytes (see the tests' compilerHash). The tests check every field
// against the FS's own API, so a toolchain that changes the layout fails
// them rather than hashing garbage.
type File struct {
	Name string
	Data string
	Hash [16]byte
}

// Files returns the files of fsys, directories included.
func Files(fsys *embed.FS) []File {
	files := *(**[]File)(unsafe.Pointer(fsys))
	if files == nil {
		return nil
	}
	return *files
}
