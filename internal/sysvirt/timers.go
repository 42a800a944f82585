package sysvirt

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"math"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Timers (strict mode): alarm, setitimer(ITIMER_REAL), POSIX timers and
// timerfds keep their deadlines on the process's virtual clock. The kernel
// objects stay (timer_create and timerfd_create run as the kernel would)
// but are never armed: the supervisor answers settime and gettime itself,
// fires a timer when a wait of its process jumps past its deadline
// (advance), and keeps a backstop on the real clock for a process that
// never waits, which counts as an escape. See the package documentation.

// timerKind sorts timers: the order timers due at one instant fire in.
type timerKind int

const (
	timerAlarm timerKind = iota // ITIMER_REAL: alarm, setitimer
	timerPOSIX                  // timer_create
	timerFD                     // timerfd_create
)

// vtimer is one timer of a process.
type vtimer struct {
	kind timerKind
	// id is a POSIX timer's id or a timerfd's descriptor number; clock
	// the kind of its clock ('r' or 'm').
	id    int
	clock byte
	// deadline is the virtual offset (base + reads×quantum, as
	// Supervisor.nowT) at which an armed timer expires next.
	armed    bool
	deadline int64
	interval int64
	// A signal timer's delivery: signo to the process, or to thread tid
	// (SIGEV_THREAD_ID); none for SIGEV_NONE. value is sigev_value.
	signo int
	tid   int
	none  bool
	value uint64
	// overrun is a POSIX timer's expirations beyond the one signalled at
	// its last fire (timer_getoverrun).
	overrun int64
	// file is the supervisor's copy of a timerfd (owned: closed by
	// drop); ticks the expirations it set there and has not seen read.
	file  int
	ticks uint64
	// gen counts armings: a backstop of an earlier one does nothing.
	gen      uint64
	backstop *time.Timer
}

// Signal codes and sigevent notifications.
const (
	siTimer       = -2
	sigevSignal   = 0
	sigevNone     = 1
	sigevThread   = 2
	sigevThreadID = 4
)

// tfdIocSetTicks is TFD_IOC_SET_TICKS: it sets a timerfd's expiration
// count and wakes its readers (CONFIG_CHECKPOINT_RESTORE).
const tfdIocSetTicks = 0x40085400

// nowT is p's virtual offset now, without counting a read. Callers hold mu.
func (s *Supervisor) nowT(p *proc, tid int) int64 {
	return p.base + (p.reads+s.pageReads(p, tid))*s.cfg.QuantumNS
}

// jumpTo moves p's clock up to offset t. Callers hold mu.
func (s *Supervisor) jumpTo(p *proc, tid int, t int64) {
	if now := s.nowT(p, tid); t > now {
		s.setBase(p, tid, p.base+t-now)
	}
}

// timer returns p's timer of kind k and id, nil if none. Callers hold mu.
func (p *proc) timer(k timerKind, id int) *vtimer {
	for _, t := range p.timers {
		if t.kind == k && t.id == id {
			return t
		}
	}
	return nil
}

// armedTimers reports whether p has a timer that can fire.
func (p *proc) armedTimers() bool {
	for _, t := range p.timers {
		if t.armed {
			return true
		}
	}
	return false
}

// drop forgets timer t of p: its backstop stops, its file closes.
// Callers hold mu.
func (p *proc) drop(t *vtimer) {
	t.disarm()
	if t.file > 0 {
		unix.Close(t.file)
		t.file = 0
	}
	for i, u := range p.timers {
		if u == t {
			p.timers = append(p.timers[:i], p.timers[i+1:]...)
			return
		}
	}
}

// dropTimers forgets p's timers of the kinds keep does not accept (all
// when keep is nil): POSIX timers at an exec, every timer at the exit.
func (p *proc) dropTimers(keep func(*vtimer) bool) {
	for _, t := range append([]*vtimer(nil), p.timers...) {
		if keep == nil || !keep(t) {
			p.drop(t)
		}
	}
}

func (t *vtimer) disarm() {
	t.armed = false
	t.gen++
	if t.backstop != nil {
		t.backstop.Stop()
		t.backstop = nil
	}
}

// arm sets t to expire at virtual offset deadline, then every interval,
// with its backstop on the real clock at the same distance from now.
// Callers hold mu.
func (s *Supervisor) arm(p *proc, t *vtimer, now, deadline, interval int64) {
	t.disarm()
	t.armed, t.deadline, t.interval, t.overrun = true, deadline, interval, 0
	g := t.gen
	t.backstop = time.AfterFunc(time.Duration(max(deadline-now, 0)), func() { s.backstopFire(p, t, g) })
	if !p.watching {
		p.watching = true
		go s.watch(p)
	}
}

