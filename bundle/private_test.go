package bundle

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A bundle directory another user can write (here group-writable, as a
// shared directory is) is read from a private copy: a file swapped in it
// after verification never reaches the reader; the replay outcome still
// goes to the bundle itself. A bundle only its owner can write is read in
// place: a small file swapped there (by that owner) is served as Open
// verified it (ReadFile keeps the bytes it hashed), a file read again is
// refused (ReadPrefix checks every byte against the manifest). Not
// parallel: it sets the package's afterVerify hook.
func TestVerifyThenUse(t *testing.T) {
	swap := func(dir string) {
		for rel, data := range map[string]string{"env.json": `{"mode":"swapped"}` + "\n", "fs-pre/a.txt": "swapped\n"} {
			p := filepath.Join(dir, rel)
			if err := os.WriteFile(p+".new", []byte(data), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(p+".new", p); err != nil {
				t.Fatal(err)
			}
		}
	}
	t.Cleanup(func() { afterVerify = nil })

	t.Run("shared", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "run")
		makeBundle(t, dir)
		if err := os.Chmod(filepath.Join(dir, "fs-pre"), 0o775); err != nil {
			t.Fatal(err)
		}
		afterVerify = func(string) { swap(dir) } // the original, after its copy was verified
		b, err := Open(dir, OpenOptions{})
		afterVerify = nil
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		if b.Dir == dir || !strings.HasPrefix(b.Dir, os.TempDir()) {
			t.Fatalf("a group-writable bundle is read in place (%s)", b.Dir)
		}
		if fi, err := os.Stat(b.Dir); err != nil || fi.Mode().Perm() != 0o700 {
			t.Fatalf("the private copy %s: %v %v", b.Dir, fi.Mode(), err)
		}
		var env map[string]any
		if err := b.ReadJSON("env.json", &env); err != nil || env["mode"] != "seeded" {
			t.Errorf("env.json read after the swap: %v %v", env, err)
		}
		if data, err := os.ReadFile(b.File("fs-pre/a.txt")); err != nil || string(data) != "old a\n" {
			t.Errorf("fs-pre/a.txt by path after the swap: %q %v", data, err)
		}
		if err := b.AddSignedReplay(ReplayOutcome{Fidelity: 1}, testKey(2)); err != nil {
			t.Fatal(err)
		}
		if !exists(filepath.Join(dir, ReplaysDir, "0001.json")) || exists(filepath.Join(b.Dir, ReplaysDir, "0001.json")) {
			t.Error("the replay outcome of a copied bundle did not go to the bundle")
		}
		copyDir := b.Dir
		b.Close()
		if exists(copyDir) {
			t.Error("Close left the private copy")
		}
	})

	t.Run("own", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "run")
		makeBundle(t, dir)
		afterVerify = swap
		b, err := Open(dir, OpenOptions{})
		afterVerify = nil
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		if b.Dir != dir {
			t.Fatalf("a bundle only its owner can write was copied to %s", b.Dir)
		}
		var env map[string]any
		if err := b.ReadJSON("env.json", &env); err != nil || env["mode"] != "seeded" {
			t.Errorf("ReadJSON of a swapped env.json: %v (%v), want the verified bytes", env, err)
		}
		data, err := b.ReadPrefix("env.json", 4)
		var be *Error
		if !errors.As(err, &be) || !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "changed after it was verified") {
			t.Errorf("ReadPrefix of a swapped env.json: %q (%v), want a refusal", data, err)
		}
	})

	t.Run("exposed ancestor", func(t *testing.T) {
		parent := filepath.Join(t.TempDir(), "shared")
		if err := os.Mkdir(parent, 0o777); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(parent, 0o777); err != nil { // not sticky: anyone may rename run away
			t.Fatal(err)
		}
		dir := filepath.Join(parent, "run")
		makeBundle(t, dir)
		b, err := Open(dir, OpenOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		if b.Dir == dir {
			t.Error("a bundle in a world-writable, non-sticky directory is read in place")
		}
	})
}

// ReadPrefix returns the head of a file whose whole hash it checked, and
// refuses one that changed since Open.
func TestReadPrefix(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "run")
	makeBundle(t, dir)
	b, err := Open(dir, OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if got, err := b.ReadPrefix("fs-diff/a.txt", 3); err != nil || string(got) != "new" {
		t.Errorf("ReadPrefix = %q, %v", got, err)
	}
	if got, err := b.ReadPrefix("logs/stderr", 3); err != nil || got == nil || len(got) != 0 {
		t.Errorf("ReadPrefix of an empty file = %#v, %v", got, err)
	}
	if err := os.WriteFile(filepath.Join(dir, "fs-diff", "a.txt"), []byte("new b\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := b.ReadPrefix("fs-diff/a.txt", 3); !errors.Is(err, ErrCorrupt) {
		t.Errorf("ReadPrefix of a changed file = %q, %v", got, err)
	}
}
