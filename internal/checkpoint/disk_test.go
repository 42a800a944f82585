package checkpoint

import (
	"crypto/rand"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
)

// tmpfs mounts a small tmpfs (root; these machines and CI are) and
// unmounts it after the test.
func tmpfs(t *testing.T, size string) string {
	t.Helper()
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size="+size); err != nil {
		t.Fatalf("mount a %s tmpfs for the full-disk test (needs root): %v", size, err)
	}
	t.Cleanup(func() { syscall.Unmount(dir, syscall.MNT_DETACH) })
	return dir
}

func TestFullDisk(t *testing.T) {
	t.Parallel()
	big := make([]byte, 256<<10) // incompressible
	rand.Read(big)

	t.Run("ingest", func(t *testing.T) {
		t.Parallel()
		s := newStore(t, &clock{t0})
		s.Dir = filepath.Join(tmpfs(t, "128k"), "store")
		ws := workspace(t, map[string]string{"small": "s", "big": string(big)}, nil)
		// The first checkpoint fits, a second with the big file does not.
		if _, err := s.Ingest(Run{ID: "r", Workspace: ws}, writeMarks(t, ws, mark{name: "small", paths: []string{"small"}})); err != nil {
			t.Fatal(err)
		}
		before := snapshot(t, s.Dir)
		ms := writeMarks(t, ws, mark{name: "big", paths: []string{"big"}})
		_, err := s.Ingest(Run{ID: "r", Workspace: ws}, ms)
		if !errors.Is(err, ErrDiskFull) || !strings.Contains(err.Error(), "free space there and try again") {
			t.Fatalf("Ingest on a full disk: %v", err)
		}
		if got := snapshot(t, s.Dir); !reflect.DeepEqual(got, before) {
			t.Errorf("the store changed: %d files, was %d", len(got), len(before))
		}
		_, err = s.Ingest(Run{ID: "r2", Workspace: ws}, ms)
		if !errors.Is(err, ErrDiskFull) {
			t.Fatalf("Ingest of a new run on a full disk: %v", err)
		}
		if _, err := os.Stat(filepath.Join(s.Dir, "r2")); !os.IsNotExist(err) {
			t.Errorf("a failed new run left its directory: %v", err)
		}
		if rep, err := s.Check(); err != nil || len(rep.Damaged) != 0 || rep.Checked != 1 {
			t.Errorf("Check = %+v %v", rep, err)
		}
	})

	t.Run("restore", func(t *testing.T) {
		t.Parallel()
		s := newStore(t, &clock{t0})
		ws := workspace(t, map[string]string{"a/small": "s", "b/big": string(big)}, nil)
		ingest(t, s, Run{ID: "r"}, ws, "all")
		dest := tmpfs(t, "64k")
		os.MkdirAll(filepath.Join(dest, "a"), 0o755)
		os.WriteFile(filepath.Join(dest, "a", "small"), []byte("old"), 0o644)
		before := snapshot(t, dest)
		_, err := s.Restore("r/1", dest, RestoreOptions{})
		if !errors.Is(err, ErrDiskFull) || !strings.Contains(err.Error(), "cannot restore into "+dest) {
			t.Fatalf("Restore on a full disk: %v", err)
		}
		if got := snapshot(t, dest); !reflect.DeepEqual(got, before) {
			t.Errorf("the destination changed: %v", got)
		}
		if ents, _ := os.ReadDir(dest); len(ents) != 1 {
			t.Errorf("staging left behind: %v", ents)
		}
	})

	t.Run("read-only destination", func(t *testing.T) {
		t.Parallel()
		s := newStore(t, &clock{t0})
		ingest(t, s, Run{ID: "r"}, workspace(t, map[string]string{"a": "a"}, nil), "one")
		dest := tmpfs(t, "64k")
		if err := syscall.Mount("", dest, "", syscall.MS_REMOUNT|syscall.MS_RDONLY, ""); err != nil {
			t.Fatalf("remount read-only: %v", err)
		}
		_, err := s.Restore("r/1", dest, RestoreOptions{})
		if err == nil || !strings.Contains(err.Error(), "cannot restore into "+dest) || !strings.Contains(err.Error(), "read-only file system") {
			t.Fatalf("Restore into a read-only directory: %v", err)
		}
	})
}
