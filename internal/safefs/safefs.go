package safefs

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

var (
	// ErrSymlink: a component of the path, or the entry itself, is a
	// symlink, which is not followed.
	ErrSymlink = errors.New("a symlink is in the way, and dal never follows one in a tree it does not trust")
	// ErrPath: the path is not clean, relative and inside the tree.
	ErrPath = errors.New("not a clean relative path inside the tree")
	// ErrNotRegular: the entry is not a regular file (or directory, where
	// one is accepted).
	ErrNotRegular = errors.New("not a regular file")
	// ErrOpenat2: the kernel has no openat2(2).
	ErrOpenat2 = errors.New("the kernel has no openat2(2) with RESOLVE_BENEATH, which dal needs to work on a tree it does not trust: use Linux 5.6 or later")
)

const baseResolve = unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS

// Dir is an open directory, the root of an untrusted tree. It owns one
// O_PATH descriptor, released by Close. A Dir may be used from several
// goroutines; Close must come after every other call has returned.
type Dir struct {
	fd      int
	name    string
	resolve uint64
}

// Open opens the directory root (a path the caller trusts; symlinks in it
// are followed) as the root of an untrusted tree.
func Open(root string) (*Dir, error) { return open(root, baseResolve) }

// OpenOneMount is [Open] for a tree that must also not cross a mount point
// (a directory dal made itself: a staging area, an extracted bundle).
func OpenOneMount(root string) (*Dir, error) { return open(root, baseResolve|unix.RESOLVE_NO_XDEV) }

var probe struct {
	once sync.Once
	err  error
}

func open(root string, resolve uint64) (*Dir, error) {
	fd, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: root, Err: err}
	}
	probe.once.Do(func() {
		how := unix.OpenHow{Flags: unix.O_PATH | unix.O_CLOEXEC, Resolve: baseResolve}
		pfd, err := unix.Openat2(fd, ".", &how)
		if err == nil {
			unix.Close(pfd)
			return
		}
		if errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EINVAL) {
			probe.err = ErrOpenat2
		}
	})
	if probe.err != nil {
		unix.Close(fd)
		return nil, probe.err
	}
	return &Dir{fd: fd, name: filepath.Clean(root), resolve: resolve}, nil
}

// Close releases the directory's descriptor.
func (d *Dir) Close() error {
	if d == nil || d.fd < 0 {
		return nil
	}
	err := unix.Close(d.fd)
	d.fd = -1
	return err
}

// Name is the path the Dir was opened with (for messages).
func (d *Dir) Name() string { return d.name }

// Join is the host path of rel, for messages only: never open it.
func (d *Dir) Join(rel string) string {
	if rel == "" || rel == "." {
		return d.name
	}
	return filepath.Join(d.name, filepath.FromSlash(rel))
}

// Sub opens the directory rel as a Dir of its own (same resolution rules).
func (d *Dir) Sub(rel string) (*Dir, error) {
	fd, err := d.openat2("sub", rel, unix.O_PATH|unix.O_DIRECTORY, 0)
	if err != nil {
		return nil, err
	}
	return &Dir{fd: fd, name: d.Join(rel), resolve: d.resolve}, nil
}

// CheckPath reports whether rel is a path a Dir accepts: "" or "." (the
// root), or clean, relative, without a ".." component or a NUL byte.
func CheckPath(rel string) error {
	if rel == "" || rel == "." {
		return nil
	}
	if rel[0] == '/' || strings.IndexByte(rel, 0) >= 0 || path.Clean(rel) != rel || rel == ".." || strings.HasPrefix(rel, "../") {
		return ErrPath
	}
	return nil
}

func isRoot(rel string) bool { return rel == "" || rel == "." }

// mapErr turns the kernel's refusals into this package's errors.
func mapErr(err error) error {
	switch {
	case errors.Is(err, unix.ELOOP):
		return ErrSymlink
	case errors.Is(err, unix.ENOSYS):
		return ErrOpenat2
	}
	return err
}

