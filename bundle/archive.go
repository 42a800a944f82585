package bundle

import (
	"archive/tar"
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"

	"github.com/dal-runtime/dal/internal/atomicfile"
	"github.com/dal-runtime/dal/internal/safefs"
)

// packing is how a bundle is stored.
type packing int

const (
	packDir packing = iota
	packTgz
	packZstd
)

// packingFor chooses by out's extension.
func packingFor(out string) packing {
	switch {
	case strings.HasSuffix(out, ".tgz"), strings.HasSuffix(out, ".tar.gz"):
		return packTgz
	case strings.HasSuffix(out, ".tar.zst"):
		return packZstd
	}
	return packDir
}

var (
	magicGzip = []byte{0x1f, 0x8b}
	magicZstd = []byte{0x28, 0xb5, 0x2f, 0xfd}
)

// Pack writes the bundle directory dir as one archive at out, chosen by
// out's extension: .tgz or .tar.gz (gzip) or .tar.zst (zstd). Entries are
// in sorted order with fixed owners, times and normalized modes, so the
// same bundle packs to the same bytes. out is written atomically and
// never replaced (ErrExists). Pack does not verify dir; Open does.
func Pack(dir, out string) error {
	p := packingFor(out)
	if p == packDir {
		return fmt.Errorf("pack %s: unknown archive type: name it .tgz, .tar.gz or .tar.zst", out)
	}
	if fi, err := os.Lstat(filepath.Join(dir, ManifestFile)); err != nil || !fi.Mode().IsRegular() {
		return &Error{Bundle: dir, Kind: ErrNotBundle, Err: err, msg: fmt.Sprintf("%s is not a dal bundle: it has no %s", dir, ManifestFile)}
	}
	if _, err := os.Lstat(out); err == nil {
		return fmt.Errorf("pack %s: %w: choose another path or remove it", out, ErrExists)
	}
	return packTo(dir, out, p, false)
}

// packTo archives dir (all of it, reserved entries included) into out
// through a temporary file beside it; replace allows replacing out.
func packTo(dir, out string, p packing, replace bool) (err error) {
	tmp, err := os.CreateTemp(filepath.Dir(out), "."+filepath.Base(out)+".partial-*")
	if err != nil {
		return writeErr(out, "the archive", err)
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if err := writeArchive(tmp, dir, p); err != nil {
		return writeErr(out, "the archive", err)
	}
	if err := tmp.Sync(); err != nil {
		return writeErr(out, "the archive", err)
	}
	if err := tmp.Close(); err != nil {
		return writeErr(out, "the archive", err)
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return writeErr(out, "the archive", err)
	}
	if replace {
		if err := os.Rename(tmp.Name(), out); err != nil {
			return writeErr(out, "the archive", err)
		}
		if err := atomicfile.SyncDir(filepath.Dir(out)); err != nil {
			return writeErr(out, "its directory", err)
		}
		return nil
	}
	return publish(tmp.Name(), out)
}

func writeArchive(w io.Writer, dir string, p packing) error {
	bw := bufio.NewWriterSize(w, 1<<20)
	var zw io.WriteCloser
	var err error
	switch p {
	case packTgz:
		zw = gzip.NewWriter(bw)
	case packZstd:
		zw, err = zstd.NewWriter(bw)
		if err != nil {
			return err
		}
	default:
		return errors.New("not an archive type")
	}
	tw := tar.NewWriter(zw)
	if err := tarTree(tw, dir); err != nil {
		zw.Close()
		return err
	}
	if err := tw.Close(); err != nil {
		return err
	}
	if err := zw.Close(); err != nil {
		return err
	}
	return bw.Flush()
}

// tarTree writes every entry below dir in sorted order, reading dir as
// an untrusted tree (it may be a bundle someone handed over).
func tarTree(tw *tar.Writer, dir string) error {
	root, err := safefs.Open(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	type item struct {
		rel string
		typ fs.FileMode
	}
	var items []item
	err = root.Walk("", func(rel string, fi fs.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if rel != "" {
			items = append(items, item{rel, fi.Mode().Type()})
		}
		return nil
	})
	if err != nil {
		return err
	}
	// manifest.json and manifest.sig come first, so that a reader can
	// check the signature and the listing before it extracts the rest;
	// everything else follows in sorted order.
	rank := func(rel string) int {
		switch rel {
		case ManifestFile:
			return 0
		case SignatureFile:
			return 1
		}
		return 2
	}
	slices.SortFunc(items, func(a, b item) int {
		if c := rank(a.rel) - rank(b.rel); c != 0 {
			return c
		}
		return strings.Compare(a.rel, b.rel)
	})
	epoch := time.Unix(0, 0)
	buf := copyBufs.Get().(*[]byte)
	defer copyBufs.Put(buf)
	for _, it := range items {
		h := &tar.Header{Name: it.rel, ModTime: epoch, Format: tar.FormatPAX}
		switch {
		case it.typ.IsDir():
			h.Typeflag, h.Name, h.Mode = tar.TypeDir, it.rel+"/", 0o755
			if err := tw.WriteHeader(h); err != nil {
				return err
			}
		case it.typ&fs.ModeSymlink != 0:
			target, err := root.Readlink(it.rel)
			if err != nil {
				return err
			}
			h.Typeflag, h.Linkname, h.Mode = tar.TypeSymlink, target, 0o777
			if err := tw.WriteHeader(h); err != nil {
				return err
			}
		case it.typ.IsRegular():
			if err := tarFile(tw, h, root, *buf); err != nil {
				return err
			}
		default:
			return fmt.Errorf("%s is a %s: bundles hold only regular files, symbolic links and directories", it.rel, kindName(it.typ))
		}
	}
	return nil
}

func tarFile(tw *tar.Writer, h *tar.Header, root *safefs.Dir, buf []byte) error {
	f, err := root.Open(h.Name)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s is no longer a regular file", h.Name)
	}
	h.Typeflag, h.Size, h.Mode = tar.TypeReg, fi.Size(), 0o644
	if fi.Mode()&0o111 != 0 {
		h.Mode = 0o755
	}
	if err := tw.WriteHeader(h); err != nil {
		return err
	}
	n, err := io.CopyBuffer(tw, io.LimitReader(f, h.Size), buf)
	if err == nil && n != h.Size {
		err = fmt.Errorf("%s changed while being packed", h.Name)
	}
	return err
}

// sniff reports the packing of the file at path from its first bytes.
func sniff(path string) (packing, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	head := make([]byte, 4)
	n, _ := io.ReadFull(f, head)
	head = head[:n]
	switch {
	case bytes.HasPrefix(head, magicZstd):
		return packZstd, nil
	case bytes.HasPrefix(head, magicGzip):
		return packTgz, nil
	}
	return packDir, nil
}

// truncated marks a failure to decode the archive itself.
type truncated struct{ err error }

func (t truncated) Error() string { return t.err.Error() }
func (t truncated) Unwrap() error { return t.err }

func isWriteErr(err error) bool {
	var pe *fs.PathError
	return errors.As(err, &pe) && pe.Op == "write"
}
