package sysvirt

import (
	"strconv"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// File times and inode numbers (strict mode). The stat family — stat,
// lstat, fstat, newfstatat, statx — goes to the supervisor, which makes
// the call itself on the caller's behalf (same path, descriptor and flags:
// a symbolic link is followed exactly when the caller's own call would
// follow it), rewrites what the run made, and writes the result into the
// caller's memory:
//
//   - a time at or after the run's real start (and not after the real
//     now, so a time a program set into the future is its own) becomes
//     virtual. The first time a process sees a value of an inode, the
//     value gets the process's virtual now, or just after the last value
//     given out, whichever is later: values given out only grow, so what
//     was seen changing later looks newer (make, git's racy-clean check).
//     Every new value of one answer gets the same time. An access time
//     the run set shows as the file's modification time: reads set it at
//     the whim of relatime and the kernel's coarse clock.
//   - an inode made during the run (birth time at or after the start, or
//     its change time when the file system keeps no birth time) gets a
//     number in the order inodes were first seen: 2^32+1, 2^32+2...
//   - a device with no number of its own (major 0: the workspace's
//     overlay, tmpfs, proc), whose number depends on what else is
//     mounted on the machine, gets a number in the order devices were
//     first seen: 0:1, 0:2...
//
// A call dal cannot make exactly as the caller would — the caller's root
// or mount namespace is not the supervisor's — runs as the kernel would
// and counts as a clock escape. An error (no such file, a bad buffer) is
// the kernel's own: the call runs again and the kernel reports it.

// fileTimes is what the run's stats have shown so far. Guarded by the
// supervisor's mu.
type fileTimes struct {
	start int64 // real ns: values from here on were made by the run
	last  int64 // the last virtual time given out
	times map[fileValue]int64
	// inodes maps an inode (its birth time tells a reused number apart)
	// to its number in the run, 0 for one kept.
	inodes map[inodeKey]uint64
	nino   uint64
	devs   map[uint64]uint64
	ndev   uint64
	// The supervisor's own root and mount namespace, read at the first
	// stat (valid is then true).
	valid            bool
	rootDev, rootIno uint64
	mntNS            uint64
}

// fileValue is a time value of an inode; its birth time tells a reused
// inode number apart.
type fileValue struct {
	dev, ino  uint64
	birth, ns int64
}

type inodeKey struct {
	dev, ino uint64
	birth    int64
}

// inodeBase is where the numbers of the run's inodes start: above any
// 32-bit inode number (ext4, tmpfs without inode64) and below the high
// bits overlayfs uses for its layers.
const inodeBase = 1 << 32

func newFileTimes(start int64) *fileTimes {
	return &fileTimes{start: start, times: map[fileValue]int64{}, inodes: map[inodeKey]uint64{}, devs: map[uint64]uint64{}}
}

// StartNow is a run's start for [Config.StartNS]: the real time on the
// kernel's coarse clock, which stamps files and lags the precise one by up
// to a tick, so that nothing made after it has an earlier time.
func StartNow() int64 {
	var ts unix.Timespec
	unix.ClockGettime(unix.CLOCK_REALTIME_COARSE, &ts)
	return ts.Nano()
}

// statRules are the filter rules for the stat family.
func statRules() []Rule {
	r := []Rule{{Nr: unix.SYS_NEWFSTATAT}, {Nr: unix.SYS_FSTAT}, {Nr: unix.SYS_STATX}}
	for _, nr := range legacyStat {
		r = append(r, Rule{Nr: nr})
	}
	return r
}

// statName names the stat family's calls for [callName].
func statName(nr int) string {
	switch nr {
	case unix.SYS_NEWFSTATAT:
		return "newfstatat"
	case unix.SYS_FSTAT:
		return "fstat"
	case unix.SYS_STATX:
		return "statx"
	case sysStat:
		return "stat"
	case sysLstat:
		return "lstat"
	}
	return ""
}

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
	if !ok || c.buf == 0 || (c.statx && c.flags&^statxFlags != 0) || (!c.statx && c.flags&^statFlags != 0) {
		Continue(s.fd, n.ID) // the kernel's error
		return
	}
	if ownThread(tid) {
		// The supervisor's own process (its tracer's thread reads
		// /proc while it holds mu): nothing of the agent's.
		Continue(s.fd, n.ID)
		return
	}
	s.mu.Lock()
	p := s.lookup(tid)
	if p == nil {
		s.escaped("clock")
		s.counts.note("a process dal was not tracing called stat: it got real file times")
	}
	s.mu.Unlock()
	if p == nil {
		Continue(s.fd, n.ID)
		return
	}
	path := ""
	if c.path != 0 {
		var errno unix.Errno
		if path, errno = readPath(tid, c.path); errno != 0 {
			Continue(s.fd, n.ID)
			return
		}
	}
	if path == "" && c.flags&unix.AT_EMPTY_PATH == 0 {
		Continue(s.fd, n.ID) // ENOENT, or EFAULT for a NULL path
		return
	}
	if path != "" && !s.sameRoot(tid) {
		s.mu.Lock()
		s.escaped("clock")
		s.counts.note("a process with a root or mount namespace of its own called stat: it got real file times")
		s.mu.Unlock()
		Continue(s.fd, n.ID)
		return
	}
	// Where a relative (or empty) path starts: the caller's descriptor
	// or working directory, as an O_PATH descriptor of ours.
	dirfd := unix.AT_FDCWD
	if path == "" || path[0] != '/' {
		fd, err := callerDir(tid, p.tgid, c.dirfd)
		if err != nil {
			Continue(s.fd, n.ID) // EBADF and friends: the kernel's
			return
		}
		defer unix.Close(fd)
		dirfd = fd
	}
	flags, mask := c.flags, c.mask|unix.STATX_BASIC_STATS|unix.STATX_BTIME
	if !c.statx {
		// stat, lstat and fstatat never trigger an automount.
		flags |= unix.AT_NO_AUTOMOUNT
	}
	var st unix.Statx_t
	if err := unix.Statx(dirfd, path, flags, mask, &st); err != nil {
		Continue(s.fd, n.ID)
		return
	}
	if !Valid(s.fd, n.ID) {
		return // the caller is gone, or was interrupted and will call again
	}
	s.mu.Lock()
	s.rewrite(p, tid, &st)
	s.served("file_times")
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

// rewrite puts st on the run's clock and numbers. Callers hold mu.
func (s *Supervisor) rewrite(p *proc, tid int, st *unix.Statx_t) {
	f := s.files
	dev := unix.Mkdev(st.Dev_major, st.Dev_minor)
	realNow := time.Now().UnixNano()
	// A pipe's, socket's or device's times move with its I/O, at the
	// whim of the scheduler and the kernel's coarse clock: they keep the
	// first virtual time they were seen with.
	frozen := false
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFIFO, unix.S_IFSOCK, unix.S_IFCHR, unix.S_IFBLK:
		frozen = true
	}
	at := int64(0)     // the time new values of this answer get
	latest := int64(0) // the latest virtual time of the answer
	birth := int64(0)
	made := st.Ctime.Sec*1e9+int64(st.Ctime.Nsec) >= f.start
	if st.Mask&unix.STATX_BTIME != 0 {
		birth = st.Btime.Sec*1e9 + int64(st.Btime.Nsec)
		made = birth >= f.start
	}
	virtual := func(ts *unix.StatxTimestamp) {
		v := ts.Sec*1e9 + int64(ts.Nsec)
		if v < f.start || v > realNow {
			return
		}
		k := fileValue{dev, st.Ino, birth, v}
		if frozen {
			k.ns = -1
		}
		w, ok := f.times[k]
		if !ok {
			if at == 0 {
				at = max(s.fileNow(p, tid), f.last+1)
				f.last = at
			}
			w = at
			f.times[k] = w
		}
		ts.Sec, ts.Nsec = w/1e9, uint32(w%1e9)
		latest = max(latest, w)
	}
	a := st.Atime.Sec*1e9 + int64(st.Atime.Nsec)
	virtual(&st.Mtime)
	virtual(&st.Ctime)
	if st.Mask&unix.STATX_BTIME != 0 {
		virtual(&st.Btime)
	}
	if a >= f.start && a <= realNow {
		st.Atime = st.Mtime
	}

	k := inodeKey{dev, st.Ino, birth}
	ino, ok := f.inodes[k]
	if !ok {
		if made {
			f.nino++
			ino = inodeBase + f.nino
		}
		f.inodes[k] = ino
	}
	if ino != 0 {
		st.Ino = ino
	}
	// A process never sees a file newer than its clock: seeing one
	// moves its clock there, as a message moves a Lamport clock (else ls
	// would show a new file's year, as it does for one in the future,
	// and make would warn of clock skew).
	if now := s.fileNow(p, tid); latest > now {
		s.advance(p, tid, latest-now)
	}
	if st.Dev_major == 0 {
		d, ok := f.devs[dev]
		if !ok {
			f.ndev++
			d = f.ndev
			f.devs[dev] = d
		}
		st.Dev_minor = uint32(d)
	}
}

