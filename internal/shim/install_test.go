package shim

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// installed installs into a fresh base and returns the tree.
func installed(t testing.TB) string {
	t.Helper()
	d, err := installIn(filepath.Join(t.TempDir(), "shims"))
	if err != nil {
		t.Fatal(err)
	}
	return string(d)
}

// firstPyc is a byte-compiled file of the installed Python shim.
func firstPyc(t *testing.T, dir string) string {
	t.Helper()
	m, _ := filepath.Glob(filepath.Join(dir, "python", "__pycache__", "sitecustomize.*.pyc"))
	if len(m) == 0 {
		t.Fatal("no byte-compiled sitecustomize: python3 is needed on PATH for this test (the installer compiles with it)")
	}
	return m[0]
}

// TestInstallReplacesAltered: every way of changing an installed tree is
// noticed by the next Install, which puts the embedded files back.
func TestInstallReplacesAltered(t *testing.T) {
	site := filepath.Join("python", "sitecustomize.py")
	for _, tc := range []struct {
		name   string
		tamper func(t *testing.T, dir string)
	}{
		{"append to sitecustomize.py", func(t *testing.T, dir string) {
			f, err := os.OpenFile(filepath.Join(dir, site), os.O_APPEND|os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			f.WriteString("\nimport os; os.system('touch /tmp/pwned')\n")
			f.Close()
		}},
		{"rewrite a byte-compiled file", func(t *testing.T, dir string) {
			p := firstPyc(t, dir)
			b, _ := os.ReadFile(p)
			b[len(b)-1] ^= 0xff
			os.WriteFile(p, b, 0o644)
		}},
		{"a module shadowing the standard library", func(t *testing.T, dir string) {
			os.WriteFile(filepath.Join(dir, "python", "json.py"), []byte("raise SystemExit\n"), 0o644)
		}},
		{"a symbolic link with the same content", func(t *testing.T, dir string) {
			p := filepath.Join(dir, site)
			b, _ := os.ReadFile(p)
			elsewhere := filepath.Join(t.TempDir(), "site.py")
			os.WriteFile(elsewhere, b, 0o644)
			os.Remove(p)
			os.Symlink(elsewhere, p)
		}},
		{"group-writable", func(t *testing.T, dir string) {
			os.Chmod(filepath.Join(dir, site), 0o664)
		}},
		{"a file removed", func(t *testing.T, dir string) {
			os.Remove(filepath.Join(dir, "node", "dal-register.js"))
		}},
		{"a manifest of an older dal", func(t *testing.T, dir string) {
			os.WriteFile(filepath.Join(dir, completeName), []byte(Digest()+"\n"), 0o644)
		}},
		{"the tree replaced by a link", func(t *testing.T, dir string) {
			copyDir := filepath.Join(t.TempDir(), "copy")
			os.Rename(dir, copyDir)
			os.Symlink(copyDir, dir)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			base := filepath.Join(t.TempDir(), "shims")
			d, err := installIn(base)
			if err != nil {
				t.Fatal(err)
			}
			dir := string(d)
			tc.tamper(t, dir)
			if verify(dir) == nil {
				t.Fatal("the altered tree passes the check")
			}
			d2, err := installIn(base)
			if err != nil {
				t.Fatal(err)
			}
			if string(d2) != dir {
				t.Fatalf("Install moved to %s from %s", d2, dir)
			}
			if err := verify(dir); err != nil {
				t.Fatalf("the reinstalled tree fails the check: %v", err)
			}
			fi, err := os.Lstat(filepath.Join(dir, site))
			if err != nil || !fi.Mode().IsRegular() {
				t.Fatalf("sitecustomize.py after reinstalling: %v, %v", fi, err)
			}
			got, _ := os.ReadFile(filepath.Join(dir, site))
			want, _ := files.ReadFile("python/sitecustomize.py")
			if !bytes.Equal(got, want) {
				t.Errorf("sitecustomize.py is not the embedded one after reinstalling")
			}
			if _, err := os.Stat(filepath.Join(dir, "python", "json.py")); err == nil {
				t.Errorf("the planted module survived")
			}
			entries, _ := os.ReadDir(base)
			for _, e := range entries {
				if strings.HasPrefix(e.Name(), ".extract-") {
					t.Errorf("left behind: %s", e.Name())
				}
			}
		})
	}
}

// TestInstallRemovesForeignCache: byte-compiled files of another Python
// version, written beside the shim by an unsandboxed run, are removed
// without reinstalling the tree.
func TestInstallRemovesForeignCache(t *testing.T) {
	t.Parallel()
	base := filepath.Join(t.TempDir(), "shims")
	d, err := installIn(base)
	if err != nil {
		t.Fatal(err)
	}
	dir := string(d)
	before, _ := os.Stat(filepath.Join(dir, completeName))
	foreign := []string{
		filepath.Join(dir, "python", "__pycache__", "sitecustomize.cpython-399.pyc"),
		filepath.Join(dir, "python", "dal", "__pycache__", "_site.cpython-399.pyc.140234"),
	}
	for _, p := range foreign {
		if err := os.WriteFile(p, []byte("cache"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := installIn(base); err != nil {
		t.Fatal(err)
	}
	for _, p := range foreign {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("%s was kept", p)
		}
	}
	after, _ := os.Stat(filepath.Join(dir, completeName))
	if !os.SameFile(before, after) {
		t.Errorf("the tree was reinstalled for a foreign cache")
	}
	firstPyc(t, dir) // the shim's own cache stays
}

// TestInstallRefusesSharedBase: a base directory others can write, or a
// link, is refused.
func TestInstallRefusesSharedBase(t *testing.T) {
	t.Parallel()
	shared := filepath.Join(t.TempDir(), "shared")
	os.Mkdir(shared, 0o755)
	os.Chmod(shared, 0o777)
	if _, err := installIn(shared); err == nil || !strings.Contains(err.Error(), "writable by others") {
		t.Errorf("a world-writable base: %v", err)
	}
	link := filepath.Join(t.TempDir(), "link")
	os.Symlink(t.TempDir(), link)
	if _, err := installIn(link); err == nil || !strings.Contains(err.Error(), "is not a directory") {
		t.Errorf("a linked base: %v", err)
	}
}

// BenchmarkInstallChecked is the cost each run pays: checking an installed
// tree.
func BenchmarkInstallChecked(b *testing.B) {
	dir := installed(b)
	base := filepath.Dir(dir)
	for b.Loop() {
		if _, err := installIn(base); err != nil {
			b.Fatal(err)
		}
	}
}
