package sysvirt

import (
	"bytes"
	"encoding/binary"
	"math"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Held timed waits: a discrete-event queue of the timed waits of
// multi-threaded processes (strict mode). See the package documentation's
// "Timed waits of several threads".
//
// A sleep of a multi-threaded process and a private futex wait with a
// timeout (FUTEX_WAIT_BITSET, futex_waitv) are not answered when they
// arrive: the supervisor holds them, each with a deadline on its process's
// virtual clock. One goroutine (vloop) looks at every held wait of every
// process, every vwaitEvery after something changed, backing off to
// vwaitAtMost:
//
//   - a wait whose thread a signal interrupted is forgotten (the kernel
//     restarts the call or returns EINTR; a restart of the same call keeps
//     its deadline);
//   - a futex wait whose word changed is answered 0: a wake-up, which its
//     caller must take as possibly spurious anyway;
//   - when a process is idle — every thread blocked, none on outstanding
//     I/O (idle, below) — its clock moves to its earliest deadline (a timer
//     of the process due first fires there instead) and that one wait is
//     answered as timed out; then the loop looks again, so the thread it
//     woke runs, and blocks, before the next deadline is due;
//   - a wait whose process has not become idle within max(its duration,
//     Config.StallLimit) of real time is answered anyway, an escape
//     ("stall") with a note naming what kept the process busy.
//
// Deadlines that tie are taken in thread order (thread ids, which the
// tree's pid namespace gives out in creation order): the order in which
// the waits reached the supervisor is the machine's, and would make two
// threads that sleep equally wake in another order each run.

// vwaitKind is what a held wait is.
type vwaitKind int

const (
	vwSleep vwaitKind = iota // nanosleep, clock_nanosleep: 0 at the deadline
	vwFutex                  // FUTEX_WAIT_BITSET: ETIMEDOUT, or 0 when its word changes
	vwWaitv                  // futex_waitv: ETIMEDOUT, or the index of the word that changed
	vwPoll                   // a timed poll, select or epoll wait that would jump (deferWait)
)

// vwait is one held wait.
type vwait struct {
	n    Notif
	tid  int
	p    *proc
	kind vwaitKind
	// deadline is a virtual offset (base + reads×quantum, as nowT); for a
	// relative wait (onBase) an offset of base alone: base + duration at
	// the call, what a single-threaded process's sleep adds to base, so
	// waits of equal length started at one instant end at one instant
	// whatever the threads' clock reads in between.
	deadline int64
	onBase   bool
	// words are the futex words watched: address and expected value.
	words []futexWord
	// since is when it was held (real clock); limit its stall limit.
	since time.Time
	limit time.Duration
	// A poll's call, a pidfd of its process to look at its descriptors
	// through, and what expire counts.
	w     *waitCall
	pidfd int
	count string
}

type futexWord struct {
	addr uint64
	val  uint32
}

// vgone is a held wait its thread left (a signal interrupted it): a
// restart of the same call resumes it.
type vgone struct {
	p        *proc
	nr       int32
	args     [6]uint64
	deadline int64
	since    time.Time
}

// vqueue holds the waits. Its lock may be taken while Supervisor.mu is
// held, never the other way round.
type vqueue struct {
	mu      sync.Mutex
	held    []*vwait
	firing  *waitCall // the poll vloop is ending (deferWait lets it)
	gone    map[int]vgone
	running bool
	wake    chan struct{}
}

// How often the held waits are looked at: vwaitEvery after a change,
// doubling up to vwaitAtMost while nothing changes.
const (
	vwaitEvery  = 100 * time.Microsecond
	vwaitAtMost = 2 * time.Millisecond
)

// FUTEX_PRIVATE_FLAG: the futex is the process's own (no other process can
// wake it).
const futexPrivate = 128

// holdSleep holds a sleep of d ns of thread tid of p, a process with
// several threads; abs says the deadline was absolute. It reports false
// for a sleep that stays real: the quiet thread's, and any of a Go image,
// whose runtime sleeps only in back-offs waiting for another thread
// (usleep while spinning, stopping the world), never for the program
// (time.Sleep is a timer of its netpoller, a timed epoll wait).
// Callers hold mu.
func (s *Supervisor) holdSleep(n *Notif, p *proc, tid int, d int64, abs bool) bool {
	if tid == p.quiet || p.goImage {
		return false
	}
	v := &vwait{n: *n, tid: tid, p: p, kind: vwSleep, since: time.Now()}
	if abs {
		v.deadline = satAdd(s.nowT(p, tid), d)
	} else {
		v.deadline, v.onBase = satAdd(p.base, d), true
	}
	v.limit = max(time.Duration(min(d, math.MaxInt64/2)), s.cfg.stallLimit())
	s.vq.hold(s, v)
	return true
}

// holdFutex holds a FUTEX_WAIT_BITSET of n (a private futex with an
// absolute timeout on clock kind k) and reports true, or false when the
// call is to run as before (shared futex, a caller dal does not know, a
// bad argument the kernel reports).
func (s *Supervisor) holdFutex(n *Notif, k byte) bool {
	op := int(n.Args[1])
	if op&futexPrivate == 0 || n.Args[3] == 0 || uint32(n.Args[5]) == 0 || !s.cfg.Clock {
		return false
	}
	tid := int(n.Pid)
	abs, errno := readTimespec(tid, n.Args[3])
	if errno != 0 {
		return false
	}
	var b [4]byte
	if ReadMem(tid, n.Args[0], b[:]) != nil {
		return false
	}
	if binary.LittleEndian.Uint32(b[:]) != uint32(n.Args[2]) {
		s.fail(n, unix.EAGAIN) // as the kernel: the word moved on
		return true
	}
	return s.holdWords(n, k, abs, vwFutex, []futexWord{{addr: n.Args[0], val: uint32(n.Args[2])}})
}

// futex_waitv's waiter flags: a 32-bit word, private.
const (
	futex2Size32  = 2
	futex2Private = 128
	waitvMax      = 128
)

// holdWaitv holds a futex_waitv (waiters, nr, flags, timeout, clockid) of
// private 32-bit words, or reports false.
func (s *Supervisor) holdWaitv(n *Notif, k byte) bool {
	nr := n.Args[1]
	if !s.cfg.Clock || n.Args[2] != 0 || nr == 0 || nr > waitvMax || n.Args[3] == 0 {
		return false
	}
	tid := int(n.Pid)
	abs, errno := readTimespec(tid, n.Args[3])
	if errno != 0 {
		return false
	}
	raw := make([]byte, nr*24)
	if ReadMem(tid, n.Args[0], raw) != nil {
		return false
	}
	words := make([]futexWord, nr)
	for i := range words {
		e := raw[i*24:]
		if binary.LittleEndian.Uint32(e[16:]) != futex2Size32|futex2Private || binary.LittleEndian.Uint32(e[20:]) != 0 {
			return false
		}
		val := binary.LittleEndian.Uint64(e[0:])
		if val > math.MaxUint32 {
			return false // the kernel's EINVAL
		}
		words[i] = futexWord{addr: binary.LittleEndian.Uint64(e[8:]), val: uint32(val)}
	}
	if i, ok := changedWord(tid, words); ok {
		if i < 0 {
			return false // unreadable: the kernel's EFAULT
		}
		s.fail(n, unix.EAGAIN)
		return true
	}
	return s.holdWords(n, k, abs, vwWaitv, words)
}

// holdWords holds a futex wait of words with an absolute deadline abs on
// clock kind k.
func (s *Supervisor) holdWords(n *Notif, k byte, abs int64, kind vwaitKind, words []futexWord) bool {
	tid := int(n.Pid)
	s.mu.Lock()
	p := s.lookup(tid)
	if p == nil {
		s.mu.Unlock()
		return false
	}
	origin := s.cfg.MonoNS
	if k == 'r' {
		origin = s.cfg.EpochNS
	}
	now := s.nowT(p, tid)
	v := &vwait{n: *n, tid: tid, p: p, kind: kind, deadline: abs - origin, words: words, since: time.Now()}
	v.limit = max(time.Duration(max(min(v.deadline-now, math.MaxInt64/2), 0)), s.cfg.stallLimit())
	s.served("deadline")
	s.mu.Unlock()
	s.vq.hold(s, v)
	return true
}

func satAdd(a, b int64) int64 {
	if b > 0 && a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// changedWord reads words in thread tid's memory: the index of the first
// that differs from its expected value and true, or -1 and false when none
// does; -1 and true when one cannot be read.
func changedWord(tid int, words []futexWord) (int, bool) {
	var b [4]byte
	for i, w := range words {
		if ReadMem(tid, w.addr, b[:]) != nil {
			return -1, true
		}
		if binary.LittleEndian.Uint32(b[:]) != w.val {
			return i, true
		}
	}
	return -1, false
}

// hold adds v, starting the loop when none runs. A thread that left a
// held wait to a signal and makes the same call again resumes it: its
// deadline, and its stall clock, stay.
func (q *vqueue) hold(s *Supervisor, v *vwait) {
	q.mu.Lock()
	if g, ok := q.gone[v.tid]; ok {
		delete(q.gone, v.tid)
		if g.p == v.p && g.nr == v.n.Nr && g.args == v.n.Args {
			v.deadline, v.since = g.deadline, g.since
		}
	}
	for i, h := range q.held {
		// A thread waits for one answer at a time: its wait still on
		// the queue is one a signal interrupted before vloop saw it.
		if h.tid == v.tid && h != v {
			if h.kind == v.kind && h.n.Nr == v.n.Nr && h.n.Args == v.n.Args {
				v.deadline, v.since = h.deadline, h.since
			}
			q.held = append(q.held[:i], q.held[i+1:]...)
			if h.pidfd > 0 {
				unix.Close(h.pidfd)
				h.pidfd = -1
			}
			break
		}
	}
	q.held = append(q.held, v)
	start := !q.running
	q.running = true
	if q.wake == nil {
		q.wake = make(chan struct{}, 1)
	}
	q.mu.Unlock()
	if start {
		go s.vloop()
		return
	}
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// remove takes v off the queue; false when it was not on it.
func (q *vqueue) remove(v *vwait) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	for i, h := range q.held {
		if h == v {
			q.held = append(q.held[:i], q.held[i+1:]...)
			if v.pidfd > 0 {
				unix.Close(v.pidfd)
				v.pidfd = -1
			}
			return true
		}
	}
	return false
}

// heldIdle reports whether thread tid holds a wait on the queue, and
// whether that wait is decided to go on waiting: a sleep, or a futex wait
// whose words are unchanged (Supervisor.settled).
func (q *vqueue) heldIdle(tid int) (held, idle bool) {
	q.mu.Lock()
	var v *vwait
	for _, h := range q.held {
		if h.tid == tid {
			v = h
			break
		}
	}
	q.mu.Unlock()
	if v == nil {
		return false, false
	}
	if v.kind == vwFutex || v.kind == vwWaitv {
		_, changed := changedWord(v.tid, v.words)
		return true, !changed
	}
	return true, true
}

// snapshot returns the waits held now.
func (q *vqueue) snapshot() []*vwait {
	q.mu.Lock()
	defer q.mu.Unlock()
	return append([]*vwait(nil), q.held...)
}

// vloop is the one goroutine that looks at the held waits; it ends when
// none is held.
func (s *Supervisor) vloop() {
	q := &s.vq
	every := vwaitEvery
	t := time.NewTimer(every)
	defer t.Stop()
	for {
		select {
		case <-q.wake:
			if !t.Stop() {
				<-t.C
			}
			every = vwaitEvery
		case <-t.C:
		}
		q.mu.Lock()
		if len(q.held) == 0 {
			q.running = false
			q.mu.Unlock()
			return
		}
		q.mu.Unlock()
		if s.vstep(q.snapshot()) {
			every = vwaitEvery
		} else {
			every = min(every*2, vwaitAtMost)
		}
		t.Reset(every)
	}
}

// vstep looks at the held waits once and reports whether anything changed.
func (s *Supervisor) vstep(held []*vwait) bool {
	changed := false
	byProc := map[*proc][]*vwait{}
	var order []*proc
	for _, v := range held {
		if !Valid(s.fd, v.n.ID) {
			// Interrupted by a signal (it calls again, or takes EINTR),
			// or gone.
			if s.vq.remove(v) {
				s.vq.mu.Lock()
				if s.vq.gone == nil {
					s.vq.gone = map[int]vgone{}
				}
				s.vq.gone[v.tid] = vgone{p: v.p, nr: v.n.Nr, args: v.n.Args, deadline: v.deadline, since: v.since}
				s.vq.mu.Unlock()
			}
			changed = true
			continue
		}
		if v.kind != vwSleep && s.woken(v) {
			changed = true
			continue
		}
		if byProc[v.p] == nil {
			order = append(order, v.p)
		}
		byProc[v.p] = append(byProc[v.p], v)
	}
	for _, p := range order {
		if s.vprocStep(p, byProc[p]) {
			changed = true
		}
	}
	s.vq.mu.Lock()
	for tid, g := range s.vq.gone {
		// A thread that left its wait long ago and never came back.
		if time.Since(g.since) > time.Hour {
			delete(s.vq.gone, tid)
		}
	}
	s.vq.mu.Unlock()
	return changed
}

// woken answers futex wait v 0 (futex_waitv: the index of the word) when
// one of its words changed, and reports whether it did. Its memory gone
// counts as a change: a wake-up, which the caller takes as spurious.
func (s *Supervisor) woken(v *vwait) bool {
	i, ok := changedWord(v.tid, v.words)
	if !ok {
		return false
	}
	if s.vq.remove(v) {
		val := int64(0)
		if v.kind == vwWaitv && i >= 0 {
			val = int64(i)
		}
		s.reply(&v.n, val)
	}
	return true
}

// pollLook looks at held poll v's descriptors: when one is ready (or is
// not a descriptor: the kernel says so) the call runs, returning at once,
// and ready is true; out says it waits on outstanding I/O.
func (s *Supervisor) pollLook(v *vwait) (ready, out bool) {
	l := look(v.w, v.p.tgid, v.pidfd)
	defer l.close()
	switch {
	case l.verdict == waitReady || l.verdict == waitKernel:
		if s.vq.remove(v) {
			Continue(s.fd, v.n.ID)
		}
		return true, false
	case l.verdict == waitReal:
		return false, l.outstanding()
	}
	return false, false
}

// vprocStep decides p's held waits vs: when p is idle its earliest event
// happens; otherwise a wait past its stall limit is answered anyway. It
// reports whether it answered one.
func (s *Supervisor) vprocStep(p *proc, vs []*vwait) bool {
	sort.SliceStable(vs, func(i, j int) bool {
		if vs[i].deadline != vs[j].deadline {
			return vs[i].deadline < vs[j].deadline
		}
		return vs[i].tid < vs[j].tid
	})
	held := make(map[int]bool, len(vs))
	for _, v := range vs {
		held[v.tid] = true
	}
	s.mu.Lock()
	quiet, children, current := p.quiet, p.children, s.procs[p.tgid] == p
	s.mu.Unlock()
	if !current {
		return false // its exec or exit ends the waits (Valid)
	}
	// A held poll returns when a descriptor it waits on is ready; one
	// that now waits on outstanding I/O (another thread added a socket
	// to its epoll set) keeps p busy.
	busy := ""
	for _, v := range vs {
		if v.kind != vwPoll {
			continue
		}
		ready, out := s.pollLook(v)
		if ready {
			return true
		}
		if out {
			busy = "thread " + strconv.Itoa(v.tid) + " (" + comm(v.tid) + ") polled outstanding I/O"
		}
	}
	ok, why := false, busy
	if busy == "" {
		ok, why = s.idle(p.tgid, quiet, children, held)
	}
	if ok {
		// A word may have changed between vstep's look and the instant
		// every thread slept (a waker that then blocked, as glibc's
		// pthread_cond_signal does waiting for a group's waiters to
		// leave): look again now that nothing in p runs.
		for _, v := range vs {
			if v.kind == vwPoll {
				if ready, _ := s.pollLook(v); ready {
					return true
				}
			} else if v.kind != vwSleep && s.woken(v) {
				return true
			}
		}
		s.fireFirst(p, vs[0], "")
		return true
	}
	now := time.Now()
	for _, v := range vs {
		if now.Sub(v.since) >= v.limit {
			s.fireFirst(p, v, why)
			return true
		}
	}
	return false
}

// fireFirst ends v at its deadline: p's clock moves there and v is
// answered as timed out. A timer of p due first fires instead, at its own
// deadline, and v stays held. why, when not empty, says v was not due: the
// stall limit ends it, an escape.
func (s *Supervisor) fireFirst(p *proc, v *vwait, why string) {
	s.mu.Lock()
	deadline := v.deadline
	if v.onBase {
		// Its deadline on base, as an offset of the clock.
		deadline = satAdd(deadline, s.nowT(p, v.tid)-p.base)
	}
	if why == "" && p.armedTimers() {
		var first *vtimer
		for _, t := range p.timers {
			if t.armed && t.deadline <= deadline && (first == nil || t.deadline < first.deadline) {
				first = t
			}
		}
		if first != nil {
			// The timer's signal or timerfd wakes whom the kernel
			// picks; the loop looks again.
			s.jumpTo(p, v.tid, first.deadline)
			s.fire(p, first, 1)
			s.deliver(p, first, 1)
			s.served("timer")
			s.mu.Unlock()
			return
		}
	}
	if !s.vq.remove(v) {
		s.mu.Unlock()
		return
	}
	if v.kind == vwPoll {
		// expire moves the clock by what is left of the timeout, firing
		// the timers due on the way, and answers.
		v.w.timeout = max(v.deadline-p.base, 0)
		if why != "" {
			s.escaped("stall")
			s.counts.note("%s", stallNote(v, why))
		}
		s.mu.Unlock()
		s.vq.mu.Lock()
		s.vq.firing = v.w
		s.vq.mu.Unlock()
		s.expire(v.w, p, v.count)
		s.vq.mu.Lock()
		s.vq.firing = nil
		s.vq.mu.Unlock()
		return
	}
	if v.onBase {
		if p.base < v.deadline {
			s.setBase(p, v.tid, v.deadline)
		}
	} else {
		s.jumpTo(p, v.tid, v.deadline)
	}
	if why != "" {
		s.escaped("stall")
		s.counts.note("%s", stallNote(v, why))
	}
	switch v.kind {
	case vwSleep:
		s.served("sleep")
	default:
		s.served("wait")
	}
	s.mu.Unlock()
	if v.kind == vwSleep {
		s.reply(&v.n, 0)
		return
	}
	s.fail(&v.n, unix.ETIMEDOUT)
}

// stallNote says which held wait the stall limit ended and why.
func stallNote(v *vwait, why string) string {
	what := "sleep"
	switch v.kind {
	case vwFutex, vwWaitv:
		what = "timed futex wait"
	case vwPoll:
		what = "timed " + callName(int(v.n.Nr))
	}
	return "a " + what + " of thread " + strconv.Itoa(v.tid) + " (" + comm(v.tid) + ") ended on the stall limit after " +
		time.Since(v.since).Round(time.Second).String() + " of real time, not on the virtual clock: " + why
}

// comm is a thread's name.
func comm(tid int) string {
	b, err := readFile("/proc/" + strconv.Itoa(tid) + "/comm")
	if err != nil {
		return "gone"
	}
	return strings.TrimSpace(string(b))
}

// threadState is one look at a thread: its state letter and how many
// times it ran (schedstat's third field).
type threadState struct {
	state byte
	runs  string
}

// lookThreads reads the state of every thread of tgid.
func lookThreads(tgid int) (map[int]threadState, bool) {
	dir := "/proc/" + strconv.Itoa(tgid) + "/task/"
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, false
	}
	names, err := readDirNames(fd)
	unix.Close(fd)
	if err != nil {
		return nil, false
	}
	out := make(map[int]threadState, len(names))
	for _, name := range names {
		tid, err := strconv.Atoi(name)
		if err != nil {
			continue
		}
		b, err := readFile(dir + name + "/stat")
		if err != nil {
			continue // gone
		}
		i := bytes.LastIndexByte(b, ')')
		if i < 0 || i+2 >= len(b) {
			return nil, false
		}
		st := threadState{state: b[i+2]}
		if sc, err := readFile(dir + name + "/schedstat"); err == nil {
			if f := bytes.Fields(sc); len(f) == 3 {
				st.runs = string(f[2])
			}
		}
		out[tid] = st
	}
	return out, true
}

// readDirNames lists a directory open at fd.
func readDirNames(fd int) ([]string, error) {
	var names []string
	buf := make([]byte, 8192)
	for {
		n, err := unix.Getdents(fd, buf)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, err
		}
		if n <= 0 {
			return names, nil
		}
		_, _, names = unix.ParseDirent(buf[:n], -1, names)
	}
}

