package embedfs

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"io/fs"
	"strings"
	"testing"
)

//go:embed embedfs.go embedfs_test.go testdata
var sample embed.FS

// TestLayout: the compiler's layout of an embed.FS (File) holds: the same
// names, contents and content hashes as the FS's own API gives, for small
// and large files.
func TestLayout(t *testing.T) {
	names := map[string]bool{}
	err := fs.WalkDir(sample, ".", func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			names[p] = true
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	files, small, large := 0, 0, 0
	for _, f := range Files(&sample) {
		if strings.HasSuffix(f.Name, "/") {
			continue
		}
		if !names[f.Name] {
			t.Fatalf("embedded file %d is %q, a name the FS does not list: embed's layout changed (embedfs.File)", files, f.Name)
		}
		b, _ := sample.ReadFile(f.Name)
		if f.Data != string(b) || !bytes.Equal(f.Hash[:], compilerHash(b)) {
			t.Fatalf("embedded file %s: data or hash differ from the FS's: embed's layout changed (embedfs.File)", f.Name)
		}
		if len(b) <= 1<<10 {
			small++
		} else {
			large++
		}
		files++
	}
	if files != len(names) || small == 0 || large == 0 {
		t.Fatalf("the layout shows %d files (%d small, %d large), the FS %d: want both sizes", files, small, large, len(names))
	}
	var empty embed.FS
	if Files(&empty) != nil {
		t.Error("an empty FS has files")
	}
}

// compilerHash is the content hash the compiler stores beside an embedded
// file (cmd/compile's fileStringSym): SHA-256 with its first byte inverted
// for a file of up to 1 kB (cmd/internal/hash.Sum32), SHA-256 of a 1 byte
// and the data for a larger one (hash.New32), cut to 16 bytes.
func compilerHash(b []byte) []byte {
	if len(b) <= 1<<10 {
		sum := sha256.Sum256(b)
		sum[0] ^= 0xff
		return sum[:16]
	}
	h := sha256.New()
	h.Write([]byte{1})
	h.Write(b)
	return h.Sum(nil)[:16]
}
