package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// agentFiles is the workspace the agent of TestCaptureApplyRevert starts
// from.
var agentFiles = map[string]string{
	"modified.txt":     "m\n",
	"deleted.txt":      "d\n",
	"chmod.txt":        "c\n",
	"renamed-from.txt": "rename me\n",
	"tree/a":           "a",
	"tree/sub/b":       "b",
	"tree/sub/c":       "cc",
	"opaque/old.txt":   "o",
	"opaque/keep":      "k",
	"filetodir":        "x",
	"dirtofile/inner":  "i",
	"movedir/f":        "mf",
	"same.txt":         "s",
	"same2.txt":        "same\n",
	"untouched/u.txt":  "u",
	"emptyold/":        "",
}

// agentScript makes every kind of change, then copies what it sees to
// $SEEN (a bound directory).
const agentScript = `set -e
umask 022
echo new > created.txt
echo more >> modified.txt
rm deleted.txt
ln -s created.txt link
mkdir emptydir
chmod 0600 chmod.txt
mv renamed-from.txt renamed-to.txt
rm -r tree
rm -r opaque && mkdir opaque && echo n > opaque/new.txt
rm filetodir && mkdir filetodir && echo c > filetodir/child
rm -r dirtofile && echo f > dirtofile
mv movedir moveddir
touch same.txt
echo same > same2.txt
rmdir emptyold
cp -a . "$SEEN/view"
`

// wantChanges is Capture's answer for agentScript: path op kind mode
// [renamed-from].
var wantChanges = []string{
	"chmod.txt modified file 0600",
	"created.txt created file 0644",
	"deleted.txt deleted file 0644",
	"dirtofile modified file 0644",
	"dirtofile/inner deleted file 0644",
	"emptydir created dir 0755",
	"emptyold deleted dir 0755",
	"filetodir modified dir 0755",
	"filetodir/child created file 0644",
	"link created symlink 0777",
	"modified.txt modified file 0644",
	"moveddir created dir 0755",
	"moveddir/f created file 0644 movedir/f",
	"movedir deleted dir 0755",
	"movedir/f deleted file 0644",
	"opaque/keep deleted file 0644",
	"opaque/new.txt created file 0644",
	"opaque/old.txt deleted file 0644",
	"renamed-from.txt deleted file 0644",
	"renamed-to.txt created file 0644 renamed-from.txt",
	"tree deleted dir 0755",
	"tree/a deleted file 0644",
	"tree/sub deleted dir 0755",
	"tree/sub/b deleted file 0644",
	"tree/sub/c deleted file 0644",
}

func summarize(cs []Change) []string {
	var out []string
	for _, c := range cs {
		s := fmt.Sprintf("%s %s %s %04o", c.Path, c.Op, c.Kind, unixMode(c.Mode))
		if c.RenamedFrom != "" {
			s += " " + c.RenamedFrom
		}
		out = append(out, s)
	}
	return out
}

