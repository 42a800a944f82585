package bundle

import (
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestEndorsedOpen: a bundle opened with an Endorsement of its head opens
// without its signature checked again; a head changed since, in either
// file, is refused (ErrCorrupt, ErrNotEndorsed), even when re-signed; an
// endorsement by another key than the bundle's is ignored, the
// signature verified.
func TestEndorsedOpen(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "run")
	makeBundle(t, dir)
	pub := testKey(1).Public().(ed25519.PublicKey)
	head, err := Endorse(dir, pub)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Endorse(dir, testKey(2).Public().(ed25519.PublicKey)); !errors.Is(err, ErrUntrusted) {
		t.Errorf("Endorse under another key: %v, want ErrUntrusted", err)
	}
	b, err := Open(dir, OpenOptions{Endorsed: &Endorsement{Key: pub, Head: head}})
	if err != nil {
		t.Fatalf("endorsed open: %v", err)
	}
	b.Close()

	// Re-signed with another key: the head differs.
	man := must(os.ReadFile(filepath.Join(dir, ManifestFile)))
	writeSig := func(key ed25519.PrivateKey, data []byte) {
		sig := base64.StdEncoding.EncodeToString(ed25519.Sign(key, data)) + "\n"
		if err := os.WriteFile(filepath.Join(dir, SignatureFile), []byte(sig), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	writeSig(testKey(2), man)
	_, err = Open(dir, OpenOptions{Endorsed: &Endorsement{Key: pub, Head: head}})
	if !errors.Is(err, ErrCorrupt) || !errors.Is(err, ErrNotEndorsed) || !strings.Contains(err.Error(), "not the one that was endorsed") {
		t.Errorf("a replaced manifest.sig: %v, want ErrNotEndorsed", err)
	}
	// Without the endorsement the same bundle fails its signature.
	if _, err := Open(dir, OpenOptions{}); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "does not verify") {
		t.Errorf("a replaced manifest.sig, unendorsed: %v", err)
	}
	// Changed and re-signed by the right key: valid, but not endorsed.
	changed := []byte(strings.Replace(string(man), `"workflow_id": "`, `"workflow_id": "x`, 1))
	if err := os.WriteFile(filepath.Join(dir, ManifestFile), changed, 0o644); err != nil {
		t.Fatal(err)
	}
	writeSig(testKey(1), changed)
	if _, err := Open(dir, OpenOptions{Endorsed: &Endorsement{Key: pub, Head: head}}); !errors.Is(err, ErrNotEndorsed) {
		t.Errorf("a re-signed manifest: %v, want ErrNotEndorsed", err)
	}
	if b, err := Open(dir, OpenOptions{}); err != nil {
		t.Errorf("the re-signed bundle itself: %v", err)
	} else {
		b.Close()
	}
	// Endorse checks what Open then skips: a signed manifest that breaks
	// the schema is not endorsed.
	invalid := []byte(strings.Replace(string(changed), `"execution_mode": "`, `"execution_mode": "x`, 1))
	if err := os.WriteFile(filepath.Join(dir, ManifestFile), invalid, 0o644); err != nil {
		t.Fatal(err)
	}
	writeSig(testKey(1), invalid)
	if _, err := Endorse(dir, pub); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "schema") {
		t.Errorf("Endorse of a manifest that breaks the schema: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, ManifestFile), changed, 0o644); err != nil {
		t.Fatal(err)
	}
	writeSig(testKey(1), changed)
	// An endorsement under another key says nothing: the signature is
	// checked, and here holds.
	other := testKey(2).Public().(ed25519.PublicKey)
	if b, err := Open(dir, OpenOptions{Endorsed: &Endorsement{Key: other, Head: head}}); err != nil {
		t.Errorf("an endorsement by another key: %v, want the bundle verified by its signature", err)
	} else {
		b.Close()
	}
}

// TestPrivateParent: a parent checked once serves every bundle in it;
// a bundle whose name is a symbolic link there is still resolved, and one
// in a directory others may write is still copied before it is read.
func TestPrivateParent(t *testing.T) {
	t.Parallel()
	parent, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(parent, "run")
	makeBundle(t, dir)
	if !PrivateParent(parent) {
		t.Fatalf("%s is not private", parent)
	}
	b, err := Open(dir, OpenOptions{PrivateParent: parent})
	if err != nil {
		t.Fatal(err)
	}
	if b.Dir != dir {
		t.Errorf("Dir %s, want %s", b.Dir, dir)
	}
	b.Close()
	if err := os.Symlink("run", filepath.Join(parent, "link")); err != nil {
		t.Fatal(err)
	}
	b, err = Open(filepath.Join(parent, "link"), OpenOptions{PrivateParent: parent})
	if err != nil {
		t.Fatal(err)
	}
	if b.Dir != dir {
		t.Errorf("a link's Dir %s, want it resolved to %s", b.Dir, dir)
	}
	b.Close()

	shared := filepath.Join(parent, "shared")
	if err := os.Mkdir(shared, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(shared, 0o777); err != nil {
		t.Fatal(err)
	}
	if PrivateParent(shared) {
		t.Errorf("a world-writable directory is private")
	}
	if PrivateParent("relative") {
		t.Errorf("a relative path is private")
	}
}
