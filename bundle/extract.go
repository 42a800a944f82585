package bundle

import (
	"archive/tar"
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"golang.org/x/sys/unix"

	"github.com/dal-runtime/dal/internal/plural"
	"github.com/dal-runtime/dal/internal/safefs"
)

// Flags that raise the extraction limits; refusals name them.
const (
	MaxExtractBytesFlag   = "--max-extract-bytes"
	MaxExtractEntriesFlag = "--max-extract-entries"
)

// Default extraction limits (see ExtractLimits).
const (
	DefaultMaxExtractBytes          int64 = 8 << 30
	DefaultMaxExtractEntries              = 1_000_000
	DefaultMaxEntriesBeforeManifest       = 10_000
	DefaultMaxExtractRatio          int64 = 1000
	// defaultRatioFloor: the ratio guard applies only once this much
	// is written, so small, very repetitive bundles are never refused.
	defaultRatioFloor int64 = 256 << 20
	// maxZstdWindow is the largest zstd window accepted: the zstd
	// tool's own default limit for decompression (--long=27).
	maxZstdWindow = 128 << 20
	// maxReplayFiles is how many files of replays/ an archive may
	// hold; more are skipped with a warning.
	maxReplayFiles = 20_000
)

// ExtractLimits bound what opening an archive bundle may write to disk.
// They are checked while the archive streams, each before the entry
// that would exceed it is written, so a decompression bomb is refused
// after at most one entry's worth of work, never after filling the disk.
// A zero field takes its default; a negative one turns the check off.
type ExtractLimits struct {
	// MaxBytes caps the sum of the sizes the archive's entries declare
	// (default 8 GiB: the largest workspace change a run of an agent
	// plausibly records, fs-diff and fs-pre together, and still a size
	// a temporary filesystem can spare). Besides it, extraction never
	// leaves less than 5% (at most 1 GiB) of the temporary filesystem
	// free.
	MaxBytes int64
	// MaxEntries caps the archive's entries (default 1,000,000: a
	// workspace of a million files is already far beyond what agents
	// change in a run, and the entries cost about 0.1 ms each).
	MaxEntries int
	// MaxEntriesBeforeManifest caps the entries before manifest.json
	// (default 10,000). dal writes manifest.json and manifest.sig first,
	// so that the signature, the signer's trust and the listing are
	// checked before anything else is extracted; archives made by other
	// tools, or by dal before 2026-12, have it later.
	MaxEntriesBeforeManifest int
	// MaxRatio caps written bytes per compressed byte read, once 256 MiB
	// are written (default 1000: text bundles compress 5 to 50 times; a
	// bomb, tens of thousands of times).
	MaxRatio int64

	ratioFloor int64 // tests lower it; 0: defaultRatioFloor
}

// WithMaxBytes is l with MaxBytes n and no ratio guard: what a user who
// passes MaxExtractBytesFlag asks for.
func (l ExtractLimits) WithMaxBytes(n int64) ExtractLimits {
	l.MaxBytes, l.MaxRatio = n, -1
	return l
}

// WithMaxEntries is l with MaxEntries and MaxEntriesBeforeManifest n:
// what a user who passes MaxExtractEntriesFlag asks for.
func (l ExtractLimits) WithMaxEntries(n int) ExtractLimits {
	l.MaxEntries, l.MaxEntriesBeforeManifest = n, n
	return l
}

func (l ExtractLimits) withDefaults() ExtractLimits {
	if l.MaxBytes == 0 {
		l.MaxBytes = DefaultMaxExtractBytes
	}
	if l.MaxEntries == 0 {
		l.MaxEntries = DefaultMaxExtractEntries
	}
	if l.MaxEntriesBeforeManifest == 0 {
		l.MaxEntriesBeforeManifest = DefaultMaxEntriesBeforeManifest
	}
	if l.MaxRatio == 0 {
		l.MaxRatio = DefaultMaxExtractRatio
	}
	if l.ratioFloor == 0 {
		l.ratioFloor = defaultRatioFloor
	}
	return l
}

// limitError: the archive exceeds an ExtractLimits bound.
type limitError struct{ msg string }

func (e *limitError) Error() string { return e.msg }

// spaceError: the archive would not fit in the temporary filesystem.
type spaceError struct{ msg string }

func (e *spaceError) Error() string { return e.msg }

// headCheck verifies manifest.json and manifest.sig, extracted into dir,
// and returns the kind of every path the manifest lists, parents
// included (as kindDir).
type headCheck func(dir string) (map[string]entryKind, error)

