package sandbox

import (
	"fmt"
	"io/fs"
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

// TestPlacePlantedLinks: the agent plants symlinks to host paths where
// Place will write (its temporary name, the target, a parent directory);
// Place writes the workspace's capture layer only, and nothing on the host
// changes (issue 12, attack 1).
func TestPlacePlantedLinks(t *testing.T) {
	t.Parallel()
	host := t.TempDir()
	hostFile := filepath.Join(host, "authorized_keys")
	if err := os.WriteFile(hostFile, []byte("host\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	hostDir := filepath.Join(host, "dir")
	if err := os.Mkdir(hostDir, 0o700); err != nil {
		t.Fatal(err)
	}
	cfg := newConfig(t, map[string]string{"report.md": "v0\n", "notes.md": "n\n", "sub/x": "x"})
	script := `set -e
ln -s ` + hostFile + ` report.md.dal-place
ln -s ` + hostFile + ` notes.md.dal-place
rm notes.md && ln -s ` + hostFile + ` notes.md
ln -s ` + hostDir + ` out
rm -r sub && ln -s ` + hostDir + ` sub
`
	if r := run(t, cfg, script); r.code != 0 {
		t.Fatalf("agent failed: exit %d, %s", r.code, r.stderr)
	}
	before := snapshotTree(t, host)
	for _, rel := range []string{"report.md", "notes.md", "out/report.md", "sub/x"} {
		if err := Place(cfg, rel, strings.NewReader("placed "+rel+"\n"), 0o644); err != nil {
			t.Errorf("Place %s: %v", rel, err)
		}
	}
	if after := snapshotTree(t, host); after != before {
		t.Errorf("Place changed the host:\nbefore %s\nafter  %s", before, after)
	}
	for _, rel := range []string{"report.md", "notes.md", "out/report.md", "sub/x"} {
		b, err := os.ReadFile(filepath.Join(Upper(cfg), rel))
		if err != nil || string(b) != "placed "+rel+"\n" {
			t.Errorf("%s in the capture layer: %q, %v", rel, b, err)
		}
	}
	if l, err := os.Readlink(filepath.Join(Upper(cfg), "report.md.dal-place")); err != nil || l != hostFile {
		t.Errorf("the agent's own report.md.dal-place is %q, %v; want it left as the agent made it", l, err)
	}
}

// snapshotTree describes every entry under dir (kind, mode, size,
// content, mtime) in one string.
func snapshotTree(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, "%s %v %d %d", p, fi.Mode(), fi.Size(), fi.ModTime().UnixNano())
		if fi.Mode().IsRegular() {
			c, _ := os.ReadFile(p)
			fmt.Fprintf(&b, " %q", c)
		}
		b.WriteString("; ")
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}
