package leftover

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

func TestSweepRemovesOnlyAbandonedDirectories(t *testing.T) {
	root := t.TempDir()
	mk := func(name string) string {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Join(p, "sub"), 0o700); err != nil {
			t.Fatal(err)
		}
		return p
	}
	live := mk("dal-sandbox-live")
	h, err := Hold(live)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Release()

	// A dead process's directory: its lock file exists, nobody holds it.
	dead := mk("dal-sandbox-dead")
	cmd := exec.Command("flock", filepath.Join(dead, LockFile), "true")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("flock(1): %v %s", err, out)
	}
	fresh := mk("dal-sandbox-fresh") // no lock yet, just made
	old := mk("dal-sandbox-old")     // no lock, older than Grace
	past := time.Now().Add(-2 * Grace)
	os.Chtimes(old, past, past)
	other := mk("other-dir")
	os.Chtimes(other, past, past)

	// A symlink matching the pattern, to a directory outside: never
	// followed, never removed through.
	outside := t.TempDir()
	os.WriteFile(filepath.Join(outside, "keep"), []byte("x"), 0o600)
	os.Chtimes(outside, past, past)
	if err := os.Symlink(outside, filepath.Join(root, "dal-sandbox-link")); err != nil {
		t.Fatal(err)
	}

	got := Sweep(root, "dal-sandbox-*")
	want := map[string]bool{dead: true, old: true}
	if len(got) != len(want) {
		t.Fatalf("removed %v, want %v", got, want)
	}
	for _, p := range got {
		if !want[p] {
			t.Fatalf("removed %s", p)
		}
	}
	for _, p := range []string{live, fresh, other, filepath.Join(outside, "keep"), filepath.Join(root, "dal-sandbox-link")} {
		if _, err := os.Lstat(p); err != nil {
			t.Errorf("%s is gone: %v", p, err)
		}
	}
	h.Release()
	if got := Sweep(root, "dal-sandbox-live"); len(got) != 1 {
		t.Fatalf("a released directory was not swept: %v", got)
	}
}