// idle reports whether process tgid is idle: every thread but its quiet
// one blocked at one instant — asleep in the kernel, or held here (held),
// never in a call the supervisor has yet to answer, in uninterruptible
// sleep or stopped for the tracer — and none blocked on something from
// outside: outstanding I/O (a read, receive or untimed poll of a
// descriptor outstandingFD judges so), a wait in real time (a kernel wait
// with a timeout, a timed poll the supervisor holds in real time), or a
// child's exit (wait4, waitid while it has children). Otherwise why names
// a thread that kept it busy.
//
// Two looks, and the threads' run counts between them: a thread seen
// asleep at both that did not run in between slept all along, so at some
// instant between the looks every thread slept at once (one look, thread
// by thread, could see a thread asleep, then another that woke it go to
// sleep).
func (s *Supervisor) idle(tgid, quiet, children int, held map[int]bool) (bool, string) {
	return s.quiet(tgid, quiet, children, held, true)
}

// quiet is idle; without io, a thread blocked on something from outside
// counts as blocked: every thread is asleep at one instant, none of them
// about to run.
func (s *Supervisor) quiet(tgid, quiet, children int, held map[int]bool, io bool) (bool, string) {
	first, ok := lookThreads(tgid)
	if !ok {
		return false, "its threads could not be read"
	}
	for tid, st := range first {
		if tid == quiet || held[tid] || st.state == 'Z' || st.state == 'X' {
			continue
		}
		if st.state != 'S' {
			return false, "thread " + strconv.Itoa(tid) + " (" + comm(tid) + ") was running"
		}
		if !io {
			if w, err := readFile("/proc/" + strconv.Itoa(tid) + "/wchan"); err == nil && bytes.HasPrefix(w, []byte("seccomp_do_user_notif")) {
				if _, real := s.realWaits.Load(tid); !real {
					return false, "thread " + strconv.Itoa(tid) + " (" + comm(tid) + ") waited for dal's answer"
				}
			}
			continue
		}
		if _, real := s.realWaits.Load(tid); real {
			return false, "thread " + strconv.Itoa(tid) + " (" + comm(tid) + ") waited for I/O in a timed poll"
		}
		if w, err := readFile("/proc/" + strconv.Itoa(tid) + "/wchan"); err == nil && bytes.HasPrefix(w, []byte("seccomp_do_user_notif")) {
			return false, "thread " + strconv.Itoa(tid) + " (" + comm(tid) + ") waited for dal's answer"
		}
		if what := outsideWait(tgid, tid, children); what != "" {
			return false, "thread " + strconv.Itoa(tid) + " (" + comm(tid) + ") " + what
		}
	}
	second, ok := lookThreads(tgid)
	if !ok || len(second) != len(first) {
		return false, "it was starting or ending threads"
	}
	for tid, st := range second {
		was, ok := first[tid]
		if !ok || (tid != quiet && !held[tid] && (st.state != was.state || st.runs != was.runs)) {
			return false, "thread " + strconv.Itoa(tid) + " (" + comm(tid) + ") was running"
		}
	}
	return true, ""
}

