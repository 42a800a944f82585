package bundle

import (
	"bytes"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"testing"
)

func TestRoundTrip(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"run", "run.tgz", "run.tar.gz", "run.tar.zst"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			out := filepath.Join(t.TempDir(), name)
			want := makeBundle(t, out)
			b, err := Open(out, OpenOptions{TrustedKey: testKey(1).Public().(ed25519.PublicKey)})
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			if !reflect.DeepEqual(b.Manifest, want) {
				t.Fatalf("manifest read back differs:\n got %+v\nwant %+v", b.Manifest, want)
			}
			for rel, data := range smallFiles {
				got, err := b.ReadFile(rel)
				if err != nil || string(got) != data {
					t.Fatalf("%s: %q, %v; want %q", rel, got, err, data)
				}
			}
			if l, err := os.Readlink(b.File("fs-diff/link")); err != nil || l != "a.txt" {
				t.Fatalf("symlink: %q, %v", l, err)
			}
			if !isDir(b.File("fs-diff/empty")) {
				t.Fatal("empty directory lost")
			}
			var files []string
			for rel := range b.Manifest.Dal.Files {
				files = append(files, rel)
			}
			sort.Strings(files)
			if len(files) != len(smallFiles) {
				t.Fatalf("manifest lists %v", files)
			}
			if got := b.Manifest.Dal.Symlinks; len(got) != 1 || got["fs-diff/link"] != digestOf([]byte("a.txt")) {
				t.Fatalf("symlinks %v", got)
			}
			if got := b.Manifest.Dal.EmptyDirs; !reflect.DeepEqual(got, []string{"fs-diff/empty"}) {
				t.Fatalf("empty dirs %v", got)
			}
			if left, _ := Leftovers(out); len(left) != 0 {
				t.Fatalf("staging left behind: %v", left)
			}
			dir := b.Dir
			if err := b.Close(); err != nil {
				t.Fatal(err)
			}
			if name != "run" && exists(dir) {
				t.Fatal("Close left the extracted copy")
			}
		})
	}
}

// TestPack: a directory bundle packs into archives that open and are
// byte-identical when packed twice.
func TestPack(t *testing.T) {
	t.Parallel()
	tmp := t.TempDir()
	dir := filepath.Join(tmp, "run")
	makeBundle(t, dir)
	for _, ext := range []string{".tgz", ".tar.zst"} {
		a, b := filepath.Join(tmp, "a"+ext), filepath.Join(tmp, "b"+ext)
		if err := Pack(dir, a); err != nil {
			t.Fatal(err)
		}
		if err := Pack(dir, b); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(must(os.ReadFile(a)), must(os.ReadFile(b))) {
			t.Fatalf("%s: packing twice gives different bytes", ext)
		}
		if err := Pack(dir, a); !errors.Is(err, ErrExists) {
			t.Fatalf("packing onto an existing archive: %v", err)
		}
		bd, err := Open(a, OpenOptions{})
		if err != nil {
			t.Fatal(err)
		}
		bd.Close()
	}
	if err := Pack(dir, filepath.Join(tmp, "x.zip")); err == nil {
		t.Fatal("packed to an unknown archive type")
	}
	if err := Pack(tmp, filepath.Join(tmp, "y.tgz")); !errors.Is(err, ErrNotBundle) {
		t.Fatalf("packing a non-bundle: %v", err)
	}
}

// bundleFiles lists the regular files of a bundle directory.
func bundleFiles(t *testing.T, dir string) []string {
	var out []string
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			rel, _ := filepath.Rel(dir, p)
			out = append(out, filepath.ToSlash(rel))
		}
		return nil
	})
	return out
}