func diffLists(t *testing.T, what string, got, want []string) {
	t.Helper()
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("%s:\ngot:\n  %s\nwant:\n  %s", what, strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}

// recorded runs agentScript and returns its config, capture and the tree
// hash of what the agent saw.
func recorded(t *testing.T) (Config, []Change, string, string) {
	t.Helper()
	cfg := newConfig(t, agentFiles)
	seen := t.TempDir()
	cfg.WritableBinds = []string{seen}
	pre := hashOf(t, cfg.Workspace)
	if r := run(t, cfg, agentScript, "SEEN="+seen); r.code != 0 {
		t.Fatalf("agent failed: exit %d, %s", r.code, r.stderr)
	}
	if got := hashOf(t, cfg.Workspace); got != pre {
		t.Fatalf("the real workspace changed during the run")
	}
	cs, err := Capture(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cfg, cs, pre, hashOf(t, filepath.Join(seen, "view"))
}

func TestCaptureApplyRevert(t *testing.T) {
	t.Parallel()
	cfg, cs, pre, seen := recorded(t)
	diffLists(t, "changes", summarize(cs), wantChanges)
	if merged, err := TreeHashLayers(Upper(cfg), cfg.Workspace); err != nil || merged != seen {
		t.Errorf("the merged layers hash to %s (%v), the agent saw %s", merged, err, seen)
	}
	if d, _ := Denied(cfg); len(d) != 0 {
		t.Errorf("denied writes in a run that only wrote its workspace: %v", d)
	}

	bundle := t.TempDir()
	diffDir, preDir := filepath.Join(bundle, "fs-diff"), filepath.Join(bundle, "fs-pre")
	if err := Export(cfg, cs, diffDir, preDir); err != nil {
		t.Fatal(err)
	}
	read, err := ReadChanges(filepath.Join(diffDir, "changes.json"))
	if err != nil {
		t.Fatal(err)
	}
	diffLists(t, "changes read back", summarize(read), wantChanges)
	if got := hashOf(t, cfg.Workspace); got != pre {
		t.Fatalf("Export touched the workspace")
	}

	// Restore from the pre-run state: an empty layer.
	layer := filepath.Join(t.TempDir(), "layer")
	if state, err := Restore(cfg.Workspace, preDir, read, layer); err != nil || state != "pre-run" {
		t.Fatalf("Restore before apply: %q, %v", state, err)
	}
	if err := AtPost(cfg.Workspace, read); err == nil {
		t.Errorf("AtPost accepted the pre-run workspace")
	}

	if err := Apply(cfg.Workspace, diffDir, read); err != nil {
		t.Fatal(err)
	}
	if got := hashOf(t, cfg.Workspace); got != seen {
		t.Fatalf("after Apply the workspace hashes to %s, the agent saw %s", got, seen)
	}
	if err := Apply(cfg.Workspace, diffDir, read); err == nil {
		t.Errorf("a second Apply was accepted")
	}

	// Replay from the post-run state: the layer shows the pre-run state,
	// and the same agent makes the same changes.
	layer = filepath.Join(t.TempDir(), "layer")
	if state, err := Restore(cfg.Workspace, preDir, read, layer); err != nil || state != "post-run" {
		t.Fatalf("Restore after apply: %q, %v", state, err)
	}
	if got, _ := TreeHashLayers(layer, cfg.Workspace); got != pre {
		t.Errorf("the replay layer over the workspace hashes to %s, want the pre-run %s", got, pre)
	}
	replay := Config{Workspace: cfg.Workspace, Staging: filepath.Join(t.TempDir(), "staging"), PrivateTmp: true,
		Lower: []string{layer, cfg.Workspace}}
	seen2 := t.TempDir()
	replay.WritableBinds = []string{seen2}
	if r := run(t, replay, agentScript, "SEEN="+seen2); r.code != 0 {
		t.Fatalf("replayed agent failed: exit %d, %s", r.code, r.stderr)
	}
	if got := hashOf(t, filepath.Join(seen2, "view")); got != seen {
		t.Errorf("the replayed agent saw %s, the recorded one %s", got, seen)
	}
	again, err := Capture(replay)
	if err != nil {
		t.Fatal(err)
	}
	diffLists(t, "replayed changes", summarize(again), wantChanges)

	if err := Revert(cfg.Workspace, preDir, read); err != nil {
		t.Fatal(err)
	}
	if got := hashOf(t, cfg.Workspace); got != pre {
		t.Fatalf("after Revert the workspace hashes to %s, want the pre-run %s", got, pre)
	}
	if err := Revert(cfg.Workspace, preDir, read); err == nil {
		t.Errorf("a second Revert was accepted")
	}
}

func TestRevertRefuses(t *testing.T) {
	t.Parallel()
	cfg, cs, _, _ := recorded(t)
	bundle := t.TempDir()
	diffDir, preDir := filepath.Join(bundle, "fs-diff"), filepath.Join(bundle, "fs-pre")
	if err := Export(cfg, cs, diffDir, preDir); err != nil {
		t.Fatal(err)
	}
	ws := cfg.Workspace
	for _, tc := range []struct {
		name   string
		change func() error
		path   string
		why    string
	}{
		{"content", func() error { return os.WriteFile(filepath.Join(ws, "modified.txt"), []byte("other\n"), 0o644) },
			"modified.txt", "its content changed"},
		{"mode", func() error { return os.Chmod(filepath.Join(ws, "chmod.txt"), 0o640) }, "chmod.txt", "its mode is 0640, expected 0600"},
		{"recreated", func() error { return os.WriteFile(filepath.Join(ws, "deleted.txt"), nil, 0o644) },
			"deleted.txt", "it exists and should not"},
		{"removed", func() error { return os.Remove(filepath.Join(ws, "created.txt")) }, "created.txt", "it is missing"},
		{"added in a created directory", func() error { return os.WriteFile(filepath.Join(ws, "emptydir", "x"), nil, 0o644) },
			"emptydir/x", "it was added since"},
		{"symlink retargeted", func() error {
			os.Remove(filepath.Join(ws, "link"))
			return os.Symlink("elsewhere", filepath.Join(ws, "link"))
		}, "link", "its content changed"},
	} {
		if err := Apply(ws, diffDir, cs); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		post := hashOf(t, ws)
		if err := tc.change(); err != nil {
			t.Fatal(err)
		}
		changed := hashOf(t, ws)
		err := Revert(ws, preDir, cs)
		var se *StateError
		if !errors.As(err, &se) || se.Path != tc.path || se.Why != tc.why || se.State != "post-run" {
			t.Fatalf("%s: Revert said %v, want %s: %s", tc.name, err, tc.path, tc.why)
		}
		if hashOf(t, ws) != changed {
			t.Fatalf("%s: the refused Revert changed the workspace", tc.name)
		}
		if _, err := Restore(ws, preDir, cs, filepath.Join(t.TempDir(), "layer")); err == nil ||
			!strings.Contains(err.Error(), "at neither the run's pre-run state") {
			t.Errorf("%s: Restore accepted a workspace at neither state: %v", tc.name, err)
		}
		// Undo the damage, then revert for the next case.
		if err := os.RemoveAll(ws); err != nil {
			t.Fatal(err)
		}
		os.Mkdir(ws, 0o755)
		writeTree(t, ws, agentFiles)
		if err := Apply(ws, diffDir, cs); err != nil {
			t.Fatal(err)
		}
		if hashOf(t, ws) != post {
			t.Fatalf("%s: cannot rebuild the post-run state", tc.name)
		}
		if err := Revert(ws, preDir, cs); err != nil {
			t.Fatal(err)
		}
	}
}
