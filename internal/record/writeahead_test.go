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
	"github.com/dal-runtime/dal/internal/safefs"
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

// writeNetworkInto records xs into a new bundle staging under dir, with
// the exchanges handed over as the proxy does (some added after the
// write-ahead stopped when late > 0), and returns the files written.
func writeNetworkInto(t *testing.T, dir string, xs []*har.Exchange, ahead bool, late int) map[string][]byte {
	t.Helper()
	n, err := NewNetwork(filepath.Join(dir, "net"), NetworkOptions{SecretValues: []string{"sk-bench-7f3e0123456789"}}, nil, nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	w, err := bundle.Create(filepath.Join(dir, "b"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Abort() })
	if ahead {
		if err := n.WriteAhead(w.Dir()); err != nil {
			t.Fatal(err)
		}
	}
	for _, x := range xs[:len(xs)-late] {
		n.add(x)
	}
	n.stopWriteAhead()
	for _, x := range xs[len(xs)-late:] {
		n.add(x) // after Finish stopped the write-ahead
	}
	if err := writeNetwork(w, n, xs); err != nil {
		t.Fatal(err)
	}
	if n.count != len(xs) || len(n.prompts) != len(xs) {
		t.Errorf("%d entries and %d prompts recorded, want %d each", n.count, len(n.prompts), len(xs))
	}
	return files(t, w.Dir())
}

// network.har and prompts/ are the same bytes whether written ahead, as
// record does, after the agent's exit, or after the exit because some
// exchanges came after the write-ahead stopped (its prompt files are
// then replaced).
func TestWriteAheadWritesWhatWriteNetworkWrites(t *testing.T) {
	t.Parallel()
	xs := benchExchanges(12)
	want := writeNetworkInto(t, t.TempDir(), xs, false, 0)
	if _, ok := want["prompts/0012.json"]; !ok || len(want) != 13 {
		t.Fatalf("the write after the exit wrote %d files: %v", len(want), slices.Sorted(maps.Keys(want)))
	}
	for _, c := range []struct {
		name string
		late int
	}{{"ahead", 0}, {"ahead, two exchanges late", 2}} {
		got := writeNetworkInto(t, t.TempDir(), xs, true, c.late)
		if !slices.Equal(slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(want))) {
			t.Errorf("%s: files %v, want %v", c.name, slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(want)))
		}
		for name, b := range want {
			if !bytes.Equal(got[name], b) {
				t.Errorf("%s: %s differs:\n%s\nwant\n%s", c.name, name, got[name], b)
			}
		}
	}
}

// A symlink planted where prompts/ goes is not followed, whether the
// prompts are written ahead or after the exit: the recording fails with a
// sentence naming prompts/, and nothing is written where the link points.
func TestWritePromptsDoesNotFollowAPlantedSymlink(t *testing.T) {
	t.Parallel()
	for _, ahead := range []bool{true, false} {
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
		if ahead {
			if err := n.WriteAhead(w.Dir()); err != nil {
				t.Fatal(err)
			}
		}
		xs := benchExchanges(3)
		for _, x := range xs {
			n.add(x)
		}
		n.stopWriteAhead()
		err = writeNetwork(w, n, xs)
		if !errors.Is(err, safefs.ErrSymlink) || !strings.HasPrefix(err.Error(), "write prompts/: ") {
			t.Errorf("ahead %v: writeNetwork: %v, want a refusal of the symlink at prompts/", ahead, err)
		}
		if ents, _ := os.ReadDir(outside); len(ents) != 0 {
			t.Errorf("ahead %v: %d files written through the symlink", ahead, len(ents))
		}
	}
}
