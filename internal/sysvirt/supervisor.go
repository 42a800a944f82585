package sysvirt

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"maps"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dal-runtime/dal/seedrng"
	"golang.org/x/sys/unix"
)

// Supervisor serves the virtual clock and randomness to a process tree. Its
// process table is fed by [Supervisor.Trace]; its answers by
// [Supervisor.Handle], called for every seccomp notification.
type Supervisor struct {
	cfg Config
	// fd is the seccomp listener the supervisor answers on, set by New
	// and never changed: the waiter's and the sleeps' goroutines read it
	// while Handle runs.
	fd int

	killedBy unix.Signal // set by Trace: the signal that killed the agent

	mu      sync.Mutex
	procs   map[int]*proc // by thread-group id
	threads map[int]int   // thread id → thread-group id
	counts  Counts
	pidfds  pidfds // the timed waits' (pidfd.go)
	files   *fileTimes
	// tracer is the thread id of the tracer's thread, whose stats run
	// as the kernel would (statcall.go).
	tracer atomic.Int32
	// walker is the thread id of the serve thread, whose effective
	// capabilities let no walk past a permission check (callercaps.go).
	walker   atomic.Int32
	selfOnce sync.Once
	selfView selfView
	// restarts are the calls a timer's signal interrupted, by thread
	// (timers.go); pendingRestarts their number, read without mu.
	restarts        map[int]restart
	pendingRestarts atomic.Int32
	// realWaits are the threads whose wait the supervisor holds in real
	// time (waitReal), by thread id: decided, for Supervisor.settled.
	realWaits sync.Map
	waiter    realWaiter
	owed      owed // the proxy's connections that owe a response (owed.go)
	// ports gives binds to port 0 their ports (bindport.go).
	ports ports
}

// proc is one process (thread group) and its stream.
type proc struct {
	tgid    int
	parent  int // the thread-group id of the process that started it
	stream  string
	spawned int // children named so far
	// The stream's virtual offset is base + reads×quantum: base holds
	// what sleeps, expired waits and waited-for children added, and is
	// what a child inherits; reads are the process's own.
	base    int64
	reads   int64
	threads int
	execs   int
	rng     *seedrng.Stream
	// page is the address of the data pages of dal's vDSO in the process
	// (0: none, its clock is base + reads×quantum alone); seen is how
	// many of the vDSO's reads were counted; seq is the pages' sequence
	// count (fast.go).
	page uint64
	seen uint64
	seq  byte
	// How the process resolves paths (statview.go): sameView, its root
	// and mount namespace were found to be the supervisor's; each, check
	// them at every call; ownFiles, a thread has a descriptor table of
	// its own.
	sameView bool
	each     bool
	ownFiles bool
	// File times (filetimes.go): looked is what seeing files newer than
	// its clock added to base; instantAt the time the new values seen at
	// its instant got.
	looked     int64
	instant    int64
	instantAt  int64
	instantSet bool
	// Timers (timers.go): children counts the processes it started that
	// the tracer has not reaped (one could end a wait for a signal with
	// its SIGCHLD); ended says its own exit was seen.
	timers   []*vtimer
	children int
	ended    bool
	watching bool // its watcher runs (timers.go)
	// Its image's quiet thread (quiet.go): goImage, Go built it;
	// quietSeen, its first new thread was seen; quiet, that thread.
	goImage   bool
	quietSeen bool
	quiet     int
	// The program's reads when its quiet thread last saw them change,
	// and when that was (real clock): quietSleep.
	stallReads int64
	stallSince time.Time
}

// New returns a supervisor for cfg that answers on seccomp listener fd
// (-1 for one that only traces). The caller keeps ownership of fd and
// keeps it open for as long as the supervisor runs. With cfg.StartNS set,
// New makes no system call (a caller under its own filter must set it).
func New(cfg Config, fd int) *Supervisor {
	if cfg.QuantumNS < 0 {
		cfg.QuantumNS = 0
	}
	start := cfg.StartNS
	if start == 0 {
		start = StartNow()
	}
	return &Supervisor{cfg: cfg, fd: fd, procs: map[int]*proc{}, threads: map[int]int{}, files: newFileTimes(start)}
}

