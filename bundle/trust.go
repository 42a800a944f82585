package bundle

import (
	"bufio"
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/dal-runtime/dal/internal/plural"
)

// TrustSignerFlag is the command-line flag that accepts, for one
// command, a bundle signed by a key the reader does not otherwise trust.
// It takes the key's Fingerprint (or the key itself, base64); refusals
// name it.
const TrustSignerFlag = "--trust-signer"

// Fingerprint is how messages name an ed25519 public key: "SHA256:"
// and the unpadded standard base64 of the SHA-256 of the 32 key bytes
// (43 characters, in the style of OpenSSH fingerprints, though OpenSSH
// hashes its own key encoding and so prints another value).
func Fingerprint(pub ed25519.PublicKey) string {
	sum := sha256.Sum256(pub)
	return "SHA256:" + base64.RawStdEncoding.EncodeToString(sum[:])
}

// TrustOptions name where LoadTrust finds the keys the reader trusts.
type TrustOptions struct {
	// OwnKey is the user's signing key (DefaultKeyPath()); its public
	// half (PublicKeyPath(OwnKey), else derived from the key itself) is
	// trusted. "" or a missing key: none.
	OwnKey string
	// Keys are public key files the user named (`--key FILE`); each must
	// exist.
	Keys []string
	// TrustedKeysFile is the trusted-keys file (DefaultTrustedKeysPath());
	// "" or missing: none.
	TrustedKeysFile string
	// Signers are fingerprints (or base64 keys) the user accepts for this
	// command only (TrustSignerFlag).
	Signers []string
}

// DefaultTrustOptions trusts the user's own key and the default
// trusted-keys file.
func DefaultTrustOptions() TrustOptions {
	return TrustOptions{OwnKey: DefaultKeyPath(), TrustedKeysFile: DefaultTrustedKeysPath()}
}

// DefaultTrustedKeysPath is $DAL_TRUSTED_KEYS, else <user config
// dir>/dal/trusted_keys (~/.config/dal/trusted_keys), or "" when neither
// is known.
func DefaultTrustedKeysPath() string {
	if p := os.Getenv("DAL_TRUSTED_KEYS"); p != "" {
		return p
	}
	dir, err := os.UserConfigDir()
	if err != nil {
		return ""
	}
	return filepath.Join(dir, "dal", "trusted_keys")
}

// TrustedKey is one key of a Trust and why it is trusted.
type TrustedKey struct {
	Key ed25519.PublicKey
	// Source says where the trust comes from, for messages: "your key
	// ~/.config/dal/signing.key", "--key alice.pub", "trusted_keys line
	// 3 (alice@ci)", "--trust-signer".
	Source string
}

// Trust is a set of public keys a reader trusts to sign bundles and
// replay outcomes. The zero Trust (and a nil *Trust) trusts no key.
type Trust struct {
	keys    map[string]TrustedKey // by string(key bytes)
	signers map[string]bool       // fingerprints accepted for one command
	file    string                // the trusted-keys file, for messages
	// Sources lists what was read, for messages ("your key …", "… (3 keys)").
	Sources []string
}

// Lookup reports whether pub is trusted, and why.
func (t *Trust) Lookup(pub ed25519.PublicKey) (TrustedKey, bool) {
	if t == nil {
		return TrustedKey{}, false
	}
	if k, ok := t.keys[string(pub)]; ok {
		return k, true
	}
	if t.signers[Fingerprint(pub)] {
		return TrustedKey{Key: pub, Source: TrustSignerFlag + " " + Fingerprint(pub)}, true
	}
	return TrustedKey{}, false
}

// trustedKeysFile names the trusted-keys file for a message.
func (t *Trust) trustedKeysFile() string {
	if t != nil && t.file != "" {
		return t.file
	}
	if p := DefaultTrustedKeysPath(); p != "" {
		return p
	}
	return "your trusted-keys file"
}

// Add trusts pub, with source as the reason.
func (t *Trust) Add(pub ed25519.PublicKey, source string) {
	if t.keys == nil {
		t.keys = map[string]TrustedKey{}
	}
	if _, dup := t.keys[string(pub)]; !dup {
		t.keys[string(pub)] = TrustedKey{Key: bytes.Clone(pub), Source: source}
	}
}

// Len is the number of keys trusted (not counting TrustOptions.Signers).
func (t *Trust) Len() int {
	if t == nil {
		return 0
	}
	return len(t.keys)
}