// TestEveryByteFlip: changing any byte of any file is detected, and the
// error names that file.
func TestEveryByteFlip(t *testing.T) {
	if testing.Short() {
		t.Skip("verifies a bundle once for every byte of it flipped (over a minute): skipped under -short (testing.Short())")
	}
	t.Parallel()
	src := filepath.Join(t.TempDir(), "run")
	makeBundle(t, src)
	files := bundleFiles(t, src)
	if len(files) != len(smallFiles)+2 {
		t.Fatalf("bundle files %v", files)
	}
	for _, rel := range files {
		t.Run(strings.ReplaceAll(rel, "/", "_"), func(t *testing.T) {
			t.Parallel()
			dir := filepath.Join(t.TempDir(), "run")
			copyTree(t, src, dir)
			p := filepath.Join(dir, rel)
			orig := must(os.ReadFile(p))
			if len(orig) == 0 {
				// An empty file has no byte to flip: grow it instead.
				os.WriteFile(p, []byte{0}, 0o644)
				_, err := Open(dir, OpenOptions{})
				wantBundleErr(t, err, ErrCorrupt, rel)
				return
			}
			for i := range orig {
				for _, mask := range []byte{0x01, 0x80} {
					flipped := bytes.Clone(orig)
					flipped[i] ^= mask
					if err := os.WriteFile(p, flipped, 0o644); err != nil {
						t.Fatal(err)
					}
					b, err := Open(dir, OpenOptions{})
					if err == nil {
						b.Close()
						t.Fatalf("byte %d ^ %#x of %s not detected", i, mask, rel)
					}
					if !strings.Contains(err.Error(), rel) {
						t.Fatalf("byte %d ^ %#x of %s: error %q does not name it", i, mask, rel, err)
					}
				}
			}
			os.WriteFile(p, orig, 0o644)
			if b, err := Open(dir, OpenOptions{}); err != nil {
				t.Fatalf("restored bundle: %v", err)
			} else {
				b.Close()
			}
		})
	}
}

// TestTreeChanges: added, removed and retyped entries.
func TestTreeChanges(t *testing.T) {
	t.Parallel()
	src := filepath.Join(t.TempDir(), "run")
	makeBundle(t, src)
	cases := []struct {
		name   string
		change func(dir string) error
		file   string
	}{
		{"extra file at the root", func(d string) error { return os.WriteFile(filepath.Join(d, "notes.txt"), nil, 0o644) }, "notes.txt"},
		{"extra file in fs-diff", func(d string) error { return os.WriteFile(filepath.Join(d, "fs-diff/c.txt"), []byte("c"), 0o644) }, "fs-diff/c.txt"},
		{"extra empty directory", func(d string) error { return os.Mkdir(filepath.Join(d, "prompts"), 0o755) }, "prompts"},
		{"extra symlink", func(d string) error { return os.Symlink("/etc/passwd", filepath.Join(d, "fs-pre/p")) }, "fs-pre/p"},
		{"missing file", func(d string) error { return os.Remove(filepath.Join(d, "logs/stdout")) }, "logs/stdout"},
		{"missing symlink", func(d string) error { return os.Remove(filepath.Join(d, "fs-diff/link")) }, "fs-diff/link"},
		{"missing empty directory", func(d string) error { return os.Remove(filepath.Join(d, "fs-diff/empty")) }, "fs-diff/empty"},
		{"empty directory filled", func(d string) error { return os.WriteFile(filepath.Join(d, "fs-diff/empty/x"), nil, 0o644) }, "fs-diff/empty"},
		{"symlink retargeted", func(d string) error {
			os.Remove(filepath.Join(d, "fs-diff/link"))
			return os.Symlink("sub/b.txt", filepath.Join(d, "fs-diff/link"))
		}, "fs-diff/link"},
		{"symlink replaced by its target's content", func(d string) error {
			os.Remove(filepath.Join(d, "fs-diff/link"))
			return os.WriteFile(filepath.Join(d, "fs-diff/link"), []byte("a.txt"), 0o644)
		}, "fs-diff/link"},
		{"file replaced by a symlink", func(d string) error {
			os.Remove(filepath.Join(d, "env.json"))
			return os.Symlink("clock.json", filepath.Join(d, "env.json"))
		}, "env.json"},
		{"fifo", func(d string) error { return mkfifo(filepath.Join(d, "logs/pipe")) }, "logs/pipe"},
		{"missing signature", func(d string) error { return os.Remove(filepath.Join(d, SignatureFile)) }, SignatureFile},
		{"manifest is a symlink", func(d string) error {
			os.Rename(filepath.Join(d, ManifestFile), filepath.Join(d, "m"))
			return os.Symlink("m", filepath.Join(d, ManifestFile))
		}, ManifestFile},
		{"manifest is a directory", func(d string) error {
			os.Remove(filepath.Join(d, ManifestFile))
			return os.Mkdir(filepath.Join(d, ManifestFile), 0o755)
		}, ManifestFile},
		{"manifest is a fifo", func(d string) error { // opening it must not block
			os.Remove(filepath.Join(d, ManifestFile))
			return mkfifo(filepath.Join(d, ManifestFile))
		}, ManifestFile},
		{"signature is a symlink", func(d string) error {
			os.Rename(filepath.Join(d, SignatureFile), filepath.Join(d, "s"))
			return os.Symlink("s", filepath.Join(d, SignatureFile))
		}, SignatureFile},
		{"signature is a fifo", func(d string) error {
			os.Remove(filepath.Join(d, SignatureFile))
			return mkfifo(filepath.Join(d, SignatureFile))
		}, SignatureFile},
		{"directory where a file should be", func(d string) error {
			os.Remove(filepath.Join(d, "logs/stdout"))
			return os.Mkdir(filepath.Join(d, "logs/stdout"), 0o755)
		}, "logs/stdout"},
		{"directory with content where a file should be", func(d string) error {
			os.Remove(filepath.Join(d, "logs/stdout"))
			os.Mkdir(filepath.Join(d, "logs/stdout"), 0o755)
			return os.WriteFile(filepath.Join(d, "logs/stdout/x"), nil, 0o644)
		}, "logs/stdout"},
		{"file where a directory should be", func(d string) error {
			os.RemoveAll(filepath.Join(d, "fs-diff/sub"))
			return os.WriteFile(filepath.Join(d, "fs-diff/sub"), nil, 0o644)
		}, "fs-diff/sub"},
		{"non-UTF-8 file name", func(d string) error { return os.WriteFile(filepath.Join(d, "fs-diff/\xff\xfe.txt"), nil, 0o644) }, "fs-diff/\xff\xfe.txt"}, // named escaped
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			dir := filepath.Join(t.TempDir(), "run")
			copyTree(t, src, dir)
			if err := c.change(dir); err != nil {
				t.Fatal(err)
			}
			_, err := Open(dir, OpenOptions{})
			wantBundleErr(t, err, ErrCorrupt, strings.Trim(strconv.Quote(c.file), `"`))
			var be *Error
			errors.As(err, &be)
			if be.File != c.file {
				t.Fatalf("Error.File = %q, want %q (%v)", be.File, c.file, err)
			}
		})
	}
}

