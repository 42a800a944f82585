package fsdiff

import (
	"encoding/json"
	"io/fs"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/dal-runtime/dal/internal/golden"
)

// TestChangesJSONGolden: the bytes of changes.json and of env.json's
// uncaptured list, names that are not UTF-8 included, and what reading
// them back gives.
func TestChangesJSONGolden(t *testing.T) {
	t.Parallel()
	a, b := sha256Of("a"), sha256Of("b")
	changes := []Change{
		{Path: "bin/run", Op: OpModified, Kind: KindFile, Mode: 0o755 | fs.ModeSetuid, Hash: b, Size: 1,
			Pre: &Entry{Kind: KindFile, Mode: 0o644, Hash: a, Size: 1}, Stripped: []string{StrippedSetuid}},
		{Path: "caf\xe9", Op: OpCreated, Kind: KindSymlink, Mode: 0o777, Hash: sha256Of("\xff"), Size: 1, LinkTarget: "\xff"},
		{Path: "new.txt", Op: OpCreated, Kind: KindFile, Mode: 0o644, Hash: a, Size: 1, RenamedFrom: "ol\xe9"},
		{Path: "ol\xe9", Op: OpDeleted, Kind: KindFile, Mode: 0o600, Hash: a, Size: 1},
	}
	if err := Validate(changes); err != nil {
		t.Fatal(err)
	}
	got, err := json.MarshalIndent(struct {
		Changes    []Change     `json:"changes"`
		Uncaptured []Uncaptured `json:"uncaptured"`
	}{changes, []Uncaptured{{Path: "fif\xf0", Kind: "fifo"}}}, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	golden.Check(t, filepath.Join("testdata", "changes.golden.json"), append(got, '\n'))
	var back struct{ Changes []Change }
	if err := json.Unmarshal(got, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back.Changes, changes) {
		t.Errorf("read back %+v, want %+v", back.Changes, changes)
	}
}

// TestChangeRefusesForgedNames: a *_b64 companion must be the bytes its
// text shows.
func TestChangeRefusesForgedNames(t *testing.T) {
	t.Parallel()
	for _, doc := range []string{
		`{"path": "a", "path_b64": "Yg==", "op": "created", "kind": "dir", "mode": "0755", "size": 0}`,
		`{"path": "a", "path_b64": "YQ==", "op": "created", "kind": "dir", "mode": "0755", "size": 0}`,
		`{"path": "a", "op": "created", "kind": "dir", "mode": "9999", "size": 0}`,
	} {
		var c Change
		if err := json.Unmarshal([]byte(doc), &c); err == nil {
			t.Errorf("%s read as %+v", doc, c)
		}
	}
}

func TestMirrorPath(t *testing.T) {
	t.Parallel()
	for rel, want := range map[string]string{
		"a/b.txt":        "a/b.txt",
		"a/caf\xe9/x":    "a/.dal-b64-Y2Fm6Q/x",
		"a/.dal-b64-x":   "a/.dal-b64-LmRhbC1iNjQteA",
		"plain/.dal-b64": "plain/.dal-b64",
		"\xff":           ".dal-b64-_w",
	} {
		if got := MirrorPath(rel); got != want {
			t.Errorf("MirrorPath(%q) = %q, want %q", rel, got, want)
		}
	}
}

func TestValidateRenamedFrom(t *testing.T) {
	t.Parallel()
	c := Change{Path: "a", Op: OpCreated, Kind: KindFile, Mode: 0o644, Hash: sha256Of("a"), Size: 1}
	for from, ok := range map[string]bool{"b": true, "d/b": true, "../b": false, "/b": false, "d/../b": false} {
		c.RenamedFrom = from
		err := Validate([]Change{c})
		if (err == nil) != ok || err != nil && !strings.Contains(err.Error(), "renamed_from") {
			t.Errorf("renamed_from %q: %v", from, err)
		}
	}
}
