package safefs

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// fixture is a root with planted symlinks and an outside tree they point
// at.
type fixture struct {
	root, outside string
	d             *Dir
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	base := t.TempDir()
	f := &fixture{root: filepath.Join(base, "root"), outside: filepath.Join(base, "outside")}
	for _, p := range []string{f.root + "/dir/sub", f.outside + "/targetdir"} {
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	files := map[string]string{
		f.outside + "/target":      "host secret\n",
		f.outside + "/targetdir/f": "host file\n",
		f.root + "/file":           "inside\n",
		f.root + "/dir/f":          "inside dir file\n",
	}
	for p, c := range files {
		if err := os.WriteFile(p, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	links := map[string]string{
		"linkout":    f.outside + "/target",
		"linkoutdir": f.outside + "/targetdir",
		"linkrel":    "../outside/targetdir",
		"linkin":     "file",
		"linkindir":  "dir",
		"dir/up":     "../../outside/targetdir",
	}
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(f.root, name)); err != nil {
			t.Fatal(err)
		}
	}
	d, err := Open(f.root)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	f.d = d
	return f
}

// snapshot describes every entry under dir: kind, mode, owner, times,
// content or target, and xattrs.
func snapshot(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		st := fi.Sys().(*syscall.Stat_t)
		line := fmt.Sprintf("%s %v %d:%d %d.%d", p, fi.Mode(), st.Uid, st.Gid, st.Mtim.Sec, st.Mtim.Nsec)
		switch {
		case fi.Mode().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			line += fmt.Sprintf(" %x", sha256.Sum256(b))
		case fi.Mode()&fs.ModeSymlink != 0:
			l, _ := os.Readlink(p)
			line += " -> " + l
		}
		if !(fi.Mode()&fs.ModeSymlink != 0) {
			buf := make([]byte, 4096)
			n, _ := unix.Llistxattr(p, buf)
			line += " xattrs=" + string(buf[:max(n, 0)])
		}
		out = append(out, line)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(out)
	return out
}

func sameSnapshots(t *testing.T, what string, before, after []string) {
	t.Helper()
	if strings.Join(before, "\n") != strings.Join(after, "\n") {
		t.Errorf("%s changed:\nbefore:\n%s\nafter:\n%s", what, strings.Join(before, "\n"), strings.Join(after, "\n"))
	}
}

// op is one operation of a Dir, applied to a path.
type op struct {
	name string
	do   func(d *Dir, rel string) error
	// onLink: on a symlink as the last component the operation acts on the
	// link itself (and must succeed); otherwise it must be refused.
	onLink bool
}

func ops(other *Dir) []op {
	closeF := func(f *os.File, err error) error {
		if f != nil {
			f.Close()
		}
		return err
	}
	epoch := time.Unix(1, 0)
	return []op{
		{name: "Open", do: func(d *Dir, r string) error { return closeF(d.Open(r)) }},
		{name: "Create", do: func(d *Dir, r string) error { return closeF(d.Create(r, 0o644)) }},
		{name: "OpenFile", do: func(d *Dir, r string) error { return closeF(d.OpenFile(r, os.O_WRONLY|os.O_TRUNC)) }},
		{name: "Sub", do: func(d *Dir, r string) error {
			s, err := d.Sub(r)
			s.Close()
			return err
		}},
		{name: "Mkdir", do: func(d *Dir, r string) error { return d.Mkdir(r, 0o755) }},
		{name: "MkdirAll", do: func(d *Dir, r string) error { return d.MkdirAll(r+"/x/y", 0o755) }},
		{name: "ReadDir", do: func(d *Dir, r string) error { _, err := d.ReadDir(r); return err }},
		{name: "ReadDirNames", do: func(d *Dir, r string) error { _, err := d.ReadDirNames(r); return err }},
		{name: "Symlink", do: func(d *Dir, r string) error { return d.Symlink("/etc/passwd", r) }},
		{name: "Mknod", do: func(d *Dir, r string) error { return d.Mknod(r, unix.S_IFIFO|0o644, 0) }},
		{name: "Chmod", do: func(d *Dir, r string) error { return d.Chmod(r, 0o777|fs.ModeSetuid) }},
		{name: "Getxattr", do: func(d *Dir, r string) error { _, err := d.Getxattr(r, "user.x"); return err }},
		{name: "Setxattr", do: func(d *Dir, r string) error { return d.Setxattr(r, "user.x", []byte("y")) }},
		{name: "Removexattr", do: func(d *Dir, r string) error { return d.Removexattr(r, "user.x") }},
		{name: "Lstat", onLink: true, do: func(d *Dir, r string) error { _, err := d.Lstat(r); return err }},
		{name: "Readlink", onLink: true, do: func(d *Dir, r string) error { _, err := d.Readlink(r); return err }},
		{name: "Lchown", onLink: true, do: func(d *Dir, r string) error { return d.Lchown(r, 1234, 1234) }},
		{name: "Lutimes", onLink: true, do: func(d *Dir, r string) error { return d.Lutimes(r, epoch, epoch) }},
		{name: "Link", onLink: true, do: func(d *Dir, r string) error { return d.Link(r, other, "linked") }},
		{name: "LinkTo", do: func(d *Dir, r string) error { return other.Link("src", d, r) }},
		{name: "RenameFrom", onLink: true, do: func(d *Dir, r string) error { return d.Rename(r, "renamed") }},
		{name: "RenameTo", onLink: true, do: func(d *Dir, r string) error { return d.Rename("file", r) }},
		{name: "Remove", onLink: true, do: func(d *Dir, r string) error { return d.Remove(r) }},
		{name: "RemoveAll", onLink: true, do: func(d *Dir, r string) error { return d.RemoveAll(r) }},
		{name: "Walk", onLink: true, do: func(d *Dir, r string) error {
			return d.Walk(r, func(rel string, fi fs.FileInfo, err error) error {
				if err == nil && fi.Mode()&fs.ModeSymlink == 0 && rel != r {
					return fmt.Errorf("walked into %s", rel)
				}
				return err
			})
		}},
	}
}

// TestPlantedSymlinks: every operation, given a path whose last component
// or a parent is a symlink (out of the root, or inside it), either refuses
// or acts on the link itself; nothing outside the root and nothing a link
// points at changes.
func TestPlantedSymlinks(t *testing.T) {
	otherRoot := t.TempDir()
	if err := os.WriteFile(filepath.Join(otherRoot, "src"), []byte("src"), 0o644); err != nil {
		t.Fatal(err)
	}
	other, err := Open(otherRoot)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	type planted struct {
		rel    string
		parent bool // the link is a parent component
	}
	var cases []planted
	for _, r := range []string{"linkout", "linkoutdir", "linkrel", "linkin", "linkindir", "dir/up"} {
		cases = append(cases, planted{r, false})
	}
	for _, r := range []string{"linkoutdir/f", "linkoutdir/new", "linkrel/f", "linkindir/f", "linkindir/sub", "dir/up/f", "dir/up/new/deeper"} {
		cases = append(cases, planted{r, true})
	}
	for _, o := range ops(other) {
		for _, c := range cases {
			t.Run(o.name+"/"+c.rel, func(t *testing.T) {
				f := newFixture(t)
				os.Remove(filepath.Join(otherRoot, "linked"))
				watched := []string{f.outside, filepath.Join(f.root, "dir/f"), filepath.Join(f.root, "dir/sub")}
				if o.name != "RenameTo" {
					watched = append(watched, filepath.Join(f.root, "file"))
				}
				var before [][]string
				for _, w := range watched {
					before = append(before, snapshot(t, w))
				}
				err := o.do(f.d, c.rel)
				switch {
				case c.parent:
					if !errors.Is(err, ErrSymlink) {
						t.Errorf("%s(%q): %v, want ErrSymlink", o.name, c.rel, err)
					}
				case !o.onLink:
					if err == nil {
						t.Errorf("%s(%q) was accepted", o.name, c.rel)
					}
				default:
					if err != nil {
						t.Errorf("%s(%q) on the link itself: %v", o.name, c.rel, err)
					}
				}
				for i, w := range watched {
					sameSnapshots(t, w, before[i], snapshot(t, w))
				}
			})
		}
	}
}

// TestBadPaths: paths that are not clean and relative are refused by every
// operation before anything is resolved.
func TestBadPaths(t *testing.T) {
	other, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	bad := []string{"/etc/passwd", "..", "../x", "dir/../../x", "dir/../file", "./file", "dir//f", "dir/", "a\x00b", "/"}
	for _, o := range ops(other) {
		for _, rel := range bad {
			f := newFixture(t)
			outBefore := snapshot(t, f.outside)
			err := o.do(f.d, rel)
			if !errors.Is(err, ErrPath) {
				t.Errorf("%s(%q): %v, want ErrPath", o.name, rel, err)
			}
			sameSnapshots(t, "the outside tree", outBefore, snapshot(t, f.outside))
		}
	}
}

// TestOrdinaryUse: the operations do what their names say on ordinary
// entries, names that are not UTF-8 included.
func TestOrdinaryUse(t *testing.T) {
	f := newFixture(t)
	d := f.d
	odd := "odd-\xff\xfe-name"
	if err := d.MkdirAll("a/"+odd+"/c", 0o755); err != nil {
		t.Fatal(err)
	}
	w, err := d.Create("a/"+odd+"/c/"+odd, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(w, "hello")
	w.Close()
	if _, err := d.Create("a/"+odd+"/c/"+odd, 0o600); !errors.Is(err, fs.ErrExist) {
		t.Errorf("Create of an existing file: %v, want ErrExist", err)
	}
	if err := d.Chmod("a/"+odd+"/c/"+odd, 0o750|fs.ModeSetuid); err != nil {
		t.Fatal(err)
	}
	fi, err := d.Lstat("a/" + odd + "/c/" + odd)
	if err != nil || fi.Mode() != 0o750|fs.ModeSetuid || fi.Size() != 5 || fi.Name() != odd {
		t.Fatalf("Lstat: %v %v", fi, err)
	}
	if err := d.Lutimes("a/"+odd+"/c/"+odd, time.Unix(5, 6), time.Unix(7, 8)); err != nil {
		t.Fatal(err)
	}
	if fi, _ := d.Lstat("a/" + odd + "/c/" + odd); !fi.ModTime().Equal(time.Unix(7, 8)) {
		t.Errorf("mtime %v", fi.ModTime())
	}
	rw, err := d.OpenFile("a/"+odd+"/c/"+odd, os.O_WRONLY|os.O_TRUNC)
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(rw, "hi")
	rw.Close()
	r, err := d.Open("a/" + odd + "/c/" + odd)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(r)
	r.Close()
	if string(b) != "hi" {
		t.Errorf("content %q after the rewrite", b)
	}
	ents, err := d.ReadDir("a/" + odd + "/c")
	if err != nil || len(ents) != 1 || ents[0].Name() != odd {
		t.Fatalf("ReadDir: %v %v", ents, err)
	}
	if err := d.Symlink("../../../../etc/passwd", "a/lnk"); err != nil {
		t.Fatal(err)
	}
	if l, err := d.Readlink("a/lnk"); err != nil || l != "../../../../etc/passwd" {
		t.Errorf("Readlink: %q %v", l, err)
	}
	if err := d.Rename("a/"+odd+"/c/"+odd, "a/moved"); err != nil {
		t.Fatal(err)
	}
	if err := d.RenameNoReplace("file", "a/moved"); !errors.Is(err, fs.ErrExist) {
		t.Errorf("RenameNoReplace over a file: %v", err)
	}
	if err := d.Setxattr("a", "user.dal", []byte("y")); err != nil && !errors.Is(err, unix.EOPNOTSUPP) {
		t.Fatal(err)
	} else if err == nil {
		if v, err := d.Getxattr("a", "user.dal"); err != nil || string(v) != "y" {
			t.Errorf("Getxattr: %q %v", v, err)
		}
	}
	if err := d.Mknod("a/fifo", unix.S_IFIFO|0o644, 0); err != nil {
		t.Fatal(err)
	}
	// A fifo is refused at once, not waited on.
	if _, err := d.Open("a/fifo"); !errors.Is(err, ErrNotRegular) {
		t.Errorf("Open of a fifo: %v, want ErrNotRegular", err)
	}
	if _, err := d.OpenFile("a/fifo", os.O_WRONLY); !errors.Is(err, ErrNotRegular) && !errors.Is(err, unix.ENXIO) {
		t.Errorf("OpenFile of a fifo: %v, want a refusal", err)
	}
	var walked []string
	if err := d.Walk("a", func(rel string, fi fs.FileInfo, err error) error {
		walked = append(walked, rel)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	want := []string{"a", "a/fifo", "a/lnk", "a/moved", "a/" + odd, "a/" + odd + "/c"}
	if strings.Join(walked, "|") != strings.Join(want, "|") {
		t.Errorf("Walk: %q, want %q", walked, want)
	}
	if err := d.Remove("a/" + odd); !errors.Is(err, unix.ENOTEMPTY) {
		t.Errorf("Remove of a full directory: %v", err)
	}
	if err := d.RemoveAll("a"); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Lstat("a"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a after RemoveAll: %v", err)
	}
	if err := d.RemoveAll("a"); err != nil {
		t.Errorf("RemoveAll of a missing path: %v", err)
	}
	// The root itself.
	if err := d.Chmod(".", 0o711); err != nil {
		t.Fatal(err)
	}
	if err := d.Lutimes("", time.Unix(1, 0), time.Unix(2, 0)); err != nil {
		t.Fatal(err)
	}
	if fi, err := d.Lstat("."); err != nil || fi.Mode().Perm() != 0o711 || !fi.ModTime().Equal(time.Unix(2, 0)) {
		t.Errorf("root after Chmod and Lutimes: %v %v", fi, err)
	}
}

// TestRemoveAllDoesNotDescendLinks: a tree full of links out of the root
// is removed without touching what they point at.
func TestRemoveAllDoesNotDescendLinks(t *testing.T) {
	f := newFixture(t)
	before := snapshot(t, f.outside)
	if err := os.Symlink(f.outside, filepath.Join(f.root, "dir/sub/out")); err != nil {
		t.Fatal(err)
	}
	if err := f.d.RemoveAll("dir"); err != nil {
		t.Fatal(err)
	}
	if err := f.d.RemoveAll("linkoutdir"); err != nil {
		t.Fatal(err)
	}
	sameSnapshots(t, "the outside tree", before, snapshot(t, f.outside))
	if _, err := os.Lstat(filepath.Join(f.root, "dir")); !os.IsNotExist(err) {
		t.Errorf("dir is still there: %v", err)
	}
}

// TestOneMount: OpenOneMount does not cross a mount point below the root.
func TestOneMount(t *testing.T) {
	root := t.TempDir()
	mnt := filepath.Join(root, "mnt")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("tmpfs", mnt, "tmpfs", 0, ""); err != nil {
		t.Fatalf("mount a tmpfs (these tests run as root): %v", err)
	}
	defer unix.Unmount(mnt, unix.MNT_DETACH)
	if err := os.WriteFile(filepath.Join(mnt, "f"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	d, err := OpenOneMount(root)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if _, err := d.Lstat("mnt/f"); !errors.Is(err, unix.EXDEV) {
		t.Errorf("Lstat across a mount point: %v, want EXDEV", err)
	}
	any, err := Open(root)
	if err != nil {
		t.Fatal(err)
	}
	defer any.Close()
	if _, err := any.Lstat("mnt/f"); err != nil {
		t.Errorf("Open's Dir across a mount point: %v", err)
	}
}

// TestChmodWithoutFchmodat2: the path taken before Linux 6.6 sets modes
// and refuses symlinks too.
func TestChmodWithoutFchmodat2(t *testing.T) {
	noFchmodat2 = true
	defer func() { noFchmodat2 = false }()
	f := newFixture(t)
	before := snapshot(t, f.outside)
	if err := f.d.Chmod("dir/f", 0o600|fs.ModeSetgid); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(filepath.Join(f.root, "dir/f")); err != nil || fi.Mode() != 0o600|fs.ModeSetgid {
		t.Errorf("dir/f: %v %v", fi.Mode(), err)
	}
	for _, rel := range []string{"linkout", "linkoutdir/f", "dir/up/f"} {
		if err := f.d.Chmod(rel, 0o777); !errors.Is(err, ErrSymlink) {
			t.Errorf("Chmod(%q): %v, want ErrSymlink", rel, err)
		}
	}
	sameSnapshots(t, "the outside tree", before, snapshot(t, f.outside))
}
