package sysvirt

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// waitCall is a timed wait (poll, select or epoll family) being served.
type waitCall struct {
	n   *Notif
	pid int // the calling thread
	// helper is its process's quiet thread (quiet.go), which does not
	// count as running: Go's sysmon wakes on the real clock and cannot
	// make a timer due while the clock stands still.
	helper  int
	timeout int64 // ns
	// fds are the caller's descriptors to watch, with the poll events that
	// would make the call return.
	fds    []int
	events []int16
	// epoll: the caller's epoll descriptor (fds then are its members,
	// used only to judge outstanding I/O).
	epoll int
	// zero writes what the kernel writes when the call times out; left
	// the time left when a signal interrupts it (ppoll, select, pselect6).
	zero func() error
	left func(ns int64)
	// mask is the signal mask the call sets for its wait (hasMask).
	mask    uint64
	hasMask bool
}

// wait serves the calls of the poll, select and epoll families that exist
// on every architecture.
func (s *Supervisor) wait(n *Notif) {
	a := n.Args
	w := &waitCall{n: n, pid: int(n.Pid), epoll: -1}
	var tsp, maskAddr uint64
	switch int(n.Nr) {
	case unix.SYS_PPOLL:
		tsp, maskAddr = a[2], a[3]
	case unix.SYS_PSELECT6:
		tsp = a[4]
		if a[5] != 0 {
			var b [8]byte
			if ReadMem(w.pid, a[5], b[:]) != nil {
				Continue(s.fd, n.ID)
				return
			}
			maskAddr = binary.LittleEndian.Uint64(b[:])
		}
	case sysEpollWait:
		w.timeout = msTimeout(a[3])
	case unix.SYS_EPOLL_PWAIT:
		w.timeout, maskAddr = msTimeout(a[3]), a[4]
	case unix.SYS_EPOLL_PWAIT2:
		tsp, maskAddr = a[3], a[4]
	}
	if tsp != 0 {
		ns, errno := readTimespec(w.pid, tsp)
		if errno != 0 {
			Continue(s.fd, n.ID) // the kernel reports it
			return
		}
		w.timeout = ns
	} else if int(n.Nr) != sysEpollWait && int(n.Nr) != unix.SYS_EPOLL_PWAIT {
		w.timeout = -1
	}
	if maskAddr != 0 {
		var b [8]byte
		if ReadMem(w.pid, maskAddr, b[:]) != nil {
			Continue(s.fd, n.ID) // the kernel reports it
			return
		}
		w.mask, w.hasMask = binary.LittleEndian.Uint64(b[:]), true
	}
	switch int(n.Nr) {
	case unix.SYS_PPOLL:
		s.servePoll(w, a[0], a[1], tsp, true)
	case unix.SYS_PSELECT6:
		s.serveSelect(w, int(a[0]), a[1], a[2], a[3], tsp, true)
	default:
		w.epoll = int(int32(a[0]))
		s.serveWait(w)
	}
}

// msTimeout reads an int timeout in milliseconds: -1 (any negative) is
// infinite.
func msTimeout(v uint64) int64 {
	ms := int32(v)
	if ms < 0 {
		return -1
	}
	return int64(ms) * 1e6
}

const pollfdSize = 8

// servePoll serves poll and ppoll; tsp is ppoll's timespec (0 for poll).
func (s *Supervisor) servePoll(w *waitCall, fds, nfds, tsp uint64, pp bool) {
	if w.timeout <= 0 || nfds > 1<<16 {
		Continue(s.fd, w.n.ID)
		return
	}
	raw := make([]byte, nfds*pollfdSize)
	if ReadMem(w.pid, fds, raw) != nil {
		Continue(s.fd, w.n.ID)
		return
	}
	for i := 0; i < int(nfds); i++ {
		fd := int32(binary.LittleEndian.Uint32(raw[i*8:]))
		ev := int16(binary.LittleEndian.Uint16(raw[i*8+4:]))
		if fd < 0 {
			continue
		}
		w.fds = append(w.fds, int(fd))
		w.events = append(w.events, ev|unix.POLLERR|unix.POLLHUP|unix.POLLNVAL)
	}
	w.zero = func() error {
		for i := 0; i < int(nfds); i++ {
			raw[i*8+6], raw[i*8+7] = 0, 0
		}
		if err := writeMem(w.pid, fds, raw); err != nil {
			return err
		}
		if pp && tsp != 0 {
			return writeMem(w.pid, tsp, make([]byte, 16))
		}
		return nil
	}
	if pp && tsp != 0 {
		w.left = func(ns int64) { writeMem(w.pid, tsp, putTimespec(ns)) }
	}
	s.serveWait(w)
}

