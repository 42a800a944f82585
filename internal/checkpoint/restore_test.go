package checkpoint

import (
	"archive/tar"
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"
)

// TestRestoreRefusesEverySymlinkParent: a symlink on the way is refused
// also when it points inside the destination (dal follows none in a
// workspace), and nothing is written.
func TestRestoreRefusesEverySymlinkParent(t *testing.T) {
	t.Parallel()
	s := newStore(t, &clock{t0})
	ws := workspace(t, map[string]string{"good.txt": "good", "x": "evil"}, nil)
	ingest(t, s, Run{ID: "r"}, ws, "cp")
	rewrite(t, s, "r", func(e *Entry) { e.Artifacts[1].Path = "in/x" })
	dest := t.TempDir()
	os.Mkdir(filepath.Join(dest, "real"), 0o755)
	os.Symlink("real", filepath.Join(dest, "in"))
	before := snapshot(t, dest)
	_, err := s.Restore("r/1", dest, RestoreOptions{})
	if !errors.Is(err, ErrOutside) || !strings.Contains(err.Error(), "reached through a symlink") {
		t.Fatalf("Restore = %v; want ErrOutside naming the symlink", err)
	}
	if got := snapshot(t, dest); !reflect.DeepEqual(got, before) {
		t.Errorf("destination changed: %v", got)
	}
}

// TestRestoreLimit: a restore larger than MaxBytes is refused before
// anything is decompressed or written.
func TestRestoreLimit(t *testing.T) {
	t.Parallel()
	s := newStore(t, &clock{t0})
	ws := workspace(t, map[string]string{"a.txt": strings.Repeat("a", 1000)}, nil)
	ingest(t, s, Run{ID: "r"}, ws, "cp")
	dest := t.TempDir()
	_, err := s.Restore("r/1", dest, RestoreOptions{MaxBytes: 999})
	if err == nil || !strings.Contains(err.Error(), "more than the limit of 999") {
		t.Fatalf("Restore = %v; want the limit named", err)
	}
	if ents, _ := os.ReadDir(dest); len(ents) != 0 {
		t.Errorf("the refused restore wrote %v", ents)
	}
	if _, err := s.Restore("r/1", dest, RestoreOptions{MaxBytes: 1000}); err != nil {
		t.Errorf("a restore at the limit: %v", err)
	}
}

// TestExtractBomb: members whose headers claim more than the entry says
// are damage before their content is read; so is a long tail after the
// tar's end.
func TestExtractBomb(t *testing.T) {
	t.Parallel()
	e := &Entry{Artifacts: []Artifact{{Path: "a", Size: 5, SHA256: sha256Hex([]byte("alpha"))}}, StateSize: 4, StateSHA256: sha256Hex([]byte("null"))}
	archive := func(write func(tw *tar.Writer, zw *zstd.Encoder)) []byte {
		var b bytes.Buffer
		zw, _ := zstd.NewWriter(&b)
		tw := tar.NewWriter(zw)
		write(tw, zw)
		zw.Close()
		return b.Bytes()
	}
	for _, tc := range []struct {
		name, msg string
		b         []byte
	}{
		{"artifact claims 50 GiB", "is 53687091200 bytes, the manifest says 5", archive(func(tw *tar.Writer, zw *zstd.Encoder) {
			tw.WriteHeader(&tar.Header{Name: filesPrefix + "0", Size: 50 << 30, Mode: 0o644, Typeflag: tar.TypeReg})
			tw.Flush()
		})},
		{"metadata claims 50 GiB", "claims 53687091200 bytes", archive(func(tw *tar.Writer, zw *zstd.Encoder) {
			tw.WriteHeader(&tar.Header{Name: metaMember, Size: 50 << 30, Mode: 0o644, Typeflag: tar.TypeReg})
			tw.Flush()
		})},
		{"state claims more", "the state is 9999 bytes", archive(func(tw *tar.Writer, zw *zstd.Encoder) {
			tw.WriteHeader(&tar.Header{Name: stateMember, Size: 9999, Mode: 0o644, Typeflag: tar.TypeReg})
			tw.Flush()
		})},
		{"a tail after the end", "after its end", archive(func(tw *tar.Writer, zw *zstd.Encoder) {
			tw.WriteHeader(&tar.Header{Name: metaMember, Size: 2, Mode: 0o644, Typeflag: tar.TypeReg})
			tw.Write([]byte("{}"))
			tw.WriteHeader(&tar.Header{Name: stateMember, Size: 4, Mode: 0o644, Typeflag: tar.TypeReg})
			tw.Write([]byte("null"))
			tw.WriteHeader(&tar.Header{Name: filesPrefix + "0", Size: 5, Mode: 0o644, Typeflag: tar.TypeReg})
			tw.Write([]byte("alpha"))
			tw.Close()
			zw.Write(make([]byte, 2*maxTrailing))
		})},
	} {
		_, err := extract(bytes.NewReader(tc.b), "r/1", e, nil, nil)
		if !errors.Is(err, ErrDamaged) || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%s: %v; want damage saying %q", tc.name, err, tc.msg)
		}
	}
}