// outsideWait says what thread tid of tgid, asleep in the kernel, waits
// for when something from outside the process can end its wait; "" when
// only the process itself (or a signal) can.
func outsideWait(tgid, tid, children int) string {
	line, err := readFile("/proc/" + strconv.Itoa(tid) + "/syscall")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(line))
	if len(f) < 7 {
		return "" // not in a system call (a page fault's sleep is D)
	}
	nr, err := strconv.Atoi(f[0])
	if err != nil {
		return ""
	}
	var a [6]uint64
	for i := range a {
		a[i], _ = strconv.ParseUint(strings.TrimPrefix(f[i+1], "0x"), 16, 64)
	}
	fdWait := func(call string, fds []int) string {
		if anyOutstanding(tgid, fds) {
			return "was blocked in " + call + " on outstanding I/O"
		}
		return ""
	}
	switch nr {
	case unix.SYS_READ, unix.SYS_READV, unix.SYS_RECVFROM, unix.SYS_RECVMSG, unix.SYS_RECVMMSG,
		unix.SYS_CONNECT, unix.SYS_ACCEPT, unix.SYS_ACCEPT4, unix.SYS_WRITE, unix.SYS_WRITEV, unix.SYS_SENDTO, unix.SYS_SENDMSG:
		return fdWait(callName(nr), []int{int(int32(a[0]))})
	case unix.SYS_WAIT4, unix.SYS_WAITID:
		if children > 0 {
			return "waited for a child process"
		}
	case unix.SYS_NANOSLEEP, unix.SYS_CLOCK_NANOSLEEP:
		return "slept in real time"
	case unix.SYS_FUTEX:
		if op := a[1] & futexCmdMask; a[3] != 0 && (op == 0 || op == futexWaitBitset || op == futexLockPI || op == futexLockPI2 || op == futexWaitRequeuePI) {
			return "waited on a futex in real time"
		}
	case unix.SYS_FUTEX_WAITV:
		if a[3] != 0 {
			return "waited on futexes in real time"
		}
	case unix.SYS_RT_SIGTIMEDWAIT:
		if a[2] != 0 {
			return "waited for a signal in real time"
		}
	case unix.SYS_PPOLL, unix.SYS_PSELECT6, unix.SYS_EPOLL_PWAIT, unix.SYS_EPOLL_PWAIT2:
		if _, fds, ok := untimedWait(tid); ok {
			return fdWait(callName(nr), fds)
		}
		return "waited in real time (" + callName(nr) + ")"
	default:
		if nr == sysPoll || nr == sysSelect || nr == sysEpollWait {
			if _, fds, ok := untimedWait(tid); ok {
				return fdWait(callName(nr), fds)
			}
			return "waited in real time (" + callName(nr) + ")"
		}
	}
	return ""
}

