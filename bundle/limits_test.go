package bundle

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"golang.org/x/sys/unix"
)

// rawEntry is one entry of a crafted archive: its header and how many
// zero bytes of body follow (fewer than Size makes a truncated archive).
type rawEntry struct {
	h    tar.Header
	body []byte
	// zeros, when positive, is written as that many zero bytes.
	zeros int64
}

// craft writes entries as a .tar.zst (zst) or .tgz at path; the archive
// ends after the last entry's body, complete or not.
func craft(t testing.TB, path string, zst bool, entries []rawEntry, complete bool) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var zw io.WriteCloser
	if zst {
		zw, err = zstd.NewWriter(f, zstd.WithEncoderLevel(zstd.SpeedFastest))
		if err != nil {
			t.Fatal(err)
		}
	} else {
		zw, _ = gzip.NewWriterLevel(f, gzip.BestSpeed)
	}
	tw := tar.NewWriter(zw)
	zero := make([]byte, 1<<20)
	for _, e := range entries {
		h := e.h
		if h.Format == 0 {
			h.Format = tar.FormatPAX
		}
		if h.Mode == 0 && h.Typeflag != tar.TypeXGlobalHeader {
			h.Mode = 0o644
		}
		if err := tw.WriteHeader(&h); err != nil {
			t.Fatal(err)
		}
		tw.Write(e.body)
		for n := e.zeros; n > 0; n -= int64(len(zero)) {
			tw.Write(zero[:min(n, int64(len(zero)))])
		}
	}
	if complete {
		tw.Close()
	} else {
		tw.Flush()
	}
	zw.Close()
}

// manifestFirst is the small bundle's entries with manifest.json and
// manifest.sig first, as dal writes them.
func manifestFirst(t testing.TB) []rawEntry {
	var head, rest []rawEntry
	for _, e := range bundleEntries(t, "") {
		r := rawEntry{h: tar.Header{Name: e.name, Linkname: e.link, Typeflag: e.typ}, body: []byte(e.body)}
		if e.typ == tar.TypeReg {
			r.h.Size = int64(len(e.body))
		}
		if e.name == ManifestFile || e.name == SignatureFile {
			head = append(head, r)
		} else {
			rest = append(rest, r)
		}
	}
	if len(head) != 2 || head[0].h.Name != ManifestFile {
		head[0], head[1] = head[1], head[0]
	}
	return append(head, rest...)
}

// extractionLeft lists what an Open left in its extraction directory.
func extractionLeft(t *testing.T, dir string) {
	t.Helper()
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Fatalf("extraction left %v", ents)
	}
}

