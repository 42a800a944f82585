package sysvirt

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"strconv"
	"time"
	"unsafe"

	"github.com/dal-runtime/dal/seedrng"
	"golang.org/x/sys/unix"
)

// ptrace options: stop at exec, and follow every new task.
const traceOptions = unix.PTRACE_O_TRACEEXEC | unix.PTRACE_O_TRACEFORK | unix.PTRACE_O_TRACEVFORK |
	unix.PTRACE_O_TRACECLONE | unix.PTRACE_O_TRACEEXIT | unix.PTRACE_O_EXITKILL

// Trace follows the process tree of agent, which the calling thread forked
// with PTRACE_TRACEME (its first stop is the SIGTRAP after its exec), until
// agent exits; it returns agent's exit status (128+n when killed by signal
// n). It must run on that thread (runtime.LockOSThread), and also reaps
// every other child, as the sandbox's init must.
func (s *Supervisor) Trace(agent int) int {
	s.tracer.Store(int32(unix.Gettid()))
	// The agent's first image starts now: what the file system stamps
	// from here on is the run's (filetimes.go). Drawn on another thread
	// when the sandbox has not: this one is under the filter, and the
	// supervisor would answer its fstat.
	s.mu.Lock()
	barrier := s.files.barrier
	s.mu.Unlock()
	if barrier == 0 {
		now := make(chan int64)
		go func() { now <- stampBarrier() }()
		barrier = <-now
	}
	s.mu.Lock()
	s.newProc(agent, "0")
	s.files.agent = max(s.files.start, barrier)
	s.mu.Unlock()
	// Tasks whose first stop (the SIGSTOP every auto-attached task starts
	// with) has not been seen yet.
	fresh := map[int]bool{}
	seen := map[int]bool{agent: true}
	// Tasks named at their first stop whose parent's fork or clone
	// event has not come yet: that event must not name them again.
	early := map[int]bool{}
	started := false
	// Stops seen while dal injected calls into a task, for the loop.
	var queued []stop
	// Exits held until the parent reaches its wait (holdExit).
	var held []heldExit
	for {
		var ws unix.WaitStatus
		var pid int
		if len(queued) > 0 {
			pid, ws, queued = queued[0].pid, queued[0].ws, queued[1:]
		} else {
			flags := unix.WALL
			if len(held) > 0 {
				flags |= unix.WNOHANG
			}
			var err error
			pid, err = unix.Wait4(-1, &ws, flags, nil)
			if err == unix.EINTR {
				continue
			}
			if err != nil {
				return 127
			}
			if pid == 0 {
				held = s.release(held)
				continue
			}
		}
		if ws.Exited() || ws.Signaled() {
			s.exited(pid)
			// Its pid may come back as another task's.
			delete(seen, pid)
			delete(fresh, pid)
			if pid == agent {
				if ws.Signaled() {
					s.killedBy = ws.Signal()
					return 128 + int(ws.Signal())
				}
				return ws.ExitStatus()
			}
			continue
		}
		if !ws.Stopped() {
			continue
		}
		sig := ws.StopSignal()
		switch {
		case sig == unix.SIGTRAP && ws.TrapCause() == unix.PTRACE_EVENT_EXEC:
			if old, err := unix.PtraceGetEventMsg(pid); err == nil && int(old) != pid {
				s.threadGone(int(old))
			}
			if in := s.exec(pid); in.gone != nil {
				queued = append(queued, stop{pid, *in.gone})
			} else {
				resume(pid, in.sig)
			}
		case sig == unix.SIGTRAP && ws.TrapCause() == unix.PTRACE_EVENT_EXIT:
			if s.holdExit(pid) {
				held = append(held, s.hold(pid))
				continue
			}
			s.exiting(pid)
			unix.PtraceCont(pid, 0)
		case sig == unix.SIGTRAP && (ws.TrapCause() == unix.PTRACE_EVENT_FORK ||
			ws.TrapCause() == unix.PTRACE_EVENT_VFORK || ws.TrapCause() == unix.PTRACE_EVENT_CLONE):
			if child, err := unix.PtraceGetEventMsg(pid); err == nil {
				switch c := int(child); {
				case early[c]:
					// Named at its first stop; it may have ended
					// since, and must not take a second stream.
					delete(early, c)
				default:
					s.spawned(pid, c, ws.TrapCause() == unix.PTRACE_EVENT_VFORK)
					if !seen[c] {
						fresh[c] = true
					}
				}
			}
			unix.PtraceCont(pid, 0)
		case sig == unix.SIGTRAP && pid == agent && !started:
			// The agent's own exec (PTRACE_TRACEME): follow its tree
			// from now on.
			started = true
			if err := unix.PtraceSetOptions(pid, traceOptions); err != nil {
				s.mu.Lock()
				s.counts.note("dal could not follow the agent's processes (ptrace options: %v): its children get real clock and random values", err)
				s.mu.Unlock()
			}
			if in := s.exec(pid); in.gone != nil {
				queued = append(queued, stop{pid, *in.gone})
			} else {
				resume(pid, in.sig)
			}
		case sig == unix.SIGSTOP && (fresh[pid] || !seen[pid]):
			// A new task's initial stop. It may come before its
			// parent's fork or clone event: name it now, from /proc,
			// so it never runs unnamed (or on its parent's vDSO
			// pages).
			if !fresh[pid] {
				if s.spawnedEarly(pid) {
					early[pid] = true
				}
			}
			delete(fresh, pid)
			seen[pid] = true
			s.quietStart(pid)
			unix.PtraceCont(pid, 0)
		default:
			seen[pid] = true
			if groupStop(pid) {
				// A group stop (SIGSTOP, SIGTSTP...): without
				// PTRACE_SEIZE it cannot be kept; the task goes on.
				unix.PtraceCont(pid, 0)
				continue
			}
			unix.PtraceCont(pid, int(sig))
		}
	}
}

