package checkpoint

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/dal-runtime/dal/internal/marks"
)

// benchWorkspace holds 16 files of 512 KiB: half random, half text-like.
func benchWorkspace(b *testing.B) (string, int64) {
	ws := b.TempDir()
	var total int64
	for i := range 16 {
		buf := make([]byte, 512<<10)
		rand.Read(buf)
		if i%2 == 1 {
			copy(buf, []byte(hex.EncodeToString(buf[:len(buf)/2])))
		}
		os.WriteFile(filepath.Join(ws, "f"+strconv.Itoa(i)), buf, 0o644)
		total += int64(len(buf))
	}
	return ws, total
}

// BenchmarkCopyBaseline copies the files as marks.Write does: the cost
// every checkpoint pays before dal-exec stores it.
func BenchmarkCopyBaseline(b *testing.B) {
	ws, total := benchWorkspace(b)
	b.SetBytes(total)
	for b.Loop() {
		dir := b.TempDir()
		if _, err := marks.Write(dir, marks.Input{Kind: marks.Checkpoint, Paths: []string{ws}, Workspace: ws}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkIngest stores one 8 MiB checkpoint (compress, hash, sync).
func BenchmarkIngest(b *testing.B) {
	ws, total := benchWorkspace(b)
	dir := b.TempDir()
	if _, err := marks.Write(dir, marks.Input{Kind: marks.Checkpoint, Paths: []string{ws}, Workspace: ws}); err != nil {
		b.Fatal(err)
	}
	ms, _, _ := marks.Read(dir, marks.Checkpoint)
	s := &Store{Dir: filepath.Join(b.TempDir(), "store")}
	b.SetBytes(total)
	i := 0
	for b.Loop() {
		i++
		if _, err := s.Ingest(Run{ID: "r" + strconv.Itoa(i), Workspace: ws}, ms); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkValidate checks one 8 MiB checkpoint.
func BenchmarkValidate(b *testing.B) {
	s, total := storedCheckpoint(b)
	b.SetBytes(total)
	for b.Loop() {
		if err := s.Validate("r/1"); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRestore restores one 8 MiB checkpoint into a fresh directory.
func BenchmarkRestore(b *testing.B) {
	s, total := storedCheckpoint(b)
	b.SetBytes(total)
	for b.Loop() {
		if _, err := s.Restore("r/1", b.TempDir(), RestoreOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}

// storedCheckpoint is a store holding one 8 MiB checkpoint, r/1.
func storedCheckpoint(b *testing.B) (*Store, int64) {
	ws, total := benchWorkspace(b)
	dir := b.TempDir()
	marks.Write(dir, marks.Input{Kind: marks.Checkpoint, Paths: []string{ws}, Workspace: ws})
	ms, _, _ := marks.Read(dir, marks.Checkpoint)
	s := &Store{Dir: filepath.Join(b.TempDir(), "store")}
	if _, err := s.Ingest(Run{ID: "r", Workspace: ws}, ms); err != nil {
		b.Fatal(err)
	}
	return s, total
}
