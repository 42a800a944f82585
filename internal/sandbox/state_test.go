package sandbox

import (
	"bytes"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/dal-runtime/dal/internal/digest"
	"github.com/dal-runtime/dal/internal/golden"
)

var (
	hashA = digest.Bytes([]byte("a"))
	hashB = digest.Bytes([]byte("b"))
)

// sampleChanges has one of each shape.
var sampleChanges = []Change{
	{Path: "bin/run", Op: OpModified, Kind: KindFile, Mode: 0o755 | fs.ModeSetuid, Hash: hashB, Size: 1,
		Pre: &Entry{Kind: KindFile, Mode: 0o644, Hash: hashA, Size: 1}},
	{Path: "empty", Op: OpCreated, Kind: KindDir, Mode: 0o750},
	{Path: "link", Op: OpCreated, Kind: KindSymlink, Mode: 0o777, Hash: digest.Bytes([]byte("../x")), Size: 4, LinkTarget: "../x"},
	{Path: "new.txt", Op: OpCreated, Kind: KindFile, Mode: 0o644, Hash: hashA, Size: 1, RenamedFrom: "old.txt"},
	{Path: "old.txt", Op: OpDeleted, Kind: KindFile, Mode: 0o600, Hash: hashA, Size: 1},
}

func TestChangesGolden(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "changes.json")
	if err := WriteChanges(file, sampleChanges); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(file)
	goldenFile := filepath.Join("testdata", "changes.golden.json")
	if golden.Update() {
		os.MkdirAll("testdata", 0o755)
		if err := os.WriteFile(goldenFile, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(goldenFile)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("changes.json differs from %s:\n%s", goldenFile, got)
	}
	back, err := ReadChanges(file)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, sampleChanges) {
		t.Errorf("read back %+v, want %+v", back, sampleChanges)
	}
}

func TestValidate(t *testing.T) {
	t.Parallel()
	file := Change{Path: "a", Op: OpCreated, Kind: KindFile, Mode: 0o644, Hash: hashA, Size: 1}
	with := func(f func(*Change)) []Change {
		c := file
		f(&c)
		return []Change{c}
	}
	for _, tc := range []struct {
		name    string
		changes []Change
		want    string
	}{
		{"ok", []Change{file}, ""},
		{"absolute", with(func(c *Change) { c.Path = "/etc/passwd" }), "not a clean relative path"},
		{"parent", with(func(c *Change) { c.Path = "../x" }), "not a clean relative path"},
		{"inner parent", with(func(c *Change) { c.Path = "a/../../x" }), "not a clean relative path"},
		{"dot", with(func(c *Change) { c.Path = "." }), "not a clean relative path"},
		{"empty", with(func(c *Change) { c.Path = "" }), "not a clean relative path"},
		{"twice", []Change{file, file}, "listed twice"},
		{"bad op", with(func(c *Change) { c.Op = "moved" }), `unknown operation "moved"`},
		{"bad kind", with(func(c *Change) { c.Kind = "fifo" }), `unknown kind "fifo"`},
		{"bad hash", with(func(c *Change) { c.Hash = "md5:00" }), "is not sha256"},
		{"short hash", with(func(c *Change) { c.Hash = hashA[:len(hashA)-1] }), "is not sha256"},
		{"long hash", with(func(c *Change) { c.Hash = hashA + "0" }), "is not sha256"},
		{"upper-case hash", with(func(c *Change) { c.Hash = "sha256:" + strings.ToUpper(hashA[7:]) }), "is not sha256"},
		{"not hex", with(func(c *Change) { c.Hash = "sha256:" + strings.Repeat("g", 64) }), "is not sha256"},
		{"mode bits", with(func(c *Change) { c.Mode |= fs.ModeDir }), "more than permission bits"},
		{"modified without pre", with(func(c *Change) { c.Op = OpModified }), "needs its pre-run entry"},
		{"created with pre", with(func(c *Change) { c.Pre = &Entry{Kind: KindDir} }), "only a modification"},
		{"symlink hash", with(func(c *Change) { c.Kind, c.LinkTarget = KindSymlink, "elsewhere" }), "does not match its hash"},
	} {
		err := Validate(tc.changes)
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}

func TestReadChangesBadFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for name, body := range map[string]string{
		"truncated.json": `[{"path":"a","op":"created"`,
		"mode.json":      `[{"path":"a","op":"created","kind":"dir","mode":"rwx"}]`,
		"escape.json":    `[{"path":"../a","op":"created","kind":"dir","mode":"0755"}]`,
	} {
		p := filepath.Join(dir, name)
		os.WriteFile(p, []byte(body), 0o644)
		_, err := ReadChanges(p)
		if err == nil || !strings.Contains(err.Error(), p) {
			t.Errorf("%s: %v, want an error naming the file", name, err)
		}
	}
}

func FuzzReadChanges(f *testing.F) {
	b, _ := json.Marshal(sampleChanges)
	f.Add(b)
	f.Add([]byte(`[{"path":"a/b","op":"deleted","kind":"dir","mode":"0755"}]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var cs []Change
		if json.Unmarshal(data, &cs) != nil || Validate(cs) != nil {
			return
		}
		again, err := json.Marshal(cs)
		if err != nil {
			t.Fatal(err)
		}
		var back []Change
		if err := json.Unmarshal(again, &back); err != nil || Validate(back) != nil || !reflect.DeepEqual(back, cs) && len(cs) > 0 {
			t.Fatalf("a valid list does not round-trip: %s", again)
		}
	})
}
