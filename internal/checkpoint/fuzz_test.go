package checkpoint

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// seedArchive stores one checkpoint and returns its archive, manifest and
// entry.
func seedArchive(f *testing.F) ([]byte, []byte, Entry) {
	dir := f.TempDir()
	ws := filepath.Join(dir, "ws")
	os.MkdirAll(filepath.Join(ws, "out"), 0o755)
	os.WriteFile(filepath.Join(ws, "out", "a.md"), []byte("alpha"), 0o644)
	s := &Store{Dir: filepath.Join(dir, "store"), Now: (&clock{t0}).now}
	mdir := filepath.Join(dir, "marks")
	ms := writeMarksF(f, mdir, ws)
	res, err := s.Ingest(Run{ID: "r", Workspace: ws}, ms)
	if err != nil {
		f.Fatal(err)
	}
	c := res.Stored[0]
	a, _ := os.ReadFile(c.ArchivePath)
	m, _ := os.ReadFile(filepath.Join(s.Dir, "r", ManifestFile))
	return a, m, c.Entry
}

// FuzzExtract: any archive bytes give a result or an error, never a panic,
// and content that does not match the entry is never accepted.
func FuzzExtract(f *testing.F) {
	a, _, e := seedArchive(f)
	f.Add(a)
	f.Add(a[:len(a)/2])
	f.Add([]byte{0x28, 0xb5, 0x2f, 0xfd})
	f.Fuzz(func(t *testing.T, b []byte) {
		state, err := extract(bytes.NewReader(b), "r/1", &e, nil, nil)
		if err == nil && (!bytes.Equal(b, a) && sha256Hex(state) != e.StateSHA256) {
			t.Fatalf("accepted a state that does not match")
		}
		if err != nil && !errors.Is(err, ErrDamaged) {
			t.Fatalf("error is not ErrDamaged: %v", err)
		}
	})
}

// FuzzManifest: any manifest bytes are read or refused, never a panic.
func FuzzManifest(f *testing.F) {
	_, m, _ := seedArchive(f)
	f.Add(m)
	f.Add([]byte(`{"schema_version": 1}`))
	f.Add([]byte(`{"schema_version": 9}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, ManifestFile), b, 0o644)
		got, err := readManifest(dir, "r")
		if err == nil && got.checksum() != got.Checksum {
			t.Fatalf("accepted a manifest with a wrong checksum")
		}
	})
}
