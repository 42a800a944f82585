package sysvirt

import (
	"time"

	"golang.org/x/sys/unix"
)

// File times and inode numbers (strict mode). The stat family — stat,
// lstat, fstat, newfstatat, statx — goes to the supervisor, which makes
// the call itself on the caller's behalf (statcall.go: same descriptor,
// directory and flags, resolved as the caller would), rewrites what the
// run made, and writes the result into the caller's memory:
//
//   - a time at or after the run's real start (and not after the real
//     now, so a time a program set into the future is its own) becomes
//     virtual. A value of an inode gets a time the first time anyone sees
//     it: the observer's virtual now, or just after the latest time given
//     out when the observer's clock is behind it — except that a value
//     seen at the very instant the latest time was given gets that time
//     too. So values seen changing at a later instant look newer (make,
//     git's racy-clean check), while the values one process sees between
//     two of its clock reads all get one time, whatever order its threads
//     look in and however many distinct values the kernel's timestamps
//     happened to make (equal times are what coarse kernel timestamps give
//     anyway). Every new value of one answer gets the same time. An access
//     time the run set shows as the file's modification time: reads set it
//     at the whim of relatime and the kernel's clock.
//   - an inode made during the run (birth time at or after the start, or
//     its change time when the file system keeps no birth time) gets a
//     number in the order inodes were first seen: 2^32+1, 2^32+2... Two
//     threads or processes that first see new inodes at the same time may
//     swap their numbers (a limit, doc.go).
//   - a device with no number of its own (major 0: the workspace's
//     overlay, tmpfs, proc), whose number depends on what else is
//     mounted on the machine, gets a number in the order devices were
//     first seen: 0:1, 0:2...
//
// A process never sees a file newer than its clock: seeing one moves its
// clock there, as a message moves a Lamport clock (else ls would show a new
// file's year, as it does for one in the future, and make would warn of
// clock skew).

// fileTimes is what the run's stats have shown so far. Guarded by the
// supervisor's mu.
type fileTimes struct {
	start int64 // real ns: values from here on were made by the run
	last  int64 // the latest virtual time given out
	times map[fileValue]int64
	// inodes maps an inode (its birth time tells a reused number apart)
	// to its number in the run, 0 for one kept.
	inodes map[inodeKey]uint64
	nino   uint64
	// nspecial counts pipes, sockets, FIFOs and device nodes apart.
	nspecial uint64
	devs     map[uint64]uint64
	ndev     uint64
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

// specialBase is where the numbers of the run's pipes, sockets, FIFOs and
// device nodes start, above inodeBase.
const specialBase = 1 << 31

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

// newTime is the time the values process p sees for the first time get,
// now: its instant's (see above). Its instant is its virtual realtime —
// only the part of it the process inherits and its sleeps and waits move,
// its base, when it has several threads, whose clock reads come in the
// order the scheduler picks — less what looking at files added to it: so
// neither the order its threads look in nor what they saw before moves it.
// Callers hold mu.
func (s *Supervisor) newTime(p *proc, now int64) int64 {
	f := s.files
	if p.threads > 1 {
		now = s.cfg.EpochNS + p.base
	}
	instant := now - p.looked
	if p.instantSet && p.instant == instant {
		return p.instantAt
	}
	at := max(now, f.last+1)
	f.last = at
	p.instant, p.instantAt, p.instantSet = instant, at, true
	return at
}

// rewrite puts st on the run's clock and numbers, as process p sees it
// through task tid. Callers hold mu.
func (s *Supervisor) rewrite(p *proc, tid int, st *unix.Statx_t) {
	f := s.files
	dev := unix.Mkdev(st.Dev_major, st.Dev_minor)
	realNow := time.Now().UnixNano()
	now := s.now(p, tid, 'r', false)
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFIFO, unix.S_IFSOCK, unix.S_IFCHR, unix.S_IFBLK:
		s.rewriteSpecial(st, dev, realNow)
		return
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
		w, ok := f.times[k]
		if !ok {
			if at == 0 {
				at = s.newTime(p, now)
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
	if latest > now {
		p.looked += latest - now
		s.setBase(p, tid, p.base+latest-now)
	}
	f.renumberDev(st, dev)
}

// rewriteSpecial puts a pipe, socket, FIFO or device node on the run's
// clock and numbers. Its times move with its I/O, at the whim of the
// scheduler and the kernel's clock, and both ends of a pipeline look at a
// pipe at once, in either order: what the run made shows the run's start
// on the virtual clock, moves no one's clock, and is numbered apart from
// files (2^32+2^31+1...), so that which end looked first changes nothing
// else. Callers hold mu.
func (s *Supervisor) rewriteSpecial(st *unix.Statx_t, dev uint64, realNow int64) {
	f := s.files
	made := false
	for _, ts := range []*unix.StatxTimestamp{&st.Mtime, &st.Ctime, &st.Atime, &st.Btime} {
		if v := ts.Sec*1e9 + int64(ts.Nsec); v >= f.start && v <= realNow {
			ts.Sec, ts.Nsec = s.cfg.EpochNS/1e9, uint32(s.cfg.EpochNS%1e9)
			made = made || ts != &st.Atime
		}
	}
	if made {
		k := inodeKey{dev, st.Ino, -1}
		ino, ok := f.inodes[k]
		if !ok {
			f.nspecial++
			ino = inodeBase + specialBase + f.nspecial
			f.inodes[k] = ino
		}
		st.Ino = ino
	}
	f.renumberDev(st, dev)
}

// renumberDev gives a device with no number of its own the run's.
func (f *fileTimes) renumberDev(st *unix.Statx_t, dev uint64) {
	if st.Dev_major != 0 {
		return
	}
	d, ok := f.devs[dev]
	if !ok {
		f.ndev++
		d = f.ndev
		f.devs[dev] = d
	}
	st.Dev_minor = uint32(d)
}