// resume lets task pid, stopped at its exec, go on; sig is a signal it
// received while dal injected calls into it, raised again (a restart from
// an event stop may drop a signal given to it), and delivered through its
// own signal stop.
func resume(pid, sig int) {
	if sig != 0 {
		unix.Tgkill(pid, pid, unix.Signal(sig))
	}
	unix.PtraceCont(pid, 0)
}

// stop is a wait status of task pid.
type stop struct {
	pid int
	ws  unix.WaitStatus
}

// spawned names a new task of parent's: a thread joins its process, a
// process gets the next child stream. vfork says the event was a vfork's.
// It may run twice for a task (spawnedEarly): the second does nothing.
// It says whether child has a name now.
func (s *Supervisor) spawned(parent, child int, vfork bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, known := s.threads[child]; known {
		return true
	}
	p := s.lookup(parent)
	if p == nil {
		return false
	}
	if g := tgidOf(child); g == p.tgid {
		if _, ok := s.threads[child]; !ok {
			s.threads[child] = p.tgid
			p.threads++
			p.quietJoined(child)
			s.spawnedView(p, nil, child)
		}
		return true
	}
	p.spawned++
	// A point of the parent's own run, as its system calls are: its
	// vDSO's reads so far count, and its next image starts from them.
	s.harvest(p, parent)
	c := s.newProc(child, p.stream+"."+strconv.Itoa(p.spawned))
	c.parent = p.tgid
	p.children++
	// A child starts where its parent's sleeps and waits had brought
	// it: not its reads, so a child's values never depend on how often its
	// parent looked at the clock (a shimmed runtime's own bookkeeping
	// does, and varies).
	c.base = p.base
	s.forked(p, c, sharesMemory(parent, child, vfork))
	s.spawnedView(p, c, child)
	return true
}

// spawnedEarly names new task tid, stopped before its first instruction,
// whose parent's event has not been seen yet: its parent is its thread
// group's leader (a thread) or its parent process. It says whether tid
// has a name now.
func (s *Supervisor) spawnedEarly(tid int) bool {
	g, ppid := tgidOf(tid), parentOf(tid)
	switch {
	case g > 0 && g != tid:
		return s.spawned(g, tid, false)
	case ppid > 0:
		return s.spawned(ppid, tid, false)
	}
	return false
}

