package bundle

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestLoadTrust(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	own := filepath.Join(dir, "signing.key")
	if err := writeKey(own, testKey(1), false); err != nil {
		t.Fatal(err)
	}
	alice := filepath.Join(dir, "alice.pub")
	os.WriteFile(alice, []byte(EncodePublicKey(pubOf(testKey(2)))+"\n"), 0o644)
	tk := filepath.Join(dir, "trusted_keys")
	os.WriteFile(tk, []byte("# CI and colleagues\n\n"+EncodePublicKey(pubOf(testKey(3)))+" ci@build\n"+EncodePublicKey(pubOf(testKey(4)))+"\n"), 0o644)

	tr, err := LoadTrust(TrustOptions{OwnKey: own, Keys: []string{alice}, TrustedKeysFile: tk, Signers: []string{Fingerprint(pubOf(testKey(5)))}})
	if err != nil {
		t.Fatal(err)
	}
	for n, want := range map[byte]string{1: "your key " + own, 2: "--key " + alice, 3: tk + " line 3 (ci@build)", 4: tk + " line 4", 5: TrustSignerFlag} {
		k, ok := tr.Lookup(pubOf(testKey(n)))
		if !ok || !strings.HasPrefix(k.Source, want) {
			t.Errorf("key %d: trusted %v, source %q, want %q", n, ok, k.Source, want)
		}
	}
	if _, ok := tr.Lookup(pubOf(testKey(6))); ok {
		t.Error("a stranger's key is trusted")
	}
	if tr.Len() != 4 {
		t.Errorf("Len %d", tr.Len())
	}
	// The own key without its .pub: the public half comes from the key.
	os.Remove(PublicKeyPath(own))
	if tr, err := LoadTrust(TrustOptions{OwnKey: own}); err != nil || tr.Len() != 1 {
		t.Fatalf("own key without .pub: %v", err)
	}
	// Missing files trust nothing, without an error.
	if tr, err := LoadTrust(TrustOptions{OwnKey: filepath.Join(dir, "none"), TrustedKeysFile: filepath.Join(dir, "none2")}); err != nil || tr.Len() != 0 {
		t.Fatalf("missing files: %v", err)
	}
	var nilTrust *Trust
	if _, ok := nilTrust.Lookup(pubOf(testKey(1))); ok {
		t.Fatal("a nil Trust trusts")
	}
}

func TestLoadTrustRefusals(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, text string, perm os.FileMode) string {
		p := filepath.Join(dir, name)
		os.WriteFile(p, []byte(text), perm)
		os.Chmod(p, perm)
		return p
	}
	key := EncodePublicKey(pubOf(testKey(3)))
	cases := []struct {
		name string
		o    TrustOptions
		want string
	}{
		{"malformed line", TrustOptions{TrustedKeysFile: write("bad", key+"\nnot-a-key alice\n", 0o644)}, "bad line 2 is not a public key"},
		{"short key", TrustOptions{TrustedKeysFile: write("short", "AAAA\n", 0o644)}, "line 1 is not a public key"},
		{"group-writable trusted keys", TrustOptions{TrustedKeysFile: write("gw", key+"\n", 0o664)}, "can be written by other users"},
		{"world-writable own key", TrustOptions{OwnKey: write("own.key", "", 0o600), Keys: nil}, ""},
		{"missing --key", TrustOptions{Keys: []string{filepath.Join(dir, "nope.pub")}}, "nope.pub"},
		{"bad signer", TrustOptions{Signers: []string{"SHA256:nope"}}, TrustSignerFlag + ` "SHA256:nope" is neither`},
		{"trusted keys is a directory", TrustOptions{TrustedKeysFile: dir}, "is not a regular file"},
		{"trusted keys is a fifo", TrustOptions{TrustedKeysFile: func() string { p := filepath.Join(dir, "fifo"); mkfifo(p); return p }()}, "is not a regular file"},
	}
	// An own key whose .pub others can write.
	own := filepath.Join(dir, "k")
	writeKey(own, testKey(1), false)
	os.Chmod(PublicKeyPath(own), 0o666)
	cases[3].o, cases[3].want = TrustOptions{OwnKey: own}, "k.pub can be written by other users"
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := LoadTrust(c.o)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want %q", err, c.want)
			}
		})
	}
	// A signer given as a base64 key works like its fingerprint.
	tr, err := LoadTrust(TrustOptions{Signers: []string{key}})
	if _, ok := tr.Lookup(pubOf(testKey(3))); err != nil || !ok {
		t.Fatalf("signer as a key: %v", err)
	}
}

// TestOpenWithTrust: a bundle from an untrusted signer is refused with
// one sentence naming the fingerprint and the flag; the flag, the
// trusted-keys file or AllowUntrusted let it open, and Signer says who.
func TestOpenWithTrust(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"run", "run.tar.zst"} {
		out := filepath.Join(t.TempDir(), name)
		makeBundle(t, out)
		fp := Fingerprint(pubOf(testKey(1)))
		tk := filepath.Join(t.TempDir(), "trusted_keys")
		_, err := Open(out, OpenOptions{Trust: must(LoadTrust(TrustOptions{TrustedKeysFile: tk}))})
		wantBundleErr(t, err, ErrUntrusted, fp)
		for _, want := range []string{"which you do not trust", TrustSignerFlag + " " + fp, tk, EncodePublicKey(pubOf(testKey(1)))} {
			if !strings.Contains(err.Error(), want) {
				t.Fatalf("%s: error %q does not say %q", name, err, want)
			}
		}
		for _, o := range []TrustOptions{{Signers: []string{fp}}, {TrustedKeysFile: tk}} {
			os.WriteFile(tk, []byte(EncodePublicKey(pubOf(testKey(1)))+" me\n"), 0o600)
			b, err := Open(out, OpenOptions{Trust: must(LoadTrust(o))})
			if err != nil {
				t.Fatalf("%s: %+v: %v", name, o, err)
			}
			if !b.Signer.Trusted || b.Signer.Fingerprint != fp || b.Signer.Source == "" {
				t.Fatalf("%s: signer %+v", name, b.Signer)
			}
			b.Close()
		}
		b, err := Open(out, OpenOptions{Trust: &Trust{}, AllowUntrusted: true})
		if err != nil || b.Signer.Trusted || b.Signer.Fingerprint != fp {
			t.Fatalf("%s: AllowUntrusted: %v, %+v", name, err, b)
		}
		b.Close()
	}
}
