package bundle

import (
	"archive/tar"
	"crypto/ed25519"
	"os"
	"path/filepath"
	"testing"
)

// FuzzOpen feeds arbitrary bytes to Open as an archive: it must never
// panic, never write outside its extraction directory and never leave
// that directory behind.
func FuzzOpen(f *testing.F) {
	tmp := f.TempDir()
	for _, name := range []string{"s.tgz", "s.tar.zst"} {
		p := filepath.Join(tmp, name)
		makeBundle(f, p)
		data := must(os.ReadFile(p))
		f.Add(data)
		f.Add(data[:len(data)/2])
	}
	slip := filepath.Join(tmp, "slip.tgz")
	makeTgz(f, slip, []tarEntry{{name: "l", link: "/tmp", typ: '2'}, {name: "l/x", body: "x", typ: '0'}})
	f.Add(must(os.ReadFile(slip)))
	// Manifest first with an unlisted entry after it, a bomb header, and
	// an odd replays/ entry.
	es := manifestFirst(f)
	for _, extra := range []rawEntry{
		{h: tar.Header{Name: "zz", Typeflag: tar.TypeReg}},
		{h: tar.Header{Name: "fs-diff/big", Typeflag: tar.TypeReg, Size: 50 << 30}, zeros: 4096},
		{h: tar.Header{Name: "replays/0001.json", Typeflag: tar.TypeSymlink, Linkname: "/etc/passwd"}},
	} {
		p := filepath.Join(tmp, "crafted.tar.zst")
		craft(f, p, true, append(append([]rawEntry{}, es...), extra), extra.zeros == 0)
		f.Add(must(os.ReadFile(p)))
		os.Remove(p)
	}
	f.Add([]byte{0x28, 0xb5, 0x2f, 0xfd})
	f.Add([]byte{0x1f, 0x8b})
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		p := filepath.Join(dir, "in.tgz")
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		x := filepath.Join(dir, "x")
		os.Mkdir(x, 0o700)
		b, err := Open(p, OpenOptions{TempDir: x, Limits: ExtractLimits{MaxBytes: 16 << 20, MaxEntries: 10_000}, Trust: trustOf(testKey(1))})
		if err == nil {
			b.Close()
		}
		ents, _ := os.ReadDir(dir)
		if len(ents) != 2 {
			t.Fatalf("Open left %v", ents)
		}
		if ents, _ := os.ReadDir(x); len(ents) != 0 {
			t.Fatalf("extraction left %v", ents)
		}
	})
}

// FuzzOpenManifest feeds arbitrary bytes to Open as a validly signed
// manifest.json of a small bundle: path checks, schema and decoding must
// hold without a panic, and an accepted manifest lists only paths inside
// the bundle.
func FuzzOpenManifest(f *testing.F) {
	src := filepath.Join(f.TempDir(), "src")
	makeBundle(f, src)
	f.Add(must(os.ReadFile(filepath.Join(src, ManifestFile))))
	f.Add([]byte(`{"dal":{"format_version":1}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := filepath.Join(t.TempDir(), "b")
		copyTree(t, src, dir)
		os.WriteFile(filepath.Join(dir, ManifestFile), data, 0o644)
		os.WriteFile(filepath.Join(dir, SignatureFile), encodeSignature(ed25519.Sign(testKey(1), data)), 0o644)
		b, err := Open(dir, OpenOptions{})
		if err != nil {
			return
		}
		defer b.Close()
		for rel := range b.Manifest.Dal.Files {
			if validRel(rel) != nil || reserved(rel) {
				t.Fatalf("accepted path %q", rel)
			}
		}
	})
}
