package checkpoint

import (
	"archive/tar"
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/dal-runtime/dal/internal/atomicfile"
	"github.com/dal-runtime/dal/internal/digest"

	"github.com/klauspost/compress/zstd"
)

// Members of an archive.
const (
	metaMember  = "checkpoint.json"
	stateMember = "state.json"
	filesPrefix = "files/"
)

// maxMetaSize bounds what is read into memory from an archive's metadata.
const maxMetaSize = 64 << 20

// maxTrailing bounds what may follow the tar's end inside the compressed
// stream (a tar writer pads to 10 KiB records); more is damage, and is not
// decompressed to find out how much there is.
const maxTrailing = 1 << 20

// decoderMaxWindow bounds a damaged or foreign archive's memory use; dal
// writes 8 MiB windows.
const decoderMaxWindow = 64 << 20

// archiveMeta is checkpoint.json inside an archive: enough to rebuild the
// manifest entry (without the archive's own hash) and the run.
type archiveMeta struct {
	SchemaVersion int   `json:"schema_version"`
	Run           Run   `json:"run"`
	Checkpoint    Entry `json:"checkpoint"`
}

// member is one file to put in an archive.
type member struct {
	name string
	size int64
	open func() (io.ReadCloser, error)
	// sha256, when set, is what the content must hash to.
	sha256 string
	what   string // for messages
}

func bytesMember(name string, b []byte) member {
	return member{name: name, size: int64(len(b)), open: func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(b)), nil
	}}
}

// createArchive writes an archive into dir through a temporary file and
// renames it to name, returning its SHA-256 and size. On error nothing is
// left behind.
func createArchive(dir, name string, write func(io.Writer) error) (sum string, size int64, err error) {
	h := sha256.New()
	var n int64
	err = atomicfile.Write(filepath.Join(dir, name), 0o644, func(f io.Writer) error {
		cw := &countWriter{w: io.MultiWriter(f, h)}
		bw := bufio.NewWriterSize(cw, 1<<20)
		if err := write(bw); err != nil {
			return err
		}
		err := bw.Flush()
		n = cw.n
		return err
	})
	if err != nil {
		return "", 0, err
	}
	return hex.EncodeToString(h.Sum(nil)), n, nil
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// writeTar compresses members as a tar at level. Headers are fixed (owner
// root, mode 0644, time 0): the archive depends only on the content.
func writeTar(w io.Writer, level zstd.EncoderLevel, members []member) error {
	zw, err := zstd.NewWriter(w, zstd.WithEncoderLevel(level))
	if err != nil {
		return err
	}
	tw := tar.NewWriter(zw)
	for _, m := range members {
		if err := writeMember(tw, m); err != nil {
			zw.Close()
			return err
		}
	}
	if err := tw.Close(); err != nil {
		zw.Close()
		return err
	}
	return zw.Close()
}

func writeMember(tw *tar.Writer, m member) error {
	hdr := &tar.Header{Name: m.name, Mode: 0o644, Size: m.size, ModTime: time.Unix(0, 0), Typeflag: tar.TypeReg, Format: tar.FormatPAX}
	if err := tw.WriteHeader(hdr); err != nil {
		return err
	}
	rc, err := m.open()
	if err != nil {
		return sourceError{fmt.Errorf("%s cannot be read (%v)", m.what, err)}
	}
	defer rc.Close()
	h := sha256.New()
	src := &sourceReader{r: io.TeeReader(io.LimitReader(rc, m.size+1), h)}
	n, err := io.Copy(tw, src)
	if err != nil && !errors.Is(err, tar.ErrWriteTooLong) {
		return err
	}
	if n != m.size || errors.Is(err, tar.ErrWriteTooLong) {
		return sourceError{fmt.Errorf("%s changed while it was stored: it is no longer %d bytes", m.what, m.size)}
	}
	if m.sha256 != "" && hex.EncodeToString(h.Sum(nil)) != m.sha256 {
		return sourceError{fmt.Errorf("%s does not match its sha256 %s: it was changed after the mark was written", m.what, short(m.sha256))}
	}
	return nil
}

// sourceReader tags read errors as the source's.
type sourceReader struct{ r io.Reader }

func (s *sourceReader) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	if err != nil && err != io.EOF {
		err = sourceError{err}
	}
	return n, err
}

// recompress rewrites an archive's compressed stream at level; the tar
// inside is unchanged byte for byte.
func recompress(src io.Reader, level zstd.EncoderLevel) func(io.Writer) error {
	return func(w io.Writer) error {
		zr, err := zstd.NewReader(src, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxWindow(decoderMaxWindow))
		if err != nil {
			return err
		}
		defer zr.Close()
		zw, err := zstd.NewWriter(w, zstd.WithEncoderLevel(level))
		if err != nil {
			return err
		}
		if _, err := io.Copy(zw, zr); err != nil {
			zw.Close()
			return err
		}
		return zw.Close()
	}
}

// hashFile returns path's SHA-256 (hex, as the index keeps it) and size.
func hashFile(path string) (string, int64, error) {
	d, n, err := digest.File(path)
	return strings.TrimPrefix(d, digest.Prefix), n, err
}

// putError is a failure of the destination while extracting, not damage.
type putError struct{ err error }

func (e putError) Error() string { return e.err.Error() }
func (e putError) Unwrap() error { return e.err }

