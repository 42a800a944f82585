package bundle

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/dal-runtime/dal/internal/atomicfile"

	"golang.org/x/sys/unix"
)

// Signing keys.
//
// A private key file holds one PEM block "PRIVATE KEY" with the ed25519
// key in PKCS #8 (what `openssl genpkey -algorithm ed25519` writes and
// `openssl pkey -pubout` reads). LoadKey also accepts the raw 32-byte
// seed or the raw 64-byte private key. Key files are created 0600 in a
// directory created 0700, and LoadKey refuses a key that other users
// can read or write.
//
// Beside a key, PublicKeyPath(key) holds its public key: one PEM block
// "PUBLIC KEY" (PKIX), followed by a comment-free line with the same key
// in standard base64, as manifests print it. Share it; `verify --key`
// takes it.

// DefaultKeyPath is $DAL_KEY, else <user config dir>/dal/signing.key
// (~/.config/dal/signing.key), or "" when neither is known.
func DefaultKeyPath() string {
	if p := os.Getenv("DAL_KEY"); p != "" {
		return p
	}
	dir, err := os.UserConfigDir()
	if err != nil {
		return ""
	}
	return filepath.Join(dir, "dal", "signing.key")
}

// PublicKeyPath is where the public key of the key at keyPath is kept.
func PublicKeyPath(keyPath string) string { return keyPath + ".pub" }

// EncodePublicKey is pub as manifests and messages show it: standard
// base64.
func EncodePublicKey(pub ed25519.PublicKey) string {
	return base64.StdEncoding.EncodeToString(pub)
}

// LoadKey reads the private key at path.
func LoadKey(path string) (ed25519.PrivateKey, error) {
	if path == "" {
		return nil, errors.New("no signing key path: set DAL_KEY or HOME")
	}
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("signing key %s: %w", path, err)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("signing key %s can be read or written by other users: run chmod 600 %s", path, path)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("signing key %s: %w", path, err)
	}
	key, err := parsePrivateKey(data)
	if err != nil {
		return nil, fmt.Errorf("signing key %s %w", path, err)
	}
	return key, nil
}

func parsePrivateKey(data []byte) (ed25519.PrivateKey, error) {
	if blk, _ := pem.Decode(data); blk != nil {
		if blk.Type != "PRIVATE KEY" {
			return nil, fmt.Errorf("holds a PEM %q block, not an ed25519 PRIVATE KEY", blk.Type)
		}
		k, err := x509.ParsePKCS8PrivateKey(blk.Bytes)
		if err != nil {
			return nil, fmt.Errorf("is not a PKCS #8 private key: %w", err)
		}
		ek, ok := k.(ed25519.PrivateKey)
		if !ok {
			return nil, fmt.Errorf("holds a %T, not an ed25519 key", k)
		}
		return ek, nil
	}
	switch len(data) {
	case ed25519.SeedSize:
		return ed25519.NewKeyFromSeed(data), nil
	case ed25519.PrivateKeySize:
		k := ed25519.NewKeyFromSeed(data[:ed25519.SeedSize])
		if !bytes.Equal(k, data) {
			return nil, errors.New("is not an ed25519 private key (its public half does not match)")
		}
		return k, nil
	}
	return nil, errors.New("is not an ed25519 private key (expected PEM PRIVATE KEY, or 32 or 64 raw bytes)")
}

