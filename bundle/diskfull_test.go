package bundle

import (
	"crypto/rand"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// smallDisk mounts a 64 KiB tmpfs (16 pages) for the test.
func smallDisk(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "size=64k,mode=0755"); err != nil {
		t.Fatalf("mounting a small tmpfs (the test needs root): %v", err)
	}
	t.Cleanup(func() { unix.Unmount(dir, unix.MNT_DETACH) })
	return dir
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	rand.Read(b)
	return b
}

// TestDiskFull: a full disk while committing gives a clear error and
// leaves neither a bundle nor a staging directory.
func TestDiskFull(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		out   string
		write func(w *Writer) error
		m     func(m *Manifest)
	}{
		// The components fit; manifest.json (20 KiB of prompt) does not.
		{"manifest.json", "run", func(w *Writer) error { return w.WriteFile("logs/stdout", randomBytes(44<<10)) },
			func(m *Manifest) { m.Inputs.UserPrompt = strings.Repeat("p", 20<<10) }},
		// The staging directory fits; the archive of it does not.
		{"archive", "run.tar.zst", func(w *Writer) error { return w.WriteFile("logs/stdout", randomBytes(36<<10)) }, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			disk := smallDisk(t)
			out := filepath.Join(disk, c.out)
			w, err := Create(out)
			if err != nil {
				t.Fatal(err)
			}
			if err := c.write(w); err != nil {
				t.Fatalf("the components should fit: %v", err)
			}
			m := fullManifest()
			if c.m != nil {
				c.m(m)
			}
			err = w.Commit(m, testKey(1))
			if err == nil {
				t.Fatal("Commit on a full disk succeeded")
			}
			if !errors.Is(err, syscall.ENOSPC) || !strings.Contains(err.Error(), "the disk is full") || !strings.Contains(err.Error(), out) {
				t.Fatalf("error %q is not a clear full-disk sentence naming %s", err, out)
			}
			t.Log(err)
			if ents, _ := os.ReadDir(disk); len(ents) != 0 {
				t.Fatalf("left on the disk: %v", ents)
			}
		})
	}
}

// TestDiskFullWriteFile: a component that does not fit is a clear error;
// Abort then leaves nothing.
func TestDiskFullWriteFile(t *testing.T) {
	t.Parallel()
	disk := smallDisk(t)
	out := filepath.Join(disk, "run")
	w, err := Create(out)
	if err != nil {
		t.Fatal(err)
	}
	err = w.WriteFile("fs-pre/big", randomBytes(100<<10))
	if !errors.Is(err, syscall.ENOSPC) || !strings.Contains(err.Error(), "the disk is full (writing fs-pre/big") {
		t.Fatalf("WriteFile on a full disk: %v", err)
	}
	if err := w.Abort(); err != nil {
		t.Fatal(err)
	}
	if ents, _ := os.ReadDir(disk); len(ents) != 0 {
		t.Fatalf("left on the disk: %v", ents)
	}
}