// parentOf reads a task's parent process id from /proc; 0 when it is gone.
func parentOf(tid int) int {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(tid) + "/status")
	if err != nil {
		return 0
	}
	for _, l := range bytes.Split(b, []byte("\n")) {
		if v, ok := bytes.CutPrefix(l, []byte("PPid:")); ok {
			n, _ := strconv.Atoi(string(bytes.TrimSpace(v)))
			return n
		}
	}
	return 0
}

// exiting hands the time of a process that ends to its parent when the
// parent is waiting for it — every thread of it blocked — as a shell
// running one command after another is: `date; sleep 2; date` shows two
// seconds pass. It runs at the exit's first step, before the process's
// descriptors close, so the parent cannot have seen the end yet. A parent
// with one thread (or a timer) is first waited for (holdExit); one still
// busy after that, or with several threads, keeps its own time: when it
// looks is up to the scheduler.
//
// When the parent has a timer armed and its timer whose signal ends its
// wait is due before the child's time, the timer fires there and the
// parent's clock stops at it: `timeout 5 sleep 10` times out (the signal
// is pending before the child's end is), `timeout 5 sleep 1` does not.
func (s *Supervisor) exiting(tid int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p := s.lookup(tid); p != nil {
		s.harvest(p, tid)
	}
	p := s.procs[tid]
	if p == nil || p.parent == 0 {
		return
	}
	parent := s.procs[p.parent]
	p.ended = true
	// What looking at files newer than its clock added stays the
	// process's own (filetimes.go): whoever looks at them later moves
	// on by itself, whether or not the parent was idle at this exit.
	base := p.base - p.looked
	if parent == nil || parent.base >= base || !idle(parent.tgid) {
		return
	}
	if !parent.armedTimers() {
		s.setBase(parent, parent.tgid, base)
		return
	}
	st, _ := readSigState(parent.tgid)
	if _, send := s.advance(parent, parent.tgid, base-parent.base, signalWakes(st, st.blk)); send != nil {
		s.mu.Unlock()
		send()
		s.mu.Lock()
	}
}

// heldExit is a process stopped at its exit until its parent reaches a
// wait, or has run long enough without (holdCPU).
type heldExit struct {
	pid, parent int
	cpu         int64 // the parent's CPU time when the hold began (ns)
	since       time.Time
}

// An exit is held until its parent has had holdCPU of CPU time without
// settling — its own time, so a loaded machine, which leaves the parent
// waiting for a CPU, does not end the hold early and hand the child's time
// to it in one run and not the next — or, whatever the parent got,
// holdWall has passed.
const (
	holdCPU  = 50 * time.Millisecond
	holdWall = 10 * time.Second
)

// hold starts holding the exit of process pid.
func (s *Supervisor) hold(pid int) heldExit {
	s.mu.Lock()
	h := heldExit{pid: pid, since: time.Now()}
	if p := s.procs[pid]; p != nil {
		h.parent = p.parent
	}
	s.mu.Unlock()
	h.cpu = cpuTime(h.parent)
	return h
}

// cpuTime is the CPU time process tgid's threads have had (ns), from
// /proc/<tgid>/task/*/schedstat; 0 when it is gone.
func cpuTime(tgid int) int64 {
	if tgid == 0 {
		return 0
	}
	dir := "/proc/" + strconv.Itoa(tgid) + "/task"
	ents, err := os.ReadDir(dir)
	if err != nil {
		return 0
	}
	var sum int64
	for _, e := range ents {
		b, err := readFile(dir + "/" + e.Name() + "/schedstat")
		if err != nil {
			continue
		}
		if f := bytes.Fields(b); len(f) == 3 {
			n, _ := strconv.ParseInt(string(f[0]), 10, 64)
			sum += n
		}
	}
	return sum
}

