package bundle

import (
	"crypto/rand"
	"crypto/sha256"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// Benchmarks report MB/s; compare Commit and Open with the baselines
// measured in the same run (BenchmarkBaseline*): plain sha256 of the same
// bytes in one stream, and reading+hashing the 1,000 files one by one.
//
//	go test ./bundle -run '^$' -bench . -benchtime 5x

const (
	smallCount = 1000
	smallSize  = 1 << 10
	bigSize    = 256 << 20
)

// stageSmall writes 1,000 small files into a new writer for out.
func stageSmall(b *testing.B, out string) *Writer {
	w, err := Create(out)
	if err != nil {
		b.Fatal(err)
	}
	data := make([]byte, smallSize)
	for i := range smallCount {
		rand.Read(data)
		if err := w.WriteFile(fmt.Sprintf("fs-diff/d%02d/f%04d", i%32, i), data); err != nil {
			b.Fatal(err)
		}
	}
	return w
}

// bigFile makes one 256 MiB file of random bytes (once per benchmark).
func bigFile(b *testing.B, dir string) string {
	p := filepath.Join(dir, "big")
	f, err := os.Create(p)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := io.CopyN(f, rand.Reader, bigSize); err != nil {
		b.Fatal(err)
	}
	f.Sync()
	f.Close()
	return p
}

// stageBig links the big file into a new writer for out.
func stageBig(b *testing.B, big, out string) *Writer {
	w, err := Create(out)
	if err != nil {
		b.Fatal(err)
	}
	os.Mkdir(filepath.Join(w.Dir(), "fs-pre"), 0o755)
	if err := os.Link(big, filepath.Join(w.Dir(), "fs-pre", "big")); err != nil {
		b.Fatal(err)
	}
	return w
}

func BenchmarkCommit1000Files(b *testing.B) {
	dir := b.TempDir()
	b.SetBytes(smallCount * smallSize)
	for i := 0; b.Loop(); i++ {
		b.StopTimer()
		out := filepath.Join(dir, fmt.Sprint(i))
		w := stageSmall(b, out)
		b.StartTimer()
		if err := w.Commit(fullManifest(), testKey(1)); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		os.RemoveAll(out)
		b.StartTimer()
	}
}

func BenchmarkCommit256MiB(b *testing.B) {
	dir := b.TempDir()
	big := bigFile(b, dir)
	b.SetBytes(bigSize)
	for i := 0; b.Loop(); i++ {
		b.StopTimer()
		out := filepath.Join(dir, fmt.Sprint(i))
		w := stageBig(b, big, out)
		b.StartTimer()
		if err := w.Commit(fullManifest(), testKey(1)); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		os.RemoveAll(out)
		b.StartTimer()
	}
}

func BenchmarkOpen1000Files(b *testing.B) {
	out := filepath.Join(b.TempDir(), "run")
	if err := stageSmall(b, out).Commit(fullManifest(), testKey(1)); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(smallCount * smallSize)
	for b.Loop() {
		bd, err := Open(out, OpenOptions{})
		if err != nil {
			b.Fatal(err)
		}
		bd.Close()
	}
}

func BenchmarkOpen256MiB(b *testing.B) {
	dir := b.TempDir()
	out := filepath.Join(dir, "run")
	if err := stageBig(b, bigFile(b, dir), out).Commit(fullManifest(), testKey(1)); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(bigSize)
	for b.Loop() {
		bd, err := Open(out, OpenOptions{})
		if err != nil {
			b.Fatal(err)
		}
		bd.Close()
	}
}

// BenchmarkBaselineSHA256_256MiB: one stream through sha256, the floor
// for a single large file.
func BenchmarkBaselineSHA256_256MiB(b *testing.B) {
	big := bigFile(b, b.TempDir())
	b.SetBytes(bigSize)
	buf := make([]byte, 256<<10)
	for b.Loop() {
		f, err := os.Open(big)
		if err != nil {
			b.Fatal(err)
		}
		h := sha256.New()
		io.CopyBuffer(h, f, buf)
		f.Close()
	}
}

// BenchmarkBaselineHash1000Files: reading and hashing the 1,000 files
// one after another, without checks or parallelism.
func BenchmarkBaselineHash1000Files(b *testing.B) {
	out := filepath.Join(b.TempDir(), "run")
	w := stageSmall(b, out)
	defer w.Abort()
	var paths []string
	filepath.WalkDir(w.Dir(), func(p string, d os.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			paths = append(paths, p)
		}
		return nil
	})
	b.SetBytes(smallCount * smallSize)
	buf := make([]byte, 256<<10)
	for b.Loop() {
		for _, p := range paths {
			f, err := os.Open(p)
			if err != nil {
				b.Fatal(err)
			}
			h := sha256.New()
			io.CopyBuffer(h, f, buf)
			f.Close()
		}
	}
}

func BenchmarkPackZstd1000Files(b *testing.B) {
	dir := b.TempDir()
	src := filepath.Join(dir, "run")
	if err := stageSmall(b, src).Commit(fullManifest(), testKey(1)); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(smallCount * smallSize)
	for i := 0; b.Loop(); i++ {
		out := filepath.Join(dir, fmt.Sprintf("%d.tar.zst", i))
		if err := Pack(src, out); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		os.Remove(out)
		b.StartTimer()
	}
}
