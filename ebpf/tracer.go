//go:build linux && (amd64 || arm64)

package ebpf

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"

	cebpf "github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/ringbuf"
	"golang.org/x/sys/unix"
)

// noExec is NO_EXEC in bpf/boundary.c: no exec syscall in flight.
const noExec = 0xffffffff

// Tracer is the loaded and attached boundary tracer. Its methods are safe
// for concurrent use. It owns the BPF maps and links, the mapped
// tracked_pids array and one goroutine (the event reader); Close releases
// them all.
type Tracer struct {
	objs  boundaryObjects
	links []link.Link
	stats io.Closer // BPF run-time statistics, nil unless Options.Stats
	ring  *ringbuf.Reader
	names syscallTable
	opts  Options

	// pidBits is tracked_pids mapped into this process: user space sets
	// and clears bits with the same atomic operations as the kernel.
	// Guarded by trackMu; nil once closed.
	pidBits []byte

	closeMu sync.Mutex
	closed  bool

	trackMu sync.Mutex // serializes Track/Untrack/Forget (read-modify-write of map entries)
	flushMu sync.Mutex // one ring buffer flush at a time
	lastKey uint32     // the last kernel key handed out; guarded by trackMu

	mu         sync.Mutex
	cond       *sync.Cond // signalled when flushes or readerDone change
	flushes    uint64     // flushes the reader has completed
	readerDone bool
	readerErr  error
	sessions   map[uint32]*session // by the caller's session id; changed under trackMu and mu
	byKey      map[uint32]*session // by kernel key; changed under trackMu and mu
	capDrops   uint64              // events lost on this side (over MaxEventsPerSession, unreadable)
}

// session is a registered session. The kernel knows it by key, not by the
// caller's id: a key is never reused while the tracer is open, so whatever
// a forgotten session leaves in flight (an event still in the ring buffer,
// a process forked during Untrack, a syscall between lookup and count)
// lands on a dead key and is dropped, and never reaches a later session
// that reuses the id.
type session struct {
	id      uint32
	key     uint32
	events  []Event
	dropped uint64
}

// Open loads the eBPF programs, attaches them to sys_enter and to the
// process fork, exec and exit tracepoints, and starts reading events.
// It needs root (or CAP_BPF and CAP_PERFMON) and a kernel with BTF. When
// tracing cannot start, the error is an *UnavailableError saying why.
func Open(opts Options) (*Tracer, error) {
	opts = opts.withDefaults()
	if n := opts.EventBufferBytes; n < os.Getpagesize() || n&(n-1) != 0 {
		return nil, fmt.Errorf("open boundary tracer: EventBufferBytes is %d, want a power of two of at least %d", n, os.Getpagesize())
	}
	names, ok := syscallNames[runtime.GOARCH]
	if !ok {
		return nil, &UnavailableError{Reason: "boundary tracing supports amd64 and arm64 only, so no syscall is observed on " + runtime.GOARCH}
	}
	layout, err := kernelLayoutNow()
	if err != nil {
		return nil, err
	}
	spec, err := loadBoundary()
	if err != nil {
		return nil, fmt.Errorf("open boundary tracer: %w", err)
	}
	for name, v := range map[string]any{
		"task_tgid_off":     layout.TaskTgid,
		"bprm_filename_off": layout.BprmFilename,
		"regs_arg_off":      layout.RegsArgs,
	} {
		if err := spec.Variables[name].Set(v); err != nil {
			return nil, fmt.Errorf("open boundary tracer: set %s: %w", name, err)
		}
	}
	spec.Maps[boundaryMapSessions].MaxEntries = uint32(opts.MaxSessions)
	spec.Maps[boundaryMapSessionMarks].MaxEntries = uint32(opts.MaxSessions)
	spec.Maps[boundaryMapTasks].MaxEntries = uint32(opts.MaxProcesses)
	spec.Maps[boundaryMapCounts].MaxEntries = uint32(opts.MaxCounters)
	spec.Maps[boundaryMapEvents].MaxEntries = uint32(opts.EventBufferBytes)

	t := &Tracer{names: syscallTable(names), opts: opts, sessions: map[uint32]*session{}, byKey: map[uint32]*session{}}
	t.cond = sync.NewCond(&t.mu)
	if err := loadWithMemlock(spec, &t.objs); err != nil {
		return nil, unavailable(err)
	}
	if err := t.start(); err != nil {
		t.Close()
		return nil, err
	}
	return t, nil
}

