package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dal-runtime/dal/internal/checkpoint"
	"github.com/dal-runtime/dal/internal/golden"
	ucli "github.com/urfave/cli/v2"
)

// cpApp is dal-exec with the checkpoint command, and a fake-run command
// that ends as record and run do: StoreCheckpoints with CheckpointFlags.
func cpApp(stdout, stderr *bytes.Buffer, run checkpoint.Run, marksDir string) *ucli.App {
	app := App(stdout, stderr)
	has := false
	for _, c := range app.Commands {
		has = has || c.Name == "checkpoint"
	}
	if !has {
		app.Commands = append(app.Commands, CheckpointCommand())
	}
	app.Commands = append(app.Commands, &ucli.Command{
		Name:  "fake-run",
		Flags: CheckpointFlags(),
		Action: func(c *ucli.Context) error {
			if _, err := RetentionFromFlags(c); err != nil {
				return err
			}
			_, err := StoreCheckpoints(c, run, marksDir, c.App.ErrWriter)
			return err
		},
	})
	return app
}

type cpResult struct {
	code           int
	stdout, stderr string
}

// dalExec runs the app as Main does.
func dalExec(t *testing.T, run checkpoint.Run, marksDir string, args ...string) cpResult {
	t.Helper()
	var out, errb bytes.Buffer
	err := cpApp(&out, &errb, run, marksDir).Run(append([]string{"dal-exec"}, args...))
	code := 0
	var ee exitError
	switch {
	case errors.As(err, &ee):
		code = ee.code
	case err != nil:
		errb.WriteString("dal-exec: " + err.Error() + "\n")
		code = 2
	}
	return cpResult{code, out.String(), errb.String()}
}

