package sysvirt

import (
	"bytes"
	"os"
	"strconv"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// How the supervisor stats for a caller (strict mode), hostile by default:
//
//   - It starts where the caller's call starts: the caller's descriptor
//     (pidfd_getfd) or working directory, and resolves from the same root
//     in the same mount namespace (statview.go: checked once per process,
//     and at every call for one that could resolve differently without
//     dal seeing it change).
//   - It follows a symbolic link exactly when the caller's call would: the
//     flags are the caller's, and the walk is openat2's O_PATH walk, which
//     opens a link itself when told not to follow it.
//   - It never resolves through a link whose target depends on who looks:
//     /proc's magic links (/proc/self/fd/N, /dev/stdin, cwd, root) are
//     refused (RESOLVE_NO_MAGICLINKS), and an answer that lands in /proc
//     (where /proc/self names the supervisor) is not used. Both let the
//     call run as the kernel would, with real times: a clock escape.
//   - It has the caller's permissions: the agent runs with the init's uid
//     and no capabilities, and the walk runs without the capabilities
//     that pass a permission check (callercaps.go).
//
// It never stats on the tracer's thread while holding mu: the tracer is
// under the filter, and its stat would wait for a supervisor waiting for
// mu. Its own calls (the tracer's thread, for /proc) run as the kernel
// would.

// statCall is one call of the stat family, decoded.
type statCall struct {
	dirfd int32
	path  uint64 // address of the path; 0 for fstat
	flags int
	mask  int    // statx's mask; 0 for the struct stat calls
	buf   uint64 // where the result goes
	statx bool
}

// decodeStat decodes n as a call of the stat family.
func decodeStat(n *Notif) (statCall, bool) {
	a := n.Args
	switch int(n.Nr) {
	case unix.SYS_NEWFSTATAT:
		return statCall{dirfd: int32(a[0]), path: a[1], buf: a[2], flags: int(a[3])}, true
	case unix.SYS_FSTAT:
		return statCall{dirfd: int32(a[0]), buf: a[1], flags: unix.AT_EMPTY_PATH}, true
	case unix.SYS_STATX:
		return statCall{dirfd: int32(a[0]), path: a[1], flags: int(a[2]), mask: int(uint32(a[3])), buf: a[4], statx: true}, true
	case sysStat:
		return statCall{dirfd: unix.AT_FDCWD, path: a[0], buf: a[1]}, true
	case sysLstat:
		return statCall{dirfd: unix.AT_FDCWD, path: a[0], buf: a[1], flags: unix.AT_SYMLINK_NOFOLLOW}, true
	}
	return statCall{}, false
}

// Flags each call accepts; with any other the kernel's EINVAL is due.
const (
	statFlags  = unix.AT_SYMLINK_NOFOLLOW | unix.AT_EMPTY_PATH | unix.AT_NO_AUTOMOUNT
	statxFlags = statFlags | unix.AT_STATX_FORCE_SYNC | unix.AT_STATX_DONT_SYNC
)

// stat serves a call of the stat family.
func (s *Supervisor) stat(n *Notif) {
	c, ok := decodeStat(n)
	tid := int(n.Pid)
	if !ok || c.buf == 0 || (c.statx && c.flags&^statxFlags != 0) || (!c.statx && c.flags&^statFlags != 0) ||
		int32(tid) == s.tracer.Load() {
		// The kernel's EINVAL or EFAULT, or the supervisor's own call.
		Continue(s.fd, n.ID)
		return
	}
	s.mu.Lock()
	p := s.lookup(tid)
	var v callerView
	if p != nil {
		v = s.viewOf(p, c.dirfd != unix.AT_FDCWD)
	}
	stale := s.pidfds.takeStale()
	s.mu.Unlock()
	for _, fd := range stale {
		unix.Close(fd)
	}
	if p == nil {
		s.stranger(n)
		return
	}
	var st unix.Statx_t
	escape, ok := s.statFor(tid, c, &v, &st)
	if !ok {
		if escape != "" {
			s.mu.Lock()
			s.escaped(Clock)
			s.counts.note("%s", escape)
			s.mu.Unlock()
		}
		Continue(s.fd, n.ID)
		return
	}
	if !Valid(s.fd, n.ID) {
		return // the caller is gone, or was interrupted and will call again
	}
	s.mu.Lock()
	s.rewrite(p, tid, &st)
	s.served(FileTimes)
	s.mu.Unlock()
	if c.mask&unix.STATX_BTIME == 0 {
		st.Mask &^= unix.STATX_BTIME
		st.Btime = unix.StatxTimestamp{}
	}
	var out []byte
	if c.statx {
		out = unsafe.Slice((*byte)(unsafe.Pointer(&st)), unsafe.Sizeof(st))
	} else {
		ks := statOf(&st)
		out = unsafe.Slice((*byte)(unsafe.Pointer(&ks)), unsafe.Sizeof(ks))
	}
	if writeMem(tid, c.buf, out) != nil {
		Continue(s.fd, n.ID) // the kernel's EFAULT
		return
	}
	s.reply(n, 0)
}

// stranger lets the stat of a task the tracer does not know run: one of
// the supervisor's own threads, or a process dal was not tracing (an
// escape).
func (s *Supervisor) stranger(n *Notif) {
	if tgidOf(int(n.Pid)) != os.Getpid() {
		s.mu.Lock()
		s.escaped(Clock)
		s.counts.note("a process dal was not tracing called stat: it got real file times")
		s.mu.Unlock()
	}
	Continue(s.fd, n.ID)
}

// Notes of the stats dal lets run with real times.
const (
	escapeView   = "a process with a root or mount namespace of its own called stat: it got real file times"
	escapeMagic  = "a stat went through a link of /proc whose target depends on who looks (/proc/self/fd/N, /dev/stdin): it got real times"
	escapeProc   = "a stat looked into /proc, where /proc/self names whoever looks: it got real times"
	escapeNoOpen = "the kernel has no openat2 (Linux 5.6): stat got real file times"
)

// statFor makes c's stat for the caller, task tid, as v says it resolves
// paths. ok says st holds the answer; otherwise the kernel answers, and
// escape, when not empty, says why the answer has real times.
func (s *Supervisor) statFor(tid int, c statCall, v *callerView, st *unix.Statx_t) (escape string, ok bool) {
	path := ""
	if c.path != 0 {
		var errno unix.Errno
		if path, errno = readPath(tid, c.path); errno != 0 {
			return "", false
		}
	}
	if path == "" && c.flags&unix.AT_EMPTY_PATH == 0 {
		return "", false // ENOENT, or EFAULT for a NULL path
	}
	if path != "" && !v.same {
		if !s.sameView(tid) {
			return escapeView, false
		}
		s.viewSeen(v)
	}
	start := unix.AT_FDCWD
	if path == "" || path[0] != '/' {
		fd, owned, err := startDir(tid, c.dirfd, v)
		if err != nil {
			return "", false // EBADF and friends: the kernel's
		}
		if owned {
			defer unix.Close(fd)
		}
		start = fd
	}
	// The walk and the stat with the caller's permissions (callercaps.go);
	// a descriptor of the caller's needs none to be looked at.
	if path == "" {
		escape, ok = statAt(start, path, c, st)
	} else if !s.asCaller(func() { escape, ok = statAt(start, path, c, st) }) {
		return "", false
	}
	if !ok {
		return escape, false
	}
	if path != "" && unix.Mkdev(st.Dev_major, st.Dev_minor) == s.self().procDev {
		return escapeProc, false
	}
	return "", true
}

// statAt stats path from directory start (start itself when path is
// empty) as c asks, into st.
func statAt(start int, path string, c statCall, st *unix.Statx_t) (escape string, ok bool) {
	mask := c.mask | unix.STATX_BASIC_STATS | unix.STATX_BTIME
	sync := c.flags & (unix.AT_STATX_FORCE_SYNC | unix.AT_STATX_DONT_SYNC)
	if path != "" && !strings.Contains(path, "/") {
		// One name in start: a walk that follows no link, so through no
		// magic one, and a quarter of openat2's cost. Not a link, or a
		// link the caller does not follow: that is the answer.
		if unix.Statx(start, path, unix.AT_SYMLINK_NOFOLLOW|sync, mask, st) != nil {
			return "", false // the caller's own error
		}
		if st.Mode&unix.S_IFMT != unix.S_IFLNK || c.flags&unix.AT_SYMLINK_NOFOLLOW != 0 {
			return "", true
		}
	}
	target := start
	if path != "" {
		fd, escape := openAsCaller(start, path, c.flags&unix.AT_SYMLINK_NOFOLLOW != 0)
		if fd < 0 {
			return escape, false
		}
		defer unix.Close(fd)
		target = fd
	}
	return "", unix.Statx(target, "", unix.AT_EMPTY_PATH|sync, mask, st) == nil
}

// openAsCaller opens path from directory start, O_PATH, following a
// final symbolic link unless nofollow, and never through a magic link of
// /proc. It returns -1 when the caller's own call should run, with a
// note when that call may then return real times.
func openAsCaller(start int, path string, nofollow bool) (fd int, escape string) {
	how := unix.OpenHow{Flags: unix.O_PATH | unix.O_CLOEXEC, Resolve: unix.RESOLVE_NO_MAGICLINKS}
	if nofollow {
		how.Flags |= unix.O_NOFOLLOW
	}
	fd, err := unix.Openat2(start, path, &how)
	switch err {
	case nil:
		return fd, ""
	case unix.ELOOP:
		// A magic link, or a loop of the caller's own: the walk again
		// with magic links tells (it opens nothing, and its answer is
		// not used).
		how.Resolve = 0
		if fd, err := unix.Openat2(start, path, &how); err == nil {
			unix.Close(fd)
			return -1, escapeMagic
		}
		return -1, ""
	case unix.ENOSYS:
		return -1, escapeNoOpen
	}
	return -1, "" // the caller's own error
}

// startDir returns the directory a relative path of task tid starts from:
// its descriptor dirfd, or its working directory for AT_FDCWD. The caller
// closes fd when owned.
func startDir(tid int, dirfd int32, v *callerView) (fd int, owned bool, err error) {
	if dirfd == unix.AT_FDCWD {
		fd, err := unix.Open("/proc/"+strconv.Itoa(tid)+"/cwd", unix.O_PATH|unix.O_CLOEXEC, 0)
		return fd, err == nil, err
	}
	if dirfd < 0 {
		return -1, false, unix.EBADF
	}
	pidfd := v.pidfd
	if pidfd < 0 {
		// The thread's own descriptor table (it may have one of its
		// own); a kernel before 6.9 opens only a process.
		t, err := unix.PidfdOpen(tid, unix.PIDFD_THREAD)
		if err == unix.EINVAL {
			t, err = unix.PidfdOpen(v.tgid, 0)
		}
		if err != nil {
			return -1, false, err
		}
		defer unix.Close(t)
		pidfd = t
	}
	fd, err = unix.PidfdGetfd(pidfd, int(dirfd), 0)
	return fd, err == nil, err
}

// readPath reads a path argument: a NUL-terminated string of at most
// PATH_MAX bytes, a page at a time so an unmapped page after it does no
// harm. The errno is the kernel's for a bad one.
func readPath(pid int, addr uint64) (string, unix.Errno) {
	// Most paths are short (a name in a directory): the first look reads
	// 256 bytes, not the rest of the page.
	var short [256]byte
	b := short[:min(len(short), 4096-int(addr%4096))]
	if ReadMem(pid, addr, b) != nil {
		return "", unix.EFAULT
	}
	if i := bytes.IndexByte(b, 0); i >= 0 {
		return string(b[:i]), 0
	}
	var out []byte
	var page [4096]byte
	for len(out) < unix.PathMax {
		n := 4096 - int(addr%4096)
		b := page[:n]
		if ReadMem(pid, addr, b) != nil {
			return "", unix.EFAULT
		}
		for i, c := range b {
			if c == 0 {
				out = append(out, b[:i]...)
				if len(out) >= unix.PathMax {
					return "", unix.ENAMETOOLONG
				}
				return string(out), 0
			}
		}
		out = append(out, b...)
		addr += uint64(n)
	}
	return "", unix.ENAMETOOLONG
}

// readFile reads a small file (of /proc) without os.ReadFile's fstat: the
// tracer's thread is under the filter, and a stat it made while holding
// mu would wait for a supervisor waiting for mu.
func readFile(path string) ([]byte, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	b := make([]byte, 0, 4096)
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		n, err := unix.Read(fd, b[len(b):cap(b)])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, err
		}
		if n == 0 {
			return b, nil
		}
		b = b[:len(b)+n]
	}
}
