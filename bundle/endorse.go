package bundle

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"

	"github.com/dal-runtime/dal/internal/digest"
	"github.com/dal-runtime/dal/internal/safefs"
)

// Endorsement names a bundle's head (manifest.json and manifest.sig) by
// its digest, in a document the caller verified under Key: a
// consistency shard's shard.json, signed by the key its runs were
// recorded with, lists each run's head (Endorse). Open given an
// Endorsement checks that the bundle's head has that digest and that its
// manifest names Key, and then does not check the head's format version,
// schema and signature again: Endorse checked them, and the digest binds
// these exact bytes to that check. Everything else Open checks (trust,
// every file's hash, nothing unlisted) is checked as without it.
type Endorsement struct {
	Key  ed25519.PublicKey
	Head string // HeadDigest of manifest.json and manifest.sig
}

// HeadDigest is the digest that names a bundle's head: the SHA-256 of
// the digests of manifest.json's and manifest.sig's bytes, one per line,
// so that no byte can move from one file to the other unnoticed.
func HeadDigest(manifest, sig []byte) string {
	return digest.Bytes([]byte(digestOf(manifest) + "\n" + digestOf(sig) + "\n"))
}

// Endorse reads the head of the bundle directory dir, checks it as Open
// does (manifest.json is JSON of a format version this package reads and
// conforms to the schema; it names key; manifest.sig is a valid signature
// of it under key) and returns the head's HeadDigest, for a document
// signed under key to list (see Endorsement). Open checks the rest.
func Endorse(dir string, key ed25519.PublicKey) (string, error) {
	root, err := safefs.Open(dir)
	if err != nil {
		return "", fmt.Errorf("bundle %s: %w", dir, err)
	}
	defer root.Close()
	b := &Bundle{Path: dir, Dir: dir, root: root}
	data, err := b.readSmall(ManifestFile, maxManifestBytes)
	if errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("%s is not a dal bundle: it has no %s", dir, ManifestFile)
	} else if err != nil {
		return "", corrupt(dir, ManifestFile, err, "%v", err)
	}
	if err := checkManifest(dir, data); err != nil {
		return "", err
	}
	var m struct {
		Dal struct {
			PublicKey string `json:"public_key"`
		} `json:"dal"`
	}
	if err := json.Unmarshal(data, &m); err != nil {
		return "", corrupt(dir, ManifestFile, err, "cannot be read (%v)", err)
	}
	if pub, err := base64.StdEncoding.Strict().DecodeString(m.Dal.PublicKey); err != nil || !bytes.Equal(pub, key) {
		return "", &Error{Bundle: dir, File: SignatureFile, Kind: ErrUntrusted,
			msg: fmt.Sprintf("bundle %s is signed by key %s, not by key %s: it was not recorded with that key", dir,
				m.Dal.PublicKey, base64.StdEncoding.EncodeToString(key))}
	}
	sigText, err := b.readSmall(SignatureFile, maxSigBytes)
	if err != nil {
		return "", corrupt(dir, SignatureFile, err, "%v", err)
	}
	sig, err := decodeSignature(sigText)
	if err != nil {
		return "", corrupt(dir, SignatureFile, err, "%v", err)
	}
	if !ed25519.Verify(key, data, sig) {
		return "", corrupt(dir, SignatureFile, nil, "does not verify manifest.json (one of the two was changed)")
	}
	return HeadDigest(data, sigText), nil
}