// serveSelect serves select and pselect6; tv is select's timeval or
// pselect6's timespec.
func (s *Supervisor) serveSelect(w *waitCall, nfds int, r, wr, e, tv uint64, pselect bool) {
	if w.timeout <= 0 || nfds < 0 || nfds > 1<<16 {
		Continue(s.fd, w.n.ID)
		return
	}
	size := (nfds + 63) / 64 * 8
	sets := [3][]byte{}
	for i, addr := range []uint64{r, wr, e} {
		if addr == 0 {
			continue
		}
		sets[i] = make([]byte, size)
		if ReadMem(w.pid, addr, sets[i]) != nil {
			Continue(s.fd, w.n.ID)
			return
		}
	}
	masks := [3]int16{unix.POLLIN | unix.POLLHUP | unix.POLLERR, unix.POLLOUT | unix.POLLERR, unix.POLLPRI}
	for fd := 0; fd < nfds; fd++ {
		var ev int16
		for i, set := range sets {
			if set != nil && set[fd/8]&(1<<(fd%8)) != 0 {
				ev |= masks[i]
			}
		}
		if ev != 0 {
			w.fds = append(w.fds, fd)
			w.events = append(w.events, ev|unix.POLLNVAL)
		}
	}
	w.zero = func() error {
		for i, addr := range []uint64{r, wr, e} {
			if addr != 0 {
				if err := writeMem(w.pid, addr, make([]byte, len(sets[i]))); err != nil {
					return err
				}
			}
		}
		return writeMem(w.pid, tv, make([]byte, 16))
	}
	if tv != 0 {
		w.left = func(ns int64) {
			if !pselect {
				ns = ns / 1000 * 1000 // a timeval
				b := putTimespec(ns)
				binary.LittleEndian.PutUint64(b[8:], uint64(ns%1e9/1000))
				writeMem(w.pid, tv, b)
				return
			}
			writeMem(w.pid, tv, putTimespec(ns))
		}
	}
	s.serveWait(w)
}

// serveWait applies the outstanding-I/O rule to w: see the package
// documentation.
//
// Which waits come here is the filter's choice: poll, epoll_wait and
// epoll_pwait only with a positive timeout (a register the filter reads;
// zero and infinite ones run in the kernel at the filter's cost alone);
// ppoll, pselect6, select and epoll_pwait2 whenever their timeout pointer
// is not NULL, since the filter cannot follow it (a zero one is let
// through below).
//
// Why every such wait is looked at, even one on a connected socket of a
// single-threaded process, which could look like the kernel's own wait:
// such a poll can never jump while it waits (its one thread is blocked,
// so its descriptors and their kinds cannot change under it, unless
// another process shares its descriptor table), but when
// nothing comes the rule still moves the clock by the timeout as it
// expires, where the kernel's wait would return 0 with the clock
// unchanged. Answering CONTINUE at once would change what a program's
// clock reads after a timeout, so it is not done.
func (s *Supervisor) serveWait(w *waitCall) {
	if w.timeout <= 0 || !s.cfg.Clock {
		// Untimed waits are the kernel's; a timer ends them through
		// the process's watcher (timers.go).
		Continue(s.fd, w.n.ID)
		return
	}
	s.mu.Lock()
	p := s.caller(w.n)
	pidfd := -1
	if p != nil {
		pidfd = s.pidfds.get(p)
		w.helper = p.quiet
	}
	stale := s.pidfds.takeStale()
	s.mu.Unlock()
	for _, fd := range stale {
		unix.Close(fd)
	}
	if pidfd < 0 {
		Continue(s.fd, w.n.ID)
		return
	}
	l := look(w, p.tgid, pidfd)
	if w.hasMask && l.verdict == waitExpire {
		// The mask the call would set matters only to a signal pending
		// or arriving meanwhile: jumping, none can arrive but a timer's,
		// which advance judges under the mask.
		if st, ok := readSigState(w.pid); !ok || st.pending&^w.mask != 0 {
			l.verdict = waitReal
		}
	}
	if l.verdict == waitReal && w.hasMask {
		// dal cannot apply the mask to a real wait of its own.
		l.close()
		s.mu.Lock()
		s.real("wait_sigmask")
		s.mu.Unlock()
		Continue(s.fd, w.n.ID)
		return
	}
	switch l.verdict {
	case waitKernel, waitReady:
		// Ready now: the call returns at once and time does not move.
		// Or a descriptor is not one: the kernel says so.
		l.close()
		Continue(s.fd, w.n.ID)
	case waitExpire:
		l.close()
		s.expire(w, p, "wait")
	case waitReal:
		s.waitReal(w, p, l)
	}
}