// resign rewrites a bundle's manifest with change and signs it again, as
// a forger with the key (or a future dal) would.
func resign(t *testing.T, dir string, change func(doc map[string]any)) {
	t.Helper()
	var doc map[string]any
	dec := json.NewDecoder(bytes.NewReader(must(os.ReadFile(filepath.Join(dir, ManifestFile)))))
	dec.UseNumber()
	if err := dec.Decode(&doc); err != nil {
		t.Fatal(err)
	}
	change(doc)
	data, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, ManifestFile), data, 0o644)
	os.WriteFile(filepath.Join(dir, SignatureFile), encodeSignature(ed25519.Sign(testKey(1), data)), 0o644)
}

func dalOf(doc map[string]any) map[string]any { return doc["dal"].(map[string]any) }

func TestSignedButBad(t *testing.T) {
	t.Parallel()
	src := filepath.Join(t.TempDir(), "run")
	makeBundle(t, src)
	cases := []struct {
		name   string
		change func(doc map[string]any, dir string)
		kind   error
		want   string
	}{
		{"future format version", func(d map[string]any, _ string) { dalOf(d)["format_version"] = 7 }, ErrVersion,
			"has format version 7; this dal reads 1: upgrade dal"},
		{"format version 0", func(d map[string]any, _ string) { dalOf(d)["format_version"] = 0 }, ErrCorrupt, "manifest.json has format version 0"},
		{"no format version", func(d map[string]any, _ string) { delete(dalOf(d), "format_version") }, ErrCorrupt, "manifest.json has no dal.format_version"},
		{"bad enum", func(d map[string]any, _ string) { d["config"].(map[string]any)["execution_mode"] = "fast" }, ErrCorrupt,
			"manifest.json does not conform to the execution-snapshot schema"},
		{"path escaping the bundle", func(d map[string]any, _ string) {
			dalOf(d)["files"].(map[string]any)["../../etc/passwd"] = digestOf(nil)
		}, ErrCorrupt, "manifest.json does not conform"},
		{"reserved path listed", func(d map[string]any, _ string) {
			dalOf(d)["files"].(map[string]any)["replays/0001.json"] = digestOf(nil)
		}, ErrCorrupt, `manifest.json lists the path "replays/0001.json"`},
		{"path through a symlink", func(d map[string]any, dir string) {
			os.Symlink("/etc", filepath.Join(dir, "fs-diff/etc"))
			dalOf(d)["files"].(map[string]any)["fs-diff/etc/passwd"] = digestOf(must(os.ReadFile("/etc/passwd")))
		}, ErrCorrupt, "fs-diff/etc is not listed"},
		{"listed twice", func(d map[string]any, _ string) {
			dalOf(d)["symlinks"].(map[string]any)["env.json"] = digestOf(nil)
		}, ErrCorrupt, "manifest.json lists env.json twice"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			dir := filepath.Join(t.TempDir(), "run")
			copyTree(t, src, dir)
			resign(t, dir, func(doc map[string]any) { c.change(doc, dir) })
			_, err := Open(dir, OpenOptions{})
			wantBundleErr(t, err, c.kind, "")
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %q does not say %q", err, c.want)
			}
		})
	}
}