// kernelLayoutNow reads the running kernel's struct layout from its BTF.
func kernelLayoutNow() (kernelLayout, error) {
	const path = "/sys/kernel/btf/vmlinux"
	noBTF := func(err error) error {
		return &UnavailableError{
			Reason: "the kernel exposes no usable BTF (" + path + ", CONFIG_DEBUG_INFO_BTF=y), so no syscall is observed",
			Err:    err,
		}
	}
	f, err := os.Open(path)
	if err != nil {
		return kernelLayout{}, noBTF(err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return kernelLayout{}, noBTF(err)
	}
	// mmap: reading the 5 MB through read(2) costs ~5 ms, mapping it ~0.1 ms.
	raw, err := unix.Mmap(int(f.Fd()), 0, int(fi.Size()), unix.PROT_READ, unix.MAP_PRIVATE)
	if err == nil {
		defer unix.Munmap(raw)
	} else if raw, err = io.ReadAll(f); err != nil {
		return kernelLayout{}, noBTF(err)
	}
	layout, err := layoutFromBTF(raw, runtime.GOARCH)
	if err != nil {
		return kernelLayout{}, noBTF(err)
	}
	return layout, nil
}

// loadWithMemlock loads the collection. Kernels before 5.11 charge BPF
// memory to RLIMIT_MEMLOCK: on EPERM the limit is lifted once and the load
// retried.
func loadWithMemlock(spec *cebpf.CollectionSpec, objs *boundaryObjects) error {
	err := spec.LoadAndAssign(objs, nil)
	if !errors.Is(err, unix.EPERM) {
		return err
	}
	var lim unix.Rlimit
	if unix.Getrlimit(unix.RLIMIT_MEMLOCK, &lim) != nil || lim.Cur == unix.RLIM_INFINITY {
		return err
	}
	inf := unix.Rlimit{Cur: unix.RLIM_INFINITY, Max: unix.RLIM_INFINITY}
	if unix.Setrlimit(unix.RLIMIT_MEMLOCK, &inf) != nil {
		return err
	}
	return spec.LoadAndAssign(objs, nil)
}

func (t *Tracer) start() error {
	for nr, act := range t.names.actions() {
		if err := t.objs.SyscallActions.Put(nr, act); err != nil {
			return fmt.Errorf("open boundary tracer: load the syscall table: %w", err)
		}
	}
	progs := []struct {
		hook string
		prog *cebpf.Program
	}{
		{"sched_process_fork", t.objs.ProcessFork},
		{"sched_process_exec", t.objs.ProcessExec},
		{"sched_process_exit", t.objs.ProcessExit},
		{"sys_enter", t.objs.SysEnter},
	}
	for _, p := range progs {
		l, err := link.AttachRawTracepoint(link.RawTracepointOptions{Name: p.hook, Program: p.prog})
		if err != nil {
			return unavailable(fmt.Errorf("attach to %s: %w", p.hook, err))
		}
		t.links = append(t.links, l)
	}
	if t.opts.Stats {
		c, err := cebpf.EnableStats(uint32(unix.BPF_STATS_RUN_TIME))
		if err != nil {
			return fmt.Errorf("open boundary tracer: enable BPF statistics: %w", err)
		}
		t.stats = c
	}
	bits, err := unix.Mmap(t.objs.TrackedPids.FD(), 0, int(t.objs.TrackedPids.MaxEntries())*8,
		unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return fmt.Errorf("open boundary tracer: map tracked_pids: %w", err)
	}
	t.pidBits = bits
	ring, err := ringbuf.NewReader(t.objs.Events)
	if err != nil {
		return fmt.Errorf("open boundary tracer: read the ring buffer: %w", err)
	}
	t.ring = ring
	go t.readEvents()
	return nil
}

// Close detaches the programs, stops the event reader and frees the maps.
// Counts and events are gone afterwards.
func (t *Tracer) Close() error {
	t.closeMu.Lock()
	defer t.closeMu.Unlock()
	if t.closed {
		return nil
	}
	t.closed = true
	var errs []error
	for _, l := range t.links {
		errs = append(errs, l.Close())
	}
	t.links = nil
	t.trackMu.Lock()
	if t.pidBits != nil {
		errs = append(errs, unix.Munmap(t.pidBits))
		t.pidBits = nil
	}
	t.trackMu.Unlock()
	if t.ring != nil {
		errs = append(errs, t.ring.Close())
		t.mu.Lock()
		for !t.readerDone {
			t.cond.Wait()
		}
		t.mu.Unlock()
	}
	if t.stats != nil {
		errs = append(errs, t.stats.Close())
		t.stats = nil
	}
	errs = append(errs, t.objs.Close())
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("close boundary tracer: %w", err)
	}
	return nil
}