// A process's watcher looks at it watchEvery after it last changed what
// it was doing, then less and less often, down to every watchAtMost.
const (
	watchEvery  = 200 * time.Microsecond
	watchAtMost = 4 * time.Millisecond
)

// watch is p's watcher: while p has a timer armed, it looks every
// watchEvery whether p's one thread sleeps in the kernel in an untimed wait
// that only a timer can end — pause, sigsuspend, sigtimedwait without a
// timeout, poll, ppoll, select, pselect6, epoll_wait, epoll_pwait or
// epoll_pwait2 without a timeout on descriptors none of which is
// outstanding I/O, or a blocking read of a timerfd — with no child that could end it, and if so fires
// the first timer that ends it: the timerfd becomes readable, or the
// signal interrupts the kernel's own wait under the mask the call set,
// exactly as the kernel's timer would. Untimed waits are not handed to
// the supervisor (an event loop's ready epoll_wait would pay a round trip
// each time), so they are found this way; a look costs real latency
// (watchEvery to watchAtMost), never virtual time.
func (s *Supervisor) watch(p *proc) {
	every, last := watchEvery, ""
	for {
		time.Sleep(every)
		every = min(every*2, watchAtMost)
		s.mu.Lock()
		if s.procs[p.tgid] != p || !p.armedTimers() {
			p.watching = false
			s.mu.Unlock()
			return
		}
		alone := p.threads == 1 && p.children == 0
		s.mu.Unlock()
		if !alone {
			continue
		}
		call, fds, ok := untimedWait(p.tgid)
		if call != last {
			every, last = watchEvery, call
		}
		if !ok || anyOutstanding(p.tgid, fds) {
			continue
		}
		st, ok := readSigState(p.tgid)
		if !ok {
			continue
		}
		s.mu.Lock()
		if again, _, _ := untimedWait(p.tgid); s.procs[p.tgid] != p || again != call {
			s.mu.Unlock()
			continue
		}
		_, send := s.advance(p, p.tgid, -1, func(t *vtimer) bool {
			if t.kind == timerFD {
				for _, fd := range fds {
					if fd == t.id {
						return true
					}
				}
				return false
			}
			return st.interrupts(t.sigOf(), st.blk)
		})
		s.mu.Unlock()
		if send != nil {
			send()
		}
		every = watchEvery
	}
}

// untimedWait reads the untimed wait process tgid's one thread sleeps in,
// in the kernel: its /proc syscall line and the descriptors it waits on.
func untimedWait(tgid int) (string, []int, bool) {
	dir := "/proc/" + strconv.Itoa(tgid)
	b, err := readFile(dir + "/stat")
	if err != nil {
		return "", nil, false
	}
	if i := bytes.LastIndexByte(b, ')'); i < 0 || i+2 >= len(b) || b[i+2] != 'S' {
		return "", nil, false
	}
	if w, err := readFile(dir + "/wchan"); err != nil || bytes.HasPrefix(w, []byte("seccomp_do_user_notif")) {
		return "", nil, false
	}
	line, err := readFile(dir + "/syscall")
	if err != nil {
		return "", nil, false
	}
	f := strings.Fields(string(line))
	if len(f) < 7 {
		return "", nil, false
	}
	nr, err := strconv.Atoi(f[0])
	if err != nil {
		return "", nil, false
	}
	var a [6]uint64
	for i := range a {
		a[i], _ = strconv.ParseUint(strings.TrimPrefix(f[i+1], "0x"), 16, 64)
	}
	call := string(line)
	switch {
	case nr == unix.SYS_READ || nr == unix.SYS_READV:
		return call, []int{int(int32(a[0]))}, true
	case nr == sysPoll && int32(a[2]) < 0, nr == unix.SYS_PPOLL && a[2] == 0:
		if a[1] > 1<<16 {
			return "", nil, false
		}
		raw := make([]byte, a[1]*pollfdSize)
		if ReadMem(tgid, a[0], raw) != nil {
			return "", nil, false
		}
		var fds []int
		for i := 0; i < int(a[1]); i++ {
			if fd := int32(binary.LittleEndian.Uint32(raw[i*8:])); fd >= 0 {
				fds = append(fds, int(fd))
			}
		}
		return call, fds, true
	case (nr == sysEpollWait || nr == unix.SYS_EPOLL_PWAIT) && int32(a[3]) < 0, nr == unix.SYS_EPOLL_PWAIT2 && a[3] == 0:
		return call, epollMembers(tgid, int(int32(a[0]))), true
	case nr == sysSelect && a[4] == 0, nr == unix.SYS_PSELECT6 && a[4] == 0:
		if a[0] > 1<<16 {
			return "", nil, false
		}
		size := (a[0] + 63) / 64 * 8
		var fds []int
		for _, addr := range a[1:4] {
			if addr == 0 {
				continue
			}
			set := make([]byte, size)
			if ReadMem(tgid, addr, set) != nil {
				return "", nil, false
			}
			for fd := 0; fd < int(a[0]); fd++ {
				if set[fd/8]&(1<<(fd%8)) != 0 {
					fds = append(fds, fd)
				}
			}
		}
		return call, fds, true
	case nr == sysPause, nr == unix.SYS_RT_SIGSUSPEND, nr == unix.SYS_RT_SIGTIMEDWAIT && a[2] == 0:
		// Only a signal ends these; the thread's mask is the one the
		// call set.
		return call, nil, true
	}
	return "", nil, false
}

