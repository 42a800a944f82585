package sandbox

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPlace: files placed after the run are captured, applied and reverted
// like the agent's own writes, including under a directory the agent
// deleted (whose other files stay deleted).
func TestPlace(t *testing.T) {
	t.Parallel()
	cfg := newConfig(t, map[string]string{"out.md": "v0\n", "gone/keep": "k", "gone/x": "x", "plain.txt": "p"})
	pre := hashOf(t, cfg.Workspace)
	script := `set -e
echo final > out.md
rm -r gone
echo later > later.txt
`
	if r := run(t, cfg, script); r.code != 0 {
		t.Fatalf("agent failed: exit %d, %s", r.code, r.stderr)
	}
	place := map[string]string{"out.md": "best\n", "gone/x": "back\n", "new/deep/f.txt": "n\n", "plain.txt": "p"}
	for _, rel := range []string{"out.md", "gone/x", "new/deep/f.txt", "plain.txt"} {
		if err := Place(cfg, rel, strings.NewReader(place[rel]), 0o640); err != nil {
			t.Fatalf("Place %s: %v", rel, err)
		}
	}
	cs, err := Capture(cfg)
	if err != nil {
		t.Fatal(err)
	}
	diffLists(t, "changes", summarize(cs), []string{
		"gone/keep deleted file 0644",
		"gone/x modified file 0640",
		"later.txt created file 0644",
		"new created dir 0755",
		"new/deep created dir 0755",
		"new/deep/f.txt created file 0640",
		"out.md modified file 0640",
		"plain.txt modified file 0640",
	})
	dir := t.TempDir()
	diffDir, preDir := filepath.Join(dir, "fs-diff"), filepath.Join(dir, "fs-pre")
	if err := Export(cfg, cs, diffDir, preDir); err != nil {
		t.Fatal(err)
	}
	if err := Apply(cfg.Workspace, diffDir, cs); err != nil {
		t.Fatal(err)
	}
	for rel, want := range place {
		if b, err := os.ReadFile(filepath.Join(cfg.Workspace, rel)); err != nil || string(b) != want {
			t.Errorf("%s after Apply: %q, %v; want %q", rel, b, err, want)
		}
	}
	if _, err := os.Stat(filepath.Join(cfg.Workspace, "gone/keep")); err == nil {
		t.Errorf("gone/keep came back with the placed gone/x")
	}
	if err := Revert(cfg.Workspace, preDir, cs); err != nil {
		t.Fatal(err)
	}
	if got := hashOf(t, cfg.Workspace); got != pre {
		t.Errorf("after Revert the workspace hashes to %s, want the pre-run %s", got, pre)
	}
}

func TestPlaceRefuses(t *testing.T) {
	t.Parallel()
	cfg := newConfig(t, map[string]string{"a": "a"})
	if r := run(t, cfg, "mkdir d"); r.code != 0 {
		t.Fatalf("agent failed: %s", r.stderr)
	}
	for _, rel := range []string{"", "/etc/passwd", "../x", "a/../../x", "./a", "d"} {
		if err := Place(cfg, rel, strings.NewReader("x"), 0o644); err == nil {
			t.Errorf("Place(%q) was accepted", rel)
		}
	}
}