// extractor unpacks one archive into an empty directory.
type extractor struct {
	dst  string
	root *safefs.Dir
	lim  ExtractLimits
	head headCheck

	seen     map[string]byte // name -> tar type flag of what was created
	entries  int
	declared int64 // sizes declared by regular-file entries
	written  int64
	read     *countingReader // compressed bytes read
	avail    int64           // bytes that may be written; -1: unknown

	files    int    // non-directory entries so far
	manifest bool   // an entry named manifest.json was seen
	prefix   string // "" or "D/": where manifest.json was, when it came first
	early    bool   // manifest.json came first: prefix is known
	listed   map[string]entryKind
	replays  int
	skipped  int
	warnings []string
	buf      []byte
}

// extract unpacks archive (of packing p) into the empty directory dst.
// It accepts only regular files, directories and symbolic links with
// clean relative names; it creates every entry beneath dst through
// internal/safefs, which never follows a symbolic link nor leaves dst
// (openat2 RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS|RESOLVE_NO_XDEV from a
// descriptor of dst, O_CREAT|O_EXCL|O_NOFOLLOW), and refuses an entry that
// would be written through a link or over another entry (tar-slip). Links
// are created, never followed. When manifest.json and manifest.sig are
// the archive's first files, head checks them before anything else is
// extracted, and every later entry must be one the manifest lists (or a
// replay outcome). Errors name the archive's entry; the caller adds the
// bundle. It returns the prefix ("" or "D/") when it is known and the
// warnings (entries of replays/ it skipped).
func extract(archive, dst string, p packing, lim ExtractLimits, head headCheck) (prefix string, early bool, warnings []string, err error) {
	f, err := os.Open(archive)
	if err != nil {
		return "", false, nil, err
	}
	defer f.Close()
	x := &extractor{dst: dst, lim: lim.withDefaults(), head: head, seen: map[string]byte{},
		read: &countingReader{r: f}, avail: freeSpace(dst)}
	if x.root, err = safefs.OpenOneMount(dst); err != nil {
		return "", false, nil, err
	}
	defer x.root.Close()
	var r io.Reader
	switch p {
	case packTgz:
		zr, err := gzip.NewReader(bufio.NewReaderSize(x.read, 1<<20))
		if err != nil {
			return "", false, nil, truncated{err}
		}
		defer zr.Close()
		r = zr
	case packZstd:
		zr, err := zstd.NewReader(bufio.NewReaderSize(x.read, 1<<20), zstd.WithDecoderConcurrency(1),
			zstd.WithDecoderMaxWindow(maxZstdWindow))
		if err != nil {
			return "", false, nil, truncated{err}
		}
		defer zr.Close()
		r = zr
	default:
		return "", false, nil, errors.New("not an archive")
	}
	buf := copyBufs.Get().(*[]byte)
	defer copyBufs.Put(buf)
	x.buf = *buf
	if err := x.run(tar.NewReader(r)); err != nil {
		return "", false, nil, err
	}
	// Read the compressed stream to its end so that its trailer (sizes,
	// checksums) is checked too.
	if _, err := io.Copy(io.Discard, r); err != nil {
		return "", false, nil, truncated{err}
	}
	if x.skipped > 0 {
		x.warnings = append(x.warnings, fmt.Sprintf("%s of %s/ %s not extracted: %s not replay outcomes", plural.Count(x.skipped, "entry", "entries"), ReplaysDir, plural.Verb(x.skipped, "was", "were"), plural.Verb(x.skipped, "it is", "they are")))
	}
	return x.prefix, x.early, x.warnings, nil
}

func (x *extractor) run(tr *tar.Reader) error {
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil && !errors.Is(err, tar.ErrInsecurePath) {
			return truncated{err}
		}
		x.entries++
		if x.lim.MaxEntries > 0 && x.entries > x.lim.MaxEntries {
			return &limitError{fmt.Sprintf("holds more than %d entries: if you trust it, pass %s N to raise the limit", x.lim.MaxEntries, MaxExtractEntriesFlag)}
		}
		if !x.manifest && x.lim.MaxEntriesBeforeManifest > 0 && x.entries > x.lim.MaxEntriesBeforeManifest {
			return &limitError{fmt.Sprintf("holds more than %d entries before its %s (it was not written by this dal, or is not a bundle): if you trust it, pass %s N to raise the limit",
				x.lim.MaxEntriesBeforeManifest, ManifestFile, MaxExtractEntriesFlag)}
		}
		if h.Typeflag == tar.TypeXGlobalHeader {
			continue
		}
		if err := x.entry(tr, h); err != nil {
			return err
		}
	}
}