// TestArchiveBombs: archives that claim or expand to too much are
// refused while streaming, with one sentence naming the flag, before
// the disk fills, and leave nothing behind.
func TestArchiveBombs(t *testing.T) {
	t.Parallel()
	fifty := int64(50) << 30
	cases := []struct {
		name    string
		entries func(t testing.TB) []rawEntry
		limits  ExtractLimits
		kind    error
		want    string
	}{
		{"one entry claims 50 GiB", func(testing.TB) []rawEntry {
			return []rawEntry{{h: tar.Header{Name: "fs-diff/big", Typeflag: tar.TypeReg, Size: fifty}, zeros: 1 << 20}}
		}, ExtractLimits{}, ErrLimit, "expands to more than 8 GiB (at \"fs-diff/big\"): if you trust it, pass --max-extract-bytes SIZE"},
		{"many entries of 1 MiB", func(testing.TB) []rawEntry {
			var es []rawEntry
			for i := range 10 {
				es = append(es, rawEntry{h: tar.Header{Name: fmt.Sprintf("f%02d", i), Typeflag: tar.TypeReg, Size: 1 << 20}, zeros: 1 << 20})
			}
			return es
		}, ExtractLimits{MaxBytes: 4 << 20}, ErrLimit, "expands to more than 4 MiB (at \"f04\")"},
		{"after a valid signed manifest", func(t testing.TB) []rawEntry {
			es := manifestFirst(t)
			return append(es[:2:2], rawEntry{h: tar.Header{Name: "fs-diff/a.txt", Typeflag: tar.TypeReg, Size: fifty}, zeros: 1 << 20})
		}, ExtractLimits{}, ErrLimit, "expands to more than 8 GiB"},
		{"ratio: 64 MiB of zeros", func(testing.TB) []rawEntry {
			return []rawEntry{{h: tar.Header{Name: "zeros", Typeflag: tar.TypeReg, Size: 64 << 20}, zeros: 64 << 20}}
		}, ExtractLimits{ratioFloor: 8 << 20}, ErrLimit, "expands to more than 1000 times its compressed size"},
		{"entries before the manifest", func(testing.TB) []rawEntry {
			var es []rawEntry
			for i := range 300 {
				es = append(es, rawEntry{h: tar.Header{Name: fmt.Sprintf("e%04d", i), Typeflag: tar.TypeReg}})
			}
			return es
		}, ExtractLimits{MaxEntriesBeforeManifest: 100}, ErrLimit, "holds more than 100 entries before its manifest.json"},
		{"entries in all", func(testing.TB) []rawEntry {
			var es []rawEntry
			for i := range 300 {
				es = append(es, rawEntry{h: tar.Header{Name: fmt.Sprintf("e%04d", i), Typeflag: tar.TypeDir}})
			}
			return es
		}, ExtractLimits{MaxEntries: 200}, ErrLimit, "holds more than 200 entries: if you trust it, pass --max-extract-entries N"},
		{"global headers count as entries", func(testing.TB) []rawEntry {
			var es []rawEntry
			for range 300 {
				es = append(es, rawEntry{h: tar.Header{Typeflag: tar.TypeXGlobalHeader, PAXRecords: map[string]string{"comment": "x"}}})
			}
			return es
		}, ExtractLimits{MaxEntries: 200}, ErrLimit, "holds more than 200 entries"},
		{"unlisted entries after a valid signed manifest", func(t testing.TB) []rawEntry {
			es := manifestFirst(t)
			for i := range 300 {
				es = append(es[:2:2], rawEntry{h: tar.Header{Name: fmt.Sprintf("fs-diff/x%04d", i), Typeflag: tar.TypeReg}})
			}
			return es
		}, ExtractLimits{}, ErrCorrupt, "archive entry fs-diff/x0299 is not listed in the manifest"},
		{"outside the bundle's directory after its manifest", func(t testing.TB) []rawEntry {
			es := manifestFirst(t)
			for i := range es {
				es[i].h.Name = "run/" + es[i].h.Name
			}
			return append(es, rawEntry{h: tar.Header{Name: "other/x", Typeflag: tar.TypeReg}})
		}, ExtractLimits{}, ErrCorrupt, `archive entry "other/x" lies outside the bundle's directory run/`},
	}
	for _, c := range cases {
		for _, zst := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/zst=%v", c.name, zst), func(t *testing.T) {
				t.Parallel()
				tmp := t.TempDir()
				p := filepath.Join(tmp, "bomb.tar.zst")
				craft(t, p, zst, c.entries(t), true)
				x := filepath.Join(tmp, "x")
				os.Mkdir(x, 0o700)
				start := time.Now()
				_, err := Open(p, OpenOptions{TempDir: x, Limits: c.limits})
				fi, _ := os.Stat(p)
				t.Logf("%d-byte archive refused in %v: %v", fi.Size(), time.Since(start), err)
				wantBundleErr(t, err, c.kind, p)
				if !strings.Contains(err.Error(), c.want) || strings.Count(err.Error(), ": ") > 3 {
					t.Fatalf("error %q does not say %q in one sentence", err, c.want)
				}
				extractionLeft(t, x)
			})
		}
	}
}

// TestManyEntriesBeforeManifest: the reported attack, 200,000 entries
// before any manifest.json, is refused at the 10,001st with the default
// limits.
func TestManyEntriesBeforeManifest(t *testing.T) {
	t.Parallel()
	tmp := t.TempDir()
	var es []rawEntry
	for i := range 200_000 {
		es = append(es, rawEntry{h: tar.Header{Name: fmt.Sprintf("d/%06d", i), Typeflag: tar.TypeReg, Format: tar.FormatUSTAR}})
	}
	p := filepath.Join(tmp, "many.tgz")
	craft(t, p, false, es, true)
	x := filepath.Join(tmp, "x")
	os.Mkdir(x, 0o700)
	start := time.Now()
	_, err := Open(p, OpenOptions{TempDir: x})
	t.Logf("refused in %v: %v", time.Since(start), err)
	wantBundleErr(t, err, ErrLimit, "more than 10000 entries before its manifest.json")
	extractionLeft(t, x)
}

