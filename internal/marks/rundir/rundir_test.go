package rundir

import (
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dal-runtime/dal/internal/iterate"
	"github.com/dal-runtime/dal/internal/marks"
)

// TestApplyRefusesAChangedCopy: a copy edited after its mark is not
// applied (the workspace file stays as it was); an intact one is.
func TestApplyRefusesAChangedCopy(t *testing.T) {
	t.Parallel()
	ws, dir := t.TempDir(), t.TempDir()
	for _, f := range []string{"a.txt", "b.txt"} {
		os.WriteFile(filepath.Join(ws, f), []byte("marked "+f), 0o644)
	}
	score := 0.9
	m, err := marks.Write(dir, marks.Input{Kind: marks.Iteration, Score: &score, Paths: []string{"a.txt", "b.txt"}, Cwd: ws, Workspace: ws})
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(m.Dir, m.Artifacts[0].File), []byte("edited later"), 0o644)
	for _, f := range []string{"a.txt", "b.txt"} {
		os.WriteFile(filepath.Join(ws, f), []byte("final "+f), 0o644)
	}
	its, err := Select(dir, iterate.DefaultPolicy())
	if err != nil {
		t.Fatal(err)
	}
	if err := its.Apply(func(rel string, r io.Reader, mode fs.FileMode) error { return writeInto(ws, rel, r, mode) }); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "a.txt")); string(b) != "final a.txt" {
		t.Errorf("a.txt is %q: the changed copy was applied", b)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "b.txt")); string(b) != "marked b.txt" {
		t.Errorf("b.txt is %q, want the marked copy", b)
	}
	if w := strings.Join(its.Selection.Warnings, "\n"); !strings.Contains(w, "copy of a.txt changed after it was marked") {
		t.Errorf("warnings %q", w)
	}
	if ents, _ := os.ReadDir(ws); len(ents) != 2 {
		t.Errorf("the refused write left %d entries in the workspace", len(ents))
	}
}