// deferWait holds w, a timed wait of thread w.pid of p about to jump by
// its timeout (expire), when p holds a wait due before that: the earlier
// deadline comes first, and w waits in the queue for its own, answered
// ready as soon as a descriptor is. It reports whether it held w.
func (s *Supervisor) deferWait(w *waitCall, p *proc, count string) bool {
	held := s.vq.snapshot()
	s.vq.mu.Lock()
	firing := s.vq.firing == w
	s.vq.mu.Unlock()
	s.mu.Lock()
	several, goImage := p.threads > 1, p.goImage
	s.mu.Unlock()
	if firing || !several || count == "" {
		// count "": a real wait on outstanding I/O that its timeout (or
		// the stall limit) ended in real time: not the queue's to hold.
		return false
	}
	// A thread that has not settled — running (a thread just started
	// counts as blocked to the jump's own look while it faults its stack
	// in), or waiting for the supervisor to take a sleep or futex wait
	// queued behind this one — may be due first: w waits in the queue
	// with it.
	if pendingHold(p.tgid, w.pid, goImage, held) {
		return s.deferHold(w, p, count)
	}
	if !goImage {
		hs := map[int]bool{w.pid: true}
		for _, v := range held {
			if v.p == p {
				hs[v.tid] = true
			}
		}
		s.mu.Lock()
		quiet, children := p.quiet, p.children
		s.mu.Unlock()
		if ok, _ := s.quiet(p.tgid, quiet, children, hs, false); !ok {
			return s.deferHold(w, p, count)
		}
	}
	if len(held) == 0 {
		return false
	}
	s.mu.Lock()
	end := satAdd(p.base, w.timeout)
	earlier := false
	for _, v := range held {
		if v.p != p || v.tid == w.pid {
			continue
		}
		d := v.deadline
		if !v.onBase {
			d -= s.nowT(p, w.pid) - p.base
		}
		earlier = earlier || d < end
	}
	s.mu.Unlock()
	if !earlier {
		return false
	}
	return s.deferHold(w, p, count)
}

