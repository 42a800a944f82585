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
//   - an inode made during the run (birth time at or after the agent's
//     start, or its change time when the file system keeps no birth time)
//     gets a number from the time it was first seen at and its rank among
//     the inodes first seen then: 2^32 + (t-epoch)×256 + rank. A time
//     belongs to one process's instant, so what another process looks at,
//     and when, leaves the number alone; only threads of one process that
//     first see inodes at one instant may swap theirs. Beyond 256 inodes at
//     one instant, or 4.9 hours of virtual time, numbers are counted in the
//     order first seen (from 2^52+2^40).
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
	// agent is when the agent's first image started (real ns, coarse
	// clock): what has a time in [start, agent) dal made for the run (the
	// sandbox's /tmp, /dev, its proxy's certificates), and shows the
	// run's start on the virtual clock, whoever looks at it when.
	agent int64
	last  int64 // the latest virtual time given out
	times map[fileValue]int64
	// inodes maps an inode (its birth time tells a reused number apart)
	// to its number in the run, 0 for one kept.
	inodes map[inodeKey]uint64
	// ranks counts the inodes numbered at each virtual time; nspill
	// those numbered past them.
	ranks  map[int64]uint64
	nspill uint64
	// nspecial counts pipes, sockets, FIFOs and device nodes apart.
	nspecial uint64
	devs     map[uint64]uint64
	ndev     uint64
	// dal are the inodes the sandbox made for the run, whose values up
	// to dalUntil (real ns) are its own; aliases are inode numbers shown
	// as others (dalfiles.go).
	dal      map[inodeID]bool
	dalUntil int64
	// barrier is the line between inode times given out before the
	// sandbox told what it made and after (stampBarrier); 0 until then.
	barrier int64
	aliases map[inodeID]uint64
	outside inodeID
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

// Where the numbers of the run's inodes start: above any 32-bit inode
// number (ext4, tmpfs without inode64), below the high bits overlayfs uses
// for its layers and below 2^53, which JavaScript numbers hold exactly.
const (
	inodeBase  = 1 << 32
	rankBits   = 8
	maxInstant = 1<<44 - 1 // ns past the epoch that fit below specialBase
	// specialBase is where pipes, sockets, FIFOs and device nodes start;
	// spillBase where inodes beyond the ranks or instants do.
	specialBase = 1 << 52
	spillBase   = specialBase + 1<<40
)

func newFileTimes(start int64) *fileTimes {
	return &fileTimes{start: start, agent: start, times: map[fileValue]int64{}, inodes: map[inodeKey]uint64{}, ranks: map[int64]uint64{}, devs: map[uint64]uint64{}}
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
	// p's virtual realtime, read (from its vDSO's pages) only for an
	// answer with times of the run's.
	now, read := int64(0), false
	clock := func() int64 {
		if !read {
			now, read = s.now(p, tid, 'r', false), true
		}
		return now
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFIFO, unix.S_IFSOCK, unix.S_IFCHR, unix.S_IFBLK:
		s.rewriteSpecial(st, dev, realNow)
		return
	}
	at, atSet := int64(0), false // the time new values of this answer get
	latest := int64(0)           // the latest virtual time of the answer
	birth := int64(0)
	// dalUntil: values of an inode the sandbox made, up to when it told
	// the supervisor, are the sandbox's (dalfiles.go).
	own := f.agent
	dal := f.dal[inodeID{dev, st.Ino}]
	if dal {
		own = max(own, f.dalUntil+1)
	}
	made := st.Ctime.Sec*1e9+int64(st.Ctime.Nsec) >= own
	if st.Mask&unix.STATX_BTIME != 0 {
		birth = st.Btime.Sec*1e9 + int64(st.Btime.Nsec)
		made = birth >= own
	}
	virtual := func(ts *unix.StatxTimestamp) {
		v := ts.Sec*1e9 + int64(ts.Nsec)
		if dal && v < own {
			// The sandbox's own, whenever it wrote it (a certificate
			// staged before the run began).
			ts.Sec, ts.Nsec = s.cfg.EpochNS/1e9, uint32(s.cfg.EpochNS%1e9)
			return
		}
		if v < f.start || v > realNow {
			return
		}
		if v < own {
			ts.Sec, ts.Nsec = s.cfg.EpochNS/1e9, uint32(s.cfg.EpochNS%1e9)
			return
		}
		k := fileValue{dev, st.Ino, birth, v}
		w, ok := f.times[k]
		if !ok {
			if !atSet {
				at, atSet = s.newTime(p, clock()), true
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
	if (a >= own && a <= realNow) || (dal && a < own) {
		st.Atime = st.Mtime
	}

	k := inodeKey{dev, st.Ino, birth}
	ino, ok := f.inodes[k]
	if !ok {
		if made {
			t := int64(-1) // not seen new here: counted apart
			if atSet {
				t = at - s.cfg.EpochNS
			}
			ino = f.number(t)
		}
		f.inodes[k] = ino
	}
	if as, ok := f.aliases[inodeID{dev, st.Ino}]; ok {
		ino = as
	}
	if f.outside == (inodeID{dev, st.Ino}) && st.Mode&unix.S_IFMT == unix.S_IFDIR {
		st.Nlink = 2
	}
	if ino != 0 {
		st.Ino = ino
	}
	if latest > 0 && latest > clock() {
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
			made = made || (ts != &st.Atime && v >= f.agent)
		}
	}
	if made {
		k := inodeKey{dev, st.Ino, -1}
		ino, ok := f.inodes[k]
		if !ok {
			f.nspecial++
			ino = specialBase + f.nspecial
			f.inodes[k] = ino
		}
		st.Ino = ino
	}
	f.renumberDev(st, dev)
}

// number is the number of an inode first seen at virtual time t past the
// epoch (see above).
func (f *fileTimes) number(t int64) uint64 {
	r := f.ranks[t]
	if t < 0 || t > maxInstant || r >= 1<<rankBits {
		f.nspill++
		return spillBase + f.nspill
	}
	f.ranks[t] = r + 1
	return inodeBase + uint64(t)<<rankBits + r
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
