// Package digest names content by its SHA-256 the way dal writes it in
// bundles, manifests and provenance: "sha256:" and 64 lowercase hex
// digits. It imports nothing of dal's, so formats and mechanisms alike
// use it. It opens no file of a tree an agent or a bundle controls: read
// those through internal/safefs and hand the open file to [Reader].
package digest

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"sync"
)

// Prefix starts every digest.
const Prefix = "sha256:"

// Bytes returns the digest of b.
func Bytes(b []byte) string {
	s := sha256.Sum256(b)
	return Prefix + hex.EncodeToString(s[:])
}

// bufs are Reader's copy buffers, 256 KiB reads shared by the goroutines
// that hash a tree.
var bufs = sync.Pool{New: func() any { b := make([]byte, 256<<10); return &b }}

// Reader returns the digest of what r yields until EOF, and its length.
// It reads into a pooled buffer, also from an *os.File, whose WriteTo
// would allocate 32 KiB for each file (a 4 KiB file hashes in ~10 µs
// instead of ~16).
func Reader(r io.Reader) (string, int64, error) {
	h := sha256.New()
	buf := bufs.Get().(*[]byte)
	n, err := io.CopyBuffer(h, struct{ io.Reader }{r}, *buf)
	bufs.Put(buf)
	if err != nil {
		return "", n, err
	}
	return Prefix + hex.EncodeToString(h.Sum(nil)), n, nil
}

// File returns the digest and the length of the file at path, opened with
// os.Open (a symbolic link is followed): for files dal itself wrote.
func File(path string) (string, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	return Reader(f)
}