// TestRaisedLimits: the limits the flags set let the archive through to
// its end (here: to "no manifest.json", as the archive holds none).
func TestRaisedLimits(t *testing.T) {
	t.Parallel()
	tmp := t.TempDir()
	var es []rawEntry
	for i := range 300 {
		es = append(es, rawEntry{h: tar.Header{Name: fmt.Sprintf("d/%04d", i), Typeflag: tar.TypeReg, Size: 1 << 10}, zeros: 1 << 10})
	}
	p := filepath.Join(tmp, "many.tgz")
	craft(t, p, false, es, true)
	low := ExtractLimits{MaxEntries: 100, MaxEntriesBeforeManifest: 100, MaxBytes: 100 << 10}
	_, err := Open(p, OpenOptions{TempDir: tmp, Limits: low})
	wantBundleErr(t, err, ErrLimit, "")
	_, err = Open(p, OpenOptions{TempDir: tmp, Limits: low.WithMaxEntries(1000)})
	wantBundleErr(t, err, ErrLimit, "expands to more than 100 KiB")
	_, err = Open(p, OpenOptions{TempDir: tmp, Limits: low.WithMaxEntries(1000).WithMaxBytes(1 << 20)})
	wantBundleErr(t, err, ErrNotBundle, "has no manifest.json")
	_, err = Open(p, OpenOptions{TempDir: tmp, Limits: ExtractLimits{MaxEntries: -1, MaxEntriesBeforeManifest: -1, MaxBytes: -1, MaxRatio: -1}})
	wantBundleErr(t, err, ErrNotBundle, "has no manifest.json")
}

// TestUntrustedRefusedBeforeExtraction: with manifest.json first, an
// untrusted signer is refused before the rest is extracted, even when
// the rest would exceed every limit.
func TestUntrustedRefusedBeforeExtraction(t *testing.T) {
	t.Parallel()
	tmp := t.TempDir()
	es := manifestFirst(t)
	es = append(es[:2:2], rawEntry{h: tar.Header{Name: "fs-diff/a.txt", Typeflag: tar.TypeReg, Size: 50 << 30}, zeros: 1 << 20})
	p := filepath.Join(tmp, "b.tar.zst")
	craft(t, p, true, es, false)
	_, err := Open(p, OpenOptions{Trust: trustOf(testKey(2))})
	wantBundleErr(t, err, ErrUntrusted, Fingerprint(pubOf(testKey(1))))
	if !strings.Contains(err.Error(), TrustSignerFlag) {
		t.Fatalf("error %q does not name %s", err, TrustSignerFlag)
	}
}

// TestPackPutsManifestFirst: dal's archives start with manifest.json and
// manifest.sig, which is what lets Open check them first.
func TestPackPutsManifestFirst(t *testing.T) {
	t.Parallel()
	tmp := t.TempDir()
	p := filepath.Join(tmp, "run.tgz")
	makeBundle(t, p)
	f := must(os.Open(p))
	defer f.Close()
	zr := must(gzip.NewReader(f))
	tr := tar.NewReader(zr)
	var names []string
	for {
		h, err := tr.Next()
		if err != nil {
			break
		}
		names = append(names, h.Name)
	}
	if len(names) < 3 || names[0] != ManifestFile || names[1] != SignatureFile {
		t.Fatalf("archive order %q", names)
	}
}

// TestExtractionNeedsSpace: an archive that would not fit in the
// temporary filesystem (leaving 5% free) is refused before it is
// written, naming the directory. The filesystem is a real 16 MiB tmpfs.
func TestExtractionNeedsSpace(t *testing.T) {
	t.Parallel()
	tmp := t.TempDir()
	small := filepath.Join(tmp, "small")
	os.Mkdir(small, 0o700)
	if err := unix.Mount("tmpfs", small, "tmpfs", 0, "size=16m"); err != nil {
		t.Fatalf("mounting a tmpfs (this test runs as root): %v", err)
	}
	defer unix.Unmount(small, unix.MNT_DETACH)
	p := filepath.Join(tmp, "big.tgz")
	craft(t, p, false, []rawEntry{{h: tar.Header{Name: "a", Typeflag: tar.TypeReg, Size: 20 << 20}, zeros: 20 << 20}}, true)
	_, err := Open(p, OpenOptions{TempDir: small})
	if err == nil || !strings.Contains(err.Error(), "free in "+small) || !strings.Contains(err.Error(), "set TMPDIR") {
		t.Fatalf("error %v", err)
	}
	extractionLeft(t, small)
}

