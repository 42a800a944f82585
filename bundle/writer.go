package bundle

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/dal-runtime/dal/internal/atomicfile"
	"github.com/dal-runtime/dal/internal/leftover"

	"golang.org/x/sys/unix"

	"github.com/dal-runtime/dal/internal/safefs"
)

// Writer builds a bundle in a staging directory beside its output and
// publishes it atomically with Commit. A Writer is used by one goroutine,
// except that WriteFile and WriteJSON may run concurrently for distinct
// paths. Every Writer ends with Commit or Abort; `defer w.Abort()` right
// after Create is safe, Abort being a no-op after a successful Commit.
type Writer struct {
	out     string
	staging string
	packing packing
	done    bool
	held    *leftover.Held // marks staging as a live writer's (Leftovers)
}

// commitHook, when set (by tests), is called at each stage of Commit:
// "hashed", "manifest", "synced", "published".
var commitHook func(stage string)

// Create starts a bundle that Commit will publish at out: a directory, or
// a single archive when out ends in .tgz, .tar.gz or .tar.zst. It refuses
// when out exists (ErrExists) or its parent directory does not. The
// staging directory is <dir of out>/.<base of out>.partial-XXXX; a process
// that dies before Commit leaves it there, never a bundle at out; the next
// Create for the same out removes it (a live writer's is locked and kept).
func Create(out string) (*Writer, error) {
	out = filepath.Clean(out)
	if _, err := os.Lstat(out); err == nil {
		return nil, fmt.Errorf("bundle %s: %w: choose another path or remove it", out, ErrExists)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("bundle %s: %w", out, err)
	}
	parent := filepath.Dir(out)
	if fi, err := os.Stat(parent); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("bundle %s: directory %s does not exist: create it first", out, parent)
	}
	// Staging directories of writers of out that died are removed first;
	// a live writer's is locked (internal/leftover) and kept.
	leftover.Sweep(parent, "."+escapeGlob(filepath.Base(out))+".partial-*")
	staging, err := os.MkdirTemp(parent, "."+filepath.Base(out)+".partial-")
	if err != nil {
		return nil, writeErr(out, "the staging directory", err)
	}
	held, err := leftover.Hold(staging)
	if err != nil {
		os.RemoveAll(staging)
		return nil, writeErr(out, "the staging directory", err)
	}
	return &Writer{out: out, staging: staging, packing: packingFor(out), held: held}, nil
}

// Leftovers lists the staging directories (and partial archives) that
// writers of out left behind when their process died. They hold no
// usable bundle and may be removed.
func Leftovers(out string) ([]string, error) {
	out = filepath.Clean(out)
	return filepath.Glob(filepath.Join(filepath.Dir(out), "."+escapeGlob(filepath.Base(out))+".partial-*"))
}

func escapeGlob(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `*`, `\*`, `?`, `\?`, `[`, `\[`)
	return r.Replace(s)
}

// Dir is the staging root. Callers may write or copy trees into it
// directly; everything in it at Commit is covered by the manifest, except
// that manifest.json, manifest.sig and replays/ are reserved.
func (w *Writer) Dir() string { return w.staging }

// Out is the path Commit publishes to.
func (w *Writer) Out() string { return w.out }

// WriteFile writes data to the slash-separated path rel inside the
// staging directory, creating parent directories. It refuses a path that
// would leave the bundle, including through a symbolic link.
func (w *Writer) WriteFile(rel string, data []byte) error {
	if w.done {
		return fmt.Errorf("bundle %s: writing %s after Commit or Abort", w.out, rel)
	}
	if err := validRel(rel); err != nil {
		return fmt.Errorf("bundle %s: bad path: %w", w.out, err)
	}
	if reserved(rel) {
		return fmt.Errorf("bundle %s: %s is reserved: Commit writes it", w.out, rel)
	}
	if err := w.mkdirs(rel); err != nil {
		return err
	}
	p := filepath.Join(w.staging, filepath.FromSlash(rel))
	if err := os.WriteFile(p, data, 0o644); err != nil {
		return writeErr(w.out, rel, err)
	}
	return nil
}

// mkdirs creates rel's parent directories, refusing to pass through a
// symbolic link or a file.
func (w *Writer) mkdirs(rel string) error {
	segs := strings.Split(rel, "/")
	p := w.staging
	for _, s := range segs[:len(segs)-1] {
		p = filepath.Join(p, s)
		fi, err := os.Lstat(p)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			if err := os.Mkdir(p, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
				return writeErr(w.out, rel, err)
			}
		case err != nil:
			return writeErr(w.out, rel, err)
		case !fi.IsDir():
			return fmt.Errorf("bundle %s: cannot write %s: a parent is not a directory", w.out, rel)
		}
	}
	return nil
}

// WriteJSON writes v as indented JSON to rel (see WriteFile).
func (w *Writer) WriteJSON(rel string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("bundle %s: encoding %s: %w", w.out, rel, err)
	}
	return w.WriteFile(rel, append(b, '\n'))
}