// Track makes process pid and every process it forks from now on members of
// session. With countFromExec = 0 the process counts from now on. With n > 0
// nothing is counted for a process until its lineage has performed its n-th
// successful exec since Track (a fork inherits the execs still due); the
// execve or execveat that performs it is counted, so the counts equal
// `strace -f -c` of the command exec'd. Threads count with their process.
//
// An exec that pid entered (execve) before Track belongs to before Track,
// even if it completes after: it neither counts toward n nor is counted or
// reported. (os/exec's Start returns once the child's exec has closed its
// close-on-exec descriptors, before the kernel reports the exec: a Track
// right after Start must not take that exec for one of n.)
//
// Preconditions: pid is a process (thread group) id in the initial PID
// namespace, and it has not exec'd past the point it should count from
// (track it before it execs). Returns an error wrapping ErrNoProcess when
// the process is gone or exiting.
func (t *Tracer) Track(pid int, session uint32, countFromExec int) error {
	if pid <= 0 || pid >= maxPID {
		return fmt.Errorf("track pid %d: not a process id", pid)
	}
	if countFromExec < 0 {
		return fmt.Errorf("track pid %d: countFromExec must be 0 or more, not %d", pid, countFromExec)
	}
	t.trackMu.Lock()
	defer t.trackMu.Unlock()
	if t.pidBits == nil {
		return fmt.Errorf("track pid %d: the tracer is closed", pid)
	}

	ss, created, err := t.openSession(session)
	if err != nil {
		return err
	}
	key := uint32(pid)
	var old boundaryTaskState
	fail := func(err error) error {
		if created { // leave no session behind that the caller does not know of
			t.dropSession(ss)
		}
		return err
	}
	if err := t.objs.Tasks.Lookup(key, &old); err == nil && old.Session != ss.key {
		t.mu.Lock()
		owner := t.byKey[old.Session]
		t.mu.Unlock()
		if owner != nil {
			return fail(fmt.Errorf("track pid %d: it belongs to session %d already", pid, owner.id))
		}
		// A forgotten session's process forked during its Untrack:
		// nothing reads its key any more.
	}
	st := boundaryTaskState{Session: ss.key, ExecsLeft: uint32(countFromExec), ExecNr: noExec}
	if err := t.objs.Tasks.Put(key, &st); err != nil {
		if errors.Is(err, unix.E2BIG) {
			return fail(fmt.Errorf("track pid %d: %d processes are tracked already (Options.MaxProcesses)", pid, t.opts.MaxProcesses))
		}
		return fail(fmt.Errorf("track pid %d: %w", pid, err))
	}
	t.setTracked(key, true)
	// The exit hook removes the entry of a process that exits from now on;
	// one that exited before the entry existed must be removed here.
	if err := liveProcess(pid); err != nil {
		t.setTracked(key, false)
		_ = t.objs.Tasks.Delete(key)
		return fail(err)
	}
	return nil
}

