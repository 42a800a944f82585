package bundle

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"unicode/utf8"

	"github.com/dal-runtime/dal/internal/digest"
	"github.com/dal-runtime/dal/internal/safefs"
	"golang.org/x/sys/unix"
)

// entryKind is what a bundle path is on disk.
type entryKind int

const (
	kindFile entryKind = iota
	kindSymlink
	kindDir // listed only when empty
)

func (k entryKind) String() string {
	return [...]string{"a regular file", "a symbolic link", "an empty directory"}[k]
}

// entry is one covered path of a bundle tree.
type entry struct {
	rel    string // slash-separated
	kind   entryKind
	digest string // "sha256:<hex>", filled by hashEntries
	want   string // expected digest when verifying
	err    error  // from hashEntries
	// data is a small file's content as hashed (keepSmall), so that
	// the verified bytes can be served without reading the file again.
	data []byte
}

// tree is a scanned bundle directory.
type tree struct {
	entries []entry // sorted by rel
	// exposed: another user can change an entry (or the root) of the
	// tree (private.go).
	exposed bool
}

// validRel reports whether rel is a clean, relative, slash-separated path
// inside a bundle.
func validRel(rel string) error {
	if rel == "" {
		return errors.New("empty path")
	}
	if strings.HasPrefix(rel, "/") {
		return fmt.Errorf("%q is absolute", rel)
	}
	if strings.IndexByte(rel, 0) >= 0 {
		return fmt.Errorf("%q contains a NUL byte", rel)
	}
	if !utf8.ValidString(rel) {
		return fmt.Errorf("%q is not valid UTF-8", rel)
	}
	for _, seg := range strings.Split(rel, "/") {
		switch seg {
		case "":
			return fmt.Errorf("%q has an empty segment", rel)
		case ".", "..":
			return fmt.Errorf("%q has a %q segment", rel, seg)
		}
	}
	return nil
}

// reserved reports whether rel is written by this package rather than
// covered by the manifest: manifest.json, manifest.sig and replays/.
func reserved(rel string) bool {
	return rel == ManifestFile || rel == SignatureFile || rel == ReplaysDir || strings.HasPrefix(rel, ReplaysDir+"/")
}

