package bundle

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"syscall"

	"github.com/dal-runtime/dal/internal/safefs"
)

// Size limits of the files Open reads whole.
const (
	maxManifestBytes = 256 << 20
	maxSigBytes      = 1 << 10
	maxReplayBytes   = 16 << 20
)

// OpenOptions tune Open.
type OpenOptions struct {
	// TrustedKey, when set, is the only key the bundle may be signed
	// with (`dal-exec verify --key`); it is also trusted for replay
	// outcomes.
	TrustedKey ed25519.PublicKey
	// Trust, when set, is the set of keys the reader trusts (LoadTrust):
	// Open refuses a bundle signed by any other key (ErrUntrusted, naming
	// the signer's fingerprint and TrustSignerFlag) unless AllowUntrusted
	// is set. Replay outcomes count only when signed by a key of Trust
	// (or TrustedKey). Without Trust and TrustedKey, Open checks the
	// signature under the key the manifest names, which proves the
	// bundle intact but not who recorded it, and counts no replay.
	Trust *Trust
	// AllowUntrusted opens a bundle whose signer is not in Trust; its
	// Signer.Trusted says so (`dal-exec verify` without --key).
	AllowUntrusted bool
	// PrivateParent, when set, is a directory that PrivateParent found
	// private; a bundle directory right below it is not checked again
	// for directories above it that others may change, nor resolved
	// again but for its own name.
	PrivateParent string
	// Endorsed, when set, names the bundle's head by a digest that the
	// caller verified under Endorsed.Key (see Endorsement): the head's
	// format version, schema and signature, which Endorse checked, are
	// then not checked again; its digest is compared instead.
	Endorsed *Endorsement
	// TempDir is where archives are extracted ("" = os.TempDir()).
	TempDir string
	// Limits bound archive extraction; the zero value is the defaults.
	Limits ExtractLimits
}

// Signer is who signed a bundle or a replay outcome.
type Signer struct {
	Key         ed25519.PublicKey
	Fingerprint string // Fingerprint(Key)
	Trusted     bool
	// Source says why the key is trusted ("your key …", "--key …",
	// "<trusted_keys> line 3 (alice)"); "" when it is not.
	Source string
}

func (o OpenOptions) signer(pub ed25519.PublicKey) Signer {
	s := Signer{Key: pub, Fingerprint: Fingerprint(pub)}
	if o.TrustedKey != nil && bytes.Equal(pub, o.TrustedKey) {
		s.Trusted, s.Source = true, "the key given"
	} else if k, ok := o.Trust.Lookup(pub); ok {
		s.Trusted, s.Source = true, k.Source
	}
	return s
}

// Bundle is an opened, verified bundle. Close releases it.
type Bundle struct {
	Path      string    // as given to Open
	Dir       string    // root directory on disk: Path, or a private extracted copy of an archive
	Manifest  *Manifest // the verified manifest
	PublicKey ed25519.PublicKey
	// Signer is who signed manifest.sig, and whether the reader trusts
	// them.
	Signer Signer
	// Replays are the outcomes in replays/ signed by a trusted key for
	// this bundle, oldest first. Only these count (ReplayStatus).
	Replays []ReplayOutcome
	// Unverified are the other outcomes of replays/: unsigned, signed
	// by a key the reader does not trust, signed for another bundle, or
	// unreadable. They are shown, never counted.
	Unverified []UnverifiedReplay
	// Warnings are problems that do not stop the bundle from opening:
	// stray files in replays/ (which the signature does not cover).
	Warnings []string

	root           *safefs.Dir // Dir, through which every read goes
	home           *safefs.Dir // the directory given, when Dir is a private copy of it (private.go)
	opts           OpenOptions
	manifestDigest string // digest of manifest.json, which replay outcomes name
	// verified holds the small files Open read to verify them, by path:
	// ReadFile serves these bytes without reading the file again.
	verified map[string][]byte
	packing  packing
	tmp      string // extraction directory, removed by Close
}

