package show_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// copyTree copies the bundle directory src to dst (files and
// directories; the fixtures hold no links but fs-diff's, copied as links).
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.Walk(src, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		to := filepath.Join(dst, rel)
		switch {
		case fi.IsDir():
			return os.MkdirAll(to, 0o755)
		case fi.Mode()&os.ModeSymlink != 0:
			l, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return os.Symlink(l, to)
		default:
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			return os.WriteFile(to, b, fi.Mode().Perm())
		}
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestShowBadInput: every mistake is one sentence on stderr, exit 2, and
// leaves no file (not even a temporary one) where the page would go.
func TestShowBadInput(t *testing.T) {
	t.Parallel()
	tampered := filepath.Join(t.TempDir(), "tampered")
	copyTree(t, fixture.a, tampered)
	if err := os.WriteFile(filepath.Join(tampered, "logs", "stdout"), []byte("forged\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	unsigned := filepath.Join(t.TempDir(), "unsigned")
	copyTree(t, fixture.a, unsigned)
	if err := os.Remove(filepath.Join(unsigned, "manifest.sig")); err != nil {
		t.Fatal(err)
	}
	notBundle := t.TempDir()
	if err := os.WriteFile(filepath.Join(notBundle, "x"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	plainFile := filepath.Join(notBundle, "x")
	for _, tc := range []struct {
		name string
		args []string // "OUT" is replaced by the page's path
		want string
	}{
		{"no bundle", []string{"show", "--out", "OUT"}, "show takes one bundle, or two"},
		{"three bundles", []string{"show", "--out", "OUT", fixture.a, fixture.b, fixture.a}, "show takes one bundle, or two"},
		{"missing", []string{"show", "--out", "OUT", filepath.Join(notBundle, "nope")}, "does not exist"},
		{"not a bundle", []string{"show", "--out", "OUT", notBundle}, "manifest.json"},
		{"a plain file", []string{"show", "--out", "OUT", plainFile}, ""},
		{"tampered", []string{"show", "--out", "OUT", tampered}, "logs/stdout does not match its hash"},
		{"unsigned", []string{"show", "--out", "OUT", unsigned}, "manifest.sig"},
		{"second tampered", []string{"show", "--out", "OUT", fixture.a, tampered}, "logs/stdout does not match its hash"},
		{"out in a missing directory", []string{"show", "--out", filepath.Join(notBundle, "no", "page.html"), fixture.a}, "does not exist: create it"},
		{"out is a directory", []string{"show", "--out", notBundle, fixture.a}, "is a directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			out := filepath.Join(dir, "page.html")
			args := make([]string, len(tc.args))
			for i, a := range tc.args {
				args[i] = strings.ReplaceAll(a, "OUT", out)
			}
			code, so, se := dalExec(args...)
			if code != 2 || so != "" || strings.Count(se, "\n") != 1 || !strings.HasPrefix(se, "dal-exec: ") || !strings.Contains(se, tc.want) {
				t.Errorf("exit %d, stdout %q, stderr %q; want exit 2 and one sentence with %q", code, so, se, tc.want)
			}
			if left, _ := os.ReadDir(dir); len(left) != 0 {
				t.Errorf("left behind: %v", left)
			}
		})
	}
}

// TestOpenWithoutXdgOpen: --open on a machine without xdg-open writes the
// page and says where it is. (Not parallel: it empties PATH.)
func TestOpenWithoutXdgOpen(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	out := filepath.Join(t.TempDir(), "page.html")
	code, _, se := dalExec("show", "--open", "--out", out, fixture.a)
	if code != 0 || !strings.Contains(se, "no xdg-open here: open file://"+out+" in a browser") {
		t.Errorf("exit %d, stderr %q", code, se)
	}
	if _, err := os.Stat(out); err != nil {
		t.Error(err)
	}
}
