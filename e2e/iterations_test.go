package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// selection is the part of iterations/selection.json the tests read.
type selection struct {
	Iterations []struct {
		Seq    int      `json:"iteration"`
		Score  *float64 `json:"quality_score"`
		Source string   `json:"score_source"`
	} `json:"iterations"`
	Best, Final, Selected int
	Override, Accepted    bool
	Rationale             []string
	Degradation           []struct {
		Iteration int
		Kind      string
	}
	Applied []string
}

func readSelection(t *testing.T, path string) selection {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var s selection
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return s
}

// refineWorkspace is a new workspace holding the refine agents.
func refineWorkspace(t *testing.T) string {
	t.Helper()
	ws := t.TempDir()
	for _, f := range []string{"refine.sh", "refine.py", "refine.js"} {
		b, err := os.ReadFile(filepath.Join("testdata", "refine", f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(ws, f), b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return ws
}

// TestBestIterationIsApplied: an agent whose iteration 2 of 3 scores best
// ends with iteration 2's artifacts in the workspace, every iteration
// preserved in the bundle, a report saying why, an exact replay (which
// selects again) and a revert that undoes it all.
func TestBestIterationIsApplied(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		argv []string
	}{
		{"shell", []string{"sh", "refine.sh"}},
		{"python", []string{"python3", "refine.py"}},
		{"node", []string{"node", "refine.js"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ws := refineWorkspace(t)
			out := filepath.Join(t.TempDir(), "b")
			env := []string{"DAL_KEY=" + filepath.Join(t.TempDir(), "k"), "DAL_EXEC=" + bin.exec}
			r := dalExec(t, env, append([]string{"record", "--keep-env", "DAL_EXEC", "--workspace", ws, "--out", out, "--"}, c.argv...)...)
			if r.code != 0 {
				t.Fatalf("record: exit %d\n%s", r.code, r.stderr)
			}
			if got, _ := os.ReadFile(filepath.Join(ws, "out", "report.md")); string(got) != "draft 2\n" {
				t.Errorf("out/report.md is %q, want iteration 2's %q", got, "draft 2\n")
			}
			if !strings.Contains(r.stderr, "selected iteration 2") {
				t.Errorf("record did not say which iteration it selected:\n%s", r.stderr)
			}
			s := readSelection(t, filepath.Join(out, "iterations", "selection.json"))
			if len(s.Iterations) != 3 || s.Best != 2 || s.Final != 3 || s.Selected != 2 || s.Override || !s.Accepted {
				t.Errorf("selection %+v: want 3 iterations, best = selected = 2, final 3, accepted", s)
			}
			if !strings.Contains(strings.Join(s.Applied, ","), "out/report.md") {
				t.Errorf("applied %v, want out/report.md", s.Applied)
			}
			for i := 1; i <= 3; i++ {
				b, err := os.ReadFile(filepath.Join(out, "iterations", "000"+string(rune('0'+i)), "files", "0"))
				if err != nil || !strings.HasPrefix(string(b), "draft "+string(rune('0'+i))) && !strings.HasPrefix(string(b), "notes of draft") {
					t.Errorf("iteration %d's artifact not preserved: %q %v", i, b, err)
				}
			}
			rep, err := os.ReadFile(filepath.Join(out, "iterations", "selection-report.md"))
			if err != nil || !strings.Contains(string(rep), "Iteration 2 selected because:") ||
				!strings.Contains(string(rep), "iteration 2 has the highest quality score") {
				t.Errorf("selection report does not explain the choice (%v):\n%s", err, rep)
			}
			if r := dalExec(t, env, "replay", "--workspace", ws, out); r.code != 0 || !strings.Contains(r.stdout, "ok     iterations") {
				t.Errorf("replay: exit %d\n%s%s", r.code, r.stdout, r.stderr)
			}
			if r := dalExec(t, env, "revert", "--workspace", ws, out); r.code != 0 {
				t.Fatalf("revert: exit %d\n%s", r.code, r.stderr)
			}
			if _, err := os.Stat(filepath.Join(ws, "out")); err == nil {
				t.Errorf("revert left out/ behind")
			}
		})
	}
}

// TestIterationOverride: --use needs a reason; with one, the chosen
// iteration is applied, the override is logged and reported, and replay
// selects the same way.
func TestIterationOverride(t *testing.T) {
	t.Parallel()
	ws := refineWorkspace(t)
	env := []string{"DAL_KEY=" + filepath.Join(t.TempDir(), "k"), "DAL_EXEC=" + bin.exec}
	out := filepath.Join(t.TempDir(), "b")
	r := dalExec(t, env, "record", "--use", "final", "--keep-env", "DAL_EXEC", "--workspace", ws, "--out", out, "--", "sh", "refine.sh")
	if r.code != 2 || !strings.Contains(r.stderr, "--reason") {
		t.Fatalf("--use final without a reason: exit %d, want 2 asking for --reason\n%s", r.code, r.stderr)
	}
	r = dalExec(t, env, "record", "--use", "final", "--reason", "the reviewer prefers the last wording",
		"--keep-env", "DAL_EXEC", "--workspace", ws, "--out", out, "--", "sh", "refine.sh")
	if r.code != 0 {
		t.Fatalf("record: exit %d\n%s", r.code, r.stderr)
	}
	if got, _ := os.ReadFile(filepath.Join(ws, "out", "report.md")); string(got) != "draft 3\n" {
		t.Errorf("out/report.md is %q, want the final iteration's", got)
	}
	if !strings.Contains(r.stderr, "selection override: --use final (the reviewer prefers the last wording)") {
		t.Errorf("the override was not logged:\n%s", r.stderr)
	}
	s := readSelection(t, filepath.Join(out, "iterations", "selection.json"))
	if s.Selected != 3 || s.Best != 2 || !s.Override || !strings.Contains(strings.Join(s.Rationale, " "), "the reviewer prefers the last wording") {
		t.Errorf("selection %+v: want iteration 3 selected over the best 2, with the reason", s)
	}
	if r := dalExec(t, env, "replay", "--workspace", ws, out); r.code != 0 {
		t.Errorf("replay: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// TestIterationDegradation: a drop over 0.05 and two drops in a row are
// flagged; a selected score under the threshold is said to be unaccepted.
func TestIterationDegradation(t *testing.T) {
	t.Parallel()
	ws := refineWorkspace(t)
	env := []string{"DAL_KEY=" + filepath.Join(t.TempDir(), "k"), "DAL_EXEC=" + bin.exec}
	out := filepath.Join(t.TempDir(), "b")
	r := dalExec(t, env, "record", "--keep-env", "DAL_EXEC", "--workspace", ws, "--out", out, "--", "sh", "refine.sh", "0.6", "0.5", "0.48")
	if r.code != 0 {
		t.Fatalf("record: exit %d\n%s", r.code, r.stderr)
	}
	for _, want := range []string{"degradation at iteration 2: quality dropped by 0.10", "degradation at iteration 3: quality dropped in 2 iterations in a row", "below the acceptance threshold 0.70"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, r.stderr)
		}
	}
	s := readSelection(t, filepath.Join(out, "iterations", "selection.json"))
	if s.Selected != 1 || s.Accepted || len(s.Degradation) != 2 {
		t.Errorf("selection %+v: want iteration 1, not accepted, two degradation flags", s)
	}
}

// TestIterationUnderRun: dal-exec run selects and applies too, and keeps
// the iterations where --iterations-dir says.
func TestIterationUnderRun(t *testing.T) {
	t.Parallel()
	ws := refineWorkspace(t)
	keep := filepath.Join(t.TempDir(), "its")
	cmd := exec.Command(bin.exec, "run", "--keep-env", "DAL_EXEC", "--iterations-dir", keep, "--", "sh", "refine.sh")
	cmd.Dir = ws
	cmd.Env = append(os.Environ(), "DAL_EXEC="+bin.exec)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("run: %v\n%s", err, out)
	}
	if got, _ := os.ReadFile(filepath.Join(ws, "out", "report.md")); string(got) != "draft 2\n" {
		t.Errorf("out/report.md is %q, want iteration 2's", got)
	}
	if s := readSelection(t, filepath.Join(keep, "selection.json")); s.Selected != 2 {
		t.Errorf("selected %d, want 2", s.Selected)
	}
	for _, d := range []string{"0001", "0002", "0003"} {
		if _, err := os.Stat(filepath.Join(keep, d, "mark.json")); err != nil {
			t.Errorf("iteration %s not kept: %v", d, err)
		}
	}
}

// TestIterationBadInput: outside a run, a score out of range, a missing
// artifact: exit 2 with one sentence, and nothing marked.
func TestIterationBadInput(t *testing.T) {
	t.Parallel()
	r := dalExec(t, []string{"DAL_MARKS="}, "iteration", "--score", "0.5")
	if r.code != 2 || !strings.Contains(r.stderr, "DAL_MARKS is not set") {
		t.Errorf("outside a run: exit %d\n%s", r.code, r.stderr)
	}
	marksDir := t.TempDir()
	ws := t.TempDir()
	os.WriteFile(filepath.Join(ws, "a.txt"), []byte("a"), 0o644)
	env := []string{"DAL_MARKS=" + marksDir, "DAL_WORKSPACE=" + ws}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--score", "1.5", filepath.Join(ws, "a.txt")}, "must be a number in [0, 1]"},
		{[]string{"--score", "high"}, "is not a number"},
		{[]string{"--dim", "validation"}, "expected NAME=VALUE"},
		{[]string{"--score", "0.5", filepath.Join(ws, "missing.txt")}, "does not exist"},
	} {
		r := dalExec(t, env, append([]string{"iteration"}, c.args...)...)
		if r.code != 2 || !strings.Contains(r.stderr, c.want) || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
			t.Errorf("iteration %v: exit %d, want 2 and one line with %q:\n%s", c.args, r.code, c.want, r.stderr)
		}
	}
	if ents, _ := os.ReadDir(filepath.Join(marksDir, "iterations")); len(ents) != 0 {
		t.Errorf("bad input left %d iteration directories", len(ents))
	}
	if r := dalExec(t, env, "iteration", "--score", "0.5", filepath.Join(ws, "a.txt")); r.code != 0 || strings.TrimSpace(r.stdout) != "1" {
		t.Errorf("a good mark after the bad ones: exit %d, printed %q, want 1", r.code, r.stdout)
	}
}

// TestDiffComparesIterations: dal-exec diff of two runs whose agents
// scored their iterations differently names the first difference.
func TestDiffComparesIterations(t *testing.T) {
	t.Parallel()
	env := []string{"DAL_KEY=" + filepath.Join(t.TempDir(), "k"), "DAL_EXEC=" + bin.exec}
	var outs []string
	for _, scores := range [][]string{{"0.72", "0.85", "0.83"}, {"0.72", "0.90", "0.83"}} {
		out := filepath.Join(t.TempDir(), "b")
		args := append([]string{"record", "--no-apply", "--keep-env", "DAL_EXEC", "--workspace", refineWorkspace(t), "--out", out, "--", "sh", "refine.sh"}, scores...)
		if r := dalExec(t, env, args...); r.code != 0 {
			t.Fatalf("record: exit %d\n%s", r.code, r.stderr)
		}
		outs = append(outs, out)
	}
	r := dalExec(t, env, "diff", outs[0], outs[1])
	if r.code != 1 || !strings.Contains(r.stdout, "iteration 2: first bundle score 0.85") {
		t.Errorf("diff: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}
