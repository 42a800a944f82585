package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// checkpointList is `dal-exec checkpoint list --json`.
type checkpointList []struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	Tag  string `json:"tag"`
}

func listCheckpoints(t *testing.T, env []string) checkpointList {
	t.Helper()
	r := dalExec(t, env, "checkpoint", "list", "--json")
	if r.code != 0 {
		t.Fatalf("checkpoint list: exit %d\n%s", r.code, r.stderr)
	}
	checkSchema(t, "checkpoint-list.schema.json", r.stdout)
	var l checkpointList
	if err := json.Unmarshal([]byte(r.stdout), &l); err != nil {
		t.Fatalf("checkpoint list --json: %v\n%s", err, r.stdout)
	}
	return l
}

// TestCheckpointsOfACrashedRun: an agent checkpoints two phases and
// crashes; all its checkpoints are stored (a failed run keeps them all),
// validate, and restore the artifacts and state of the phase chosen; a
// damaged archive is named by validate and refused by restore.
func TestCheckpointsOfACrashedRun(t *testing.T) {
	t.Parallel()
	ws := refineWorkspace(t)
	os.WriteFile(filepath.Join(ws, "phases.py"), must(os.ReadFile(filepath.Join("testdata", "refine", "phases.py"))), 0o644)
	store := t.TempDir()
	env := []string{"DAL_KEY=" + filepath.Join(t.TempDir(), "k"), "DAL_CHECKPOINTS=" + store, "PHASES=7", "CRASH_AFTER=6"}
	r := dalExec(t, env, "record", "--keep-env", "PHASES", "--keep-env", "CRASH_AFTER", "--workspace", ws,
		"--out", filepath.Join(t.TempDir(), "b"), "--", "python3", "phases.py")
	if r.code != 3 || !strings.Contains(r.stderr, "stored 6 checkpoints") {
		t.Fatalf("record: exit %d, want the agent's 3 and 6 checkpoints stored\n%s", r.code, r.stderr)
	}
	l := listCheckpoints(t, env)
	if len(l) != 6 {
		t.Fatalf("%d checkpoints listed, want all 6 of the failed run: %+v", len(l), l)
	}
	if r := dalExec(t, env, "checkpoint", "validate"); r.code != 0 {
		t.Errorf("validate: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	var phase2 string
	for _, c := range l {
		if c.Name == "phase-2" {
			phase2 = c.ID
		}
	}
	dest := t.TempDir()
	r = dalExec(t, env, "checkpoint", "restore", phase2, "--to", dest)
	if r.code != 0 {
		t.Fatalf("restore: exit %d\n%s", r.code, r.stderr)
	}
	var state struct {
		Phase int   `json:"phase"`
		Done  []int `json:"done"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &state); err != nil || state.Phase != 2 || len(state.Done) != 2 {
		t.Errorf("restored state %q (%v), want phase 2", r.stdout, err)
	}
	if b, err := os.ReadFile(filepath.Join(dest, "build", "phase-2.txt")); err != nil || string(b) != "output of phase 2\n" {
		t.Errorf("restored build/phase-2.txt: %q %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(dest, "build", "phase-3.txt")); err == nil {
		t.Errorf("phase 3's file restored from phase 2's checkpoint")
	}

	// Damage phase 2's archive: validate names it, restore refuses it.
	archives, _ := filepath.Glob(filepath.Join(store, "*", "0002-*.tar.zst"))
	if len(archives) != 1 {
		t.Fatalf("archives of checkpoint 2: %v", archives)
	}
	b := must(os.ReadFile(archives[0]))
	b[len(b)/2] ^= 0xff
	os.WriteFile(archives[0], b, 0o644)
	r = dalExec(t, env, "checkpoint", "validate")
	if r.code != 1 || !strings.Contains(r.stdout+r.stderr, phase2) || !strings.Contains(r.stdout+r.stderr, "damaged") {
		t.Errorf("validate of a damaged archive: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := dalExec(t, env, "checkpoint", "restore", phase2, "--to", t.TempDir()); r.code == 0 || !strings.Contains(r.stderr, "damaged") {
		t.Errorf("restore of a damaged checkpoint: exit %d\n%s", r.code, r.stderr)
	}
}

// TestCheckpointRetention: a successful run keeps the 5 most recent
// checkpoints of its workspace, and tagged ones forever.
func TestCheckpointRetention(t *testing.T) {
	t.Parallel()
	ws := refineWorkspace(t)
	os.WriteFile(filepath.Join(ws, "phases.py"), must(os.ReadFile(filepath.Join("testdata", "refine", "phases.py"))), 0o644)
	store := t.TempDir()
	env := []string{"DAL_KEY=" + filepath.Join(t.TempDir(), "k"), "DAL_CHECKPOINTS=" + store, "PHASES=8"}
	r := dalExec(t, env, "record", "--keep-env", "PHASES", "--workspace", ws, "--out", filepath.Join(t.TempDir(), "b"), "--", "python3", "phases.py")
	if r.code != 0 {
		t.Fatalf("record: exit %d\n%s", r.code, r.stderr)
	}
	if !strings.Contains(r.stderr, "retention deleted checkpoint") {
		t.Errorf("retention was not reported:\n%s", r.stderr)
	}
	var names []string
	for _, c := range listCheckpoints(t, env) {
		names = append(names, c.Name+"/"+c.Tag)
	}
	want := "phase-8/,phase-7/,phase-6/,phase-5/,phase-4/,phase-1/release"
	if strings.Join(names, ",") != want {
		t.Errorf("kept %v, want %s", names, want)
	}
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}