// openSession registers session in the kernel under a new key, or reopens
// it after Untrack. created reports whether the session did not exist
// before. Preconditions: trackMu is held.
func (t *Tracer) openSession(id uint32) (ss *session, created bool, err error) {
	full := func(err error) error {
		if errors.Is(err, unix.E2BIG) {
			return fmt.Errorf("track session %d: %d sessions are registered already (Options.MaxSessions); Forget ended ones", id, t.opts.MaxSessions)
		}
		return fmt.Errorf("track session %d: %w", id, err)
	}
	t.mu.Lock()
	ss = t.sessions[id]
	t.mu.Unlock()
	if ss != nil {
		var s boundarySession
		if err := t.objs.Sessions.Lookup(ss.key, &s); err != nil {
			return nil, false, full(err)
		}
		if s.Closed != 0 {
			s.Closed = 0
			if err := t.objs.Sessions.Update(ss.key, &s, cebpf.UpdateExist); err != nil {
				return nil, false, full(err)
			}
		}
		return ss, false, nil
	}
	ss = &session{id: id, key: t.newKey()}
	// The kernel updates the marks in place: create them once, never rewrite.
	if err := t.objs.SessionMarks.Update(ss.key, &boundarySessionMarks{}, cebpf.UpdateNoExist); err != nil {
		return nil, false, full(err)
	}
	if err := t.objs.Sessions.Update(ss.key, &boundarySession{}, cebpf.UpdateNoExist); err != nil {
		_ = t.objs.SessionMarks.Delete(ss.key)
		return nil, false, full(err)
	}
	t.mu.Lock()
	t.sessions[id] = ss
	t.byKey[ss.key] = ss
	t.mu.Unlock()
	return ss, true, nil
}

// newKey returns a kernel key no session has had since Open (until 2^32
// sessions wrap it; then one no registered session holds).
// Preconditions: trackMu is held.
func (t *Tracer) newKey() uint32 {
	for {
		t.lastKey++
		t.mu.Lock()
		taken := t.lastKey == 0 || t.byKey[t.lastKey] != nil
		t.mu.Unlock()
		if !taken {
			return t.lastKey
		}
	}
}

// dropSession removes a session that no process joined from the kernel and
// from the tables. Preconditions: trackMu is held.
func (t *Tracer) dropSession(ss *session) {
	_ = t.objs.Sessions.Delete(ss.key)
	_ = t.objs.SessionMarks.Delete(ss.key)
	t.mu.Lock()
	delete(t.sessions, ss.id)
	delete(t.byKey, ss.key)
	t.mu.Unlock()
}

// lookup returns the registered session with this id, or nil.
func (t *Tracer) lookup(id uint32) *session {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.sessions[id]
}

// liveProcess returns nil if pid is a thread group leader that is not
// exiting. PF_EXITING is set before the exit tracepoint runs, so a process
// found without it will still pass through the exit hook.
func liveProcess(pid int) error {
	gone := fmt.Errorf("process %d exited before tracking started, nothing observed: %w", pid, ErrNoProcess)
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if errors.Is(err, os.ErrNotExist) || errors.Is(err, unix.ESRCH) {
		return gone
	}
	if err != nil {
		return fmt.Errorf("track pid %d: %w", pid, err)
	}
	// Fields after the command name, which may hold spaces and parentheses:
	// state ppid pgrp session tty_nr tpgid flags ...
	i := strings.LastIndexByte(string(stat), ')')
	f := strings.Fields(string(stat[i+1:]))
	if i < 0 || len(f) < 7 {
		return fmt.Errorf("track pid %d: unreadable /proc/%d/stat", pid, pid)
	}
	var flags uint64
	if _, err := fmt.Sscan(f[6], &flags); err != nil {
		return fmt.Errorf("track pid %d: unreadable /proc/%d/stat", pid, pid)
	}
	const pfExiting = 0x4
	if f[0] == "Z" || f[0] == "X" || flags&pfExiting != 0 {
		return gone
	}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return gone
	}
	for line := range strings.Lines(string(status)) {
		if tgid, ok := strings.CutPrefix(line, "Tgid:"); ok && strings.TrimSpace(tgid) != fmt.Sprint(pid) {
			return fmt.Errorf("track pid %d: it is a thread of process %s, track the process", pid, strings.TrimSpace(tgid))
		}
	}
	return nil
}

// Untrack stops following session: its processes are removed from the
// process map and its forks are no longer added. Its counts and events stay
// readable until Forget. A process forked at the very moment of Untrack may
// stay in the map, and counted, until it exits.
func (t *Tracer) Untrack(session uint32) error {
	t.trackMu.Lock()
	defer t.trackMu.Unlock()
	if ss := t.lookup(session); ss != nil {
		return t.untrack(ss)
	}
	return nil
}

