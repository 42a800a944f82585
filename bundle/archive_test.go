package bundle

import (
	"archive/tar"
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/klauspost/compress/gzip"
)

// tarEntry is one entry of a hand-made archive.
type tarEntry struct {
	name, link, body string
	typ              byte
}

func makeTgz(t testing.TB, path string, entries []tarEntry) {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Linkname: e.link, Typeflag: e.typ, Mode: 0o644, Size: int64(len(e.body)), Format: tar.FormatPAX}
		if e.typ != tar.TypeReg {
			h.Size = 0
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Size > 0 {
			tw.Write([]byte(e.body))
		}
	}
	tw.Close()
	zw.Close()
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// bundleEntries is the small bundle as tar entries, with prefix before
// every name.
func bundleEntries(t testing.TB, prefix string) []tarEntry {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "run")
	makeBundle(t, dir)
	var es []tarEntry
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		rel, _ := filepath.Rel(dir, p)
		if rel == "." {
			return nil
		}
		rel = prefix + filepath.ToSlash(rel)
		switch {
		case d.IsDir():
			es = append(es, tarEntry{name: rel + "/", typ: tar.TypeDir})
		case d.Type()&fs.ModeSymlink != 0:
			l, _ := os.Readlink(p)
			es = append(es, tarEntry{name: rel, link: l, typ: tar.TypeSymlink})
		default:
			es = append(es, tarEntry{name: rel, body: string(must(os.ReadFile(p))), typ: tar.TypeReg})
		}
		return nil
	})
	return es
}

// TestArchiveLayouts: archives made by other tools open too.
func TestArchiveLayouts(t *testing.T) {
	t.Parallel()
	for _, prefix := range []string{"./", "run/"} {
		p := filepath.Join(t.TempDir(), "run.tgz")
		makeTgz(t, p, bundleEntries(t, prefix))
		b, err := Open(p, OpenOptions{})
		if err != nil {
			t.Fatalf("prefix %q: %v", prefix, err)
		}
		b.Close()
	}
	// A cap on extracted bytes stops a decompression bomb early.
	p := filepath.Join(t.TempDir(), "run.tar.zst")
	makeBundle(t, p)
	_, err := Open(p, OpenOptions{Limits: ExtractLimits{MaxBytes: 10}})
	wantBundleErr(t, err, ErrLimit, p)
	if !strings.Contains(err.Error(), "expands to more than 10 bytes") {
		t.Fatalf("error %q", err)
	}
}

// TestTarSlip: no archive entry is written outside the extraction
// directory, and each is refused with a sentence naming it.
func TestTarSlip(t *testing.T) {
	t.Parallel()
	valid := bundleEntries(t, "")
	cases := []struct {
		name    string
		entries []tarEntry
		want    string
	}{
		{"dot-dot", []tarEntry{{name: "../evil", body: "x", typ: tar.TypeReg}}, "../evil"},
		{"dot-dot inside", []tarEntry{{name: "fs-diff/../../evil", body: "x", typ: tar.TypeReg}}, "fs-diff/../../evil"},
		{"absolute", []tarEntry{{name: "/tmp/evil", body: "x", typ: tar.TypeReg}}, "/tmp/evil"},
		{"through a symlink", []tarEntry{
			{name: "fs-diff/", typ: tar.TypeDir},
			{name: "fs-diff/l", link: "OUTSIDE", typ: tar.TypeSymlink},
			{name: "fs-diff/l/evil", body: "x", typ: tar.TypeReg},
		}, "passes through the symbolic link fs-diff/l"},
		{"directory through a symlink", []tarEntry{
			{name: "l", link: "OUTSIDE", typ: tar.TypeSymlink},
			{name: "l/d/", typ: tar.TypeDir},
		}, "passes through the symbolic link l"},
		{"overwrite a symlink", []tarEntry{
			{name: "l", link: "OUTSIDE/evil", typ: tar.TypeSymlink},
			{name: "l", body: "x", typ: tar.TypeReg},
		}, "l appears twice"},
		{"duplicate file", []tarEntry{{name: "a", body: "1", typ: tar.TypeReg}, {name: "a", body: "2", typ: tar.TypeReg}}, "a appears twice"},
		{"below a file", []tarEntry{{name: "a", body: "1", typ: tar.TypeReg}, {name: "a/b", body: "2", typ: tar.TypeReg}}, "not a directory"},
		{"hard link", []tarEntry{{name: "h", link: "/etc/passwd", typ: tar.TypeLink}}, "tar type"},
		{"device", []tarEntry{{name: "dev", typ: tar.TypeChar}}, "tar type"},
		{"fifo", []tarEntry{{name: "fifo", typ: tar.TypeFifo}}, "tar type"},
		{"extra file after a valid bundle", append(append([]tarEntry{}, valid...), tarEntry{name: "zz", body: "x", typ: tar.TypeReg}), "zz is not listed"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			tmp := t.TempDir()
			outside := filepath.Join(tmp, "outside")
			os.Mkdir(outside, 0o755)
			extractTo := filepath.Join(tmp, "x", "y")
			os.MkdirAll(extractTo, 0o700)
			for i := range c.entries {
				c.entries[i].link = strings.ReplaceAll(c.entries[i].link, "OUTSIDE", outside)
			}
			p := filepath.Join(tmp, "run.tgz")
			makeTgz(t, p, c.entries)
			_, err := Open(p, OpenOptions{TempDir: extractTo})
			wantBundleErr(t, err, ErrCorrupt, p)
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %q does not say %q", err, c.want)
			}
			if ents, _ := os.ReadDir(outside); len(ents) != 0 {
				t.Fatalf("wrote outside: %v", ents)
			}
			for _, p := range []string{filepath.Join(tmp, "evil"), filepath.Join(tmp, "x", "evil"), "/tmp/evil"} {
				if exists(p) {
					t.Fatalf("wrote %s", p)
				}
			}
			if ents, _ := os.ReadDir(extractTo); len(ents) != 0 {
				t.Fatalf("extraction directory not removed: %v", ents)
			}
		})
	}
}
