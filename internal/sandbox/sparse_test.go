package sandbox

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// copySparse keeps a sparse file sparse and hashes every byte of it,
// holes included, as a plain read would.
func TestCopySparse(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	f, err := os.Create(src)
	if err != nil {
		t.Fatal(err)
	}
	const size = 64 << 20
	for _, off := range []int64{0, 5 << 20, size - 3} {
		if _, err := f.WriteAt([]byte("abc"), off); err != nil {
			t.Fatal(err)
		}
	}
	f.Close()
	in, _ := os.Open(src)
	defer in.Close()
	want := sha256.New()
	if _, err := io.Copy(want, in); err != nil {
		t.Fatal(err)
	}
	in.Seek(0, io.SeekStart)
	out, err := os.Create(filepath.Join(dir, "dst"))
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.New()
	if err := copySparse(out, in, h); err != nil {
		t.Fatal(err)
	}
	out.Close()
	if hex.EncodeToString(h.Sum(nil)) != hex.EncodeToString(want.Sum(nil)) {
		t.Error("copySparse hashed other bytes than the file's")
	}
	fi, err := os.Stat(filepath.Join(dir, "dst"))
	if err != nil || fi.Size() != size {
		t.Fatalf("the copy: %v %v", fi, err)
	}
	if b, ok := blocks(fi); !ok || b*512 > 1<<18 {
		t.Errorf("the copy of a sparse file takes %d bytes", b*512)
	}
	dst, _ := os.Open(filepath.Join(dir, "dst"))
	defer dst.Close()
	for _, off := range []int64{0, 5 << 20, size - 3} {
		got := make([]byte, 3)
		if _, err := dst.ReadAt(got, off); err != nil || string(got) != "abc" {
			t.Errorf("the copy holds %q at %d (%v)", got, off, err)
		}
	}
}

// BenchmarkDataBytes1000: what revert's --max-apply-bytes check costs for
// 1,000 changed files (an lstat each), to set beside BenchmarkRevert1000.
func BenchmarkDataBytes1000(b *testing.B) {
	dir := b.TempDir()
	var cs []Change
	for i := range 1000 {
		rel := filepath.Join("d", "f"+strconv.Itoa(i))
		p := filepath.Join(dir, "files", rel)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, make([]byte, 4096), 0o644); err != nil {
			b.Fatal(err)
		}
		cs = append(cs, Change{Path: rel, Op: OpDeleted, Kind: KindFile, Size: 4096})
	}
	for b.Loop() {
		n, err := DataBytes(dir, cs, false)
		if err != nil || n != 1000*4096 {
			b.Fatalf("%d %v", n, err)
		}
	}
}

// BenchmarkCopySparse4K: copySparse of a 4 KiB file (what apply and
// revert copy most), with the plain copy it replaced as the baseline in
// the same run.
func BenchmarkCopySparse4K(b *testing.B) {
	dir := b.TempDir()
	src := filepath.Join(dir, "src")
	if err := os.WriteFile(src, make([]byte, 4096), 0o644); err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name string
		copy func(out, in *os.File) error
	}{
		{"plain", func(out, in *os.File) error { _, err := io.Copy(io.MultiWriter(out, sha256.New()), in); return err }},
		{"sparse", func(out, in *os.File) error { return copySparse(out, in, sha256.New()) }},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				in, err := os.Open(src)
				if err != nil {
					b.Fatal(err)
				}
				out, err := os.Create(filepath.Join(dir, "dst"))
				if err != nil {
					b.Fatal(err)
				}
				if err := c.copy(out, in); err != nil {
					b.Fatal(err)
				}
				in.Close()
				out.Close()
			}
		})
	}
}
