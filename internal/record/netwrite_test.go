package record

import (
	"bytes"
	"errors"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/dal-runtime/dal/bundle"
	"github.com/dal-runtime/dal/internal/netcap/har"
	"github.com/dal-runtime/dal/internal/netcap/prompts"
	"github.com/dal-runtime/dal/internal/safefs"
	"github.com/dal-runtime/dal/internal/version"
)

// files reads every regular file under dir: slash path → content.
func files(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		b, err := os.ReadFile(p)
		rel, _ := filepath.Rel(dir, p)
		out[filepath.ToSlash(rel)] = b
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// writeNetwork writes network.har as har.Write writes the redacted
// entries, and prompts/NNNN.json as prompts.Write writes the prompts
// extracted from them, in request order; it sets the count and prompts
// that the manifest and prov.json take.
func TestWriteNetworkWritesTheEntriesAndPrompts(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	xs := benchExchanges(12)
	n, err := NewNetwork(filepath.Join(dir, "net"), NetworkOptions{SecretValues: []string{"sk-bench-7f3e0123456789"}}, nil, nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	w, err := bundle.Create(filepath.Join(dir, "b"))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Abort()
	if err := startNetworkWrite(w.Dir(), n, xs).wait(); err != nil {
		t.Fatal(err)
	}
	got := files(t, w.Dir())

	es, err := n.Entries(xs)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]byte{}
	var buf bytes.Buffer
	if err := har.Write(&buf, har.NewLog(es, version.Version)); err != nil {
		t.Fatal(err)
	}
	want["network.har"] = buf.Bytes()
	ps := ExtractPrompts(es)
	ref := t.TempDir()
	if err := prompts.Write(ref, ps); err != nil {
		t.Fatal(err)
	}
	for name, b := range files(t, ref) {
		want["prompts/"+name] = b
	}
	if !slices.Equal(slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(want))) {
		t.Fatalf("files %v, want %v", slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(want)))
	}
	for name, b := range want {
		if !bytes.Equal(got[name], b) {
			t.Errorf("%s differs:\n%s\nwant\n%s", name, got[name], b)
		}
	}
	if n.count != 12 || len(n.prompts) != 12 || !strings.Contains(string(got["prompts/0012.json"]), `"seq": 11`) {
		t.Errorf("count %d, %d prompts, prompts/0012.json %s", n.count, len(n.prompts), got["prompts/0012.json"])
	}
}

// A symlink planted where prompts/ goes is not followed: the recording
// fails with a sentence naming prompts/, nothing is written where the
// link points, and no network.har is left half-written.
func TestWriteNetworkDoesNotFollowAPlantedSymlink(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	outside := filepath.Join(dir, "outside")
	os.Mkdir(outside, 0o755)
	n, err := NewNetwork(filepath.Join(dir, "net"), NetworkOptions{}, nil, nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	w, err := bundle.Create(filepath.Join(dir, "b"))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Abort()
	if err := os.Symlink(outside, filepath.Join(w.Dir(), "prompts")); err != nil {
		t.Fatal(err)
	}
	err = startNetworkWrite(w.Dir(), n, benchExchanges(3)).wait()
	if !errors.Is(err, safefs.ErrSymlink) || !strings.HasPrefix(err.Error(), "write prompts/: ") {
		t.Errorf("writeNetwork: %v, want a refusal of the symlink at prompts/", err)
	}
	if ents, _ := os.ReadDir(outside); len(ents) != 0 {
		t.Errorf("%d files written through the symlink", len(ents))
	}
	if _, err := os.Lstat(filepath.Join(w.Dir(), "network.har")); err == nil {
		t.Errorf("network.har was written")
	}
}