func TestCheckpointCLI(t *testing.T) {
	store := filepath.Join(t.TempDir(), "store")
	ws := t.TempDir()
	os.MkdirAll(filepath.Join(ws, "out"), 0o755)
	write := func(p, s string) {
		if err := os.WriteFile(filepath.Join(ws, p), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("out/a.md", "alpha")
	write("out/b.md", "beta")
	marksDir := t.TempDir()
	run := checkpoint.Run{ID: "run-1", Workspace: ws, Command: []string{"./agent.sh"}, Mode: "strict",
		Started: time.Now(), Finished: time.Now()}
	t.Setenv(checkpoint.EnvStore, store)
	t.Setenv("DAL_MARKS", marksDir)
	t.Setenv("DAL_WORKSPACE", ws)
	t.Chdir(ws)
	x := func(args ...string) cpResult { t.Helper(); return dalExec(t, run, marksDir, args...) }
	expect := func(r cpResult, code int, stdout, stderr string) {
		t.Helper()
		if r.code != code || !strings.Contains(r.stdout, stdout) || !strings.Contains(r.stderr, stderr) {
			t.Fatalf("exit %d, stdout %q, stderr %q; want exit %d, %q, %q", r.code, r.stdout, r.stderr, code, stdout, stderr)
		}
	}

	// Inside the agent's run: marks.
	expect(x("checkpoint", "save", "phase-plan", "out", "--state", `{"step": 1}`, "--note", "first"), 0, "1\n", "")
	expect(x("checkpoint", "save", "--tag", "good", "phase-build", "out/a.md"), 0, "2\n", "")
	expect(x("checkpoint", "save"), 2, "", "needs a checkpoint name")
	expect(x("checkpoint", "save", "x", "missing.txt"), 2, "", "does not exist")
	expect(x("checkpoint", "save", "x", "--state", "{bad"), 2, "", "the state is not valid JSON")
	expect(x("checkpoint", "save", "x", "--tag", "has space"), 2, "", "without spaces")
	expect(x("checkpoint", "save", "x", "--bogus"), 2, "", "flag --bogus is not defined")

	// The run ends: dal-exec stores the marks.
	expect(x("fake-run", "--checkpoint-max-age", "soon"), 2, "", "--checkpoint-max-age: age \"soon\"")
	expect(x("fake-run"), 0, "", "dal: stored 2 checkpoints of run run-1 in "+store+" (restore: dal-exec checkpoint restore run-1/2)")

	// Outside a run.
	t.Setenv("DAL_MARKS", "")
	r := x("checkpoint", "list")
	expect(r, 0, "ID", "")
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[1], "run-1/2") || !strings.Contains(lines[1], "phase-build") ||
		!strings.Contains(lines[1], "good") || !strings.Contains(lines[1], "1 (5 B)") || !strings.Contains(lines[2], "2 (9 B)") {
		t.Errorf("list:\n%s", r.stdout)
	}
	r = x("checkpoint", "list", "--json", "--run", "run")
	var cs []checkpoint.Checkpoint
	if err := json.Unmarshal([]byte(r.stdout), &cs); err != nil || len(cs) != 2 || cs[1].Note != "first" || cs[0].Run.Command[0] != "./agent.sh" {
		t.Errorf("list --json: %v\n%s", err, r.stdout)
	}
	expect(x("checkpoint", "list", "--tag", "none"), 0, "no checkpoints in "+store, "")
	expect(x("checkpoint", "show", "run-1/1"), 0, `{"step":1}`, "")
	expect(x("checkpoint", "show", "run"), 0, "run-1/2 (phase-build)", "")
	expect(x("checkpoint", "validate"), 0, "2 checkpoints intact", "")

	// Restore into the workspace, flags after the id.
	write("out/a.md", "changed")
	os.Remove(filepath.Join(ws, "out", "b.md"))
	expect(x("checkpoint", "restore", "run-1/1", "--store", store), 0, `{"step":1}`,
		"restored 2 artifacts of checkpoint run-1/1 (phase-plan) into "+ws+": out/a.md, out/b.md")
	for p, want := range map[string]string{"out/a.md": "alpha", "out/b.md": "beta"} {
		if b, _ := os.ReadFile(filepath.Join(ws, p)); string(b) != want {
			t.Errorf("%s = %q after restore", p, b)
		}
	}
	to, stateOut := t.TempDir(), filepath.Join(t.TempDir(), "state.json")
	expect(x("checkpoint", "restore", "--to", to, "--state-out", stateOut, "latest"), 0, "", "state written to "+stateOut)
	if b, _ := os.ReadFile(stateOut); string(b) != "null\n" {
		t.Errorf("state-out: %q", b)
	}
	if b, _ := os.ReadFile(filepath.Join(to, "out", "a.md")); string(b) != "alpha" {
		t.Errorf("restore --to: %q", b)
	}
	expect(x("checkpoint", "restore", "nope/1"), 2, "", `no run "nope"`)
	expect(x("checkpoint", "restore"), 2, "", "restore needs a checkpoint id")

	// Tags, manual saves, prune.
	expect(x("checkpoint", "untag", "run-1/2"), 0, "untagged checkpoint run-1/2", "")
	expect(x("checkpoint", "tag", "run-1/1", "keep"), 0, "tagged checkpoint run-1/1 (phase-plan) keep", "")
	manual := checkpoint.ManualRunID(ws)
	expect(x("checkpoint", "save", "by-hand", "out/b.md"), 0, manual+"/1\n", "saved checkpoint "+manual+"/1 (by-hand): 1 artifact")
	// A checkpoint without state: restore prints nothing, not null
	// (--state-out writes null, above).
	if r := x("checkpoint", "restore", "--to", t.TempDir(), manual+"/1"); r.code != 0 || r.stdout != "" {
		t.Errorf("restore of a checkpoint without state: exit %d, stdout %q, want 0 and nothing", r.code, r.stdout)
	}
	expect(x("checkpoint", "prune", "--keep", "1", "--dry-run"), 0, "would delete run-1/2 (phase-build): beyond the 1 most recent of "+ws, "")
	expect(x("checkpoint", "list", "--run", "run-1"), 0, "run-1/2", "")
	expect(x("checkpoint", "prune", "--keep", "1"), 0, "deleted 1, compressed 0, kept 2", "")
	expect(x("checkpoint", "prune", "--aged", "shred"), 2, "", "--aged: unknown action")

	// Damage: validate names it and exits 1; restore refuses.
	cp, err := (&checkpoint.Store{Dir: store}).Get("run-1/1")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(cp.ArchivePath)
	b[len(b)/2] ^= 1
	os.WriteFile(cp.ArchivePath, b, 0o644)
	expect(x("checkpoint", "validate"), 1, "1 problem; 2 checkpoints checked", "dal-exec: checkpoint run-1/1 is damaged: archive 0001-phase-plan.tar.zst has sha256")
	expect(x("checkpoint", "restore", "run-1/1"), 2, "", "restore an earlier checkpoint")
}

// TestCheckpointHelpGolden pins what a user reads in checkpoint --help.
func TestCheckpointHelpGolden(t *testing.T) {
	for _, args := range [][]string{{"checkpoint", "--help"}, {"checkpoint", "save", "--help"}} {
		r := dalExec(t, checkpoint.Run{}, "", args...)
		if r.code != 0 {
			t.Fatalf("%v exited %d: %s", args, r.code, r.stderr)
		}
		golden.Check(t, filepath.Join("testdata", "help-"+strings.Join(args[:len(args)-1], "-")+".golden"), []byte(r.stdout))
	}
}