// anyOutstanding reports whether one of tgid's descriptors fds is
// outstanding I/O (wait.go).
func anyOutstanding(tgid int, fds []int) bool {
	pidfd, err := unix.PidfdOpen(tgid, 0)
	if err != nil {
		return true
	}
	defer unix.Close(pidfd)
	return anyOutstandingCopy(tgid, pidfd, fds)
}

// backstopFire fires t on the real clock: its process did not wait for it
// (a busy loop, a wait on outstanding I/O, several threads). The process's
// clock moves to the deadline, as a message moves a Lamport clock; the
// fire is an escape, its moment the scheduler's.
func (s *Supervisor) backstopFire(p *proc, t *vtimer, gen uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.procs[p.tgid] != p || !t.armed || t.gen != gen {
		return
	}
	s.jumpTo(p, p.tgid, t.deadline)
	s.escaped(Timer)
	s.counts.note("a timer expired while its process was busy or waiting for outstanding I/O: it fired on the real clock")
	s.fire(p, t, 1)
	s.deliver(p, t, 1)
}

// fire counts count expirations of t, the first at its deadline, and arms
// it for the next one (or disarms it). Callers hold mu.
func (s *Supervisor) fire(p *proc, t *vtimer, count int64) {
	first := t.deadline
	if t.kind == timerPOSIX {
		t.overrun = min(count-1, math.MaxInt32)
	}
	if t.interval <= 0 {
		t.disarm()
		return
	}
	next := first + count*t.interval
	s.arm(p, t, s.nowT(p, p.tgid), next, t.interval)
	t.overrun = min(count-1, math.MaxInt32)
}

// deliver makes count expirations of t visible: its signal is sent (once:
// a timer's signal is never queued twice) or its timerfd's count grows.
// Callers hold mu.
func (s *Supervisor) deliver(p *proc, t *vtimer, count int64) {
	switch t.kind {
	case timerAlarm:
		unix.Kill(p.tgid, unix.SIGALRM)
	case timerPOSIX:
		if !t.none {
			sigqueue(p.tgid, t.tid, t.signo, t.id, int32(t.overrun), t.value)
		}
	case timerFD:
		if t.file <= 0 {
			return
		}
		// The count the process has not read is what dal set, unless
		// it read it since: a readable timerfd still holds it.
		pfd := []unix.PollFd{{Fd: int32(t.file), Events: unix.POLLIN}}
		if n, _ := unix.Poll(pfd, 0); n <= 0 {
			t.ticks = 0
		}
		t.ticks += uint64(count)
		v := t.ticks
		if _, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(t.file), tfdIocSetTicks, uintptr(unsafe.Pointer(&v))); errno != 0 {
			// No TFD_IOC_SET_TICKS: expire the real timer at once.
			its := unix.ItimerSpec{Value: unix.Timespec{Nsec: 1}}
			unix.TimerfdSettime(t.file, 0, &its, nil)
		}
	}
}

// sigqueue sends a timer's signal as the kernel does: si_code SI_TIMER,
// the timer's id, overrun and sigev_value; to thread tid when not 0.
func sigqueue(tgid, tid, sig, id int, overrun int32, value uint64) {
	var info [128]byte
	binary.LittleEndian.PutUint32(info[0:], uint32(sig))
	code := int32(siTimer)
	binary.LittleEndian.PutUint32(info[8:], uint32(code))
	binary.LittleEndian.PutUint32(info[16:], uint32(id))
	binary.LittleEndian.PutUint32(info[20:], uint32(overrun))
	binary.LittleEndian.PutUint64(info[24:], value)
	if tid > 0 {
		unix.Syscall6(unix.SYS_RT_TGSIGQUEUEINFO, uintptr(tgid), uintptr(tid), uintptr(sig), uintptr(unsafe.Pointer(&info[0])), 0, 0)
		return
	}
	unix.Syscall(unix.SYS_RT_SIGQUEUEINFO, uintptr(tgid), uintptr(sig), uintptr(unsafe.Pointer(&info[0])))
}

