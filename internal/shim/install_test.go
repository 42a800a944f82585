package shim

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
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
		{"a file rewritten with its size and times kept", func(t *testing.T, dir string) {
			p := filepath.Join(dir, site)
			fi, _ := os.Stat(p)
			b, _ := os.ReadFile(p)
			b[0] ^= 0x20
			os.WriteFile(p, b, 0o644)
			os.Chtimes(p, fi.ModTime(), fi.ModTime())
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
			// The second Install checks in full and seals the tree.
			if _, err := installIn(base); err != nil {
				t.Fatal(err)
			}
			if err := sealed(dir, 0); err != nil {
				t.Fatalf("the untouched tree is not as sealed: %v", err)
			}
			tc.tamper(t, dir)
			if sealed(dir, 0) == nil {
				t.Fatal("the altered tree passes the seal's check")
			}
			if _, err := verify(dir); err == nil {
				t.Fatal("the altered tree passes the check")
			}
			d2, err := installIn(base)
			if err != nil {
				t.Fatal(err)
			}
			if string(d2) != dir {
				t.Fatalf("Install moved to %s from %s", d2, dir)
			}
			if _, err := verify(dir); err != nil {
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

// TestInstallPrunesOldBuilds: a build installing its tree removes the
// trees (and seals) of other builds installed more than a day ago, except
// the three newest; a younger tree, a directory not named as a tree, and
// a link named as one are left, and nothing is removed through a link.
func TestInstallPrunesOldBuilds(t *testing.T) {
	t.Parallel()
	base := filepath.Join(t.TempDir(), "shims")
	outside := t.TempDir()
	victim := filepath.Join(outside, "victim")
	if err := os.WriteFile(victim, []byte("keep"), 0o644); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	tree := func(name string, age time.Duration) string {
		p := filepath.Join(base, name)
		if err := os.MkdirAll(filepath.Join(p, "python"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(victim, filepath.Join(p, "python", "link")); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(base, "."+name+".seal"), []byte("seal"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, now.Add(-age), now.Add(-age)); err != nil {
			t.Fatal(err)
		}
		return p
	}
	young := tree("00000000000000a1", time.Hour)
	kept1 := tree("00000000000000b2", 72*time.Hour)
	kept2 := tree("00000000000000c3", 96*time.Hour)
	gone1 := tree("00000000000000d4", 120*time.Hour)
	gone2 := tree("00000000000000e5", 144*time.Hour)
	other := tree("not-a-tree", 500*time.Hour)
	link := filepath.Join(base, "00000000000000f6")
	if err := os.Symlink(outside, link); err != nil {
		t.Fatal(err)
	}
	os.Chtimes(outside, now.Add(-500*time.Hour), now.Add(-500*time.Hour))

	d, err := installIn(base)
	if err != nil {
		t.Fatal(err)
	}
	firstPyc(t, string(d))
	for _, p := range []string{young, kept1, kept2, other} {
		if _, err := os.Stat(filepath.Join(p, "python")); err != nil {
			t.Errorf("%s was removed: %v", p, err)
		}
	}
	for _, p := range []string{gone1, gone2} {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("%s was kept", p)
		}
		if _, err := os.Lstat(filepath.Join(base, "."+filepath.Base(p)+".seal")); err == nil {
			t.Errorf("the seal of %s was kept", p)
		}
	}
	if _, err := os.Lstat(filepath.Join(base, ".00000000000000b2.seal")); err != nil {
		t.Errorf("a kept tree's seal was removed: %v", err)
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the link named as a tree: %v", err)
	}
	if b, err := os.ReadFile(victim); err != nil || string(b) != "keep" {
		t.Errorf("a file behind a link was touched: %q %v", b, err)
	}

	// The next runs take the installed tree: nothing more is pruned.
	os.Chtimes(young, now.Add(-200*time.Hour), now.Add(-200*time.Hour))
	if _, err := installIn(base); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(young); err != nil {
		t.Errorf("a run of an installed build pruned: %v", err)
	}
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

// TestSealTrustsOnlyItself: a seal vouches for a tree only when it is the
// user's own regular file of this digest, and not for entries changed
// within the window before it was made (coarse timestamps).
func TestSealTrustsOnlyItself(t *testing.T) {
	t.Parallel()
	dir := installed(t)
	lines, err := verify(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := seal(dir, lines); err != nil {
		t.Fatal(err)
	}
	if err := sealed(dir, 0); err != nil {
		t.Fatalf("a fresh seal: %v", err)
	}
	if sealed(dir, time.Hour) == nil {
		t.Error("the seal vouches for entries changed just before it was made")
	}
	sp := sealPath(dir)
	good, _ := os.ReadFile(sp)
	for _, tc := range []struct {
		name  string
		plant func()
	}{
		{"group-writable", func() { os.Chmod(sp, 0o664) }},
		{"a symbolic link to a good copy", func() {
			cp := filepath.Join(t.TempDir(), "seal")
			os.WriteFile(cp, good, 0o600)
			os.Remove(sp)
			os.Symlink(cp, sp)
		}},
		{"another digest", func() {
			os.WriteFile(sp, bytes.Replace(good, []byte(Digest()), []byte("0123456789abcdef"), 1), 0o600)
		}},
		{"cut short", func() {
			i := bytes.LastIndexByte(good[:len(good)-1], '\n')
			os.WriteFile(sp, good[:i+1], 0o600)
		}},
		{"a shipped file left out, the count kept", func() {
			var kept []string
			lines := strings.Split(string(good), "\n")
			for _, l := range lines[1:] {
				if !strings.HasSuffix(l, " python/sitecustomize.py") {
					kept = append(kept, l)
				}
			}
			head := strings.Fields(lines[0])
			head[3] = strconv.Itoa(len(kept) - 1)
			os.WriteFile(sp, []byte(strings.Join(head, " ")+"\n"+strings.Join(kept, "\n")), 0o600)
		}},
	} {
		os.Remove(sp)
		os.WriteFile(sp, good, 0o600)
		if err := sealed(dir, 0); err != nil {
			t.Fatalf("%s: the good seal back: %v", tc.name, err)
		}
		tc.plant()
		if sealed(dir, 0) == nil {
			t.Errorf("%s: the seal is trusted", tc.name)
		}
	}
}

// BenchmarkInstallChecked is the cost each run pays: checking an installed
// tree against its seal (Install's check once the tree is older than
// sealWindow).
func BenchmarkInstallChecked(b *testing.B) {
	dir := installed(b)
	lines, err := verify(dir)
	if err != nil {
		b.Fatal(err)
	}
	if err := seal(dir, lines); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if err := sealed(dir, 0); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkInstallCheckedFull is the cost a run pays when the seal does not
// vouch for the tree: checking it in full.
func BenchmarkInstallCheckedFull(b *testing.B) {
	dir := installed(b)
	for b.Loop() {
		if _, err := verify(dir); err != nil {
			b.Fatal(err)
		}
	}
}