// deferHold holds w in the queue, due at its timeout.
func (s *Supervisor) deferHold(w *waitCall, p *proc, count string) bool {
	pidfd, err := unix.PidfdOpen(p.tgid, 0)
	if err != nil {
		return false
	}
	s.mu.Lock()
	end := satAdd(p.base, w.timeout)
	s.mu.Unlock()
	v := &vwait{n: *w.n, tid: w.pid, p: p, kind: vwPoll, deadline: end, onBase: true, since: time.Now(),
		w: w, pidfd: pidfd, count: count}
	v.limit = max(time.Duration(w.timeout), s.cfg.stallLimit())
	s.vq.hold(s, v)
	return true
}

// pendingHold reports whether a thread of tgid other than caller waits
// for the supervisor's answer to a call it would hold: a sleep (not in a
// Go image), a private timed FUTEX_WAIT_BITSET, a futex_waitv.
func pendingHold(tgid, caller int, goImage bool, held []*vwait) bool {
	threads, ok := lookThreads(tgid)
	if !ok {
		return false
	}
next:
	for tid, st := range threads {
		if tid == caller || st.state != 'S' {
			continue
		}
		for _, v := range held {
			if v.tid == tid {
				continue next
			}
		}
		dir := "/proc/" + strconv.Itoa(tid) + "/"
		if w, err := readFile(dir + "wchan"); err != nil || !bytes.HasPrefix(w, []byte("seccomp_do_user_notif")) {
			continue
		}
		line, err := readFile(dir + "syscall")
		if err != nil {
			continue
		}
		f := strings.Fields(string(line))
		if len(f) < 7 {
			continue
		}
		nr, _ := strconv.Atoi(f[0])
		op, _ := strconv.ParseUint(strings.TrimPrefix(f[2], "0x"), 16, 64)
		switch {
		case (nr == unix.SYS_NANOSLEEP || nr == unix.SYS_CLOCK_NANOSLEEP) && !goImage,
			nr == unix.SYS_FUTEX && op&futexCmdMask == futexWaitBitset && op&futexPrivate != 0,
			nr == unix.SYS_FUTEX_WAITV:
			return true
		}
	}
	return false
}