// sigOf is the signal t delivers, 0 for none (a timerfd, SIGEV_NONE).
func (t *vtimer) sigOf() int {
	switch {
	case t.kind == timerAlarm:
		return int(unix.SIGALRM)
	case t.kind == timerPOSIX && !t.none:
		return t.signo
	}
	return 0
}

// advance moves p's clock through a wait of span ns (-1: no timeout) of
// its thread tid, firing the timers due meanwhile, in deadline order.
// wakes says whether a timer's expiry ends the wait. advance stops at the
// first timer that does and returns it, fired, with send, which makes it
// visible (a signal may have to wait for the thread to reach the kernel's
// wait); timers that do not end the wait fire on the way, all their
// expirations at once. With none, p's clock ends at the wait's end (not
// moved for an untimed wait) and advance returns nil. Callers hold mu.
func (s *Supervisor) advance(p *proc, tid int, span int64, wakes func(*vtimer) bool) (*vtimer, func()) {
	now := s.nowT(p, tid)
	end := int64(math.MaxInt64)
	if span >= 0 && now <= math.MaxInt64-span {
		end = now + span
	}
	due := make([]*vtimer, 0, len(p.timers))
	for _, t := range p.timers {
		if t.armed && t.deadline <= end {
			due = append(due, t)
		}
	}
	sort.SliceStable(due, func(i, j int) bool {
		a, b := due[i], due[j]
		if a.deadline != b.deadline {
			return a.deadline < b.deadline
		}
		if a.kind != b.kind {
			return a.kind < b.kind
		}
		return a.id < b.id
	})
	var woken *vtimer
	limit := end
	for _, t := range due {
		if wakes(t) {
			woken, limit = t, t.deadline
			break
		}
	}
	for _, t := range due {
		if t == woken || t.deadline > limit || limit == math.MaxInt64 {
			continue
		}
		count := int64(1)
		if t.interval > 0 {
			count += (limit - t.deadline) / t.interval
		}
		s.fire(p, t, count)
		s.deliver(p, t, count)
		s.served(Timer)
	}
	if woken == nil {
		if span >= 0 {
			s.jumpTo(p, tid, end)
		}
		return nil, nil
	}
	s.jumpTo(p, tid, woken.deadline)
	s.fire(p, woken, 1)
	s.served(Timer)
	gen := woken.gen
	return woken, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.procs[p.tgid] == p && woken.gen == gen {
			s.deliver(p, woken, 1)
		}
	}
}

// sigState is a thread's signal masks (/proc/<tid>/status): blocked,
// ignored and caught, bit n-1 for signal n.
type sigState struct {
	blk, ign, cgt, pending uint64
}

func readSigState(tid int) (sigState, bool) {
	var st sigState
	b, err := readFile("/proc/" + strconv.Itoa(tid) + "/status")
	if err != nil {
		return st, false
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		x, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
		if err != nil {
			continue
		}
		switch k {
		case "SigBlk":
			st.blk = x
		case "SigIgn":
			st.ign = x
		case "SigCgt":
			st.cgt = x
		case "SigPnd", "ShdPnd":
			st.pending |= x
		}
	}
	return st, true
}

// interrupts reports whether signal sig, sent to a thread whose mask
// during the wait is mask, ends its wait: it is not blocked, and is caught
// or kills (a default action that is neither ignoring nor stopping).
func (st sigState) interrupts(sig int, mask uint64) bool {
	if sig <= 0 || sig > 64 {
		return false
	}
	bit := uint64(1) << (sig - 1)
	if mask&bit != 0 || st.ign&bit != 0 {
		return false
	}
	if st.cgt&bit != 0 {
		return true
	}
	switch unix.Signal(sig) {
	case unix.SIGCHLD, unix.SIGCONT, unix.SIGURG, unix.SIGWINCH,
		unix.SIGSTOP, unix.SIGTSTP, unix.SIGTTIN, unix.SIGTTOU:
		return false
	}
	return true
}

// signalWakes is the wakes of advance for a thread whose mask during the
// wait is mask: a signal timer whose signal interrupts it.
func signalWakes(st sigState, mask uint64) func(*vtimer) bool {
	return func(t *vtimer) bool { return st.interrupts(t.sigOf(), mask) }
}