// Counts returns what was served so far.
func (s *Supervisor) Counts() Counts {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.counts
	c.Served = maps.Clone(c.Served)
	c.Real = maps.Clone(c.Real)
	c.Escapes = maps.Clone(c.Escapes)
	c.Calls = maps.Clone(c.Calls)
	c.Injected = maps.Clone(c.Injected)
	c.Notes = append([]string(nil), c.Notes...)
	return c
}

func (s *Supervisor) served(k Category)  { add(&s.counts.Served, k, 1) }
func (s *Supervisor) real(k Reason)      { add(&s.counts.Real, k, 1) }
func (s *Supervisor) escaped(k Category) { add(&s.counts.Escapes, k, 1) }

// newProc registers thread-group tgid under stream name. Callers hold mu.
func (s *Supervisor) newProc(tgid int, stream string) *proc {
	p := &proc{tgid: tgid, stream: stream, threads: 1}
	s.procs[tgid] = p
	s.threads[tgid] = tgid
	return p
}

// lookup returns the process of thread tid. Callers hold mu. A thread the
// tracer has not reported yet (its clone event may still be queued) is
// found through /proc.
func (s *Supervisor) lookup(tid int) *proc {
	if g, ok := s.threads[tid]; ok {
		return s.procs[g]
	}
	g := tgidOf(tid)
	if g <= 0 {
		return nil
	}
	p := s.procs[g]
	if p != nil {
		s.threads[tid] = g
		p.threads++
	}
	return p
}

// tgidOf reads a thread's group id from /proc; 0 when it is gone.
func tgidOf(tid int) int {
	b, err := readFile("/proc/" + strconv.Itoa(tid) + "/status")
	if err != nil {
		return 0
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if v, ok := bytes.CutPrefix(sc.Bytes(), []byte("Tgid:")); ok {
			n, _ := strconv.Atoi(string(bytes.TrimSpace(v)))
			return n
		}
	}
	return 0
}

// Clock identifiers (linux/time.h).
const (
	clockRealtime        = 0
	clockMonotonic       = 1
	clockProcessCPU      = 2
	clockThreadCPU       = 3
	clockMonotonicRaw    = 4
	clockRealtimeCoarse  = 5
	clockMonotonicCoarse = 6
	clockBoottime        = 7
	clockRealtimeAlarm   = 8
	clockBoottimeAlarm   = 9
	clockTAI             = 11
)

// clockKind sorts a clock id: 'r' realtime, 'm' monotonic, 0 other.
func clockKind(id int32) byte {
	switch id {
	case clockRealtime, clockRealtimeCoarse, clockRealtimeAlarm, clockTAI:
		return 'r'
	case clockMonotonic, clockMonotonicRaw, clockMonotonicCoarse, clockBoottime, clockBoottimeAlarm:
		return 'm'
	}
	return 0
}

// now reads p's clock of kind k through its task tid, advancing it by the
// quantum when tick. With dal's vDSO the reads it served count too.
// Callers hold mu.
func (s *Supervisor) now(p *proc, tid int, k byte, tick bool) int64 {
	if tick && tid != p.quiet {
		p.reads++
		s.syncPage(p, tid)
	}
	t := p.base + (p.reads+s.pageReads(p, tid))*s.cfg.QuantumNS
	if k == 'r' {
		return s.cfg.EpochNS + t
	}
	return s.cfg.MonoNS + t
}

// realNow reads the real clock of kind k.
func realNow(k byte) int64 {
	var ts unix.Timespec
	id := int32(unix.CLOCK_MONOTONIC)
	if k == 'r' {
		id = unix.CLOCK_REALTIME
	}
	unix.ClockGettime(id, &ts)
	return ts.Nano()
}

// Handle answers notification n, received on the supervisor's listener,
// if it is one of the supervisor's calls (a row of its table), and
// reports whether it was.
func (s *Supervisor) Handle(n *Notif) bool {
	if s.restarted(n) {
		return true
	}
	c := served(n.Nr)
	if c == nil {
		return false
	}
	c.handle(s, n)
	return true
}

// caller returns n's process, or nil for a caller the tracer does not
// know (its call then runs as the kernel would, counted as an escape).
func (s *Supervisor) caller(n *Notif) *proc {
	p := s.lookup(int(n.Pid))
	if p == nil {
		s.counts.note("a process dal was not tracing made a clock or random call: it got a real value")
	}
	return p
}