// threadsTimer fires the first timer of p, a process with several
// threads none of which holds a timed wait here (vloop fires its timers
// then: fireFirst), when p is idle: nothing but a timer can end its waits,
// so the timer's expiry is its next event. The signal goes to the thread
// the kernel picks, or the timerfd becomes readable. Its watcher calls it
// (timers.go); it reports whether a timer fired.
func (s *Supervisor) threadsTimer(p *proc) bool {
	for _, v := range s.vq.snapshot() {
		if v.p == p {
			return false
		}
	}
	s.mu.Lock()
	quiet, children := p.quiet, p.children
	s.mu.Unlock()
	if ok, _ := s.idle(p.tgid, quiet, children, nil); !ok {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.procs[p.tgid] != p {
		return false
	}
	var first *vtimer
	for _, t := range p.timers {
		if t.armed && (first == nil || t.deadline < first.deadline) {
			first = t
		}
	}
	if first == nil {
		return false
	}
	s.jumpTo(p, p.tgid, first.deadline)
	s.fire(p, first, 1)
	s.deliver(p, first, 1)
	s.served("timer")
	return true
}

// writesPipe reports whether process tgid holds, besides its descriptor
// fd, the write end of pipe link ("pipe:[inode]"): a descriptor to the same
// pipe open for writing. A child that inherited that end could write too;
// a self-pipe is close-on-exec, and a parent that keeps a child's write
// end open is rare (it would never see the pipe's end either).
func writesPipe(tgid, fd int, link string) bool {
	dir := "/proc/" + strconv.Itoa(tgid) + "/fd/"
	dfd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return false
	}
	names, err := readDirNames(dfd)
	unix.Close(dfd)
	if err != nil || len(names) > 4096 {
		return false
	}
	self := strconv.Itoa(fd)
	for _, name := range names {
		if name == self {
			continue
		}
		if l, err := readlink(dir + name); err != nil || l != link {
			continue
		}
		info, err := readFile("/proc/" + strconv.Itoa(tgid) + "/fdinfo/" + name)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(info), "\n") {
			if v, ok := strings.CutPrefix(line, "flags:"); ok {
				if flags, err := strconv.ParseUint(strings.TrimSpace(v), 8, 32); err == nil && flags&unix.O_ACCMODE != unix.O_RDONLY {
					return true
				}
				break
			}
		}
	}
	return false
}

// readlink reads a symbolic link of /proc.
func readlink(path string) (string, error) {
	buf := make([]byte, 256)
	n, err := unix.Readlink(path, buf)
	if err != nil {
		return "", err
	}
	return string(buf[:n]), nil
}