// restart is an interrupted call the supervisor expects again: dal sent a
// timer's signal while the call waited for its answer, so the kernel
// restarts it after the handler when the handler has SA_RESTART. The
// kernel would have returned EINTR whatever the flag (these calls are
// never restarted after a handler), so the restarted call gets EINTR.
type restart struct {
	nr   int32
	args [6]uint64
}

// interrupt ends the wait n of thread tid with the signal of woken, sent
// now (send), as the kernel would: the call returns EINTR after the
// handler. Its results (the time left) were written by the caller. The
// notification is not answered: the signal interrupts it. Callers hold
// mu.
func (s *Supervisor) interrupt(n *Notif, send func()) {
	if s.restarts == nil {
		s.restarts = map[int]restart{}
	}
	s.restarts[int(n.Pid)] = restart{nr: n.Nr, args: n.Args}
	s.pendingRestarts.Store(int32(len(s.restarts)))
	s.mu.Unlock()
	send()
	s.mu.Lock()
	fd, id := s.fd, n.ID
	go func() {
		// A signal that did not interrupt after all (its mask changed
		// under dal's look): let the call run.
		time.Sleep(time.Second)
		if Valid(fd, id) {
			Continue(fd, id)
		}
	}()
}

// restarted answers n with EINTR when it is the restart of a call a
// timer's signal interrupted, and reports whether it did. Any other call
// of the thread forgets the expected restart.
func (s *Supervisor) restarted(n *Notif) bool {
	if s.pendingRestarts.Load() == 0 {
		return false
	}
	s.mu.Lock()
	r, ok := s.restarts[int(n.Pid)]
	if ok {
		delete(s.restarts, int(n.Pid))
		s.pendingRestarts.Store(int32(len(s.restarts)))
	}
	s.mu.Unlock()
	if !ok || r.nr != n.Nr || r.args != n.Args {
		return false
	}
	s.fail(n, unix.EINTR)
	return true
}

// whenBlocked calls send once thread tid sleeps in system call nr, which
// the supervisor let run: a signal sent then ends the kernel's own wait
// (pause, sigsuspend with its mask applied) exactly as it would.
func whenBlocked(tid int, nr int32, send func()) {
	go func() {
		deadline := time.Now().Add(time.Second)
		for time.Now().Before(deadline) {
			if sleepingIn(tid, nr) {
				break
			}
			time.Sleep(20 * time.Microsecond)
		}
		send()
	}()
}

// sleepingIn reports whether thread tid sleeps in system call nr (or is
// gone).
func sleepingIn(tid int, nr int32) bool {
	b, err := readFile("/proc/" + strconv.Itoa(tid) + "/stat")
	if err != nil {
		return true
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) || b[i+2] != 'S' {
		return false
	}
	sc, err := readFile("/proc/" + strconv.Itoa(tid) + "/syscall")
	if err != nil {
		return true
	}
	f := bytes.Fields(sc)
	return len(f) > 0 && string(f[0]) == strconv.Itoa(int(nr))
}

// Timer system calls.

// itimerval and itimerspec: (interval, value), as timevals or timespecs.

func readPair(pid int, addr uint64, usec bool) (interval, value int64, errno unix.Errno) {
	var b [32]byte
	if ReadMem(pid, addr, b[:]) != nil {
		return 0, 0, unix.EFAULT
	}
	unit, lim := int64(1), int64(1e9)
	if usec {
		unit, lim = 1000, 1e6
	}
	var v [2]int64
	for i := range v {
		sec := int64(binary.LittleEndian.Uint64(b[i*16:]))
		frac := int64(binary.LittleEndian.Uint64(b[i*16+8:]))
		if sec < 0 || frac < 0 || frac >= lim {
			return 0, 0, unix.EINVAL
		}
		if sec > math.MaxInt64/int64(time.Second)-1 {
			sec = math.MaxInt64/int64(time.Second) - 1
		}
		v[i] = sec*1e9 + frac*unit
	}
	return v[0], v[1], 0
}

func putPair(interval, value int64, usec bool) []byte {
	b := make([]byte, 32)
	for i, v := range []int64{interval, value} {
		sec, frac := v/1e9, v%1e9
		if usec {
			frac /= 1000
		}
		binary.LittleEndian.PutUint64(b[i*16:], uint64(sec))
		binary.LittleEndian.PutUint64(b[i*16+8:], uint64(frac))
	}
	return b
}

// left is what remains of t at now: (interval, value), zero when disarmed.
// An armed timer shows at least 1 ns (1 µs in a timeval) left.
func (t *vtimer) left(now int64, usec bool) (int64, int64) {
	if t == nil || !t.armed {
		return 0, 0
	}
	floor := int64(1)
	if usec {
		floor = 1000
	}
	return t.interval, max(t.deadline-now, floor)
}