// holdExit reports whether process tid's exit, stopped at its first step,
// should wait for its parent to reach a wait: its parent has one thread
// or a timer armed, would get time from it, and is running, faulting a
// page in, or stopped for the tracer (a fork event the tracer has not
// seen: the tracer reports the newest task's stops first). What the
// parent does before waiting, such as arming the timer `timeout` arms
// after starting its command, then happens before the child's end in
// virtual time however the scheduler ran them.
func (s *Supervisor) holdExit(tid int) bool {
	s.mu.Lock()
	p := s.procs[tid]
	if p == nil || p.parent == 0 || p.ended {
		s.mu.Unlock()
		return false
	}
	parent := s.procs[p.parent]
	hold := parent != nil && parent.base < p.base-p.looked && (parent.armedTimers() || parent.threads == 1)
	s.mu.Unlock()
	return hold && !s.settled(p.parent)
}

// release lets the held exits whose parent has settled (or that waited
// long enough) go on, and returns the others, after a pause when there are
// any.
func (s *Supervisor) release(held []heldExit) []heldExit {
	kept := held[:0]
	for _, h := range held {
		if h.parent == 0 || s.settled(h.parent) || time.Since(h.since) >= holdWall ||
			cpuTime(h.parent)-h.cpu >= int64(holdCPU) {
			s.exiting(h.pid)
			unix.PtraceCont(h.pid, 0)
			continue
		}
		kept = append(kept, h)
	}
	if len(kept) > 0 {
		time.Sleep(50 * time.Microsecond)
	}
	return kept
}

// idle reports whether no thread of process tgid is running.
func idle(tgid int) bool {
	dir := "/proc/" + strconv.Itoa(tgid) + "/task"
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	for _, t := range tasks {
		b, err := readFile(dir + "/" + t.Name() + "/stat")
		if err != nil {
			continue // gone
		}
		// The state follows the command's closing parenthesis.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 || i+2 >= len(b) {
			return false
		}
		if st := b[i+2]; st == 'R' {
			return false
		}
	}
	return true
}

// exited forgets a task that ended.
func (s *Supervisor) exited(tid int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	g, ok := s.threads[tid]
	if !ok {
		return
	}
	delete(s.threads, tid)
	if p := s.procs[g]; p != nil {
		p.threads--
		if tid == g {
			delete(s.procs, g)
			s.pidfds.drop(p)
			p.dropTimers(nil)
			// Reaped by the tracer: the parent's SIGCHLD is pending now.
			if parent := s.procs[p.parent]; parent != nil {
				parent.children--
			}
		}
	}
}

// threadGone forgets a thread that vanished in its process's exec.
func (s *Supervisor) threadGone(tid int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.threads, tid)
}

// Auxiliary vector entries (linux/auxvec.h).
const (
	atNull        = 0
	atIgnore      = 1
	atRandom      = 25
	atSysinfoEhdr = 33
)

// exec edits the auxiliary vector of pid's new image, stopped before its
// first instruction, and says how the task goes on.
func (s *Supervisor) exec(pid int) injected {
	isGo := goImage(pid)
	s.mu.Lock()
	p := s.lookup(pid)
	if p == nil {
		p = s.newProc(pid, "0.?"+strconv.Itoa(pid))
	}
	p.execs++
	p.goImage, p.quietSeen, p.quiet, p.stallSince = isGo, false, 0, time.Time{}
	p.threads = 1
	s.pidfds.drop(p)
	// An exec deletes POSIX timers; alarms and timerfds stay.
	p.dropTimers(func(t *vtimer) bool { return t.kind != timerPOSIX })
	for tid, g := range s.threads {
		if g == p.tgid && tid != pid {
			delete(s.threads, tid)
		}
	}
	s.threads[pid] = p.tgid
	s.counts.Processes++
	stream, k := p.stream, p.execs
	s.mu.Unlock()
	var in injected
	if err := s.patchAuxv(pid, stream, k, &in); err != nil && in.gone == nil {
		s.mu.Lock()
		s.counts.Unpatched++
		s.counts.note("dal could not edit a new program's auxiliary vector (%v): its vDSO clock reads are real", err)
		s.mu.Unlock()
	}
	return in
}