// fileNow is the virtual realtime of p's stream, a look that does not
// count as a read. Callers hold mu.
func (s *Supervisor) fileNow(p *proc, tid int) int64 {
	return s.now(p, 'r', false)
}

// advance moves p's clock d ns on. Callers hold mu.
func (s *Supervisor) advance(p *proc, tid int, d int64) {
	p.base += d
}

// sameRoot reports whether thread tid resolves paths as the supervisor
// does: the same root directory and mount namespace.
func (s *Supervisor) sameRoot(tid int) bool {
	f := s.files
	s.mu.Lock()
	if !f.valid {
		var root, ns unix.Stat_t
		if unix.Stat("/", &root) == nil && unix.Stat("/proc/self/ns/mnt", &ns) == nil {
			f.rootDev, f.rootIno, f.mntNS, f.valid = root.Dev, root.Ino, ns.Ino, true
		}
	}
	rootDev, rootIno, mntNS, valid := f.rootDev, f.rootIno, f.mntNS, f.valid
	s.mu.Unlock()
	if !valid {
		return false
	}
	dir := "/proc/" + strconv.Itoa(tid)
	var root, ns unix.Stat_t
	if unix.Stat(dir+"/root", &root) != nil || unix.Stat(dir+"/ns/mnt", &ns) != nil {
		return false
	}
	return root.Dev == rootDev && root.Ino == rootIno && ns.Ino == mntNS
}