// scanTree lists the regular files, symbolic links and empty
// directories below root (never following a link) and all its
// directories. Reserved root entries are skipped. Any other kind of file
// is an error naming it.
func scanTree(root *safefs.Dir) (*tree, error) {
	t := &tree{}
	empty := map[string]bool{} // directories without a child seen so far
	err := root.Walk("", func(rel string, fi fs.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if !t.exposed && (fi.IsDir() || !reserved(rel)) && exposed(fi) {
			t.exposed = true
		}
		if rel == "" {
			return nil
		}
		if reserved(rel) {
			if fi.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if parent := path.Dir(rel); parent != "." {
			delete(empty, parent)
		}
		if err := validRel(rel); err != nil {
			return &entryError{rel, fmt.Errorf("file name %w: bundles hold only UTF-8 names", err)}
		}
		switch typ := fi.Mode().Type(); {
		case typ.IsRegular():
			t.entries = append(t.entries, entry{rel: rel, kind: kindFile})
		case typ&fs.ModeSymlink != 0:
			t.entries = append(t.entries, entry{rel: rel, kind: kindSymlink})
		case typ.IsDir():
			empty[rel] = true
		default:
			return &entryError{rel, fmt.Errorf("%s is a %s: bundles hold only regular files, symbolic links and directories", rel, kindName(typ))}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for rel := range empty {
		t.entries = append(t.entries, entry{rel: rel, kind: kindDir})
	}
	slices.SortFunc(t.entries, func(a, b entry) int { return strings.Compare(a.rel, b.rel) })
	return t, nil
}

// entryError is a problem with the bundle entry rel.
type entryError struct {
	rel string
	err error
}

func (e *entryError) Error() string { return e.err.Error() }
func (e *entryError) Unwrap() error { return e.err }

// kindName names a file type that bundles cannot hold.
func kindName(m fs.FileMode) string {
	switch {
	case m&fs.ModeNamedPipe != 0:
		return "named pipe"
	case m&fs.ModeSocket != 0:
		return "socket"
	case m&fs.ModeDevice != 0:
		return "device"
	}
	return "special file"
}

var copyBufs = sync.Pool{New: func() any { b := make([]byte, 256<<10); return &b }}

// hashEntries fills digest (or err) of every file and symlink entry of
// es, in parallel, reading files as streams and never following links.
// With stopEarly, once an entry fails (an error, or a digest other than
// its want), entries after it are skipped: the caller reports only the
// first failure. A tree of a few entries (a consistency run's bundle) is
// hashed by the caller's goroutine: the callers that open many bundles
// open them in parallel already.
func hashEntries(root *safefs.Dir, es []entry, stopEarly bool, keep int64) {
	workers := min(runtime.GOMAXPROCS(0), 8, len(es))
	if len(es) <= smallTree {
		workers = 1
	}
	var next atomic.Int64
	var firstBad atomic.Int64
	firstBad.Store(int64(len(es)))
	var budget atomic.Int64
	budget.Store(keep)
	var wg sync.WaitGroup
	run := wg.Go
	if workers == 1 {
		run = func(f func()) { f() }
	}
	for range workers {
		run(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= len(es) {
					return
				}
				if stopEarly && int64(i) > firstBad.Load() {
					continue
				}
				e := &es[i]
				e.digest, e.data, e.err = hashEntry(root, e.rel, e.kind, &budget)
				if e.err != nil || (e.want != "" && e.digest != e.want) {
					for {
						cur := firstBad.Load()
						if int64(i) >= cur || firstBad.CompareAndSwap(cur, int64(i)) {
							break
						}
					}
				}
			}
		})
	}
	wg.Wait()
}

// smallTree is the number of entries up to which hashEntries does not
// start goroutines.
const smallTree = 8

// keepSmall is the size up to which hashEntry returns a file's content
// with its digest, while its budget lasts.
const keepSmall = 64 << 10

// hashEntry returns the digest of one path: a file's content or a link's
// target string. Directories have none. A file of at most keepSmall
// bytes that fits in what is left of budget is read whole, and its
// content is returned too (and taken off budget).
func hashEntry(root *safefs.Dir, rel string, k entryKind, budget *atomic.Int64) (string, []byte, error) {
	switch k {
	case kindSymlink:
		target, err := root.Readlink(rel)
		if err != nil {
			return "", nil, err
		}
		return digestOf([]byte(target)), nil, nil
	case kindDir:
		return "", nil, nil
	}
	f, err := root.Open(rel)
	if err != nil {
		return "", nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", nil, err
	} else if !fi.Mode().IsRegular() {
		return "", nil, fmt.Errorf("%s is no longer a regular file", rel)
	}
	if n := fi.Size(); n <= keepSmall && budget.Add(-n) >= 0 {
		data, err := io.ReadAll(io.LimitReader(f, keepSmall+1))
		if err != nil {
			return "", nil, err
		}
		if len(data) <= keepSmall {
			return digestOf(data), data, nil
		}
		// It grew while read: hash it as a large file.
		d, _, err := digest.Reader(io.MultiReader(bytes.NewReader(data), f))
		return d, nil, err
	}
	d, _, err := digest.Reader(f)
	return d, nil, err
}

func digestOf(b []byte) string { return digest.Bytes(b) }

// syncFS puts on disk everything written to the filesystem dir is on:
// one syncfs(2) rather than an fsync per file and directory, which made
// the commit of a bundle of 100 LLM calls (a prompt file each) about
// twice as slow on ext4 (docs/benchmarks.md). It also writes out what
// other programs left unwritten on that filesystem. Since Linux 5.8 it
// reports write-back errors, as fsync does.
func syncFS(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return unix.Syncfs(int(d.Fd()))
}

// writeNew writes data to p, created (not replaced, no symlink followed).
func writeNew(p string, data []byte, perm os.FileMode) error {
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, perm)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