// Open opens and verifies the bundle at path: a directory, or a .tgz or
// .tar.zst archive (recognized by content), which is extracted into a
// private temporary directory that Close removes, within opts.Limits. It
// checks, in order: manifest.json parses; its format version is one this
// package reads; it conforms to the execution-snapshot schema;
// manifest.sig is a valid signature of manifest.json's bytes under the
// manifest's public key (given an Endorsement by that key: the two files
// have the endorsed HeadDigest, in place of the checks of version, schema
// and signature, which Endorse made); that key is trusted
// (opts.TrustedKey, opts.Trust); every file, link and empty directory the manifest lists
// exists with its hash, and nothing else exists but manifest.json,
// manifest.sig and replays/. For an archive written by dal the first
// four checks run before anything but manifest.json and manifest.sig is
// extracted. Then it reads the replay outcomes of replays/ and checks
// their signatures; nothing in replays/ makes Open fail. The error is an
// *Error naming the first bad file in one sentence.
func Open(path string, opts OpenOptions) (*Bundle, error) {
	if p := opts.PrivateParent; p != "" && filepath.Dir(path) == p {
		// The parent is resolved already: only the bundle's own name
		// can be a link.
		if fi, err := os.Lstat(path); err == nil && fi.IsDir() {
			b := &Bundle{Path: path, Dir: path, opts: opts}
			if err := b.verify(); err != nil {
				b.Close()
				return nil, err
			}
			return b, nil
		}
	}
	fi, err := os.Stat(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, &Error{Bundle: path, Kind: ErrNotBundle, Err: err, msg: fmt.Sprintf("bundle %s does not exist", path)}
		}
		return nil, &Error{Bundle: path, Kind: ErrNotBundle, Err: err, msg: fmt.Sprintf("bundle %s: %v", path, err)}
	}
	b := &Bundle{Path: path, opts: opts}
	if fi.IsDir() {
		if b.Dir, err = filepath.EvalSymlinks(path); err != nil {
			return nil, &Error{Bundle: path, Kind: ErrNotBundle, Err: err, msg: fmt.Sprintf("bundle %s: %v", path, err)}
		}
	} else {
		if err := b.unpack(); err != nil {
			return nil, err
		}
	}
	if err := b.verify(); err != nil {
		b.Close()
		return nil, err
	}
	return b, nil
}

// unpack extracts an archive bundle into a private temporary directory.
func (b *Bundle) unpack() error {
	p, err := sniff(b.Path)
	if err != nil {
		return &Error{Bundle: b.Path, Kind: ErrNotBundle, Err: err, msg: fmt.Sprintf("bundle %s: %v", b.Path, err)}
	}
	if p == packDir {
		return &Error{Bundle: b.Path, Kind: ErrNotBundle,
			msg: fmt.Sprintf("%s is not a dal bundle: expected a directory, a .tgz or a .tar.zst archive", b.Path)}
	}
	tmp, err := os.MkdirTemp(b.opts.TempDir, "dal-bundle-")
	if err != nil {
		return fmt.Errorf("bundle %s: creating a directory to extract it: %w", b.Path, err)
	}
	b.packing, b.tmp, b.Dir = p, tmp, tmp
	head := func(dir string) (map[string]entryKind, error) {
		b.Dir = dir
		if err := b.openRoot(); err != nil {
			return nil, err
		}
		if err := b.verifyHead(); err != nil {
			return nil, err
		}
		return b.listed(), nil
	}
	prefix, early, warnings, err := extract(b.Path, tmp, p, b.opts.Limits, head)
	if err != nil {
		b.Close()
		var (
			tr truncated
			be *Error
			le *limitError
			se *spaceError
			ee *entryError
		)
		switch {
		case errors.As(err, &be):
			return be
		case errors.As(err, &le):
			return &Error{Bundle: b.Path, Kind: ErrLimit, Err: err, msg: fmt.Sprintf("bundle %s %s", b.Path, le.msg)}
		case errors.As(err, &se):
			return fmt.Errorf("bundle %s %s", b.Path, se.msg)
		case errors.As(err, &tr):
			return &Error{Bundle: b.Path, File: filepath.Base(b.Path), Kind: ErrCorrupt, Err: err,
				msg: fmt.Sprintf("bundle %s is truncated or damaged (%v): copy the whole file again from where it was made", b.Path, tr.err)}
		case errors.Is(err, syscall.ENOSPC), isWriteErr(err):
			return fmt.Errorf("bundle %s: extracting into %s: %w: free space there or set TMPDIR", b.Path, filepath.Dir(tmp), err)
		case errors.As(err, &ee):
			return &Error{Bundle: b.Path, File: ee.rel, Kind: ErrCorrupt, Err: err,
				msg: fmt.Sprintf("bundle %s: %v: the bundle was modified or corrupted", b.Path, err)}
		}
		return &Error{Bundle: b.Path, Kind: ErrCorrupt, Err: err,
			msg: fmt.Sprintf("bundle %s: %v: the bundle was modified or corrupted", b.Path, err)}
	}
	b.Warnings = append(b.Warnings, warnings...)
	if early {
		b.Dir = filepath.Join(tmp, filepath.FromSlash(prefix))
		return nil
	}
	b.Dir = tmp
	b.Manifest = nil // checked after extraction
	if b.root != nil {
		b.root.Close()
		b.root = nil
	}
	// An archive of a directory (tar czf b.tgz bundle/) has the bundle
	// one level down.
	if _, err := os.Lstat(filepath.Join(tmp, ManifestFile)); err != nil {
		if ents, err := os.ReadDir(tmp); err == nil && len(ents) == 1 && ents[0].IsDir() {
			b.Dir = filepath.Join(tmp, ents[0].Name())
		}
	}
	return nil
}