// timerCaller returns n's process when the layer serves its timers, or
// lets the call run and returns nil.
func (s *Supervisor) timerCaller(n *Notif) *proc {
	if !s.cfg.Clock {
		Continue(s.fd, n.ID)
		return nil
	}
	s.mu.Lock()
	p := s.caller(n)
	s.mu.Unlock()
	if p == nil {
		Continue(s.fd, n.ID)
	}
	return p
}

// setitimer(which, new, old) and alarm(seconds) for ITIMER_REAL.
func (s *Supervisor) setitimer(n *Notif, alarm bool) {
	if !alarm && (n.Args[0] != unix.ITIMER_REAL || n.Args[1] == 0) {
		Continue(s.fd, n.ID)
		return
	}
	p := s.timerCaller(n)
	if p == nil {
		return
	}
	tid := int(n.Pid)
	var interval, value int64
	if alarm {
		value = int64(uint32(n.Args[0])) * 1e9
	} else {
		var errno unix.Errno
		if interval, value, errno = readPair(tid, n.Args[1], true); errno != 0 {
			s.fail(n, errno)
			return
		}
	}
	s.mu.Lock()
	t := p.timer(timerAlarm, 0)
	now := s.nowT(p, tid)
	oi, ov := t.left(now, true)
	if value == 0 {
		if t != nil {
			t.disarm()
		}
	} else {
		if t == nil {
			t = &vtimer{kind: timerAlarm, clock: 'r'}
			p.timers = append(p.timers, t)
		}
		s.arm(p, t, now, now+value, interval)
	}
	s.served(Timer)
	s.mu.Unlock()
	if alarm {
		// Seconds left, rounded to the nearest (at least 1 when armed).
		secs := ov / 1e9
		if rem := ov % 1e9; (secs == 0 && rem > 0) || rem >= 5e8 {
			secs++
		}
		s.reply(n, secs)
		return
	}
	if s.put(n, n.Args[2], putPair(oi, ov, true)) {
		s.reply(n, 0)
	}
}

// getitimer(which, cur) for ITIMER_REAL.
func (s *Supervisor) getitimer(n *Notif) {
	if n.Args[0] != unix.ITIMER_REAL {
		Continue(s.fd, n.ID)
		return
	}
	p := s.timerCaller(n)
	if p == nil {
		return
	}
	s.mu.Lock()
	i, v := p.timer(timerAlarm, 0).left(s.nowT(p, int(n.Pid)), true)
	s.mu.Unlock()
	if n.Args[1] == 0 {
		s.fail(n, unix.EFAULT)
		return
	}
	if s.put(n, n.Args[1], putPair(i, v, true)) {
		s.reply(n, 0)
	}
}

// posixTimer describes POSIX timer id of process tgid from
// /proc/<tgid>/timers; ok is false when it has none of that id.
func posixTimer(tgid, id int) (t vtimer, clock int32, ok bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(tgid) + "/timers")
	if err != nil {
		return t, 0, false
	}
	t.kind, t.id = timerPOSIX, id
	found := false
	for _, l := range strings.Split(string(b), "\n") {
		k, v, _ := strings.Cut(l, ": ")
		switch k {
		case "ID":
			if found {
				return t, clock, true
			}
			found = v == strconv.Itoa(id)
		case "signal":
			if found {
				sig, val, _ := strings.Cut(v, "/")
				t.signo, _ = strconv.Atoi(sig)
				t.value, _ = strconv.ParseUint(val, 16, 64)
			}
		case "notify":
			if found {
				how, who, _ := strings.Cut(v, "/")
				t.none = how == "none"
				if strings.HasPrefix(who, "tid.") {
					t.tid, _ = strconv.Atoi(who[4:])
				}
			}
		case "ClockID":
			if found {
				c, _ := strconv.Atoi(v)
				clock = int32(c)
			}
		}
	}
	return t, clock, found
}