// Commit completes and publishes the bundle: it hashes every file of the
// staging directory (sorted, streaming, in parallel), fills m.Dal (files,
// symlinks, empty directories, public key, format version) and m's other
// defaults, checks m against the schema, writes manifest.json and its
// ed25519 signature manifest.sig, syncs the staging directory's
// filesystem (every file and directory of the bundle is on disk; an
// archive is synced once packed instead), renames the staging directory to out (or packs it into the archive
// out) and fsyncs out's parent. m is modified.
//
// On any error the staging directory is removed and nothing is left at
// out. A crash at any point leaves either no bundle at out or a complete
// one. Commit ends the Writer.
func (w *Writer) Commit(m *Manifest, key ed25519.PrivateKey) error {
	if w.done {
		return fmt.Errorf("bundle %s: Commit after Commit or Abort", w.out)
	}
	w.done = true
	defer w.held.Release()
	if err := w.commit(m, key); err != nil {
		os.RemoveAll(w.staging)
		return err
	}
	return nil
}

func (w *Writer) commit(m *Manifest, key ed25519.PrivateKey) error {
	if len(key) != ed25519.PrivateKeySize {
		return fmt.Errorf("bundle %s: the signing key is not an ed25519 private key", w.out)
	}
	for _, r := range []string{ManifestFile, SignatureFile, ReplaysDir} {
		if _, err := os.Lstat(filepath.Join(w.staging, r)); err == nil {
			return fmt.Errorf("bundle %s: the staging directory holds %s, which is reserved", w.out, r)
		}
	}
	root, err := safefs.OpenOneMount(w.staging)
	if err != nil {
		return fmt.Errorf("bundle %s: %w", w.out, err)
	}
	defer root.Close()
	t, err := scanTree(root)
	if err != nil {
		return fmt.Errorf("bundle %s: %w", w.out, err)
	}
	hashEntries(root, t.entries, true, 0)
	m.Dal.Files = map[string]string{}
	m.Dal.Symlinks = nil
	m.Dal.EmptyDirs = nil
	for _, e := range t.entries {
		if e.err != nil {
			return writeErr(w.out, e.rel, e.err)
		}
		switch e.kind {
		case kindFile:
			m.Dal.Files[e.rel] = e.digest
		case kindSymlink:
			if m.Dal.Symlinks == nil {
				m.Dal.Symlinks = map[string]string{}
			}
			m.Dal.Symlinks[e.rel] = e.digest
		case kindDir:
			m.Dal.EmptyDirs = append(m.Dal.EmptyDirs, e.rel)
		}
	}
	hook("hashed")
	m.Dal.PublicKey = base64.StdEncoding.EncodeToString(key.Public().(ed25519.PublicKey))
	if err := m.fillDefaults(time.Now()); err != nil {
		return fmt.Errorf("bundle %s: %w", w.out, err)
	}
	data, err := marshalManifest(m)
	if err != nil {
		return fmt.Errorf("bundle %s: encoding the manifest: %w", w.out, err)
	}
	if err := ValidateManifest(data); err != nil {
		return fmt.Errorf("bundle %s: the manifest does not conform to the execution-snapshot schema: %w", w.out, err)
	}
	sig := encodeSignature(ed25519.Sign(key, data))
	if err := writeNew(filepath.Join(w.staging, ManifestFile), data, 0o644); err != nil {
		return writeErr(w.out, ManifestFile, err)
	}
	if err := writeNew(filepath.Join(w.staging, SignatureFile), sig, 0o644); err != nil {
		return writeErr(w.out, SignatureFile, err)
	}
	hook("manifest")
	// An archive is synced as a whole file; the staging directory it is
	// packed from then goes.
	if w.packing == packDir {
		if err := syncFS(w.staging); err != nil {
			return writeErr(w.out, "its files", err)
		}
	}
	hook("synced")
	if w.packing != packDir {
		if err := packTo(w.staging, w.out, w.packing, false); err != nil {
			return err
		}
		os.RemoveAll(w.staging)
	} else if err := publish(w.staging, w.out); err != nil {
		return err
	}
	hook("published")
	return nil
}

func hook(stage string) {
	if commitHook != nil {
		commitHook(stage)
	}
}

// publish renames the finished directory or file tmp to out, refusing to
// replace anything, and fsyncs out's parent.
func publish(tmp, out string) error {
	err := renameNoReplace(tmp, out)
	if errors.Is(err, unix.EEXIST) {
		return fmt.Errorf("bundle %s: %w (created while recording): choose another path or remove it", out, ErrExists)
	}
	if err != nil {
		return writeErr(out, "the bundle", err)
	}
	if err := atomicfile.SyncDir(filepath.Dir(out)); err != nil {
		return writeErr(out, "its directory", err)
	}
	return nil
}

// Abort removes the staging directory. It is a no-op after Commit.
func (w *Writer) Abort() error {
	if w.done {
		return nil
	}
	w.done = true
	defer w.held.Release()
	if err := os.RemoveAll(w.staging); err != nil {
		return fmt.Errorf("bundle %s: removing the staging directory: %w", w.out, err)
	}
	return nil
}

// encodeSignature is the manifest.sig encoding: standard base64 of the 64
// signature bytes and a newline.
func encodeSignature(sig []byte) []byte {
	return []byte(base64.StdEncoding.EncodeToString(sig) + "\n")
}

// decodeSignature parses manifest.sig strictly: any other byte string,
// including a different base64 spelling of the same bytes, is refused.
func decodeSignature(b []byte) ([]byte, error) {
	s, ok := strings.CutSuffix(string(b), "\n")
	if !ok || strings.ContainsAny(s, "\r\n") {
		return nil, errors.New("is not one line")
	}
	sig, err := base64.StdEncoding.Strict().DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("is not base64: %w", err)
	}
	if len(sig) != ed25519.SignatureSize {
		return nil, fmt.Errorf("holds %d bytes, not %d", len(sig), ed25519.SignatureSize)
	}
	return sig, nil
}