func (d *Dir) pathErr(op, rel string, err error) error {
	return &fs.PathError{Op: op, Path: d.Join(rel), Err: mapErr(err)}
}

// openat2 resolves rel beneath the root without following any symlink.
func (d *Dir) openat2(op, rel string, flags int, mode uint32) (int, error) {
	if err := CheckPath(rel); err != nil {
		return -1, &fs.PathError{Op: op, Path: rel, Err: err}
	}
	fd, err := openat2(d.fd, rel, flags, mode, d.resolve)
	if err != nil {
		return -1, d.pathErr(op, rel, err)
	}
	return fd, nil
}

func openat2(dirfd int, rel string, flags int, mode uint32, resolve uint64) (int, error) {
	if rel == "" {
		rel = "."
	}
	how := unix.OpenHow{Flags: uint64(flags | unix.O_CLOEXEC), Resolve: resolve}
	if flags&unix.O_CREAT != 0 {
		how.Mode = uint64(mode)
	}
	for i := 0; ; i++ {
		fd, err := unix.Openat2(dirfd, rel, &how)
		// EAGAIN: a concurrent rename made the kernel unsure that the
		// walk stayed beneath; it asks to retry.
		if (err == unix.EINTR || err == unix.EAGAIN) && i < 64 {
			continue
		}
		return fd, err
	}
}

// parent resolves the directory holding rel (not the root) and returns a
// descriptor for it and rel's last component. release closes the
// descriptor when it is not the root's.
func (d *Dir) parent(op, rel string) (pfd int, name string, release func(), err error) {
	if err := CheckPath(rel); err != nil {
		return -1, "", nil, &fs.PathError{Op: op, Path: rel, Err: err}
	}
	if isRoot(rel) {
		return -1, "", nil, &fs.PathError{Op: op, Path: d.name, Err: ErrPath}
	}
	dir, name := path.Split(rel)
	if dir == "" {
		return d.fd, name, func() {}, nil
	}
	fd, err := openat2(d.fd, dir[:len(dir)-1], unix.O_PATH|unix.O_DIRECTORY, 0, d.resolve)
	if err != nil {
		return -1, "", nil, d.pathErr(op, rel, err)
	}
	return fd, name, func() { unix.Close(fd) }, nil
}

// Open opens the regular file or directory rel for reading. A symlink, a
// fifo, a socket or a device is refused (without blocking).
func (d *Dir) Open(rel string) (*os.File, error) {
	fd, err := d.openat2("open", rel, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_NOCTTY, 0)
	if err != nil {
		return nil, err
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, d.pathErr("open", rel, err)
	}
	if t := st.Mode & unix.S_IFMT; t != unix.S_IFREG && t != unix.S_IFDIR {
		unix.Close(fd)
		return nil, d.pathErr("open", rel, ErrNotRegular)
	}
	if err := unix.SetNonblock(fd, false); err != nil {
		unix.Close(fd)
		return nil, d.pathErr("open", rel, err)
	}
	return os.NewFile(uintptr(fd), d.Join(rel)), nil
}

// Create creates the regular file rel, which must not exist (not even as a
// symlink), for writing, with perm (less the umask, as open(2)).
func (d *Dir) Create(rel string, perm fs.FileMode) (*os.File, error) {
	fd, err := d.openat2("create", rel, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_NOCTTY, UnixMode(perm))
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), d.Join(rel)), nil
}