// extract decompresses the archive r of checkpoint id and checks every
// member against e. Artifact i's content goes to put(i, r) when put is not
// nil and want(i); put must consume r or return an error. It returns the
// state. Damage is a *DamagedError; put's errors are returned as they are.
func extract(r io.Reader, id string, e *Entry, want func(int) bool, put func(int, io.Reader) error) ([]byte, error) {
	damaged := func(format string, a ...any) error {
		return &DamagedError{ID: id, Reason: fmt.Sprintf(format, a...)}
	}
	zr, err := zstd.NewReader(r, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxWindow(decoderMaxWindow))
	if err != nil {
		return nil, damaged("its archive cannot be decompressed (%v)", err)
	}
	defer zr.Close()
	tr := tar.NewReader(zr)
	var state []byte
	seenMeta, seenState, metaAgrees := false, false, false
	seen := make([]bool, len(e.Artifacts))
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, damaged("its archive cannot be decompressed (%v)", err)
		}
		switch {
		case hdr.Name == metaMember && !seenMeta:
			seenMeta = true
			if hdr.Size > maxMetaSize {
				return nil, damaged("%s in its archive claims %d bytes, more than %d", metaMember, hdr.Size, maxMetaSize)
			}
			b, err := io.ReadAll(io.LimitReader(tr, maxMetaSize))
			if err != nil {
				return nil, damaged("its archive cannot be decompressed (%v)", err)
			}
			var meta archiveMeta
			if err := json.Unmarshal(b, &meta); err != nil {
				return nil, damaged("%s in its archive is not valid JSON (%v)", metaMember, err)
			}
			metaAgrees = sameArtifacts(meta.Checkpoint.Artifacts, e.Artifacts)
		case hdr.Name == stateMember && !seenState:
			seenState = true
			if hdr.Size != e.StateSize {
				return nil, damaged("the state is %d bytes in its archive, the manifest says %d", hdr.Size, e.StateSize)
			}
			b, err := io.ReadAll(io.LimitReader(tr, e.StateSize+1))
			if err != nil {
				return nil, damaged("its archive cannot be decompressed (%v)", err)
			}
			if sum := sha256Hex(b); sum != e.StateSHA256 || int64(len(b)) != e.StateSize {
				return nil, damaged("the state has sha256 %s, the manifest says %s", short(sum), short(e.StateSHA256))
			}
			state = b
		case strings.HasPrefix(hdr.Name, filesPrefix):
			i, err := strconv.Atoi(strings.TrimPrefix(hdr.Name, filesPrefix))
			if err != nil || i < 0 || i >= len(e.Artifacts) || seen[i] {
				return nil, damaged("its archive holds an unexpected member %q", hdr.Name)
			}
			seen[i] = true
			a := e.Artifacts[i]
			if hdr.Size != a.Size {
				return nil, damaged("artifact %s is %d bytes, the manifest says %d", a.Path, hdr.Size, a.Size)
			}
			h := sha256.New()
			cr := &countReader{r: io.TeeReader(io.LimitReader(tr, a.Size), h)}
			if put != nil && (want == nil || want(i)) {
				if err := put(i, cr); err != nil {
					var de *DamagedError
					if errors.As(err, &de) {
						return nil, err
					}
					if isReadErr(err) {
						return nil, damaged("its archive cannot be decompressed (%v)", err)
					}
					return nil, putError{err}
				}
			}
			if _, err := io.Copy(io.Discard, cr); err != nil {
				return nil, damaged("its archive cannot be decompressed (%v)", err)
			}
			if sum := hex.EncodeToString(h.Sum(nil)); sum != a.SHA256 {
				return nil, damaged("artifact %s has sha256 %s, the manifest says %s", a.Path, short(sum), short(a.SHA256))
			}
			if cr.n != a.Size {
				return nil, damaged("artifact %s is %d bytes, the manifest says %d", a.Path, cr.n, a.Size)
			}
		default:
			return nil, damaged("its archive holds an unexpected member %q", hdr.Name)
		}
	}
	if !seenMeta {
		return nil, damaged("its archive has no %s", metaMember)
	}
	if !seenState {
		return nil, damaged("its archive has no %s", stateMember)
	}
	if i := slices.Index(seen, false); i >= 0 {
		return nil, damaged("artifact %s is missing from its archive", e.Artifacts[i].Path)
	}
	// Read to the end so trailing damage in the compressed stream shows.
	if n, err := io.Copy(io.Discard, io.LimitReader(zr, maxTrailing+1)); err != nil {
		return nil, damaged("its archive cannot be decompressed (%v)", err)
	} else if n > maxTrailing {
		return nil, damaged("its archive holds more than %d bytes after its end", maxTrailing)
	}
	// Checked last: a precise message about one artifact is more useful.
	if !metaAgrees {
		return nil, damaged("%s in its archive lists other artifact contents than the manifest", metaMember)
	}
	return state, nil
}

// readErr marks a failure reading the archive inside put.
type readErr struct{ err error }

func (e readErr) Error() string { return e.err.Error() }
func (e readErr) Unwrap() error { return e.err }

func isReadErr(err error) bool {
	var re readErr
	return errors.As(err, &re)
}

// countReader counts and tags read errors, so a put that fails because the
// archive is damaged is not taken for a destination failure.
type countReader struct {
	r io.Reader
	n int64
}

func (c *countReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	if err != nil && err != io.EOF {
		err = readErr{err}
	}
	return n, err
}

// sameArtifacts compares contents; paths are the manifest's to say.
func sameArtifacts(a, b []Artifact) bool {
	return slices.EqualFunc(a, b, func(x, y Artifact) bool {
		return x.SHA256 == y.SHA256 && x.Size == y.Size
	})
}

func sha256Hex(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}