func (t *Tracer) untrack(ss *session) error {
	var s boundarySession
	if err := t.objs.Sessions.Lookup(ss.key, &s); err != nil {
		return fmt.Errorf("untrack session %d: %w", ss.id, err)
	}
	if s.Closed == 0 {
		s.Closed = 1
		if err := t.objs.Sessions.Update(ss.key, &s, cebpf.UpdateExist); err != nil {
			return fmt.Errorf("untrack session %d: %w", ss.id, err)
		}
	}
	var (
		pid   uint32
		st    boundaryTaskState
		pids  []uint32
		iter  = t.objs.Tasks.Iterate()
		stale = func(err error) error { return fmt.Errorf("untrack session %d: %w", ss.id, err) }
	)
	for iter.Next(&pid, &st) {
		if st.Session == ss.key {
			pids = append(pids, pid)
		}
	}
	if err := iter.Err(); err != nil {
		return stale(err)
	}
	for _, p := range pids {
		if t.pidBits != nil {
			t.setTracked(p, false)
		}
		if err := t.objs.Tasks.Delete(p); err != nil && !errors.Is(err, cebpf.ErrKeyNotExist) {
			return stale(err)
		}
	}
	return nil
}

// maxPID is PID_MAX_LIMIT on 64-bit Linux: tracked_pids has a bit for
// every pid below it.
const maxPID = 1 << 22

// setTracked sets or clears pid's bit in tracked_pids, atomically: the
// kernel changes other bits of the same word at fork and exit.
// Preconditions: trackMu is held and the tracer is open.
func (t *Tracer) setTracked(pid uint32, on bool) {
	word := (*uint64)(unsafe.Pointer(&t.pidBits[pid/64*8]))
	bit := uint64(1) << (pid % 64)
	if on {
		atomic.OrUint64(word, bit)
	} else {
		atomic.AndUint64(word, ^bit)
	}
}

// Forget untracks session and releases everything it holds: counters,
// events and its map entries. The session id may be reused afterwards.
func (t *Tracer) Forget(session uint32) error {
	t.trackMu.Lock()
	defer t.trackMu.Unlock()
	ss := t.lookup(session)
	if ss == nil {
		return nil
	}
	if err := t.untrack(ss); err != nil {
		return err
	}
	fail := func(err error) error { return fmt.Errorf("forget session %d: %w", session, err) }
	var m boundarySessionMarks
	if err := t.objs.SessionMarks.Lookup(ss.key, &m); err == nil {
		for _, nr := range touched(&m) {
			err := t.objs.Counts.Delete(boundaryCountKey{Session: ss.key, Nr: nr})
			if err != nil && !errors.Is(err, cebpf.ErrKeyNotExist) {
				return fail(err)
			}
		}
	} else if !errors.Is(err, cebpf.ErrKeyNotExist) {
		return fail(err)
	}
	for _, mp := range []*cebpf.Map{t.objs.Sessions, t.objs.SessionMarks} {
		if err := mp.Delete(ss.key); err != nil && !errors.Is(err, cebpf.ErrKeyNotExist) {
			return fail(err)
		}
	}
	var (
		dest  boundaryDestKey
		seen  uint8
		dests []boundaryDestKey
		iter  = t.objs.SentTo.Iterate()
	)
	for iter.Next(&dest, &seen) {
		if dest.Session == ss.key {
			dests = append(dests, dest)
		}
	}
	if err := iter.Err(); err != nil {
		return fail(err)
	}
	for _, d := range dests {
		if err := t.objs.SentTo.Delete(d); err != nil && !errors.Is(err, cebpf.ErrKeyNotExist) {
			return fail(err)
		}
	}
	t.mu.Lock()
	delete(t.sessions, ss.id)
	delete(t.byKey, ss.key)
	t.mu.Unlock()
	return nil
}

// touched lists the syscall numbers a session has a counter for.
func touched(m *boundarySessionMarks) []uint32 {
	var nrs []uint32
	for w, word := range m.Touched {
		for word != 0 {
			b := bits.TrailingZeros64(word)
			nrs = append(nrs, uint32(w*64+b))
			word &^= 1 << b
		}
	}
	return nrs
}