// OpenFile opens the existing regular file rel for writing in place. flag
// is os.O_WRONLY or os.O_RDWR, optionally with os.O_TRUNC or os.O_APPEND;
// O_TRUNC takes effect only once rel is known to be a regular file.
func (d *Dir) OpenFile(rel string, flag int) (*os.File, error) {
	if flag&^(os.O_WRONLY|os.O_RDWR|os.O_TRUNC|os.O_APPEND) != 0 {
		return nil, &fs.PathError{Op: "open", Path: d.Join(rel), Err: errors.New("OpenFile rewrites an existing file: only O_WRONLY, O_RDWR, O_TRUNC and O_APPEND")}
	}
	fd, err := d.openat2("open", rel, (flag&^os.O_TRUNC)|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_NOCTTY, 0)
	if err != nil {
		return nil, err
	}
	var st unix.Stat_t
	err = unix.Fstat(fd, &st)
	if err == nil && st.Mode&unix.S_IFMT != unix.S_IFREG {
		err = ErrNotRegular
	}
	if err == nil {
		err = unix.SetNonblock(fd, false)
	}
	if err == nil && flag&os.O_TRUNC != 0 {
		err = unix.Ftruncate(fd, 0)
	}
	if err != nil {
		unix.Close(fd)
		return nil, d.pathErr("open", rel, err)
	}
	return os.NewFile(uintptr(fd), d.Join(rel)), nil
}

// Mkdir creates the directory rel with perm (less the umask).
func (d *Dir) Mkdir(rel string, perm fs.FileMode) error {
	pfd, name, release, err := d.parent("mkdir", rel)
	if err != nil {
		return err
	}
	defer release()
	if err := unix.Mkdirat(pfd, name, UnixMode(perm)); err != nil {
		return d.pathErr("mkdir", rel, err)
	}
	return nil
}

// MkdirAll creates rel and its missing parents with perm (less the umask).
// An existing entry on the way must be a directory (a symlink to one is
// refused).
func (d *Dir) MkdirAll(rel string, perm fs.FileMode) error {
	if err := CheckPath(rel); err != nil {
		return &fs.PathError{Op: "mkdir", Path: rel, Err: err}
	}
	if isRoot(rel) {
		return nil
	}
	cur := d.fd
	defer func() {
		if cur != d.fd {
			unix.Close(cur)
		}
	}()
	comps := strings.Split(rel, "/")
	for i, c := range comps {
		fd, err := openat2(cur, c, unix.O_PATH|unix.O_DIRECTORY, 0, d.resolve)
		if errors.Is(err, unix.ENOENT) {
			if err = unix.Mkdirat(cur, c, UnixMode(perm)); err == nil || errors.Is(err, unix.EEXIST) {
				fd, err = openat2(cur, c, unix.O_PATH|unix.O_DIRECTORY, 0, d.resolve)
			}
		}
		if err != nil {
			return d.pathErr("mkdir", strings.Join(comps[:i+1], "/"), err)
		}
		if cur != d.fd {
			unix.Close(cur)
		}
		cur = fd
	}
	return nil
}

// Lstat describes the entry rel itself (a symlink is described, not
// followed). Sys() of the result is a *unix.Stat_t.
func (d *Dir) Lstat(rel string) (fs.FileInfo, error) {
	var st unix.Stat_t
	if isRoot(rel) {
		if err := unix.Fstat(d.fd, &st); err != nil {
			return nil, d.pathErr("lstat", rel, err)
		}
		return newFileInfo(path.Base(d.name), &st), nil
	}
	pfd, name, release, err := d.parent("lstat", rel)
	if err != nil {
		return nil, err
	}
	defer release()
	if err := unix.Fstatat(pfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return nil, d.pathErr("lstat", rel, err)
	}
	return newFileInfo(name, &st), nil
}

// ReadDir lists the directory rel, sorted by name, with each entry's
// Lstat (taken from the directory's descriptor; an entry removed meanwhile
// is left out).
func (d *Dir) ReadDir(rel string) ([]fs.DirEntry, error) {
	f, names, err := d.names(rel)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fd := int(f.Fd())
	out := make([]fs.DirEntry, 0, len(names))
	for _, n := range names {
		var st unix.Stat_t
		if err := unix.Fstatat(fd, n, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			if errors.Is(err, unix.ENOENT) {
				continue
			}
			return nil, d.pathErr("lstat", path.Join(rel, n), err)
		}
		out = append(out, dirEntry{newFileInfo(n, &st)})
	}
	return out, nil
}