// Close removes an archive's extracted copy and releases the bundle's
// directory. The Bundle is unusable afterwards. Close is idempotent.
func (b *Bundle) Close() error {
	b.verified = nil
	if b.root != nil {
		b.root.Close()
		b.root = nil
	}
	if b.home != nil {
		b.home.Close()
		b.home = nil
	}
	if b.tmp == "" {
		return nil
	}
	err := os.RemoveAll(b.tmp)
	b.tmp = ""
	return err
}

// openRoot opens Dir as an untrusted tree, for every read that follows.
func (b *Bundle) openRoot() error {
	if b.root != nil {
		return nil
	}
	open := safefs.Open
	if b.tmp != "" {
		open = safefs.OpenOneMount // our own extraction: no mount inside
	}
	root, err := open(b.Dir)
	if err != nil {
		return &Error{Bundle: b.Path, Kind: ErrNotBundle, Err: err, msg: fmt.Sprintf("bundle %s: %v", b.Path, err)}
	}
	b.root = root
	return nil
}

// Root is the bundle's directory as an untrusted tree: dal's packages
// read bundle files through it (never through File's path), so that no
// symbolic link is followed and nothing outside the bundle is reached.
// It is owned by the Bundle and valid until Close.
func (b *Bundle) Root() *safefs.Dir { return b.root }

// File is the absolute path of the component file rel (slash-separated)
// on disk. It does not check rel; prefer ReadFile or OpenFile, which
// refuse symbolic links and paths the manifest does not list.
func (b *Bundle) File(rel string) string {
	return filepath.Join(b.Dir, filepath.FromSlash(rel))
}

// Has reports whether the manifest lists rel as a regular file.
func (b *Bundle) Has(rel string) bool {
	_, ok := b.Manifest.Dal.Files[rel]
	return ok
}

// OpenFile opens the regular file rel that the manifest lists, never
// following a symbolic link (in any component). The caller closes it.
func (b *Bundle) OpenFile(rel string) (*os.File, error) {
	if !b.Has(rel) {
		return nil, fmt.Errorf("bundle %s has no file %s: %w", b.Path, rel, fs.ErrNotExist)
	}
	f, err := b.root.Open(rel)
	if err != nil {
		return nil, fmt.Errorf("bundle %s: %w", b.Path, err)
	}
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("bundle %s: %s is not a regular file: the bundle changed after it was verified", b.Path, rel)
	}
	return f, nil
}

// keepVerified is how many bytes of small files Open keeps, per bundle,
// from its verification for ReadFile.
const keepVerified = 1 << 20

// ReadFile reads the regular file rel that the manifest lists, and checks
// that what it read has the manifest's hash: the bytes returned are the
// verified ones, whatever happened to the file since Open. A small file
// that Open read to verify it is not read again: those bytes are the
// verified ones.
func (b *Bundle) ReadFile(rel string) ([]byte, error) {
	if data, ok := b.verified[rel]; ok && b.Has(rel) {
		return bytes.Clone(data), nil
	}
	f, err := b.OpenFile(rel)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(f)
	if err != nil {
		return nil, fmt.Errorf("bundle %s: reading %s: %w", b.Path, rel, err)
	}
	if digestOf(data) != b.Manifest.Dal.Files[rel] {
		return nil, &Error{Bundle: b.Path, File: rel, Kind: ErrCorrupt,
			msg: fmt.Sprintf("bundle %s: %s changed after it was verified: the bundle was modified while dal read it", b.Path, rel)}
	}
	return data, nil
}