// waitVerdict is what a look at a wait decides.
type waitVerdict int

const (
	waitKernel waitVerdict = iota // a descriptor is not one: the kernel answers
	waitReady                     // something is ready: the call returns at once
	waitExpire                    // nothing can end it but the timeout: jump
	waitReal                      // wait for real, looking again (waitReal)
)

// waitLook is one look at a wait: the caller's waited descriptors
// duplicated into the supervisor (watch), which close releases.
//
// The copies are taken for this call only, through the process's pidfd,
// by number: a number names whatever file the process has under it now,
// so a number closed and reused since the last call is judged as its new
// file, never as the old one.
type waitLook struct {
	verdict waitVerdict
	watch   []unix.PollFd
	dups    []int
	// pidfd is the process's: the cache's while the notification is
	// being served, then the real wait's own copy.
	pidfd int
	w     *waitCall
	tgid  int
}

// look duplicates w's descriptors from process tgid through pidfd and
// judges the wait: ready, expire (no outstanding I/O and every other
// thread blocked) or real.
func look(w *waitCall, tgid, pidfd int) *waitLook {
	l := &waitLook{pidfd: pidfd, w: w, tgid: tgid}
	if w.epoll >= 0 {
		d, ok := l.dup(w.epoll)
		if !ok {
			return l
		}
		l.watch = append(l.watch, unix.PollFd{Fd: int32(d), Events: unix.POLLIN})
	} else {
		for i, fd := range w.fds {
			d, ok := l.dup(fd)
			if !ok {
				return l // POLLNVAL or EBADF
			}
			l.watch = append(l.watch, unix.PollFd{Fd: int32(d), Events: w.events[i]})
		}
	}
	if n, _ := unix.Poll(l.watch, 0); n > 0 {
		l.verdict = waitReady
		return l
	}
	// Time jumps only when nothing can end the wait but the timeout: no
	// outstanding I/O, and no other thread of the process running (it
	// could be about to register a socket, as Go's runtime does while its
	// netpoller waits, or to wake the waiter).
	if l.canJump() {
		l.verdict = waitExpire
		return l
	}
	l.verdict = waitReal
	return l
}

// dup copies the caller's descriptor fd, kept until close.
func (l *waitLook) dup(fd int) (int, bool) {
	d, err := unix.PidfdGetfd(l.pidfd, fd, 0)
	if err != nil {
		return -1, false
	}
	l.dups = append(l.dups, d)
	return d, true
}

// close releases the copies (not the pidfd: see waitReal).
func (l *waitLook) close() {
	for _, d := range l.dups {
		unix.Close(d)
	}
	l.dups = nil
}

// canJump reports whether no waited descriptor is outstanding I/O and
// every thread of the process but the caller is blocked.
func (l *waitLook) canJump() bool {
	return !l.outstanding() && quiescent(l.tgid, l.w.pid, l.w.helper)
}

// outstanding reads the waited descriptors again each time: another
// thread may have added one to the epoll set since.
func (l *waitLook) outstanding() bool {
	if l.w.epoll < 0 {
		for i, fd := range l.w.fds {
			if outstandingFD(l.tgid, fd, func(int) (int, bool) { return int(l.watch[i].Fd), true }) {
				return true
			}
		}
		return false
	}
	return anyOutstandingCopy(l.tgid, l.pidfd, epollMembers(l.tgid, l.w.epoll))
}

// anyOutstandingCopy reports whether one of tgid's descriptors fds is
// outstanding I/O, judged on a copy of each taken through pidfd for the
// one look: kept, it would hold the file open after the process closed
// it.
func anyOutstandingCopy(tgid, pidfd int, fds []int) bool {
	for _, fd := range fds {
		probe := -1
		out := outstandingFD(tgid, fd, func(fd int) (int, bool) {
			d, err := unix.PidfdGetfd(pidfd, fd, 0)
			if err != nil {
				return -1, false
			}
			probe = d
			return d, true
		})
		if probe >= 0 {
			unix.Close(probe)
		}
		if out {
			return true
		}
	}
	return false
}