// LoadPublicKey reads a public key: a .pub file written here (PEM PUBLIC
// KEY), a base64 line as in a manifest, 32 raw bytes, or a private key
// file (whose public half is taken).
func LoadPublicKey(path string) (ed25519.PublicKey, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("public key %s: %w", path, err)
	}
	if blk, _ := pem.Decode(data); blk != nil {
		switch blk.Type {
		case "PUBLIC KEY":
			k, err := x509.ParsePKIXPublicKey(blk.Bytes)
			if err != nil {
				return nil, fmt.Errorf("public key %s is not a PKIX public key: %w", path, err)
			}
			if ek, ok := k.(ed25519.PublicKey); ok {
				return ek, nil
			}
			return nil, fmt.Errorf("public key %s holds a %T, not an ed25519 key", path, k)
		case "PRIVATE KEY":
			k, err := parsePrivateKey(data)
			if err != nil {
				return nil, fmt.Errorf("key %s %w", path, err)
			}
			return k.Public().(ed25519.PublicKey), nil
		}
		return nil, fmt.Errorf("key %s holds a PEM %q block, not an ed25519 key", path, blk.Type)
	}
	if len(data) == ed25519.PublicKeySize {
		return ed25519.PublicKey(data), nil
	}
	if b, err := base64.StdEncoding.DecodeString(string(bytes.TrimSpace(data))); err == nil && len(b) == ed25519.PublicKeySize {
		return ed25519.PublicKey(b), nil
	}
	return nil, fmt.Errorf("public key %s is not an ed25519 public key (expected a .pub file, base64 or 32 raw bytes)", path)
}

// LoadOrCreateKey loads the key at path, or creates one (and its .pub)
// when none exists; created tells which, so the caller can tell the user
// where it is. Concurrent callers end up with the same key.
func LoadOrCreateKey(path string) (key ed25519.PrivateKey, created bool, err error) {
	key, err = LoadKey(path)
	if err == nil || !errors.Is(err, fs.ErrNotExist) {
		return key, false, err
	}
	_, key, err = ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, false, fmt.Errorf("generating a signing key: %w", err)
	}
	if err := writeKey(path, key, false); errors.Is(err, ErrExists) {
		key, err = LoadKey(path) // another process created it first
		return key, false, err
	} else if err != nil {
		return nil, false, err
	}
	return key, true, nil
}

// GenerateKey creates a new key at path (and its .pub) and returns its
// public half. It refuses to replace an existing key (ErrExists) unless
// force is set: bundles signed with a replaced key no longer verify
// against the new one.
func GenerateKey(path string, force bool) (ed25519.PublicKey, error) {
	if path == "" {
		return nil, errors.New("no signing key path: set DAL_KEY or HOME")
	}
	pub, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generating a signing key: %w", err)
	}
	if err := writeKey(path, key, force); err != nil {
		return nil, err
	}
	return pub, nil
}

// writeKey stores key at path and its public key beside it, each
// atomically; without replace, an existing key is an ErrExists error.
func writeKey(path string, key ed25519.PrivateKey, replace bool) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("signing key %s: %w", path, err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return fmt.Errorf("signing key %s: %w", path, err)
	}
	priv := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
	if err := writeAtomic(path, priv, 0o600, replace); err != nil {
		if errors.Is(err, unix.EEXIST) {
			return fmt.Errorf("signing key %s %w: refusing to replace it (bundles signed with it would no longer verify against your key)", path, ErrExists)
		}
		return fmt.Errorf("signing key %s: %w", path, err)
	}
	pub := key.Public().(ed25519.PublicKey)
	pder, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return fmt.Errorf("public key %s: %w", PublicKeyPath(path), err)
	}
	text := append(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pder}), EncodePublicKey(pub)+"\n"...)
	if err := writeAtomic(PublicKeyPath(path), text, 0o644, true); err != nil {
		return fmt.Errorf("public key %s: %w", PublicKeyPath(path), err)
	}
	return nil
}

// writeAtomic writes data to path through a temporary file (fsync,
// rename); without replace it fails with EEXIST when path exists.
func writeAtomic(path string, data []byte, perm os.FileMode, replace bool) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	_, err = tmp.Write(data)
	if err == nil {
		err = tmp.Chmod(perm)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if replace {
		err = os.Rename(tmp.Name(), path)
	} else {
		err = renameNoReplace(tmp.Name(), path)
	}
	if err != nil {
		return err
	}
	return atomicfile.SyncDir(filepath.Dir(path))
}