// ReadPrefix reads at most the first limit bytes of the regular file rel
// that the manifest lists, and hashes the whole file on the way (the rest
// is read and dropped): the bytes returned are the verified ones, or the
// error says the file changed since Open.
func (b *Bundle) ReadPrefix(rel string, limit int64) ([]byte, error) {
	f, err := b.OpenFile(rel)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	h := sha256.New()
	var head bytes.Buffer
	if _, err := io.Copy(io.MultiWriter(h, &head), io.LimitReader(f, limit)); err != nil {
		return nil, fmt.Errorf("bundle %s: reading %s: %w", b.Path, rel, err)
	}
	if _, err := io.Copy(h, f); err != nil {
		return nil, fmt.Errorf("bundle %s: reading %s: %w", b.Path, rel, err)
	}
	if "sha256:"+hex.EncodeToString(h.Sum(nil)) != b.Manifest.Dal.Files[rel] {
		return nil, &Error{Bundle: b.Path, File: rel, Kind: ErrCorrupt,
			msg: fmt.Sprintf("bundle %s: %s changed after it was verified: the bundle was modified while dal read it", b.Path, rel)}
	}
	return append([]byte{}, head.Bytes()...), nil // empty, not nil, for an empty file
}

// ReadJSON decodes the regular file rel into v.
func (b *Bundle) ReadJSON(rel string, v any) error {
	data, err := b.ReadFile(rel)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("bundle %s: %s is not valid JSON: %w", b.Path, rel, err)
	}
	return nil
}

// readSmall reads the regular file rel of the bundle, refusing links,
// anything but a regular file (without opening a fifo or a device) and
// files larger than limit.
func (b *Bundle) readSmall(rel string, limit int64) ([]byte, error) {
	f, err := b.root.Open(rel)
	if err != nil {
		switch fi, lerr := b.root.Lstat(rel); {
		case errors.Is(err, fs.ErrNotExist):
			return nil, err
		case lerr == nil && !fi.Mode().IsRegular():
			return nil, fmt.Errorf("is %s, not a regular file", describeMode(fi.Mode()))
		case errors.Is(err, safefs.ErrSymlink):
			return nil, errors.New("is below a symbolic link")
		}
		return nil, err
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil {
		return nil, err
	} else if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("is %s, not a regular file", describeMode(fi.Mode()))
	} else if fi.Size() > limit {
		return nil, fmt.Errorf("is larger than %d bytes", limit)
	}
	return io.ReadAll(io.LimitReader(f, limit))
}

// describeMode names a file type for a message.
func describeMode(m fs.FileMode) string {
	switch {
	case m&fs.ModeSymlink != 0:
		return "a symbolic link"
	case m.IsDir():
		return "a directory"
	}
	return "a " + kindName(m)
}

func (b *Bundle) verify() error {
	if err := b.openRoot(); err != nil {
		return err
	}
	if b.Manifest == nil {
		if err := b.verifyHead(); err != nil {
			return err
		}
	}
	err := b.verifyFiles()
	if errors.Is(err, errExposed) {
		// Verify the private copy, which nobody else can change.
		if err = b.privatize(); err == nil {
			if err = b.verifyHead(); err == nil {
				err = b.verifyFiles()
			}
		}
	}
	if err != nil {
		return err
	}
	b.loadReplays()
	if afterVerify != nil {
		afterVerify(b.Dir)
	}
	return nil
}