// callerDir opens, O_PATH, what a call of thread tid resolves a relative
// path from: descriptor dirfd, or its working directory for AT_FDCWD.
func callerDir(tid, tgid int, dirfd int32) (int, error) {
	if dirfd == unix.AT_FDCWD {
		return unix.Open("/proc/"+strconv.Itoa(tid)+"/cwd", unix.O_PATH|unix.O_CLOEXEC, 0)
	}
	if dirfd < 0 {
		return -1, unix.EBADF
	}
	// The thread's own descriptor table (it may have unshared it); a
	// kernel before 6.9 opens only a process.
	pidfd, err := unix.PidfdOpen(tid, unix.PIDFD_THREAD)
	if err == unix.EINVAL {
		pidfd, err = unix.PidfdOpen(tgid, 0)
	}
	if err != nil {
		return -1, err
	}
	defer unix.Close(pidfd)
	return unix.PidfdGetfd(pidfd, int(dirfd), 0)
}

// readPath reads a path argument: a NUL-terminated string of at most
// PATH_MAX bytes, a page at a time so an unmapped page after it does no
// harm. The errno is the kernel's for a bad one.
func readPath(pid int, addr uint64) (string, unix.Errno) {
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

// ownThread reports whether tid is a thread of the supervisor's process.
func ownThread(tid int) bool {
	return unix.Faccessat(unix.AT_FDCWD, "/proc/self/task/"+strconv.Itoa(tid), unix.F_OK, 0) == nil
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