// timerSettime(id, flags, new, old).
func (s *Supervisor) timerSettime(n *Notif) {
	id := int(int32(n.Args[0]))
	p := s.timerCaller(n)
	if p == nil {
		return
	}
	// A timer armed before is described already: its id names it until
	// timer_delete or an exec, which dal sees.
	s.mu.Lock()
	var desc vtimer
	known := p.timer(timerPOSIX, id)
	if known != nil {
		desc = vtimer{kind: timerPOSIX, id: id, clock: known.clock, signo: known.signo, tid: known.tid, none: known.none, value: known.value}
	}
	s.mu.Unlock()
	if known == nil {
		var clock int32
		var ok bool
		if desc, clock, ok = posixTimer(p.tgid, id); !ok || clockKind(clock) == 0 {
			// Not a timer (the kernel says EINVAL) or a CPU-time one: real.
			if ok {
				s.mu.Lock()
				s.real(CPUTimer)
				s.mu.Unlock()
			}
			Continue(s.fd, n.ID)
			return
		}
		desc.clock = clockKind(clock)
	}
	if n.Args[2] == 0 {
		Continue(s.fd, n.ID) // the kernel's EFAULT
		return
	}
	s.settime(n, p, &desc, desc.clock, int(n.Args[1])&unix.TIMER_ABSTIME != 0, n.Args[2], n.Args[3])
}

// settime arms timer desc of p (created if new) from the itimerspec at
// addr, writes the old setting at old and answers n. abs: the value is
// an absolute time on clock kind k.
func (s *Supervisor) settime(n *Notif, p *proc, desc *vtimer, k byte, abs bool, addr, old uint64) {
	tid := int(n.Pid)
	interval, value, errno := readPair(tid, addr, false)
	if errno != 0 {
		s.fail(n, errno)
		return
	}
	s.mu.Lock()
	t := p.timer(desc.kind, desc.id)
	if t == nil {
		t = desc
		p.timers = append(p.timers, t)
	} else {
		t.clock, t.signo, t.tid, t.none, t.value = desc.clock, desc.signo, desc.tid, desc.none, desc.value
		if desc.file > 0 && desc.file != t.file {
			if t.file > 0 {
				unix.Close(t.file)
			}
			t.file, t.ticks = desc.file, 0
		}
	}
	now := s.nowT(p, tid)
	oi, ov := t.left(now, false)
	if t.kind == timerFD && t.file > 0 {
		// A new setting drops the expirations not read, as the kernel's
		// timerfd_settime does: disarming the real one does that.
		unix.TimerfdSettime(t.file, 0, &unix.ItimerSpec{}, nil)
		t.ticks = 0
	}
	var due func()
	if value == 0 {
		t.disarm()
	} else {
		deadline := now + value
		if abs {
			origin := s.cfg.MonoNS
			if k == 'r' {
				origin = s.cfg.EpochNS
			}
			deadline = value - origin
		}
		s.arm(p, t, now, deadline, interval)
		if deadline <= now {
			// Already past: it expires at once, as the kernel's would.
			count := int64(1)
			if interval > 0 {
				count += (now - deadline) / interval
			}
			s.fire(p, t, count)
			s.served(Timer)
			due = func() {
				s.mu.Lock()
				defer s.mu.Unlock()
				s.deliver(p, t, count)
			}
		}
	}
	s.served(Timer)
	s.mu.Unlock()
	if !s.put(n, old, putPair(oi, ov, false)) {
		return
	}
	if due != nil && t.kind == timerFD {
		due() // readable when the call returns
		due = nil
	}
	s.reply(n, 0)
	if due != nil {
		due()
	}
}

// timerGettime(id, cur), and timerfdGettime(fd, cur).
func (s *Supervisor) timerGettime(n *Notif, k timerKind) {
	p := s.timerCaller(n)
	if p == nil {
		return
	}
	s.mu.Lock()
	t := p.timer(k, int(int32(n.Args[0])))
	var i, v int64
	if t != nil {
		i, v = t.left(s.nowT(p, int(n.Pid)), false)
	}
	s.mu.Unlock()
	if t == nil {
		Continue(s.fd, n.ID) // never armed under dal: the kernel's answer
		return
	}
	if n.Args[1] == 0 {
		s.fail(n, unix.EFAULT)
		return
	}
	if s.put(n, n.Args[1], putPair(i, v, false)) {
		s.reply(n, 0)
	}
}

// timerDelete(id): the kernel deletes it; dal forgets it.
func (s *Supervisor) timerDelete(n *Notif) {
	if s.cfg.Clock {
		s.mu.Lock()
		if p := s.lookup(int(n.Pid)); p != nil {
			if t := p.timer(timerPOSIX, int(int32(n.Args[0]))); t != nil {
				p.drop(t)
			}
		}
		s.mu.Unlock()
	}
	Continue(s.fd, n.ID)
}