// waitReal waits for real until w's descriptors are ready or its process
// can jump, looking again every recheck, or until the stall limit (judge);
// it takes ownership of l. An epoll wait looks at the set's
// members again, through a pidfd of its own (see pidfds); a poll or select
// has its copies and needs none. The wait is held by the supervisor's one
// waiter (realwait.go).
func (s *Supervisor) waitReal(w *waitCall, p *proc, l *waitLook) {
	if w.epoll < 0 {
		l.pidfd = -1
	} else if l.pidfd = dupPidfd(l.pidfd); l.pidfd < 0 {
		l.close()
		Continue(s.fd, w.n.ID)
		return
	}
	s.mu.Lock()
	s.real("wait_outstanding")
	s.mu.Unlock()
	now := time.Now()
	stall := max(time.Duration(w.timeout), s.cfg.stallLimit())
	h := &heldWait{w: w, p: p, l: l, deadline: now.Add(time.Duration(w.timeout)), stall: now.Add(stall), recheck: now.Add(recheck)}
	s.realWaits.Store(w.pid, h)
	s.waiter.hold(s, h)
}

// recheck is how often a real wait looks again at whether it could jump.
const recheck = 2 * time.Millisecond

// quiescent reports whether every thread of tgid other than the caller is
// blocked: sleeping in a call that is not one the supervisor answers at
// once (a clock read or getrandom held for its answer is as good as
// running). A thread that cannot be read counts as blocked (it is gone).
func quiescent(tgid, caller, helper int) bool {
	return blocked(tgid, caller, helper, nil)
}

// settled reports whether every thread of process tgid has reached a
// wait: as quiescent, and none in uninterruptible sleep (a page fault),
// stopped for the tracer, which will let it go on, or held for an answer
// the supervisor has not decided (a wait held in real time has been). The
// tracer's thread calls it, without mu: its reads make no stat
// (readFile), which the supervisor would have to answer.
func (s *Supervisor) settled(tgid int) bool {
	return blocked(tgid, -1, 0, s.heldIdle)
}

// heldIdle reports whether thread tid's wait is held in real time with
// nothing ready: decided, and not about to return. A wait whose
// descriptors became ready is as good as running, though the waiter may
// not have let it go yet.
func (s *Supervisor) heldIdle(tid int) bool {
	v, ok := s.realWaits.Load(tid)
	if !ok {
		return false
	}
	return v.(*heldWait).idle()
}