// Counts returns session's syscall counts so far, summed over CPUs.
func (t *Tracer) Counts(session uint32) (*Counts, error) {
	ss := t.lookup(session)
	var m boundarySessionMarks
	err := cebpf.ErrKeyNotExist
	if ss != nil {
		err = t.objs.SessionMarks.Lookup(ss.key, &m)
	}
	if err != nil {
		if errors.Is(err, cebpf.ErrKeyNotExist) {
			return nil, fmt.Errorf("counts of session %d: the session is not tracked", session)
		}
		return nil, fmt.Errorf("counts of session %d: %w", session, err)
	}
	c := &Counts{Syscalls: map[string]uint64{}, Categories: map[Category]uint64{}, DroppedEvents: m.Drops}
	var perCPU []uint64
	for _, nr := range touched(&m) {
		err := t.objs.Counts.Lookup(boundaryCountKey{Session: ss.key, Nr: nr}, &perCPU)
		if errors.Is(err, cebpf.ErrKeyNotExist) {
			continue // the insert that set the bit failed (map full): see Losses
		}
		if err != nil {
			return nil, fmt.Errorf("counts of session %d: %w", session, err)
		}
		var n uint64
		for _, v := range perCPU {
			n += v
		}
		if n == 0 {
			continue
		}
		name := t.names.name(nr)
		c.Syscalls[name] += n
		c.Total += n
		if cat := CategoryOf(name); cat != "" {
			c.Categories[cat] += n
		}
	}
	t.mu.Lock()
	c.DroppedEvents += ss.dropped
	t.mu.Unlock()
	return c, nil
}

// Events returns session's notable crossings so far, in the order the
// kernel recorded them per CPU. Every event recorded before the call is
// included: the ring buffer is drained first.
func (t *Tracer) Events(session uint32) []Event {
	t.flush()
	t.mu.Lock()
	defer t.mu.Unlock()
	se := t.sessions[session]
	if se == nil {
		return nil
	}
	return append([]Event(nil), se.events...)
}

// flush waits until the reader has consumed every record submitted so far.
func (t *Tracer) flush() {
	t.flushMu.Lock()
	defer t.flushMu.Unlock()
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.readerDone {
		return
	}
	start := t.flushes
	if err := t.ring.Flush(); err != nil {
		return
	}
	for t.flushes == start && !t.readerDone {
		t.cond.Wait()
	}
}

func (t *Tracer) readEvents() {
	var rec ringbuf.Record
	for {
		err := t.ring.ReadInto(&rec)
		switch {
		case err == nil:
			t.store(rec.RawSample)
		case errors.Is(err, ringbuf.ErrFlushed):
			t.mu.Lock()
			t.flushes++
			t.cond.Broadcast()
			t.mu.Unlock()
		default:
			t.mu.Lock()
			if !errors.Is(err, os.ErrClosed) && !errors.Is(err, ringbuf.ErrClosed) {
				t.readerErr = err
			}
			t.readerDone = true
			t.cond.Broadcast()
			t.mu.Unlock()
			return
		}
	}
}

func (t *Tracer) store(raw []byte) {
	session, ev, err := decodeEvent(raw)
	t.mu.Lock()
	defer t.mu.Unlock()
	if err != nil {
		t.capDrops++ // a record this side cannot read is lost, and counted
		return
	}
	if ev.Kind == "write_outside" && plumbing(ev.Detail) {
		return
	}
	se := t.byKey[session]
	if se == nil {
		return // forgotten: a straggler of a session that ended
	}
	if len(se.events) >= t.opts.MaxEventsPerSession {
		se.dropped++
		t.capDrops++
		return
	}
	se.events = append(se.events, ev)
}