// timerfdSettime(fd, flags, new, old).
func (s *Supervisor) timerfdSettime(n *Notif) {
	p := s.timerCaller(n)
	if p == nil {
		return
	}
	fd := int(int32(n.Args[0]))
	clock, ok := timerfdClock(p.tgid, fd)
	if !ok || n.Args[2] == 0 {
		Continue(s.fd, n.ID) // not a timerfd: the kernel says so
		return
	}
	s.mu.Lock()
	pidfd := s.pidfds.get(p)
	s.mu.Unlock()
	file := -1
	if pidfd >= 0 {
		file, _ = unix.PidfdGetfd(pidfd, fd, 0)
	}
	if file < 0 {
		Continue(s.fd, n.ID)
		return
	}
	s.mu.Lock()
	if t := p.timer(timerFD, fd); t != nil && t.file > 0 && sameFile(t.file, p.tgid, fd) {
		// The same file: keep the copy dal holds.
		unix.Close(file)
		file = t.file
	}
	s.mu.Unlock()
	desc := &vtimer{kind: timerFD, id: fd, clock: clockKind(clock), file: file}
	s.settime(n, p, desc, desc.clock, int(n.Args[1])&unix.TFD_TIMER_ABSTIME != 0, n.Args[2], n.Args[3])
}

// timerfdClock reads the clock of tgid's timerfd fd; ok is false when fd
// is not a timerfd.
func timerfdClock(tgid, fd int) (int32, bool) {
	dir := "/proc/" + strconv.Itoa(tgid)
	link, err := os.Readlink(dir + "/fd/" + strconv.Itoa(fd))
	if err != nil || link != "anon_inode:[timerfd]" {
		return 0, false
	}
	b, err := readFile(dir + "/fdinfo/" + strconv.Itoa(fd))
	if err != nil {
		return 0, false
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "clockid:"); ok {
			c, err := strconv.Atoi(strings.TrimSpace(v))
			return int32(c), err == nil && clockKind(int32(c)) != 0
		}
	}
	return 0, false
}

// sameFile reports whether the supervisor's descriptor mine and tgid's fd
// are the same open file (kcmp KCMP_FILE).
func sameFile(mine, tgid, fd int) bool {
	const kcmpFile = 0
	r, _, errno := unix.Syscall6(unix.SYS_KCMP, uintptr(os.Getpid()), uintptr(tgid), kcmpFile, uintptr(mine), uintptr(fd), 0)
	return errno == 0 && r == 0
}

// sigwait serves rt_sigtimedwait (sigwaitinfo, sigtimedwait). A process
// with one thread and no child running (a child's exit could end the
// wait) jumps to the first of its timers whose signal ends the wait, or
// to a timed wait's end; otherwise the wait is the kernel's, and a timer
// fires there through the watcher or its backstop. pause and sigsuspend
// are the watcher's alone.
func (s *Supervisor) sigwait(n *Notif) {
	if !s.cfg.Clock {
		Continue(s.fd, n.ID)
		return
	}
	tid := int(n.Pid)
	s.mu.Lock()
	p := s.caller(n)
	s.mu.Unlock()
	if p == nil {
		Continue(s.fd, n.ID)
		return
	}
	span := int64(-1)
	var set uint64 // sigtimedwait: the signals waited for
	st, ok := readSigState(tid)
	mask := st.blk
	var b [8]byte
	if ReadMem(tid, n.Args[0], b[:]) != nil {
		ok = false
	}
	set = binary.LittleEndian.Uint64(b[:])
	if n.Args[2] != 0 {
		d, errno := readTimespec(tid, n.Args[2])
		if errno != 0 {
			ok = false
		}
		span = d
	}
	s.mu.Lock()
	if !ok || p.threads > 1 || p.children > 0 || st.pending&^mask != 0 || st.pending&set != 0 || (span < 0 && !p.armedTimers()) {
		s.mu.Unlock()
		Continue(s.fd, n.ID)
		return
	}
	wakes := func(t *vtimer) bool {
		sig := t.sigOf()
		return st.interrupts(sig, mask) || (sig > 0 && set&(1<<(sig-1)) != 0)
	}
	woken, send := s.advance(p, tid, span, wakes)
	if woken == nil {
		if span < 0 {
			s.mu.Unlock()
			Continue(s.fd, n.ID) // a wait no timer ends: the kernel's
			return
		}
		s.served(Wait)
		s.mu.Unlock()
		s.fail(n, unix.EAGAIN) // sigtimedwait timed out
		return
	}
	s.mu.Unlock()
	if bit := uint64(1) << (woken.sigOf() - 1); st.blk&bit != 0 {
		// Blocked until the call applies its mask, or waited for:
		// pending when the kernel's call starts, which takes it.
		send()
		Continue(s.fd, n.ID)
		return
	}
	Continue(s.fd, n.ID)
	whenBlocked(tid, n.Nr, send)
}
