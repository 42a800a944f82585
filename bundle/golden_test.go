package bundle

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dal-runtime/dal/internal/golden"
)

const goldenV1 = "testdata/v1"

// goldenBundle is the small bundle without its empty directory (git
// cannot hold one).
func goldenBundle(t *testing.T, out string) {
	t.Helper()
	w, err := Create(out)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Abort()
	for rel, data := range smallFiles {
		if err := w.WriteFile(rel, []byte(data)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("a.txt", filepath.Join(w.Dir(), "fs-diff", "link")); err != nil {
		t.Fatal(err)
	}
	if err := w.Commit(fullManifest(), testKey(1)); err != nil {
		t.Fatal(err)
	}
}

// TestGoldenV1: this writer still writes the committed format-1 bundle
// byte for byte, and this reader still reads it. A failure here means
// the format changed: raise FormatVersion or undo the change.
func TestGoldenV1(t *testing.T) {
	tmp := t.TempDir()
	fresh := filepath.Join(tmp, "v1")
	goldenBundle(t, fresh)
	if golden.Update() {
		os.RemoveAll(goldenV1)
		copyTree(t, fresh, goldenV1)
		if err := writeKey(filepath.Join(tmp, "k"), testKey(1), true); err != nil {
			t.Fatal(err)
		}
		os.WriteFile(goldenV1+".pub", must(os.ReadFile(PublicKeyPath(filepath.Join(tmp, "k")))), 0o644)
	}
	want, got := treeText(t, goldenV1), treeText(t, fresh)
	if want != got {
		t.Fatalf("the writer no longer writes %s (go test ./bundle -run GoldenV1 -update after raising FormatVersion):\n got:\n%s\nwant:\n%s", goldenV1, got, want)
	}
	pub, err := LoadPublicKey(goldenV1 + ".pub")
	if err != nil {
		t.Fatal(err)
	}
	b, err := Open(goldenV1, OpenOptions{TrustedKey: pub})
	if err != nil {
		t.Fatalf("this reader no longer reads a format-1 bundle: %v", err)
	}
	b.Close()
}

// treeText renders a bundle directory: each path with its content or
// link target.
func treeText(t *testing.T, dir string) string {
	var sb strings.Builder
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		switch {
		case d.IsDir():
			fmt.Fprintf(&sb, "%s/\n", rel)
		case d.Type()&os.ModeSymlink != 0:
			fmt.Fprintf(&sb, "%s -> %s\n", rel, must(os.Readlink(p)))
		default:
			fmt.Fprintf(&sb, "%s:\n%s\n", rel, must(os.ReadFile(p)))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return sb.String()
}

// TestErrorMessages: what users read when a bundle is bad, as a golden
// file (testdata/errors.golden).
func TestErrorMessages(t *testing.T) {
	t.Parallel()
	tmp := t.TempDir()
	src := filepath.Join(tmp, "src")
	makeBundle(t, src)
	scenario := func(name string, change func(dir string) string) string {
		dir := filepath.Join(tmp, name)
		copyTree(t, src, dir)
		path := change(dir)
		_, err := Open(path, OpenOptions{})
		if err == nil {
			t.Fatalf("%s: no error", name)
		}
		msg := strings.ReplaceAll(err.Error(), tmp, "TMP")
		return fmt.Sprintf("%s:\n  %s\n", name, msg)
	}
	flip := func(rel string) func(string) string {
		return func(dir string) string {
			p := filepath.Join(dir, rel)
			b := must(os.ReadFile(p))
			b[0] ^= 1
			os.WriteFile(p, b, 0o644)
			return dir
		}
	}
	var out bytes.Buffer
	for _, s := range []struct {
		name   string
		change func(string) string
	}{
		{"flipped-component", flip("fs-diff/a.txt")},
		{"flipped-manifest", flip(ManifestFile)},
		{"flipped-signature", flip(SignatureFile)},
		{"missing-file", func(d string) string { os.Remove(filepath.Join(d, "logs/stdout")); return d }},
		{"extra-file", func(d string) string { os.WriteFile(filepath.Join(d, "fs-diff/x"), nil, 0o644); return d }},
		{"future-version", func(d string) string {
			resign(t, d, func(doc map[string]any) { dalOf(doc)["format_version"] = 2 })
			return d
		}},
		{"missing", func(d string) string { return d + "-none" }},
		{"not-a-bundle", func(d string) string { os.Remove(filepath.Join(d, ManifestFile)); return d }},
		{"truncated-archive", func(d string) string {
			a := d + ".tar.zst"
			if err := Pack(d, a); err != nil {
				t.Fatal(err)
			}
			data := must(os.ReadFile(a))
			os.WriteFile(a, data[:len(data)/2], 0o644)
			return a
		}},
		{"tar-slip", func(d string) string {
			a := d + ".tgz"
			makeTgz(t, a, []tarEntry{{name: "fs-diff/../../etc/passwd", body: "x", typ: '0'}})
			return a
		}},
	} {
		out.WriteString(scenario(s.name, s.change))
	}
	golden.Check(t, "testdata/errors.golden", out.Bytes())
	if _, err := Open(filepath.Join(tmp, "missing-none"), OpenOptions{}); !errors.Is(err, ErrNotBundle) {
		t.Fatal(err)
	}
}
