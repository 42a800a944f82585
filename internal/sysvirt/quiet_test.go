package sysvirt

import (
	"os"
	"path/filepath"
	"testing"
)

// goFile tells a Go executable from others, and reads a hostile file
// without trusting its sizes.
func TestGoFile(t *testing.T) {
	t.Parallel()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if !goFile(self) {
		t.Errorf("goFile(%s), this Go test binary, = false", self)
	}
	for _, path := range []string{"/bin/true", "/bin/sh", "/etc/passwd", "/nonexistent"} {
		if goFile(path) {
			t.Errorf("goFile(%s) = true", path)
		}
	}
	b, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for name, content := range map[string][]byte{
		"header-only": b[:64],
		"truncated":   b[:len(b)/2], // section headers are at the end
		"empty":       nil,
	} {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, content, 0o644); err != nil {
			t.Fatal(err)
		}
		if goFile(path) {
			t.Errorf("goFile(%s) = true", name)
		}
	}
}

// FuzzGoFile: any bytes give an answer, never a panic or a huge allocation.
func FuzzGoFile(f *testing.F) {
	self, err := os.Executable()
	if err != nil {
		f.Fatal(err)
	}
	b, err := os.ReadFile(self)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b[:64])
	f.Add([]byte("\x7fELF\x02\x01"))
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, content []byte) {
		path := filepath.Join(dir, "f")
		if err := os.WriteFile(path, content, 0o644); err != nil {
			t.Fatal(err)
		}
		goFile(path)
	})
}