func TestFutureVersionMessage(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "run")
	makeBundle(t, dir)
	resign(t, dir, func(doc map[string]any) {
		dalOf(doc)["format_version"] = 7
		delete(doc, "config") // a future layout need not validate today
	})
	_, err := Open(dir, OpenOptions{})
	if want := fmt.Sprintf("bundle %s has format version 7; this dal reads 1: upgrade dal", dir); err == nil || err.Error() != want {
		t.Fatalf("got %v\nwant %s", err, want)
	}
}

func TestTrustedKey(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "run")
	makeBundle(t, dir)
	_, err := Open(dir, OpenOptions{TrustedKey: testKey(2).Public().(ed25519.PublicKey)})
	wantBundleErr(t, err, ErrUntrusted, EncodePublicKey(testKey(1).Public().(ed25519.PublicKey)))
	// A forger who re-signs with their own key is caught by the trusted key.
	resign2 := func() {
		data := must(os.ReadFile(filepath.Join(dir, ManifestFile)))
		var doc map[string]any
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.UseNumber()
		dec.Decode(&doc)
		dalOf(doc)["public_key"] = EncodePublicKey(testKey(2).Public().(ed25519.PublicKey))
		data, _ = json.MarshalIndent(doc, "", "  ")
		os.WriteFile(filepath.Join(dir, ManifestFile), data, 0o644)
		os.WriteFile(filepath.Join(dir, SignatureFile), encodeSignature(ed25519.Sign(testKey(2), data)), 0o644)
	}
	resign2()
	if b, err := Open(dir, OpenOptions{}); err != nil {
		t.Fatalf("self-consistent re-signed bundle: %v", err)
	} else {
		b.Close()
	}
	_, err = Open(dir, OpenOptions{TrustedKey: testKey(1).Public().(ed25519.PublicKey)})
	wantBundleErr(t, err, ErrUntrusted, "")
}

func TestNotABundle(t *testing.T) {
	t.Parallel()
	tmp := t.TempDir()
	text := filepath.Join(tmp, "notes.txt")
	os.WriteFile(text, []byte("hello"), 0o644)
	fakeTgz := filepath.Join(tmp, "run.tgz")
	os.WriteFile(fakeTgz, []byte("not gzip at all"), 0o644)
	empty := filepath.Join(tmp, "empty")
	os.Mkdir(empty, 0o755)
	notJSON := filepath.Join(tmp, "nj")
	os.Mkdir(notJSON, 0o755)
	os.WriteFile(filepath.Join(notJSON, ManifestFile), []byte("{"), 0o644)
	for _, c := range []struct {
		path string
		kind error
		want string
	}{
		{filepath.Join(tmp, "missing"), ErrNotBundle, "does not exist"},
		{text, ErrNotBundle, "is not a dal bundle"},
		{fakeTgz, ErrNotBundle, "is not a dal bundle"},
		{empty, ErrNotBundle, "has no manifest.json"},
		{notJSON, ErrCorrupt, "manifest.json is not valid JSON"},
	} {
		_, err := Open(c.path, OpenOptions{})
		wantBundleErr(t, err, c.kind, c.path)
		if !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %q does not say %q", c.path, err, c.want)
		}
	}
}