// ReadDirNames lists the names in the directory rel, sorted.
func (d *Dir) ReadDirNames(rel string) ([]string, error) {
	f, names, err := d.names(rel)
	if err != nil {
		return nil, err
	}
	f.Close()
	return names, nil
}

// names opens the directory rel and lists its names, sorted; the caller
// closes the directory. Readdirnames never stats by path (ReadDir does,
// for file systems without d_type).
func (d *Dir) names(rel string) (*os.File, []string, error) {
	fd, err := d.openat2("readdir", rel, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW, 0)
	if err != nil {
		return nil, nil, err
	}
	f := os.NewFile(uintptr(fd), d.Join(rel))
	names, err := f.Readdirnames(-1)
	if err != nil {
		f.Close()
		return nil, nil, d.pathErr("readdir", rel, err)
	}
	sort.Strings(names)
	return f, names, nil
}

type dirEntry struct{ fi *fileInfo }

func (e dirEntry) Name() string               { return e.fi.name }
func (e dirEntry) IsDir() bool                { return e.fi.IsDir() }
func (e dirEntry) Type() fs.FileMode          { return e.fi.Mode().Type() }
func (e dirEntry) Info() (fs.FileInfo, error) { return e.fi, nil }

// Readlink returns the target of the symlink rel (which is not followed).
func (d *Dir) Readlink(rel string) (string, error) {
	pfd, name, release, err := d.parent("readlink", rel)
	if err != nil {
		return "", err
	}
	defer release()
	for n := 256; ; n *= 2 {
		buf := make([]byte, n)
		m, err := unix.Readlinkat(pfd, name, buf)
		if err != nil {
			return "", d.pathErr("readlink", rel, err)
		}
		if m < n {
			return string(buf[:m]), nil
		}
	}
}

// Symlink creates rel as a symlink to target (which is stored, never
// resolved).
func (d *Dir) Symlink(target, rel string) error {
	pfd, name, release, err := d.parent("symlink", rel)
	if err != nil {
		return err
	}
	defer release()
	if err := unix.Symlinkat(target, pfd, name); err != nil {
		return d.pathErr("symlink", rel, err)
	}
	return nil
}

// Mknod creates the special file rel (mode holds the S_IF* type and the
// permission bits, as mknod(2)).
func (d *Dir) Mknod(rel string, mode uint32, dev int) error {
	pfd, name, release, err := d.parent("mknod", rel)
	if err != nil {
		return err
	}
	defer release()
	if err := unix.Mknodat(pfd, name, mode, dev); err != nil {
		return d.pathErr("mknod", rel, err)
	}
	return nil
}

// Link makes newrel in to a hard link to the entry oldrel of d (a symlink
// is linked itself, not its target).
func (d *Dir) Link(oldrel string, to *Dir, newrel string) error {
	opfd, oname, orelease, err := d.parent("link", oldrel)
	if err != nil {
		return err
	}
	defer orelease()
	npfd, nname, nrelease, err := to.parent("link", newrel)
	if err != nil {
		return err
	}
	defer nrelease()
	if err := unix.Linkat(opfd, oname, npfd, nname, 0); err != nil {
		return &os.LinkError{Op: "link", Old: d.Join(oldrel), New: to.Join(newrel), Err: mapErr(err)}
	}
	return nil
}

// Remove removes the file, symlink, special file or empty directory rel.
func (d *Dir) Remove(rel string) error {
	pfd, name, release, err := d.parent("remove", rel)
	if err != nil {
		return err
	}
	defer release()
	err = unix.Unlinkat(pfd, name, 0)
	if errors.Is(err, unix.EISDIR) {
		err = unix.Unlinkat(pfd, name, unix.AT_REMOVEDIR)
	}
	if err != nil {
		return d.pathErr("remove", rel, err)
	}
	return nil
}