// Drops returns how many events were lost since Open, over all sessions:
// dropped in the kernel because the ring buffer was full, or here because a
// session had Options.MaxEventsPerSession already.
func (t *Tracer) Drops() (uint64, error) {
	l, err := t.Losses()
	if err != nil {
		return 0, err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return l.Events + t.capDrops, nil
}

// Losses returns what the kernel side could not record since Open.
func (t *Tracer) Losses() (Losses, error) {
	var l Losses
	for i, dst := range []*uint64{&l.Events, &l.Counts, &l.Forks} {
		var perCPU []uint64
		if err := t.objs.Losses.Lookup(uint32(i), &perCPU); err != nil {
			return Losses{}, fmt.Errorf("read losses: %w", err)
		}
		for _, v := range perCPU {
			*dst += v
		}
	}
	t.mu.Lock()
	err := t.readerErr
	t.mu.Unlock()
	if err != nil {
		return l, fmt.Errorf("read events: %w", err)
	}
	return l, nil
}

// Stats returns each program's run count and total run time. They stay zero
// unless the tracer was opened with Options.Stats (or BPF statistics are
// enabled system-wide, kernel.bpf_stats_enabled=1).
func (t *Tracer) Stats() ([]ProgramStats, error) {
	progs := []struct {
		name string
		prog *cebpf.Program
	}{
		{boundaryProgSysEnter, t.objs.SysEnter},
		{boundaryProgProcessFork, t.objs.ProcessFork},
		{boundaryProgProcessExec, t.objs.ProcessExec},
		{boundaryProgProcessExit, t.objs.ProcessExit},
	}
	out := make([]ProgramStats, 0, len(progs))
	for _, p := range progs {
		s, err := p.prog.Stats()
		if err != nil {
			return nil, fmt.Errorf("stats of %s: %w", p.name, err)
		}
		out = append(out, ProgramStats{Name: p.name, RunCount: s.RunCount, RunTime: s.Runtime})
	}
	return out, nil
}

// MapBytes returns the kernel memory the tracer's maps are charged for.
func (t *Tracer) MapBytes() (uint64, error) {
	maps := []*cebpf.Map{t.objs.TrackedPids, t.objs.Tasks, t.objs.Sessions, t.objs.SessionMarks, t.objs.Counts, t.objs.SyscallActions,
		t.objs.SentTo, t.objs.Losses, t.objs.Events}
	var total uint64
	for _, m := range maps {
		info, err := m.Info()
		if err != nil {
			return 0, fmt.Errorf("map memory: %w", err)
		}
		n, ok := info.Memlock()
		if !ok {
			return 0, fmt.Errorf("map memory: the kernel does not report it for %s", info.Name)
		}
		total += n
	}
	return total, nil
}

// SetWorkspace makes session report every open for writing (O_WRONLY,
// O_RDWR, O_CREAT or O_TRUNC; creat) of an absolute path outside dir as a
// "write_outside" event. Relative paths are not checked (they resolve
// against a working directory the hook does not know), nor are symlinks;
// paths are compared as written (".." is not resolved). dir must be
// absolute and at most 127 bytes. Writes to /dev/null, terminals and /dev/fd/* are
// not reported.
func (t *Tracer) SetWorkspace(session uint32, dir string) error {
	if !filepath.IsAbs(dir) {
		return fmt.Errorf("workspace of session %d: %q is not an absolute path", session, dir)
	}
	prefix := filepath.Clean(dir)
	if prefix != "/" {
		prefix += "/"
	}
	var s boundarySession
	var raw, mask [len(s.Prefix) * 8]byte
	if len(prefix) > len(raw) {
		return fmt.Errorf("workspace of session %d: %q is longer than %d bytes", session, dir, len(raw)-1)
	}
	t.trackMu.Lock()
	defer t.trackMu.Unlock()
	ss, created, err := t.openSession(session)
	if err != nil {
		return err
	}
	fail := func(err error) error {
		if created {
			t.dropSession(ss)
		}
		return fmt.Errorf("workspace of session %d: %w", session, err)
	}
	if err := t.objs.Sessions.Lookup(ss.key, &s); err != nil {
		return fail(err)
	}
	copy(raw[:], prefix)
	for i := range len(prefix) {
		mask[i] = 0xff
	}
	for i := range s.Prefix {
		s.Prefix[i] = binary.LittleEndian.Uint64(raw[i*8:])
		s.Mask[i] = binary.LittleEndian.Uint64(mask[i*8:])
	}
	s.PrefixLen = uint32(len(prefix))
	if err := t.objs.Sessions.Update(ss.key, &s, cebpf.UpdateExist); err != nil {
		return fail(err)
	}
	return nil
}