func TestTruncatedArchive(t *testing.T) {
	t.Parallel()
	for _, ext := range []string{".tgz", ".tar.zst"} {
		t.Run(ext, func(t *testing.T) {
			t.Parallel()
			tmp := t.TempDir()
			full := filepath.Join(tmp, "run"+ext)
			makeBundle(t, full)
			data := must(os.ReadFile(full))
			extractTo := filepath.Join(tmp, "x")
			os.Mkdir(extractTo, 0o700)
			for _, n := range []int{len(data) - 1, len(data) - 10, len(data) / 2, 20, 5} {
				p := filepath.Join(tmp, fmt.Sprintf("cut%d%s", n, ext))
				os.WriteFile(p, data[:n], 0o644)
				b, err := Open(p, OpenOptions{TempDir: extractTo})
				if err == nil {
					b.Close()
					t.Fatalf("archive cut to %d of %d bytes opened", n, len(data))
				}
				wantBundleErr(t, err, ErrCorrupt, p)
				if ents, _ := os.ReadDir(extractTo); len(ents) != 0 {
					t.Fatalf("cut to %d: extraction left %v", n, ents)
				}
			}
		})
	}
}

func TestCreateRefusesExisting(t *testing.T) {
	t.Parallel()
	tmp := t.TempDir()
	file := filepath.Join(tmp, "file")
	os.WriteFile(file, nil, 0o644)
	emptyDir := filepath.Join(tmp, "dir")
	os.Mkdir(emptyDir, 0o755)
	for _, out := range []string{file, emptyDir} {
		if _, err := Create(out); !errors.Is(err, ErrExists) {
			t.Fatalf("Create(%s): %v", out, err)
		}
	}
	if _, err := Create(filepath.Join(tmp, "no/such/dir/run")); err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Fatalf("Create under a missing directory: %v", err)
	}
	// out appears between Create and Commit (another record): Commit
	// refuses, replaces nothing and leaves no staging directory.
	for _, name := range []string{"late", "late.tgz"} {
		out := filepath.Join(tmp, name)
		w, err := Create(out)
		if err != nil {
			t.Fatal(err)
		}
		writeSmall(t, w)
		if name == "late" {
			os.Mkdir(out, 0o755) // even an empty directory is not replaced
		} else {
			os.WriteFile(out, []byte("theirs"), 0o644)
		}
		if err := w.Commit(fullManifest(), testKey(1)); !errors.Is(err, ErrExists) {
			t.Fatalf("%s: Commit onto an existing out: %v", name, err)
		}
		if left, _ := Leftovers(out); len(left) != 0 {
			t.Fatalf("%s: left %v", name, left)
		}
		if name == "late.tgz" && string(must(os.ReadFile(out))) != "theirs" {
			t.Fatal("an existing archive was replaced")
		}
	}
}

func TestAbortAndNoCommit(t *testing.T) {
	t.Parallel()
	tmp := t.TempDir()
	out := filepath.Join(tmp, "run")
	w, err := Create(out)
	if err != nil {
		t.Fatal(err)
	}
	writeSmall(t, w)
	// A writer that never commits (its process died): no bundle at out,
	// only a staging directory that Leftovers finds.
	if exists(out) {
		t.Fatal("out exists before Commit")
	}
	if _, err := Open(out, OpenOptions{}); !errors.Is(err, ErrNotBundle) {
		t.Fatalf("Open before Commit: %v", err)
	}
	left, err := Leftovers(out)
	if err != nil || len(left) != 1 || left[0] != w.Dir() {
		t.Fatalf("Leftovers = %v, %v; want [%s]", left, err, w.Dir())
	}
	if err := w.Abort(); err != nil {
		t.Fatal(err)
	}
	if ents, _ := os.ReadDir(tmp); len(ents) != 0 {
		t.Fatalf("Abort left %v", ents)
	}
	if err := w.Commit(fullManifest(), testKey(1)); err == nil {
		t.Fatal("Commit after Abort succeeded")
	}
	if err := w.WriteFile("x", nil); err == nil {
		t.Fatal("WriteFile after Abort succeeded")
	}
}