// patchAuxv gives the new image dal's vDSO (strict mode) or hides the
// kernel's, and reseeds AT_RANDOM. The initial stack is argc, argv[],
// NULL, envp[], NULL, then the (type, value) pairs.
func (s *Supervisor) patchAuxv(pid int, stream string, k int, in *injected) error {
	sp, err := stackPointer(pid)
	if err != nil {
		return err
	}
	r := &stackReader{pid: pid, addr: sp}
	argc, err := r.word()
	if err != nil {
		return err
	}
	if argc > 1<<20 {
		return fmt.Errorf("implausible argc %d", argc)
	}
	if err := r.skip(int(argc) + 1); err != nil {
		return err
	}
	for n := 0; ; n++ {
		v, err := r.word()
		if err != nil {
			return err
		}
		if v == 0 {
			break
		}
		if n > 1<<20 {
			return fmt.Errorf("environment without an end")
		}
	}
	hidVDSO := false
	for n := 0; n < 256; n++ {
		at := r.addr
		typ, err := r.word()
		if err != nil {
			return err
		}
		val, err := r.word()
		if err != nil {
			return err
		}
		switch typ {
		case atNull:
			if !hidVDSO {
				s.mu.Lock()
				s.counts.note("a program ran without a vDSO to hide")
				s.mu.Unlock()
			}
			return nil
		case atSysinfoEhdr:
			// In strict mode the image gets dal's vDSO. Otherwise the
			// kernel's is hidden, in seeded mode too: glibc 2.41+ and
			// Go 1.24+ draw getrandom's bytes in the vDSO.
			var b [16]byte
			binary.LittleEndian.PutUint64(b[:], atIgnore)
			if s.fast() {
				ehdr, err := s.newImage(pid, val, in)
				if err == errGone {
					return err
				}
				if err == nil {
					binary.LittleEndian.PutUint64(b[:], atSysinfoEhdr)
					binary.LittleEndian.PutUint64(b[8:], ehdr)
				} else {
					s.mu.Lock()
					s.counts.note("dal could not give a program its vDSO (%v): its clock reads and getrandom take the slow path", err)
					s.mu.Unlock()
				}
			}
			if err := writeMem(pid, at, b[:]); err != nil {
				return err
			}
			hidVDSO = true
		case atRandom:
			if s.cfg.Random && val != 0 {
				b := seedrng.Derive(s.cfg.Seed, stream+"/at_random."+strconv.Itoa(k)).Bytes(16)
				if err := writeMem(pid, val, b); err != nil {
					return err
				}
				s.mu.Lock()
				s.served(AtRandom)
				s.mu.Unlock()
			}
		}
	}
	return fmt.Errorf("auxiliary vector without an end")
}

// stackReader reads words off a stopped task's stack.
type stackReader struct {
	pid  int
	addr uint64
	buf  []byte
	at   uint64 // address of buf[0]
}

func (r *stackReader) word() (uint64, error) {
	if r.addr < r.at || r.addr+8 > r.at+uint64(len(r.buf)) {
		// Read up to the end of the page after this one.
		end := (r.addr+8+4095)&^4095 + 4096
		b := make([]byte, end-r.addr)
		local := []unix.Iovec{{Base: &b[0]}}
		local[0].SetLen(len(b))
		remote := []unix.RemoteIovec{{Base: uintptr(r.addr), Len: len(b)}}
		n, err := unix.ProcessVMReadv(r.pid, local, remote, 0)
		if err != nil {
			return 0, err
		}
		if n < 8 {
			return 0, errShort
		}
		r.buf, r.at = b[:n], r.addr
	}
	v := binary.LittleEndian.Uint64(r.buf[r.addr-r.at:])
	r.addr += 8
	return v, nil
}

func (r *stackReader) skip(words int) error {
	r.addr += uint64(words) * 8
	return nil
}

// groupStop reports whether pid's stop is a group stop rather than a
// signal's delivery: PTRACE_GETSIGINFO fails with EINVAL for those.
func groupStop(pid int) bool {
	var info [128]byte
	_, _, errno := unix.Syscall6(unix.SYS_PTRACE, unix.PTRACE_GETSIGINFO, uintptr(pid), 0, uintptr(unsafe.Pointer(&info[0])), 0, 0)
	return errno == unix.EINVAL
}

// KilledBy is the signal that killed the agent [Supervisor.Trace] traced,
// 0 when it exited.
func (s *Supervisor) KilledBy() unix.Signal { return s.killedBy }