// RemoveAll removes rel and everything below it; a missing rel is no
// error. It descends one name at a time from descriptors and never
// through a symlink (a symlink is removed, not followed).
func (d *Dir) RemoveAll(rel string) error {
	pfd, name, release, err := d.parent("remove", rel)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) && errors.Is(pe.Err, unix.ENOENT) {
			return nil
		}
		return err
	}
	defer release()
	if err := removeAllAt(pfd, name); err != nil {
		return d.pathErr("remove", rel, err)
	}
	return nil
}

func removeAllAt(pfd int, name string) error {
	err := unix.Unlinkat(pfd, name, 0)
	if err == nil || errors.Is(err, unix.ENOENT) {
		return nil
	}
	if !errors.Is(err, unix.EISDIR) {
		return err
	}
	// One component, O_NOFOLLOW: a symlink swapped in here fails (ELOOP
	// or ENOTDIR) instead of being entered.
	fd, err := unix.Openat(pfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	f := os.NewFile(uintptr(fd), name)
	for {
		names, rerr := f.Readdirnames(1024)
		for _, n := range names {
			if err := removeAllAt(fd, n); err != nil {
				f.Close()
				return err
			}
		}
		if rerr == io.EOF || len(names) == 0 {
			break
		}
		if rerr != nil {
			f.Close()
			return rerr
		}
	}
	f.Close()
	err = unix.Unlinkat(pfd, name, unix.AT_REMOVEDIR)
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	return err
}

// Rename renames oldrel to newrel within the tree (replacing newrel as
// rename(2) does; a symlink is renamed, never followed).
func (d *Dir) Rename(oldrel, newrel string) error {
	return d.rename(oldrel, newrel, 0)
}

// RenameNoReplace is [Dir.Rename] that fails with EEXIST when newrel
// exists.
func (d *Dir) RenameNoReplace(oldrel, newrel string) error {
	return d.rename(oldrel, newrel, unix.RENAME_NOREPLACE)
}

func (d *Dir) rename(oldrel, newrel string, flags uint) error {
	opfd, oname, orelease, err := d.parent("rename", oldrel)
	if err != nil {
		return err
	}
	defer orelease()
	npfd, nname, nrelease, err := d.parent("rename", newrel)
	if err != nil {
		return err
	}
	defer nrelease()
	if err := unix.Renameat2(opfd, oname, npfd, nname, flags); err != nil {
		return &os.LinkError{Op: "rename", Old: d.Join(oldrel), New: d.Join(newrel), Err: mapErr(err)}
	}
	return nil
}

// Chmod sets the mode bits of rel (permission, setuid, setgid, sticky).
// A symlink is refused.
func (d *Dir) Chmod(rel string, mode fs.FileMode) error {
	m := UnixMode(mode)
	if isRoot(rel) {
		return d.withFd("chmod", rel, func(fd int) error { return unix.Fchmod(fd, m) })
	}
	pfd, name, release, err := d.parent("chmod", rel)
	if err != nil {
		return err
	}
	defer release()
	err = unix.EOPNOTSUPP
	if !noFchmodat2 {
		err = unix.Fchmodat(pfd, name, m, unix.AT_SYMLINK_NOFOLLOW)
	}
	if errors.Is(err, unix.EOPNOTSUPP) {
		// No fchmodat2 (before Linux 6.6), or rel is a symlink: resolve
		// it without following, then chmod the inode the descriptor holds.
		fd, oerr := openat2(pfd, name, unix.O_PATH, 0, d.resolve)
		if oerr != nil {
			return d.pathErr("chmod", rel, oerr)
		}
		err = unix.Chmod("/proc/self/fd/"+strconv.Itoa(fd), m)
		unix.Close(fd)
		if errors.Is(err, unix.ENOENT) {
			err = errors.New("chmod needs fchmodat2 (Linux 6.6) or /proc mounted")
		}
	}
	if err != nil {
		return d.pathErr("chmod", rel, err)
	}
	return nil
}

// noFchmodat2 makes Chmod take its pre-6.6 path (tests).
var noFchmodat2 bool

// Lchown sets the owner of rel itself (a symlink's own owner).
func (d *Dir) Lchown(rel string, uid, gid int) error {
	if isRoot(rel) {
		if err := unix.Fchownat(d.fd, "", uid, gid, unix.AT_EMPTY_PATH); err != nil {
			return d.pathErr("chown", rel, err)
		}
		return nil
	}
	pfd, name, release, err := d.parent("chown", rel)
	if err != nil {
		return err
	}
	defer release()
	if err := unix.Fchownat(pfd, name, uid, gid, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return d.pathErr("chown", rel, err)
	}
	return nil
}

// Lutimes sets the access and modification times of rel itself.
func (d *Dir) Lutimes(rel string, atime, mtime time.Time) error {
	ts := []unix.Timespec{unix.NsecToTimespec(atime.UnixNano()), unix.NsecToTimespec(mtime.UnixNano())}
	if isRoot(rel) {
		return d.withFd("utimes", rel, func(fd int) error { return futimens(fd, ts) })
	}
	pfd, name, release, err := d.parent("utimes", rel)
	if err != nil {
		return err
	}
	defer release()
	if err := unix.UtimesNanoAt(pfd, name, ts, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return d.pathErr("utimes", rel, err)
	}
	return nil
}

// SetTimes sets the access and modification times of an open file.
func SetTimes(f *os.File, atime, mtime time.Time) error {
	ts := []unix.Timespec{unix.NsecToTimespec(atime.UnixNano()), unix.NsecToTimespec(mtime.UnixNano())}
	if err := futimens(int(f.Fd()), ts); err != nil {
		return &fs.PathError{Op: "utimes", Path: f.Name(), Err: err}
	}
	return nil
}

// futimens is utimensat(fd, NULL, ts, 0), as glibc's futimens.
func futimens(fd int, ts []unix.Timespec) error {
	_, _, e := unix.Syscall6(unix.SYS_UTIMENSAT, uintptr(fd), 0, uintptr(unsafe.Pointer(&ts[0])), 0, 0, 0)
	if e != 0 {
		return e
	}
	return nil
}

// withFd runs fn on a read-only descriptor of the regular file or
// directory rel (opened O_NONBLOCK: a fifo or device there is refused
// without waiting, never read).
func (d *Dir) withFd(op, rel string, fn func(fd int) error) error {
	fd, err := d.openat2(op, rel, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_NOCTTY, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	err = unix.Fstat(fd, &st)
	if t := st.Mode & unix.S_IFMT; err == nil && t != unix.S_IFREG && t != unix.S_IFDIR {
		err = ErrNotRegular
	}
	if err == nil {
		err = fn(fd)
	}
	if err != nil {
		return d.pathErr(op, rel, err)
	}
	return nil
}

// Getxattr returns the value of the extended attribute attr of the
// regular file or directory rel.
func (d *Dir) Getxattr(rel, attr string) ([]byte, error) {
	var out []byte
	err := d.withFd("getxattr", rel, func(fd int) error {
		for n := 64; ; n *= 4 {
			buf := make([]byte, n)
			m, err := unix.Fgetxattr(fd, attr, buf)
			if errors.Is(err, unix.ERANGE) && n < 1<<20 {
				continue
			}
			if err != nil {
				return err
			}
			out = buf[:m]
			return nil
		}
	})
	return out, err
}

// Setxattr sets the extended attribute attr of the regular file or
// directory rel.
func (d *Dir) Setxattr(rel, attr string, value []byte) error {
	return d.withFd("setxattr", rel, func(fd int) error { return unix.Fsetxattr(fd, attr, value, 0) })
}

// Removexattr removes the extended attribute attr of the regular file or
// directory rel.
func (d *Dir) Removexattr(rel, attr string) error {
	return d.withFd("removexattr", rel, func(fd int) error { return unix.Fremovexattr(fd, attr) })
}

// WalkFunc is called by [Dir.Walk] for each entry, with its path relative
// to the root and its Lstat; returning fs.SkipDir on a directory skips
// its content, fs.SkipAll stops the walk.
type WalkFunc func(rel string, fi fs.FileInfo, err error) error

// Walk calls fn for rel and every entry below it, parents first, in
// lexical order. Symlinks are reported, never followed.
func (d *Dir) Walk(rel string, fn WalkFunc) error {
	fi, err := d.Lstat(rel)
	if err != nil {
		err = fn(rel, nil, err)
	} else {
		err = d.walk(rel, fi, fn)
	}
	if err == fs.SkipDir || err == fs.SkipAll {
		return nil
	}
	return err
}

func (d *Dir) walk(rel string, fi fs.FileInfo, fn WalkFunc) error {
	if err := fn(rel, fi, nil); err != nil || !fi.IsDir() {
		return err
	}
	ents, err := d.ReadDir(rel)
	if err != nil {
		return fn(rel, fi, err)
	}
	for _, e := range ents {
		r := path.Join(rel, e.Name())
		cfi, err := e.Info()
		if err != nil {
			if err := fn(r, nil, err); err != nil && err != fs.SkipDir {
				return err
			}
			continue
		}
		if err := d.walk(r, cfi, fn); err != nil {
			if err == fs.SkipDir && cfi.IsDir() {
				continue
			}
			return err
		}
	}
	return nil
}

// UnixMode converts fs.FileMode permission, set-id and sticky bits to
// chmod(2) bits.
func UnixMode(m fs.FileMode) uint32 {
	u := uint32(m.Perm())
	if m&fs.ModeSetuid != 0 {
		u |= unix.S_ISUID
	}
	if m&fs.ModeSetgid != 0 {
		u |= unix.S_ISGID
	}
	if m&fs.ModeSticky != 0 {
		u |= unix.S_ISVTX
	}
	return u
}

// fileInfo is an fs.FileInfo from a stat(2) result.
type fileInfo struct {
	name string
	st   unix.Stat_t
}

func newFileInfo(name string, st *unix.Stat_t) *fileInfo { return &fileInfo{name: name, st: *st} }

func (fi *fileInfo) Name() string       { return fi.name }
func (fi *fileInfo) Size() int64        { return fi.st.Size }
func (fi *fileInfo) ModTime() time.Time { return time.Unix(fi.st.Mtim.Unix()) }
func (fi *fileInfo) IsDir() bool        { return fi.Mode().IsDir() }
func (fi *fileInfo) Sys() any           { return &fi.st }
func (fi *fileInfo) Mode() fs.FileMode {
	m := fs.FileMode(fi.st.Mode & 0o777)
	switch fi.st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		m |= fs.ModeDir
	case unix.S_IFLNK:
		m |= fs.ModeSymlink
	case unix.S_IFIFO:
		m |= fs.ModeNamedPipe
	case unix.S_IFSOCK:
		m |= fs.ModeSocket
	case unix.S_IFCHR:
		m |= fs.ModeDevice | fs.ModeCharDevice
	case unix.S_IFBLK:
		m |= fs.ModeDevice
	}
	if fi.st.Mode&unix.S_ISUID != 0 {
		m |= fs.ModeSetuid
	}
	if fi.st.Mode&unix.S_ISGID != 0 {
		m |= fs.ModeSetgid
	}
	if fi.st.Mode&unix.S_ISVTX != 0 {
		m |= fs.ModeSticky
	}
	return m
}

// Stat is the stat(2) result behind an fs.FileInfo returned by this
// package (nil for another).
func Stat(fi fs.FileInfo) *unix.Stat_t {
	st, _ := fi.Sys().(*unix.Stat_t)
	return st
}

// String names the Dir for messages.
func (d *Dir) String() string { return fmt.Sprintf("safefs.Dir(%s)", d.name) }