func TestCommitRefusals(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		setup func(w *Writer) error
		m     func(m *Manifest)
		key   ed25519.PrivateKey
		want  string
	}{
		{name: "reserved manifest.json", setup: func(w *Writer) error {
			return os.WriteFile(filepath.Join(w.Dir(), ManifestFile), nil, 0o644)
		}, want: "reserved"},
		{name: "reserved replays", setup: func(w *Writer) error { return os.Mkdir(filepath.Join(w.Dir(), ReplaysDir), 0o755) }, want: "reserved"},
		{name: "bad execution mode", m: func(m *Manifest) { m.Config.ExecutionMode = "fast" }, want: "execution-snapshot schema"},
		{name: "bad operation", m: func(m *Manifest) { m.Outputs.ArtifactsCreated[0].Operation = "renamed" }, want: "execution-snapshot schema"},
		{name: "no key", key: ed25519.PrivateKey{}, want: "not an ed25519 private key"},
		{name: "fifo", setup: func(w *Writer) error { return mkfifo(filepath.Join(w.Dir(), "pipe")) }, want: "pipe is a"},
		{name: "non-UTF-8 name", setup: func(w *Writer) error {
			return os.WriteFile(filepath.Join(w.Dir(), "bad\xffname"), nil, 0o644)
		}, want: "not valid UTF-8"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			tmp := t.TempDir()
			out := filepath.Join(tmp, "run")
			w, err := Create(out)
			if err != nil {
				t.Fatal(err)
			}
			writeSmall(t, w)
			if c.setup != nil {
				if err := c.setup(w); err != nil {
					t.Fatal(err)
				}
			}
			m := fullManifest()
			if c.m != nil {
				c.m(m)
			}
			key := testKey(1)
			if c.key != nil {
				key = c.key
			}
			err = w.Commit(m, key)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Commit: %v; want an error saying %q", err, c.want)
			}
			if ents, _ := os.ReadDir(tmp); len(ents) != 0 {
				t.Fatalf("failed Commit left %v", ents)
			}
		})
	}
}

func TestWriteFileRefusesEscapes(t *testing.T) {
	t.Parallel()
	tmp := t.TempDir()
	outside := filepath.Join(tmp, "outside")
	os.Mkdir(outside, 0o755)
	w, err := Create(filepath.Join(tmp, "run"))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Abort()
	os.Symlink(outside, filepath.Join(w.Dir(), "ln"))
	w.WriteFile("file", nil)
	for _, rel := range []string{"../x", "/etc/x", "a/../../x", "a//b", "./a", "", "ln/x", "file/x", ManifestFile, SignatureFile, "replays/0001.json"} {
		if err := w.WriteFile(rel, []byte("x")); err == nil {
			t.Errorf("WriteFile(%q) succeeded", rel)
		}
	}
	if ents, _ := os.ReadDir(outside); len(ents) != 0 {
		t.Fatalf("wrote outside the bundle: %v", ents)
	}
	if err := w.WriteJSON("deep/er/x.json", map[string]int{"a": 1}); err != nil {
		t.Fatal(err)
	}
	if got := string(must(os.ReadFile(filepath.Join(w.Dir(), "deep/er/x.json")))); got != "{\n  \"a\": 1\n}\n" {
		t.Fatalf("WriteJSON wrote %q", got)
	}
}

func TestReadFileRefusesLinksAndUnlisted(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "run")
	makeBundle(t, dir)
	b, err := Open(dir, OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	for _, rel := range []string{"fs-diff/link", "nope", "../run/env.json", ManifestFile} {
		if _, err := b.ReadFile(rel); err == nil {
			t.Errorf("ReadFile(%q) succeeded", rel)
		}
	}
	var env map[string]any
	if err := b.ReadJSON("env.json", &env); err != nil || env["mode"] != "seeded" {
		t.Fatalf("ReadJSON: %v %v", env, err)
	}
}

func TestCommitDefaults(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "run")
	w, err := Create(dir)
	if err != nil {
		t.Fatal(err)
	}
	m := &Manifest{WorkflowID: "true", Config: Config{Model: Model{ID: ModelNone}, ExecutionMode: ModeStrict}}
	if err := w.Commit(m, testKey(1)); err != nil {
		t.Fatal(err)
	}
	if m.SnapshotID == "" || m.CapturedAt.IsZero() || m.Version != SnapshotVersion || m.Dal.CreatedBy == "" ||
		m.ReplayStatus == nil || m.ReplayStatus.MatchStatus != NotReplayed || m.Dal.FormatVersion != FormatVersion {
		t.Fatalf("defaults not filled: %+v", m)
	}
	b, err := Open(dir, OpenOptions{})
	if err != nil {
		t.Fatalf("an empty bundle: %v", err)
	}
	b.Close()
}
