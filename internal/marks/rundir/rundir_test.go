package rundir

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
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

// Preserve copies every mark and the selection; a symlink the agent
// planted in a mark is copied as a symlink, its target never read, and a
// fifo is left out.
func TestPreserveCopiesNoSymlinkTarget(t *testing.T) {
	t.Parallel()
	ws, dir, dst := t.TempDir(), t.TempDir(), filepath.Join(t.TempDir(), "kept")
	outside := filepath.Join(t.TempDir(), "host-secret")
	os.WriteFile(outside, []byte("only on the host"), 0o600)
	os.WriteFile(filepath.Join(ws, "a.txt"), []byte("a"), 0o644)
	score := 0.5
	m, err := marks.Write(dir, marks.Input{Kind: marks.Iteration, Score: &score, Paths: []string{"a.txt"}, Cwd: ws, Workspace: ws})
	if err != nil {
		t.Fatal(err)
	}
	os.Symlink(outside, filepath.Join(m.Dir, "leak"))
	if err := syscall.Mkfifo(filepath.Join(m.Dir, "pipe"), 0o600); err != nil {
		t.Fatal(err)
	}
	its, err := Select(dir, iterate.DefaultPolicy())
	if err != nil {
		t.Fatal(err)
	}
	if err := its.Preserve(dst); err != nil {
		t.Fatal(err)
	}
	if l, err := os.Readlink(filepath.Join(dst, "0001", "leak")); err != nil || l != outside {
		t.Errorf("leak: %q %v, want the symlink itself", l, err)
	}
	if _, err := os.Lstat(filepath.Join(dst, "0001", "pipe")); err == nil {
		t.Error("the fifo was copied")
	}
	for _, f := range []string{"selection.json", "selection-report.md", "0001/mark.json"} {
		if _, err := os.Stat(filepath.Join(dst, f)); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
	filepath.WalkDir(dst, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if b, _ := os.ReadFile(p); strings.Contains(string(b), "only on the host") {
				t.Errorf("%s holds the host's file", p)
			}
		}
		return err
	})
}

// A plain run's marks directory: the variables name it, FinishIterations
// writes the best iteration's artifacts into the workspace, preserves the
// marks and reports; a run that marked nothing costs nothing.
func TestPlainFinishIterations(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	p, err := NewPlain(ws)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if v := p.Vars(); v[marks.EnvDir] != p.Dir || v[marks.EnvWorkspace] != ws {
		t.Errorf("vars %v", v)
	}
	keep := filepath.Join(t.TempDir(), "kept")
	var log strings.Builder
	if sel, err := p.FinishIterations(iterate.DefaultPolicy(), keep, &log); sel != nil || err != nil {
		t.Errorf("no marks: %+v, %v", sel, err)
	}
	if _, err := os.Stat(keep); err == nil {
		t.Error("no marks, yet the keep directory was made")
	}
	for i, score := range []float64{0.8, 0.3} {
		os.WriteFile(filepath.Join(ws, "out.md"), []byte(fmt.Sprint("draft ", i+1)), 0o644)
		if _, err := marks.Write(p.Dir, marks.Input{Kind: marks.Iteration, Score: &score, Paths: []string{"out.md"}, Cwd: ws, Workspace: ws}); err != nil {
			t.Fatal(err)
		}
	}
	sel, err := p.FinishIterations(iterate.DefaultPolicy(), keep, &log)
	if err != nil || sel == nil || sel.Selected != 1 {
		t.Fatalf("selection %+v, %v", sel, err)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "out.md")); string(b) != "draft 1" {
		t.Errorf("out.md is %q, want the best iteration's", b)
	}
	if !strings.Contains(log.String(), "selected iteration 1") || !strings.Contains(log.String(), filepath.Join(keep, "selection-report.md")) {
		t.Errorf("report %q", log.String())
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p.Dir); err == nil {
		t.Error("Close left the marks directory")
	}
}

// ForSandbox makes the directory writable by an agent running as another
// user (mode 0777 whatever the umask) and mounts it at marks.SandboxDir.
func TestForSandbox(t *testing.T) {
	t.Parallel()
	stage := t.TempDir()
	dir, m, err := ForSandbox(stage)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(dir)
	if err != nil || fi.Mode().Perm() != 0o777 || m.Source != dir || m.Target != marks.SandboxDir || m.ReadOnly {
		t.Errorf("dir %s %v %v, mount %+v", dir, fi.Mode(), err, m)
	}
	if _, _, err := ForSandbox(stage); err == nil {
		t.Error("a second marks directory in the same stage")
	}
}