// readClock reads n's process's clock of kind k, a read that advances it.
// When the layer does not serve the caller it lets the call run, counts
// the escape and reports false.
func (s *Supervisor) readClock(n *Notif, k byte) (int64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.caller(n)
	if p == nil || !s.cfg.Clock {
		s.escaped(Clock)
		Continue(s.fd, n.ID)
		return 0, false
	}
	s.served(Clock)
	return s.now(p, int(n.Pid), k, true), true
}

// put writes b at addr in the caller's memory (nothing at a NULL addr),
// and answers EFAULT and reports false when it cannot.
func (s *Supervisor) put(n *Notif, addr uint64, b []byte) bool {
	if addr == 0 {
		return true
	}
	if writeMem(int(n.Pid), addr, b) != nil {
		s.fail(n, unix.EFAULT)
		return false
	}
	return true
}

func (s *Supervisor) clockGettime(n *Notif) {
	id, addr := int32(n.Args[0]), n.Args[1]
	k := clockKind(id)
	if k == 0 {
		// The filter passes only the virtual clocks; a rule of an older
		// filter is no reason to serve the others.
		s.mu.Lock()
		if id == clockProcessCPU || id == clockThreadCPU || id < 0 {
			s.real(CPUClock)
		} else {
			s.real(OtherClock)
		}
		s.mu.Unlock()
		Continue(s.fd, n.ID)
		return
	}
	v, ok := s.readClock(n, k)
	if ok && s.put(n, addr, putTimespec(v)) {
		s.reply(n, 0)
	}
}

func (s *Supervisor) gettimeofday(n *Notif) {
	tv, tz := n.Args[0], n.Args[1]
	if tv != 0 {
		v, ok := s.readClock(n, 'r')
		if !ok {
			return
		}
		var b [16]byte
		binary.LittleEndian.PutUint64(b[0:], uint64(v/1e9))
		binary.LittleEndian.PutUint64(b[8:], uint64(v%1e9/1e3))
		if !s.put(n, tv, b[:]) {
			return
		}
	}
	if s.put(n, tz, make([]byte, 8)) {
		s.reply(n, 0)
	}
}

func (s *Supervisor) time(n *Notif) {
	v, ok := s.readClock(n, 'r')
	if !ok {
		return
	}
	sec := v / 1e9
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], uint64(sec))
	if s.put(n, n.Args[0], b[:]) {
		s.reply(n, sec)
	}
}

// maxRandom is the most getrandom returns in one call (the kernel's own
// limit: INT_MAX >> 6, rounded down to 32 MiB - 1).
const maxRandom = 1<<25 - 1

func (s *Supervisor) getrandom(n *Notif) {
	buf, size, flags := n.Args[0], n.Args[1], n.Args[2]
	if flags&^uint64(unix.GRND_NONBLOCK|unix.GRND_RANDOM|grndInsecure) != 0 {
		s.fail(n, unix.EINVAL)
		return
	}
	s.mu.Lock()
	p := s.caller(n)
	if p == nil || !s.cfg.Random {
		s.escaped(Random)
		s.mu.Unlock()
		Continue(s.fd, n.ID)
		return
	}
	size = min(size, maxRandom)
	b := s.rng(p).Bytes(int(size))
	s.served(Random)
	if s.fromVDSO(p, n) {
		s.refill(p, int(n.Pid))
	}
	s.mu.Unlock()
	if buf == 0 && size > 0 {
		s.fail(n, unix.EFAULT)
		return
	}
	if s.put(n, buf, b) {
		s.reply(n, int64(size))
	}
}

const grndInsecure = 0x4

// rng is p's getrandom stream. Callers hold mu.
func (s *Supervisor) rng(p *proc) *seedrng.Stream {
	if p.rng == nil {
		p.rng = seedrng.Derive(s.cfg.Seed, p.stream+"/getrandom")
	}
	return p.rng
}