// verifyHead checks manifest.json and manifest.sig: parse, version,
// schema, signature, trust. It sets Manifest, PublicKey and Signer.
func (b *Bundle) verifyHead() error {
	data, err := b.readSmall(ManifestFile, maxManifestBytes)
	if errors.Is(err, fs.ErrNotExist) {
		return &Error{Bundle: b.Path, Kind: ErrNotBundle, Err: err,
			msg: fmt.Sprintf("%s is not a dal bundle: it has no %s", b.Path, ManifestFile)}
	}
	if err != nil {
		return corrupt(b.Path, ManifestFile, err, "%v", err)
	}
	// A head with the digest its endorsement names was checked when it
	// was endorsed (Endorse: format version, schema, signature, under
	// the endorsement's key): those checks are not made again.
	e := b.opts.Endorsed
	endorsed := false
	var sigText []byte
	if e != nil {
		if text, err := b.readSmall(SignatureFile, maxSigBytes); err == nil {
			sigText, endorsed = text, HeadDigest(data, text) == e.Head
		}
	}
	if !endorsed {
		if err := checkManifest(b.Path, data); err != nil {
			return err
		}
	}
	var m Manifest
	if err := json.Unmarshal(data, &m); err != nil {
		return corrupt(b.Path, ManifestFile, err, "cannot be read (%v)", err)
	}
	pub, err := base64.StdEncoding.Strict().DecodeString(m.Dal.PublicKey)
	if err != nil || len(pub) != ed25519.PublicKeySize {
		return corrupt(b.Path, ManifestFile, err, "has a malformed dal.public_key")
	}
	// An endorsement by another key than the manifest's says nothing of
	// this bundle: it is checked in full.
	if e != nil && !bytes.Equal(pub, e.Key) {
		e = nil
		if endorsed {
			endorsed = false
			if err := checkManifest(b.Path, data); err != nil {
				return err
			}
		}
	}
	if sigText == nil {
		sigText, err = b.readSmall(SignatureFile, maxSigBytes)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return corrupt(b.Path, SignatureFile, err, "is missing")
			}
			return corrupt(b.Path, SignatureFile, err, "%v", err)
		}
	}
	sig, err := decodeSignature(sigText)
	if err != nil {
		return corrupt(b.Path, SignatureFile, err, "%v", err)
	}
	switch {
	case endorsed:
	case e != nil:
		return corrupt(b.Path, ManifestFile, ErrNotEndorsed, "or %s is not the one that was endorsed (changed since)", SignatureFile)
	case !ed25519.Verify(pub, data, sig):
		return corrupt(b.Path, SignatureFile, nil, "does not verify manifest.json (one of the two was changed)")
	}
	signer := b.opts.signer(pub)
	if b.opts.TrustedKey != nil && !bytes.Equal(pub, b.opts.TrustedKey) {
		return &Error{Bundle: b.Path, File: SignatureFile, Kind: ErrUntrusted,
			msg: fmt.Sprintf("bundle %s is signed by key %s, not by the trusted key %s: it was not recorded with that key", b.Path,
				m.Dal.PublicKey, base64.StdEncoding.EncodeToString(b.opts.TrustedKey))}
	}
	if b.opts.Trust != nil && !signer.Trusted && !b.opts.AllowUntrusted {
		return &Error{Bundle: b.Path, File: SignatureFile, Kind: ErrUntrusted,
			msg: fmt.Sprintf("bundle %s is signed by key %s, which you do not trust: if you know whose key it is, pass %s %s, or add the line %q to %s",
				b.Path, signer.Fingerprint, TrustSignerFlag, signer.Fingerprint, m.Dal.PublicKey+" NAME", b.opts.Trust.trustedKeysFile())}
	}
	b.Manifest, b.PublicKey, b.Signer = &m, ed25519.PublicKey(pub), signer
	b.manifestDigest = digestOf(data)
	return nil
}

// checkManifest checks manifest.json's bytes data, of the bundle at
// path: JSON, a format version this package reads, the schema.
func checkManifest(path string, data []byte) error {
	// One generic decoding serves the version check and the schema.
	inst, err := decodeDocument(data)
	if err != nil {
		return corrupt(path, ManifestFile, err, "is not valid JSON (%v)", err)
	}
	top, _ := inst.(map[string]any)
	dal, _ := top["dal"].(map[string]any)
	fv, present := dal["format_version"]
	n, isNum := fv.(json.Number)
	v, verr := n.Int64()
	switch {
	case !present:
		return corrupt(path, ManifestFile, nil, "has no dal.format_version")
	case !isNum || verr != nil: // the schema names what it is
	case v > FormatVersion:
		return &Error{Bundle: path, File: ManifestFile, Kind: ErrVersion,
			msg: fmt.Sprintf("bundle %s has format version %d; this dal reads %d: upgrade dal", path, v, FormatVersion)}
	case v < 1:
		return corrupt(path, ManifestFile, nil, "has format version %d, which no dal writes", v)
	}
	if err := validateInstance(inst, "#"); err != nil {
		return corrupt(path, ManifestFile, err, "does not conform to the execution-snapshot schema (%v)", err)
	}
	return nil
}

