package record

import (
	"os"
	"path/filepath"
	"testing"
)

// The self-contained copy of a workspace keeps symlinks as symlinks (one
// pointing out of the workspace is not followed, its target not copied)
// and leaves out dal's own output.
func TestCopyWorkspaceFollowsNoSymlink(t *testing.T) {
	ws, outside, dst := t.TempDir(), t.TempDir(), t.TempDir()
	os.WriteFile(filepath.Join(outside, "secret"), []byte("host\n"), 0o600)
	os.MkdirAll(filepath.Join(ws, "src"), 0o755)
	os.WriteFile(filepath.Join(ws, "src", "a.txt"), []byte("a\n"), 0o640)
	os.Symlink(outside, filepath.Join(ws, "src", "out"))
	os.Symlink(filepath.Join(outside, "secret"), filepath.Join(ws, "leak"))
	os.MkdirAll(filepath.Join(ws, "run1", "logs"), 0o755)
	os.MkdirAll(filepath.Join(ws, ".run1.partial-x"), 0o755)
	if err := copyWorkspace(ws, dst, "workspace", []string{"run1"}); err != nil {
		t.Fatal(err)
	}
	got := filepath.Join(dst, "workspace")
	if b, err := os.ReadFile(filepath.Join(got, "src", "a.txt")); err != nil || string(b) != "a\n" {
		t.Fatalf("a.txt: %q %v", b, err)
	}
	for _, l := range []string{"src/out", "leak"} {
		fi, err := os.Lstat(filepath.Join(got, l))
		if err != nil || fi.Mode()&os.ModeSymlink == 0 {
			t.Errorf("%s is not copied as a symlink: %v %v", l, fi, err)
		}
	}
	for _, gone := range []string{"run1", ".run1.partial-x"} {
		if _, err := os.Lstat(filepath.Join(got, gone)); err == nil {
			t.Errorf("%s was copied", gone)
		}
	}
	filepath.WalkDir(got, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.Name() == "secret" {
			t.Errorf("the symlink's target was copied: %s", p)
		}
		return err
	})
}