// blocked is quiescent, or settled when decided is not nil: it reports
// whether a thread held for the supervisor's answer has it decided.
// Threads caller and helper are not looked at.
func blocked(tgid, caller, helper int, decided func(tid int) bool) bool {
	strict := decided != nil
	dir := "/proc/" + strconv.Itoa(tgid) + "/task"
	ents, err := os.ReadDir(dir)
	if err != nil {
		return true
	}
	if len(ents) == 1 && caller >= 0 {
		return true
	}
	for _, e := range ents {
		tid, err := strconv.Atoi(e.Name())
		if err != nil || tid == caller || (tid == helper && helper != 0) {
			continue
		}
		b, err := readFile(dir + "/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		i := bytes.LastIndexByte(b, ')')
		if i < 0 || i+2 >= len(b) {
			continue
		}
		switch b[i+2] {
		case 'R':
			return false
		case 'D', 't':
			if strict {
				return false
			}
		case 'S':
			if strict {
				// Held for the supervisor's answer, which may not be
				// decided yet (a wait's, which may jump).
				if w, err := readFile(dir + "/" + e.Name() + "/wchan"); err == nil && bytes.HasPrefix(w, []byte("seccomp_do_user_notif")) && !decided(tid) {
					return false
				}
			}
			sc, err := readFile(dir + "/" + e.Name() + "/syscall")
			if err != nil {
				continue
			}
			f := bytes.Fields(sc)
			if len(f) == 0 {
				continue
			}
			if nr, err := strconv.Atoi(string(f[0])); err == nil && instant(nr) {
				return false
			}
		}
	}
	return true
}

// expire answers w as timed out and moves p's clock by its timeout; a
// timer due before then ends it instead: a timerfd it waits on is ready,
// a signal interrupts it.
func (s *Supervisor) expire(w *waitCall, p *proc, count Category) {
	if !Valid(s.fd, w.n.ID) {
		return
	}
	s.mu.Lock()
	if p.armedTimers() {
		start := s.nowT(p, w.pid)
		woken, send := s.advance(p, w.pid, w.timeout, s.waitWakes(w, p))
		switch {
		case woken != nil && woken.kind == timerFD:
			s.served("wait")
			s.mu.Unlock()
			send()
			Continue(s.fd, w.n.ID) // ready now
			return
		case woken != nil:
			if w.left != nil {
				w.left(max(start+w.timeout-woken.deadline, 0))
			}
			s.served("wait")
			s.interrupt(w.n, send)
			s.mu.Unlock()
			return
		}
		s.mu.Unlock()
	} else {
		s.setBase(p, w.pid, p.base+w.timeout)
		s.mu.Unlock()
	}
	if w.zero != nil && w.zero() != nil {
		s.fail(w.n, unix.EFAULT)
		return
	}
	s.mu.Lock()
	if count != "" {
		s.served(count)
	}
	s.mu.Unlock()
	s.reply(w.n, 0)
}

// waitWakes is advance's wakes for w: a timerfd w watches, or a signal
// that interrupts it.
func (s *Supervisor) waitWakes(w *waitCall, p *proc) func(*vtimer) bool {
	st, _ := readSigState(w.pid)
	mask := st.blk
	if w.hasMask {
		mask = w.mask
	}
	var fds []int
	if w.epoll >= 0 {
		fds = epollMembers(p.tgid, w.epoll)
	} else {
		fds = w.fds
	}
	return func(t *vtimer) bool {
		if t.kind == timerFD {
			for _, fd := range fds {
				if fd == t.id {
					return true
				}
			}
			return false
		}
		return st.interrupts(t.sigOf(), mask)
	}
}

// epollMembers lists the descriptors registered in tgid's epoll fd epfd.
func epollMembers(tgid, epfd int) []int {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(tgid) + "/fdinfo/" + strconv.Itoa(epfd))
	if err != nil {
		return nil
	}
	var out []int
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) >= 2 && f[0] == "tfd:" {
			if n, err := strconv.Atoi(f[1]); err == nil {
				out = append(out, n)
			}
		}
	}
	return out
}

// outstandingFD reports whether tgid's descriptor fd can bring data from
// outside the process on its own: a connected socket, a pipe, a terminal, a
// signal, timer, inotify or nested epoll descriptor. A listening socket,
// an eventfd (a wakeup among the process's own threads) or a file is not.
func outstandingFD(tgid, fd int, dup func(int) (int, bool)) bool {
	link, err := os.Readlink("/proc/" + strconv.Itoa(tgid) + "/fd/" + strconv.Itoa(fd))
	if err != nil {
		return true
	}
	switch {
	case strings.HasPrefix(link, "socket:"):
		d, ok := dup(fd)
		if !ok {
			return true
		}
		v, err := unix.GetsockoptInt(d, unix.SOL_SOCKET, unix.SO_ACCEPTCONN)
		return err != nil || v == 0
	case link == "anon_inode:[eventfd]", link == "anon_inode:[timerfd]":
		// A timerfd's expiries are dal's (timers.go).
		return false
	case strings.HasPrefix(link, "pipe:"), strings.HasPrefix(link, "anon_inode:"),
		strings.HasPrefix(link, "/dev/pts/"), strings.HasPrefix(link, "/dev/tty"),
		link == "/dev/ptmx", link == "/dev/console":
		return true
	}
	return false
}

// instant reports whether nr is a call the supervisor answers at once,
// which a thread blocked in it is about to return from.
func instant(nr int) bool {
	switch nr {
	case unix.SYS_CLOCK_GETTIME, unix.SYS_GETTIMEOFDAY, unix.SYS_GETRANDOM,
		unix.SYS_SETITIMER, unix.SYS_GETITIMER, unix.SYS_TIMER_SETTIME, unix.SYS_TIMER_GETTIME,
		unix.SYS_TIMER_DELETE, unix.SYS_TIMERFD_SETTIME, unix.SYS_TIMERFD_GETTIME:
		return true
	}
	return (nr == sysTime && sysTime >= 0) || (nr == sysAlarm && sysAlarm >= 0)
}