// LoadTrust builds the trust set o describes. A missing own key or
// trusted-keys file is no error (they trust nothing); a named --key that
// cannot be read, a malformed trusted-keys line, a trusted-keys file or
// own public key that other users can write, or a malformed signer is.
func LoadTrust(o TrustOptions) (*Trust, error) {
	t := &Trust{keys: map[string]TrustedKey{}, signers: map[string]bool{}}
	if o.OwnKey != "" {
		pub, src, err := loadOwnPublicKey(o.OwnKey)
		if err != nil {
			return nil, err
		}
		if pub != nil {
			t.Add(pub, "your key "+src)
			t.Sources = append(t.Sources, "your key "+src)
		}
	}
	for _, p := range o.Keys {
		pub, err := LoadPublicKey(p)
		if err != nil {
			return nil, err
		}
		t.Add(pub, "--key "+p)
		t.Sources = append(t.Sources, "--key "+p)
	}
	t.file = o.TrustedKeysFile
	if o.TrustedKeysFile != "" {
		n, err := t.loadTrustedKeys(o.TrustedKeysFile)
		if err != nil {
			return nil, err
		}
		if n > 0 {
			t.Sources = append(t.Sources, fmt.Sprintf("%s (%s)", o.TrustedKeysFile, plural.Count(n, "key", "keys")))
		}
	}
	for _, s := range o.Signers {
		fp, err := parseSigner(s)
		if err != nil {
			return nil, err
		}
		t.signers[fp] = true
	}
	return t, nil
}

// parseSigner accepts a fingerprint or a base64 public key and returns
// the fingerprint.
func parseSigner(s string) (string, error) {
	s = strings.TrimSpace(s)
	if rest, ok := strings.CutPrefix(s, "SHA256:"); ok {
		if b, err := base64.RawStdEncoding.Strict().DecodeString(rest); err == nil && len(b) == sha256.Size {
			return s, nil
		}
	} else if b, err := base64.StdEncoding.Strict().DecodeString(s); err == nil && len(b) == ed25519.PublicKeySize {
		return Fingerprint(b), nil
	}
	return "", fmt.Errorf("%s %q is neither a key fingerprint (SHA256:…, as refusals print it) nor a base64 public key: copy it from the refusal", TrustSignerFlag, s)
}

// loadOwnPublicKey reads the public half of the user's key at keyPath:
// its .pub file, else the private key itself. A missing key is (nil, nil).
func loadOwnPublicKey(keyPath string) (ed25519.PublicKey, string, error) {
	pubPath := PublicKeyPath(keyPath)
	for _, p := range []string{pubPath, keyPath} {
		fi, err := os.Stat(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, "", fmt.Errorf("your key %s: %w", p, err)
		}
		if fi.Mode().Perm()&0o022 != 0 {
			return nil, "", fmt.Errorf("your key %s can be written by other users, who could make you trust their bundles: run chmod go-w %s", p, p)
		}
		pub, err := LoadPublicKey(p)
		if err != nil {
			return nil, "", err
		}
		return pub, keyPath, nil
	}
	return nil, "", nil
}

// Bounds of a trusted-keys file.
const (
	maxTrustedKeysBytes = 1 << 20
	maxTrustedKeyLine   = 4 << 10
)

// loadTrustedKeys adds the keys of a trusted-keys file (format in the
// package comment) and returns how many it held.
func (t *Trust) loadTrustedKeys(path string) (int, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("trusted keys %s: %w", path, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return 0, fmt.Errorf("trusted keys %s: %w", path, err)
	}
	switch {
	case !fi.Mode().IsRegular():
		return 0, fmt.Errorf("trusted keys %s is not a regular file: make it one public key per line", path)
	case fi.Mode().Perm()&0o022 != 0:
		return 0, fmt.Errorf("trusted keys %s can be written by other users, who could make you trust their bundles: run chmod go-w %s", path, path)
	case fi.Size() > maxTrustedKeysBytes:
		return 0, fmt.Errorf("trusted keys %s is larger than %d bytes: it holds one public key per line", path, maxTrustedKeysBytes)
	}
	sc := bufio.NewScanner(io.LimitReader(f, maxTrustedKeysBytes))
	sc.Buffer(make([]byte, 0, 256), maxTrustedKeyLine)
	n := 0
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		field, comment, _ := strings.Cut(text, " ")
		if f, c, ok := strings.Cut(text, "\t"); ok && len(f) < len(field) {
			field, comment = f, c
		}
		pub, err := base64.StdEncoding.Strict().DecodeString(field)
		if err != nil || len(pub) != ed25519.PublicKeySize {
			return 0, fmt.Errorf("trusted keys %s line %d is not a public key: each line is a base64 ed25519 key as in a .pub file's last line, then an optional comment", path, line)
		}
		src := fmt.Sprintf("%s line %d", path, line)
		if comment = strings.TrimSpace(comment); comment != "" {
			src += " (" + comment + ")"
		}
		t.Add(pub, src)
		n++
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("trusted keys %s: %w: each line is one public key and a short comment", path, err)
	}
	return n, nil
}