// sleep serves nanosleep and clock_nanosleep; rem is where a relative
// sleep interrupted by a signal writes the time left.
func (s *Supervisor) sleep(n *Notif, id int32, flags int, req, rem uint64) {
	k := clockKind(id)
	s.mu.Lock()
	p := s.caller(n)
	if k == 0 || p == nil || !s.cfg.Clock {
		if k == 0 {
			s.real(OtherClock)
		} else {
			s.escaped(Sleep)
		}
		s.mu.Unlock()
		Continue(s.fd, n.ID)
		return
	}
	s.mu.Unlock()
	d, errno := readTimespec(int(n.Pid), req)
	if errno != 0 {
		s.fail(n, errno)
		return
	}
	s.mu.Lock()
	if flags&unix.TIMER_ABSTIME != 0 {
		d -= s.now(p, int(n.Pid), k, false)
	}
	if d <= 0 {
		s.served(Sleep)
		s.mu.Unlock()
		s.reply(n, 0)
		return
	}
	if p.threads <= 1 && p.armedTimers() {
		// A timer whose signal the sleep takes ends it there.
		tid := int(n.Pid)
		st, _ := readSigState(tid)
		end := s.nowT(p, tid) + d
		woken, send := s.advance(p, tid, d, signalWakes(st, st.blk))
		s.served(Sleep)
		if woken != nil {
			if flags&unix.TIMER_ABSTIME == 0 && rem != 0 {
				writeMem(tid, rem, putTimespec(end-woken.deadline))
			}
			s.interrupt(n, send)
			s.mu.Unlock()
			return
		}
		s.mu.Unlock()
		s.reply(n, 0)
		return
	}
	if p.threads <= 1 {
		s.setBase(p, int(n.Pid), p.base+d)
		s.served(Sleep)
		s.mu.Unlock()
		s.reply(n, 0)
		return
	}
	s.real(SleepThreaded)
	s.quietSleep(p, int(n.Pid))
	s.mu.Unlock()
	fd, id2 := s.fd, n.ID
	go func() {
		// A real sleep, cut short when the caller is interrupted (it will
		// call again, or not).
		deadline := time.Now().Add(time.Duration(d))
		for {
			left := time.Until(deadline)
			if left <= 0 {
				break
			}
			time.Sleep(min(left, 50*time.Millisecond))
			if !Valid(fd, id2) {
				return
			}
		}
		s.reply(n, 0)
	}()
}

// Futex operations whose timeout is an absolute time.
const (
	futexCmdMask       = 0x7f
	futexWaitBitset    = 9
	futexLockPI        = 6
	futexLockPI2       = 13
	futexWaitRequeuePI = 11
	futexClockRealtime = 256
)

// futex translates an absolute deadline on the virtual clock into the real
// one, then lets the call run.
func (s *Supervisor) futex(n *Notif) {
	op, addr := int(n.Args[1]), n.Args[3]
	k := byte('m')
	switch op & futexCmdMask {
	case futexLockPI:
		k = 'r'
	case futexWaitBitset, futexLockPI2, futexWaitRequeuePI:
		if op&futexClockRealtime != 0 {
			k = 'r'
		}
	default:
		Continue(s.fd, n.ID)
		return
	}
	s.translate(n, k, addr)
}

// futexWaitv (waiters, nr, flags, timeout, clockid): an absolute timeout.
func (s *Supervisor) futexWaitv(n *Notif) {
	k := clockKind(int32(n.Args[4]))
	if k == 0 {
		Continue(s.fd, n.ID)
		return
	}
	s.translate(n, k, n.Args[3])
}

// translate rewrites the absolute timespec at addr from p's virtual clock
// of kind k to the real clock, keeping the time left, and lets the call run.
func (s *Supervisor) translate(n *Notif, k byte, addr uint64) {
	if addr == 0 || !s.cfg.Clock {
		Continue(s.fd, n.ID)
		return
	}
	abs, errno := readTimespec(int(n.Pid), addr)
	s.mu.Lock()
	p := s.caller(n)
	if errno != 0 || p == nil {
		s.mu.Unlock()
		Continue(s.fd, n.ID) // the kernel reports the bad timespec
		return
	}
	left := abs - s.now(p, int(n.Pid), k, false)
	s.served(Deadline)
	s.mu.Unlock()
	if Valid(s.fd, n.ID) {
		writeMem(int(n.Pid), addr, putTimespec(realNow(k)+max(left, 0)))
	}
	Continue(s.fd, n.ID)
}

// String describes the supervisor's configuration, for logs.
func (s *Supervisor) String() string {
	return fmt.Sprintf("sysvirt(clock=%v random=%v seed=%d)", s.cfg.Clock, s.cfg.Random, s.cfg.Seed)
}