var replayFile = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[0-9]{4,9}\.json(\.sig)?$`) })

// entry extracts (or skips) one archive entry.
func (x *extractor) entry(tr *tar.Reader, h *tar.Header) error {
	name := strings.TrimPrefix(h.Name, "./")
	if h.Typeflag == tar.TypeDir {
		name = strings.TrimSuffix(name, "/")
		if name == "" || name == "." {
			return nil
		}
	}
	if err := validRel(name); err != nil {
		if strings.HasPrefix(name, "/") || strings.Contains("/"+name+"/", "/../") {
			return fmt.Errorf("archive entry %w: it would be written outside the bundle", err)
		}
		return fmt.Errorf("archive entry %w: bundles hold only clean, UTF-8 names", err)
	}
	switch h.Typeflag {
	case tar.TypeDir, tar.TypeSymlink:
	case tar.TypeReg:
		if h.Size > 0 {
			x.declared += h.Size
		}
		if x.lim.MaxBytes > 0 && x.declared > x.lim.MaxBytes {
			return &limitError{fmt.Sprintf("expands to more than %s (at %q): if you trust it, pass %s SIZE to raise the limit",
				formatBytes(x.lim.MaxBytes), name, MaxExtractBytesFlag)}
		}
		if x.avail >= 0 && x.declared > x.avail {
			return &spaceError{fmt.Sprintf("needs more than the %s free in %s to be extracted (at %q): free space there or set TMPDIR to a larger filesystem",
				formatBytes(x.avail), x.dst, name)}
		}
	default:
		return fmt.Errorf("archive entry %q is of tar type %q: bundles hold only regular files, symbolic links and directories", name, h.Typeflag)
	}
	if h.Typeflag != tar.TypeDir {
		x.files++
		if path.Base(name) == ManifestFile && strings.Count(name, "/") <= 1 {
			if x.files == 1 {
				x.early, x.prefix = true, strings.TrimSuffix(name, ManifestFile)
			}
			x.manifest = true
		}
	}
	if x.early && !strings.HasPrefix(name+"/", x.prefix) {
		return fmt.Errorf("archive entry %q lies outside the bundle's directory %s", name, x.prefix)
	}
	rel := strings.TrimPrefix(name, x.prefix)
	if x.early && reserved(rel) && rel != ManifestFile && rel != SignatureFile {
		// replays/: only the directory, outcomes and their signatures
		// are extracted; nothing there is covered by the signature, so
		// nothing there is fatal either.
		if rel == ReplaysDir {
			if h.Typeflag != tar.TypeDir {
				x.skipped++
				return nil
			}
		} else if base := strings.TrimPrefix(rel, ReplaysDir+"/"); h.Typeflag != tar.TypeReg || !replayFile().MatchString(base) ||
			x.replays >= maxReplayFiles || x.seen[x.prefix+ReplaysDir] == tar.TypeSymlink {
			x.skipped++
			return nil
		} else {
			x.replays++
		}
	} else if x.listed != nil && !reserved(rel) {
		k, ok := x.listed[rel]
		want := map[entryKind]byte{kindFile: tar.TypeReg, kindSymlink: tar.TypeSymlink, kindDir: tar.TypeDir}[k]
		if !ok || want != h.Typeflag {
			return &entryError{rel, fmt.Errorf("archive entry %s is not listed in the manifest", rel)}
		}
	}
	if err := x.parents(name); err != nil {
		return err
	}
	if t, dup := x.seen[name]; dup && !(t == tar.TypeDir && h.Typeflag == tar.TypeDir) {
		return fmt.Errorf("archive entry %s appears twice", name)
	}
	switch h.Typeflag {
	case tar.TypeDir:
		if _, dup := x.seen[name]; !dup {
			if err := x.root.Mkdir(name, 0o700); err != nil {
				return err
			}
		}
	case tar.TypeSymlink:
		if h.Linkname == "" {
			return fmt.Errorf("archive entry %s is a symbolic link to nothing", name)
		}
		if err := x.root.Symlink(h.Linkname, name); err != nil {
			return err
		}
	case tar.TypeReg:
		if err := x.file(tr, name); err != nil {
			return err
		}
	}
	x.seen[name] = h.Typeflag
	if x.early && x.listed == nil && x.files == 2 && (rel != SignatureFile || x.head == nil) {
		x.early = false // manifest.json first by chance (another tool): check everything at the end
	}
	if x.early && x.listed == nil && rel == SignatureFile && x.files == 2 {
		listed, err := x.head(x.dst + "/" + strings.TrimSuffix(x.prefix, "/"))
		if err != nil {
			return err
		}
		x.listed = listed
	}
	return nil
}

// file writes the regular file entry name from tr.
func (x *extractor) file(tr *tar.Reader, name string) error {
	out, err := x.root.Create(name, 0o600)
	if err != nil {
		return err
	}
	_, err = io.CopyBuffer(&meter{x: x, w: out}, tr, x.buf)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		var le *limitError
		if errors.As(err, &le) || isWriteErr(err) {
			return err
		}
		return truncated{err}
	}
	return nil
}

// meter counts the bytes written and applies the ratio guard.
type meter struct {
	x *extractor
	w io.Writer
}

func (m *meter) Write(p []byte) (int, error) {
	x := m.x
	x.written += int64(len(p))
	if x.lim.MaxRatio > 0 && x.written > x.lim.ratioFloor && x.written > x.lim.MaxRatio*x.read.n {
		return 0, &limitError{fmt.Sprintf("expands to more than %d times its compressed size (%s from %s read): if you trust it, pass %s SIZE to accept it",
			x.lim.MaxRatio, formatBytes(x.written), formatBytes(x.read.n), MaxExtractBytesFlag)}
	}
	return m.w.Write(p)
}

// parents creates name's missing parent directories and refuses a
// parent that is a symbolic link or a file in the archive.
func (x *extractor) parents(name string) error {
	for i := 0; i < len(name); i++ {
		if name[i] != '/' {
			continue
		}
		parent := name[:i]
		switch t, ok := x.seen[parent]; {
		case !ok:
			if err := x.root.Mkdir(parent, 0o700); err != nil {
				return err
			}
			x.seen[parent] = tar.TypeDir
		case t == tar.TypeSymlink:
			return fmt.Errorf("archive entry %s passes through the symbolic link %s: it would be written outside the bundle", name, parent)
		case t != tar.TypeDir:
			return fmt.Errorf("archive entry %s is below %s, which is not a directory", name, parent)
		}
	}
	return nil
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// freeSpace is what may be written in dir's filesystem while leaving 5%
// of it (at most 1 GiB) free; -1 when unknown.
func freeSpace(dir string) int64 {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil || st.Bsize <= 0 {
		return -1
	}
	bs := int64(st.Bsize)
	reserve := min(int64(st.Blocks)*bs/20, 1<<30)
	return max(int64(st.Bavail)*bs-reserve, 0)
}

// formatBytes renders n for a message: "8 GiB", "1.5 MiB", "512 bytes".
func formatBytes(n int64) string {
	for _, u := range []struct {
		size int64
		name string
	}{{1 << 30, "GiB"}, {1 << 20, "MiB"}, {1 << 10, "KiB"}} {
		if n >= u.size {
			if n%u.size == 0 {
				return fmt.Sprintf("%d %s", n/u.size, u.name)
			}
			return fmt.Sprintf("%.1f %s", float64(n)/float64(u.size), u.name)
		}
	}
	return fmt.Sprintf("%d bytes", n)
}

// ParseSize reads a byte count as a user writes it for
// MaxExtractBytesFlag: "8GiB", "500MiB", "64KiB", "2G" (G, M, K are
// powers of 1024 too), or a plain number of bytes.
func ParseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	num := strings.TrimRight(t, "KMGTBkmgtib ")
	unit := strings.ToUpper(strings.TrimSpace(t[len(num):]))
	shift := map[string]uint{"": 0, "B": 0, "K": 10, "KB": 10, "KIB": 10, "M": 20, "MB": 20, "MIB": 20,
		"G": 30, "GB": 30, "GIB": 30, "T": 40, "TB": 40, "TIB": 40}
	sh, ok := shift[unit]
	n, err := strconv.ParseInt(strings.TrimSpace(num), 10, 64)
	if !ok || err != nil || n < 0 || n > math.MaxInt64>>sh {
		return 0, fmt.Errorf("%q is not a size: write a number of bytes with an optional unit, e.g. 16GiB", s)
	}
	return n << sh, nil
}