// listed is the kind of every path the manifest lists, their parent
// directories included.
func (b *Bundle) listed() map[string]entryKind {
	d := b.Manifest.Dal
	out := make(map[string]entryKind, len(d.Files)+len(d.Symlinks)+len(d.EmptyDirs))
	addParents := func(rel string) {
		for i := len(rel) - 1; i > 0; i-- {
			if rel[i] == '/' {
				if _, ok := out[rel[:i]]; ok {
					return
				}
				out[rel[:i]] = kindDir
			}
		}
	}
	for rel := range d.Files {
		out[rel] = kindFile
		addParents(rel)
	}
	for rel := range d.Symlinks {
		out[rel] = kindSymlink
		addParents(rel)
	}
	for _, rel := range d.EmptyDirs {
		out[rel] = kindDir
		addParents(rel)
	}
	return out
}

// verifyFiles compares the tree on disk with the manifest's lists: first
// its shape (missing, extra or retyped paths), then every hash.
func (b *Bundle) verifyFiles() error {
	want := map[string]entry{}
	add := func(rel, digest string, k entryKind) error {
		if err := validRel(rel); err != nil || reserved(rel) {
			return corrupt(b.Path, ManifestFile, err, "lists the path %q, which a bundle cannot hold", rel)
		}
		if _, dup := want[rel]; dup {
			return corrupt(b.Path, ManifestFile, nil, "lists %s twice", rel)
		}
		want[rel] = entry{rel: rel, kind: k, want: digest}
		return nil
	}
	d := b.Manifest.Dal
	for rel, h := range d.Files {
		if err := add(rel, h, kindFile); err != nil {
			return err
		}
	}
	for rel, h := range d.Symlinks {
		if err := add(rel, h, kindSymlink); err != nil {
			return err
		}
	}
	for _, rel := range d.EmptyDirs {
		if err := add(rel, "", kindDir); err != nil {
			return err
		}
	}
	t, err := scanTree(b.root)
	if err == nil && b.tmp == "" && (t.exposed || b.exposedAbove()) {
		return errExposed
	}
	if err != nil {
		var ee *entryError
		if errors.As(err, &ee) {
			return &Error{Bundle: b.Path, File: ee.rel, Kind: ErrCorrupt, Err: err,
				msg: fmt.Sprintf("bundle %s: %v: the bundle was modified or corrupted", b.Path, err)}
		}
		return &Error{Bundle: b.Path, Kind: ErrCorrupt, Err: err,
			msg: fmt.Sprintf("bundle %s: %v: the bundle was modified or corrupted", b.Path, err)}
	}
	// Shape, in sorted path order over both lists.
	var paths []string
	have := map[string]entryKind{}
	for _, e := range t.entries {
		have[e.rel] = e.kind
		paths = append(paths, e.rel)
	}
	for rel := range want {
		if _, ok := have[rel]; !ok {
			paths = append(paths, rel)
		}
	}
	sort.Strings(paths)
	for _, rel := range paths {
		w, listed := want[rel]
		k, present := have[rel]
		switch {
		case !listed:
			return corrupt(b.Path, rel, nil, "is not listed in the manifest")
		case !present && w.kind == kindDir && b.isDir(rel):
			return corrupt(b.Path, rel, nil, "is no longer empty")
		case !present:
			return corrupt(b.Path, rel, nil, "is listed in the manifest but missing")
		case k != w.kind:
			return corrupt(b.Path, rel, nil, "is %s but the manifest lists %s", k, w.kind)
		}
	}
	// Content.
	for i := range t.entries {
		t.entries[i].want = want[t.entries[i].rel].want
	}
	hashEntries(b.root, t.entries, true, keepVerified)
	for _, e := range t.entries {
		if e.err != nil {
			return corrupt(b.Path, e.rel, e.err, "cannot be read (%v)", e.err)
		}
		if e.digest != e.want {
			return corrupt(b.Path, e.rel, nil, "does not match its hash in the manifest")
		}
	}
	b.verified = map[string][]byte{}
	for _, e := range t.entries {
		if e.data != nil {
			b.verified[e.rel] = e.data
		}
	}
	return nil
}

func (b *Bundle) isDir(rel string) bool {
	fi, err := b.root.Lstat(rel)
	return err == nil && fi.IsDir()
}

func isDir(p string) bool {
	fi, err := os.Lstat(p)
	return err == nil && fi.IsDir()
}
