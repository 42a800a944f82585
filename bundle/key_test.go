package bundle

import (
	"crypto/ed25519"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

func TestLoadOrCreateKey(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "config", "dal")
	path := filepath.Join(dir, "signing.key")
	key, created, err := LoadOrCreateKey(path)
	if err != nil || !created {
		t.Fatalf("first call: created=%v, %v", created, err)
	}
	for p, want := range map[string]os.FileMode{path: 0o600, dir: 0o700 | os.ModeDir, PublicKeyPath(path): 0o644} {
		if fi, err := os.Stat(p); err != nil || fi.Mode() != want {
			t.Fatalf("%s: mode %v, %v; want %v", p, fi.Mode(), err, want)
		}
	}
	if !strings.HasPrefix(string(must(os.ReadFile(path))), "-----BEGIN PRIVATE KEY-----") {
		t.Fatal("the key file is not PEM PKCS #8")
	}
	again, created, err := LoadOrCreateKey(path)
	if err != nil || created || !again.Equal(key) {
		t.Fatalf("second call: created=%v, %v, same=%v", created, err, again.Equal(key))
	}
	pub, err := LoadPublicKey(PublicKeyPath(path))
	if err != nil || !pub.Equal(key.Public()) {
		t.Fatalf("public key file: %v", err)
	}
	if pub2, err := LoadPublicKey(path); err != nil || !pub2.Equal(pub) {
		t.Fatalf("public key from the private key file: %v", err)
	}
	b64 := filepath.Join(t.TempDir(), "k.b64")
	os.WriteFile(b64, []byte(EncodePublicKey(pub)+"\n"), 0o644)
	if pub3, err := LoadPublicKey(b64); err != nil || !pub3.Equal(pub) {
		t.Fatalf("base64 public key: %v", err)
	}
}

func TestLoadOrCreateKeyConcurrent(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "signing.key")
	keys := make([]ed25519.PrivateKey, 8)
	var wg sync.WaitGroup
	for i := range keys {
		wg.Go(func() {
			k, _, err := LoadOrCreateKey(path)
			if err != nil {
				t.Error(err)
			}
			keys[i] = k
		})
	}
	wg.Wait()
	for _, k := range keys[1:] {
		if !k.Equal(keys[0]) {
			t.Fatal("concurrent callers got different keys")
		}
	}
}

func TestGenerateKey(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "signing.key")
	pub1, err := GenerateKey(path, false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := GenerateKey(path, false); !errors.Is(err, ErrExists) {
		t.Fatalf("overwrite without force: %v", err)
	}
	if k := must(LoadKey(path)); !k.Public().(ed25519.PublicKey).Equal(pub1) {
		t.Fatal("refused overwrite changed the key")
	}
	pub2, err := GenerateKey(path, true)
	if err != nil || pub2.Equal(pub1) {
		t.Fatalf("force: %v", err)
	}
	if pub := must(LoadPublicKey(PublicKeyPath(path))); !pub.Equal(pub2) {
		t.Fatal(".pub not updated")
	}
	if left, _ := filepath.Glob(filepath.Join(filepath.Dir(path), ".*")); len(left) != 0 {
		t.Fatalf("temporary files left: %v", left)
	}
}

func TestLoadKeyFormats(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	k := testKey(3)
	cases := []struct {
		name string
		data []byte
		mode os.FileMode
		want string // "" = loads k
	}{
		{"raw seed", k.Seed(), 0o600, ""},
		{"raw key", k, 0o600, ""},
		{"raw key with a wrong public half", append(append([]byte{}, k.Seed()...), make([]byte, 32)...), 0o600, "does not match"},
		{"garbage", []byte("hello"), 0o600, "not an ed25519 private key"},
		{"other PEM", []byte("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"), 0o600, "CERTIFICATE"},
		{"readable by others", k.Seed(), 0o644, "chmod 600"},
	}
	for _, c := range cases {
		p := filepath.Join(dir, strings.ReplaceAll(c.name, " ", "_"))
		os.WriteFile(p, c.data, c.mode)
		os.Chmod(p, c.mode)
		got, err := LoadKey(p)
		if c.want == "" {
			if err != nil || !got.Equal(k) {
				t.Errorf("%s: %v", c.name, err)
			}
		} else if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), p) {
			t.Errorf("%s: error %v; want one naming the file and saying %q", c.name, err, c.want)
		}
	}
	if _, err := LoadKey(filepath.Join(dir, "missing")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing key: %v", err)
	}
}

// TestDefaultKeyPath sets the environment: not parallel.
func TestDefaultKeyPath(t *testing.T) {
	t.Setenv("DAL_KEY", "/keys/k")
	if got := DefaultKeyPath(); got != "/keys/k" {
		t.Fatalf("with DAL_KEY: %s", got)
	}
	t.Setenv("DAL_KEY", "")
	t.Setenv("XDG_CONFIG_HOME", "/cfg")
	if got := DefaultKeyPath(); got != "/cfg/dal/signing.key" {
		t.Fatalf("with XDG_CONFIG_HOME: %s", got)
	}
}
