package sandbox

import (
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/dal-runtime/dal/internal/safefs"
)

// copySparse copies in (at offset 0) to the empty file out and writes
// every byte of in to h. A file with holes (fewer blocks than its size)
// is copied region by region: SEEK_DATA and SEEK_HOLE find its data,
// which is copied; a hole is skipped in out with a seek and hashed as
// zeros, and out gets in's size at the end. A 4 GiB sparse file stays a
// few blocks on disk. A filesystem that does not report holes reports
// the whole file as data, which is copied as is.
func copySparse(out, in *os.File, h hash.Hash) error {
	fi, err := in.Stat()
	if err != nil {
		return err
	}
	size := fi.Size()
	if b, ok := blocks(fi); !ok || b*512 >= size {
		_, err := io.Copy(io.MultiWriter(out, h), in)
		return err
	}
	fd := int(in.Fd())
	for off := int64(0); off < size; {
		data, err := unix.Seek(fd, off, unix.SEEK_DATA)
		switch {
		case errors.Is(err, unix.ENXIO): // only a hole is left
			data = size
		case err != nil:
			return fmt.Errorf("find the data of %s: %w", in.Name(), err)
		}
		if err := hashZeros(h, data-off); err != nil {
			return err
		}
		if data >= size {
			break
		}
		hole, err := unix.Seek(fd, data, unix.SEEK_HOLE)
		if err != nil {
			return fmt.Errorf("find the holes of %s: %w", in.Name(), err)
		}
		hole = min(hole, size)
		if _, err := in.Seek(data, io.SeekStart); err != nil {
			return err
		}
		if _, err := out.Seek(data, io.SeekStart); err != nil {
			return err
		}
		if _, err := io.CopyN(io.MultiWriter(out, h), in, hole-data); err != nil {
			return err
		}
		off = hole
	}
	return out.Truncate(size)
}

// blocks is the number of 512-byte blocks fi takes (from os.Stat or a
// safefs.Dir); false when fi does not say.
func blocks(fi fs.FileInfo) (int64, bool) {
	switch st := fi.Sys().(type) {
	case *syscall.Stat_t:
		return st.Blocks, true
	case *unix.Stat_t:
		return st.Blocks, true
	}
	return 0, false
}

var zeros [1 << 20]byte

// hashZeros writes n zero bytes to h.
func hashZeros(h hash.Hash, n int64) error {
	for n > 0 {
		k := min(n, int64(len(zeros)))
		if _, err := h.Write(zeros[:k]); err != nil {
			return err
		}
		n -= k
	}
	return nil
}

// ErrTooMuchData: a change holds more file data than its caller allows
// ([DataBytes]).
var ErrTooMuchData = errors.New("more file data than allowed")

// DataBytes is how many bytes of file data Apply (forward) or Revert
// would write into a workspace from the mirror of changes (a bundle's
// fs-diff/ or fs-pre/): the blocks each file to be placed holds, at most
// its size, so a sparse file counts for its data alone. It reads only
// metadata.
func DataBytes(mirrorDir string, changes []Change, forward bool) (int64, error) {
	src, err := safefs.OpenOneMount(mirrorDir + "/files")
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return 0, nil
		}
		return 0, err
	}
	defer src.Close()
	want := Change.Before
	if forward {
		want = applied
	}
	var n int64
	for _, c := range changes {
		w := want(c)
		if w == nil || w.Kind != KindFile {
			continue
		}
		fi, err := src.Lstat(MirrorPath(c.Path))
		if err != nil {
			return 0, fmt.Errorf("the copy of %s: %w", c.Path, err)
		}
		used := fi.Size()
		if b, ok := blocks(fi); ok {
			used = min(used, b*512)
		}
		n += used
	}
	return n, nil
}

// CheckDataBytes says why n bytes of file data (what) may not be written
// into workspace: more than max (when positive), or more than its
// filesystem has free (less a 1% margin). nil when they may; the error is
// one sentence that says what happens instead (kept), names
// --max-apply-bytes, and is ErrTooMuchData.
func CheckDataBytes(workspace string, n, max int64, what, kept string) error {
	if max > 0 && n > max {
		return &tooMuchError{fmt.Sprintf("%s hold %s of file data, more than --max-apply-bytes allows (%s): they are %s; pass a larger --max-apply-bytes to write them",
			what, humanBytes(n), humanBytes(max), kept)}
	}
	var st unix.Statfs_t
	if unix.Statfs(workspace, &st) == nil {
		free := int64(st.Bavail) * st.Bsize
		if n > free-free/100 {
			return &tooMuchError{fmt.Sprintf("%s hold %s of file data, more than the %s free on the filesystem of %s: they are %s; free space there first",
				what, humanBytes(n), humanBytes(free), workspace, kept)}
		}
	}
	return nil
}

type tooMuchError struct{ msg string }

func (e *tooMuchError) Error() string { return e.msg }
func (e *tooMuchError) Unwrap() error { return ErrTooMuchData }

// humanBytes is n in B, KiB, MiB or GiB, for a message.
func humanBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