// TestOddArchiveEntries: entries a bundle cannot hold are refused with
// one sentence naming them, never a panic.
func TestOddArchiveEntries(t *testing.T) {
	t.Parallel()
	es := manifestFirst(t)
	replace := func(name string, r rawEntry) []rawEntry {
		out := []rawEntry{}
		for _, e := range es {
			if e.h.Name == name {
				e = r
			}
			out = append(out, e)
		}
		return out
	}
	cases := []struct {
		name    string
		entries []rawEntry
		kind    error
		want    string
	}{
		{"non-UTF-8 name", append(append([]rawEntry{}, es...), rawEntry{h: tar.Header{Name: "fs-diff/\xff.txt", Typeflag: tar.TypeReg}}),
			ErrCorrupt, `"fs-diff/\xff.txt" is not valid UTF-8: bundles hold only clean, UTF-8 names`},
		{"symlink in place of manifest.json", replace(ManifestFile, rawEntry{h: tar.Header{Name: ManifestFile, Typeflag: tar.TypeSymlink, Linkname: "/etc/passwd"}}),
			ErrCorrupt, "manifest.json is a symbolic link, not a regular file"},
		{"symlink in place of a listed file", replace("env.json", rawEntry{h: tar.Header{Name: "env.json", Typeflag: tar.TypeSymlink, Linkname: "clock.json"}}),
			ErrCorrupt, "env.json is not listed in the manifest"},
		{"directory in place of a listed file", replace("env.json", rawEntry{h: tar.Header{Name: "env.json/", Typeflag: tar.TypeDir}}),
			ErrCorrupt, "env.json is not listed in the manifest"},
		{"directory in place of manifest.json", replace(ManifestFile, rawEntry{h: tar.Header{Name: ManifestFile + "/", Typeflag: tar.TypeDir}}),
			ErrCorrupt, "manifest.json is a directory, not a regular file"},
		{"hard link", append(append([]rawEntry{}, es...), rawEntry{h: tar.Header{Name: "h", Typeflag: tar.TypeLink, Linkname: "env.json"}}),
			ErrCorrupt, `"h" is of tar type '1'`},
		{"block device", append(append([]rawEntry{}, es...), rawEntry{h: tar.Header{Name: "sda", Typeflag: tar.TypeBlock}}),
			ErrCorrupt, `"sda" is of tar type '4'`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			tmp := t.TempDir()
			p := filepath.Join(tmp, "b.tgz")
			craft(t, p, false, c.entries, true)
			x := filepath.Join(tmp, "x")
			os.Mkdir(x, 0o700)
			_, err := Open(p, OpenOptions{TempDir: x})
			wantBundleErr(t, err, c.kind, p)
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %q does not say %q", err, c.want)
			}
			var be *Error
			if !errors.As(err, &be) {
				t.Fatal("not an *Error")
			}
			extractionLeft(t, x)
		})
	}
}

func TestFormatBytes(t *testing.T) {
	t.Parallel()
	for n, want := range map[int64]string{8 << 30: "8 GiB", 3 << 19: "1.5 MiB", 512: "512 bytes", 2048: "2 KiB"} {
		if got := formatBytes(n); got != want {
			t.Errorf("formatBytes(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestParseSize(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]int64{"8GiB": 8 << 30, "500 MiB": 500 << 20, "2G": 2 << 30, "123": 123, "64kb": 64 << 10, "1TiB": 1 << 40} {
		if got, err := ParseSize(in); err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "GiB", "-1", "1.5G", "8 parsecs", "99999999999999TiB"} {
		if _, err := ParseSize(in); err == nil {
			t.Errorf("ParseSize(%q) accepted", in)
		}
	}
}
