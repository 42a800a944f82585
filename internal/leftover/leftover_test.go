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
	past := time.Now().Add(-2 * Grace)
	live := mk("dal-sandbox-live")
	os.Chtimes(live, past, past)
	h, err := Hold(live)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Release()
	// Held by another live process, flock(1).
	other := mk("dal-sandbox-other-process")
	os.Chtimes(other, past, past)
	cmd := exec.Command("flock", other, "sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	for exec.Command("flock", "-n", other, "true").Run() == nil {
		// wait until flock(1) holds it (no sleep: poll the lock itself)
	}

	// A dead process's directory: nobody holds it.
	dead := mk("dal-sandbox-dead")
	os.Chtimes(dead, past, past)
	fresh := mk("dal-sandbox-fresh") // unlocked but just made
	unrelated := mk("other-dir")
	os.Chtimes(unrelated, past, past)

	// A symlink matching the pattern, to a directory outside: never
	// followed, never removed through.
	outside := t.TempDir()
	os.WriteFile(filepath.Join(outside, "keep"), []byte("x"), 0o600)
	os.Chtimes(outside, past, past)
	if err := os.Symlink(outside, filepath.Join(root, "dal-sandbox-link")); err != nil {
		t.Fatal(err)
	}

	got := Sweep(root, "dal-sandbox-*")
	want := map[string]bool{dead: true}
	if len(got) != len(want) {
		t.Fatalf("removed %v, want %v", got, want)
	}
	for _, p := range got {
		if !want[p] {
			t.Fatalf("removed %s", p)
		}
	}
	for _, p := range []string{live, other, fresh, unrelated, filepath.Join(outside, "keep"), filepath.Join(root, "dal-sandbox-link")} {
		if _, err := os.Lstat(p); err != nil {
			t.Errorf("%s is gone: %v", p, err)
		}
	}
	h.Release()
	if got := Sweep(root, "dal-sandbox-live"); len(got) != 1 {
		t.Fatalf("a released directory was not swept: %v", got)
	}
}
