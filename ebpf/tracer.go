//go:build linux && (amd64 || arm64)

package ebpf

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
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

// Tracer is the loaded boundary tracer. Its methods are safe for concurrent
// use. It owns the BPF maps, the programs' links while they are attached,
// the mapped tracked_pids and generation arrays, each session's counters
// and one goroutine (the event reader); Close releases them all.
type Tracer struct {
	objs  boundaryObjects
	stats io.Closer // BPF run-time statistics, nil unless Options.Stats
	ring  *ringbuf.Reader
	names syscallTable
	opts  Options

	// counterSpec is the inner map of counters: one per session.
	counterSpec *cebpf.MapSpec
	cpus        int // possible CPUs: the per-CPU values of a counter

	closeMu sync.Mutex
	closed  bool

	// trackMu serializes the changes of tracking state (Track, Untrack,
	// Forget, SetWorkspace: read-modify-write of map entries, attaching
	// and detaching); Counts and MapBytes read under it.
	trackMu sync.RWMutex
	flushMu sync.Mutex // one ring buffer flush at a time

	// Guarded by trackMu:
	links     []link.Link // the attached programs; nil while no session is followed
	following int         // sessions whose processes are followed (tracked, not untracked)
	lastKey   uint32      // the last kernel key handed out
	slots     []slot      // counters, by slot
	// pidBits and genWord are tracked_pids and generation mapped into this
	// process: user space changes them with the same atomic operations as
	// the kernel. nil once closed.
	pidBits []byte
	genWord []byte

	attached atomic.Bool   // links != nil, for readers that do not take trackMu
	attaches atomic.Uint64 // times the programs were attached since Open
	releases sync.WaitGroup

	mu         sync.Mutex
	cond       *sync.Cond // signalled when flushes or readerDone change
	flushes    uint64     // flushes the reader has completed
	readerDone bool
	readerErr  error
	sessions   map[uint32]*session // by the caller's session id; changed under trackMu and mu
	byKey      map[uint32]*session // by kernel key; changed under trackMu and mu
	capDrops   uint64              // events lost on this side (over MaxEventsPerSession, unreadable)
}

// slot is one entry of counters. Installing or removing a map there makes
// the kernel wait for an RCU grace period (milliseconds), so a slot keeps
// its map when its session is forgotten, for the next session, and only
// idle maps beyond keepIdleCounters are removed, in the background.
type slot struct {
	counts    *cebpf.Map // installed at the slot; nil when none
	inUse     bool       // a registered session holds it
	releasing bool       // its map is being removed
}

// keepIdleCounters is how many counters maps no session holds are kept
// for reuse (4 KiB per CPU each).
const keepIdleCounters = 16

// session is a registered session. The kernel knows it by key, not by the
// caller's id: a key is never reused while the tracer is open, so whatever
// a forgotten session leaves in flight (an event still in the ring buffer,
// a process forked during Untrack, a syscall between lookup and count)
// lands on a dead key and is dropped, and never reaches a later session
// that reuses the id.
type session struct {
	id  uint32
	key uint32
	// Guarded by trackMu:
	slot      uint32     // index in counters and slot_owner
	counts    *cebpf.Map // its counters (the per-CPU array in counters[slot]), owned by the slot
	following bool       // tracked and not untracked since
	// Guarded by mu:
	events  []Event
	dropped uint64
}

// Open loads the eBPF programs and starts reading events. The programs are
// attached to sys_enter and to the process fork, exec and exit tracepoints
// only while at least one session is followed (from its first Track to its
// Untrack or Forget): with none, they cost the machine's processes nothing.
// It needs root (or CAP_BPF and CAP_PERFMON) and a kernel with BTF. When
// tracing cannot start, the error is an *UnavailableError saying why; Open
// attaches once to check that the hooks exist.
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
	spec.Maps[boundaryMapCounters].MaxEntries = uint32(opts.MaxSessions)
	spec.Maps[boundaryMapSlotOwner].MaxEntries = uint32(opts.MaxSessions)
	spec.Maps[boundaryMapTasks].MaxEntries = uint32(opts.MaxProcesses)
	spec.Maps[boundaryMapEvents].MaxEntries = uint32(opts.EventBufferBytes)
	cpus, err := cebpf.PossibleCPU()
	if err != nil {
		return nil, fmt.Errorf("open boundary tracer: count the CPUs: %w", err)
	}

	t := &Tracer{names: syscallTable(names), opts: opts, cpus: cpus, counterSpec: spec.Maps[boundaryMapCounters].InnerMap.Copy(),
		slots: make([]slot, opts.MaxSessions), sessions: map[uint32]*session{}, byKey: map[uint32]*session{}}
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
	gen, err := unix.Mmap(t.objs.Generation.FD(), 0, os.Getpagesize(), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return fmt.Errorf("open boundary tracer: map generation: %w", err)
	}
	t.genWord = gen
	ring, err := ringbuf.NewReader(t.objs.Events)
	if err != nil {
		return fmt.Errorf("open boundary tracer: read the ring buffer: %w", err)
	}
	t.ring = ring
	go t.readEvents()
	// Attach once, so that a kernel without these hooks fails here and not
	// at the first session.
	t.trackMu.Lock()
	defer t.trackMu.Unlock()
	if err := t.attach(); err != nil {
		return err
	}
	return t.detach()
}

// hooks are the raw tracepoints and their programs, in attach order: the
// exit hook first, so that no process is added that could exit unseen.
func (t *Tracer) hooks() []struct {
	name string
	prog *cebpf.Program
} {
	return []struct {
		name string
		prog *cebpf.Program
	}{
		{"sched_process_exit", t.objs.ProcessExit},
		{"sched_process_fork", t.objs.ProcessFork},
		{"sched_process_exec", t.objs.ProcessExec},
		{"sys_enter", t.objs.SysEnter},
	}
}

// attach attaches the programs. What the process map holds from an earlier
// attachment is stale (no exit was seen while detached) and is removed
// first. Preconditions: trackMu is held and the programs are detached.
func (t *Tracer) attach() error {
	if err := t.clearTasks(); err != nil {
		return fmt.Errorf("attach the boundary tracer: %w", err)
	}
	t.bumpGeneration()
	for _, h := range t.hooks() {
		l, err := link.AttachRawTracepoint(link.RawTracepointOptions{Name: h.name, Program: h.prog})
		if err != nil {
			for _, l := range t.links {
				l.Close()
			}
			t.links = nil
			return unavailable(fmt.Errorf("attach to %s: %w", h.name, err))
		}
		t.links = append(t.links, l)
	}
	t.attached.Store(true)
	t.attaches.Add(1)
	return nil
}

// detach detaches the programs: syscalls, forks, execs and exits no longer
// run them (and once no other program is attached to sys_enter, the kernel
// takes its syscall fast path again). Preconditions: trackMu is held and
// the programs are attached.
func (t *Tracer) detach() error {
	var errs []error
	for _, l := range t.links {
		errs = append(errs, l.Close())
	}
	t.links = nil
	t.attached.Store(false)
	errs = append(errs, t.clearTasks())
	t.bumpGeneration()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("detach the boundary tracer: %w", err)
	}
	return nil
}

// syncHooks attaches the programs when a session is followed and detaches
// them when none is. Preconditions: trackMu is held and the tracer is open.
func (t *Tracer) syncHooks() error {
	switch {
	case t.following > 0 && t.links == nil:
		return t.attach()
	case t.following == 0 && t.links != nil:
		return t.detach()
	}
	return nil
}

// setFollowing marks whether ss's processes are followed, and keeps the
// count of followed sessions. Preconditions: trackMu is held.
func (t *Tracer) setFollowing(ss *session, on bool) {
	if ss.following == on {
		return
	}
	ss.following = on
	if on {
		t.following++
	} else {
		t.following--
	}
}

// clearTasks empties the process map and tracked_pids. Preconditions:
// trackMu is held and the tracer is open.
func (t *Tracer) clearTasks() error {
	var (
		pid  uint32
		st   boundaryTaskState
		pids []uint32
		iter = t.objs.Tasks.Iterate()
	)
	for iter.Next(&pid, &st) {
		pids = append(pids, pid)
	}
	if err := iter.Err(); err != nil {
		return fmt.Errorf("clear the process map: %w", err)
	}
	for _, p := range pids {
		t.setTracked(p, false)
		if err := t.objs.Tasks.Delete(p); err != nil && !errors.Is(err, cebpf.ErrKeyNotExist) {
			return fmt.Errorf("clear the process map: %w", err)
		}
	}
	return nil
}

// bumpGeneration invalidates what every CPU's thread_cache holds.
// Preconditions: trackMu is held and the tracer is open.
func (t *Tracer) bumpGeneration() {
	atomic.AddUint64((*uint64)(unsafe.Pointer(&t.genWord[0])), 1)
}

// Attached reports whether the programs are attached to their hooks now:
// whether at least one session is followed.
func (t *Tracer) Attached() bool { return t.attached.Load() }

// Attaches returns how many times the programs were attached since Open
// (the first session after a time without any attaches them).
func (t *Tracer) Attaches() uint64 { return t.attaches.Load() }

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
	t.trackMu.Lock()
	for _, l := range t.links {
		errs = append(errs, l.Close())
	}
	t.links = nil
	t.attached.Store(false)
	for _, m := range [][]byte{t.pidBits, t.genWord} {
		if m != nil {
			errs = append(errs, unix.Munmap(m))
		}
	}
	t.pidBits, t.genWord = nil, nil
	t.trackMu.Unlock()
	t.releases.Wait() // each takes trackMu when done
	for _, sl := range t.slots {
		if sl.counts != nil {
			errs = append(errs, sl.counts.Close())
		}
	}
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
	wasFollowing := ss.following
	fail := func(err error) error {
		// Leave nothing behind that the caller does not know of.
		t.setFollowing(ss, wasFollowing)
		if created {
			t.dropSession(ss)
		}
		return errors.Join(err, t.syncHooks())
	}
	// Attached before the process is added: it may fork or exec as soon
	// as its entry exists.
	t.setFollowing(ss, true)
	if err := t.syncHooks(); err != nil {
		return fail(fmt.Errorf("track pid %d: %w", pid, err))
	}
	key := uint32(pid)
	var old boundaryTaskState
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
	st := boundaryTaskState{Session: ss.key, Slot: ss.slot, ExecsLeft: uint32(countFromExec), ExecNr: noExec}
	if err := t.objs.Tasks.Put(key, &st); err != nil {
		if errors.Is(err, unix.E2BIG) {
			return fail(fmt.Errorf("track pid %d: %d processes are tracked already (Options.MaxProcesses)", pid, t.opts.MaxProcesses))
		}
		return fail(fmt.Errorf("track pid %d: %w", pid, err))
	}
	t.setTracked(key, true)
	t.bumpGeneration() // after the bit: see sys_enter
	// The exit hook removes the entry of a process that exits from now on;
	// one that exited before the entry existed must be removed here.
	if err := liveProcess(pid); err != nil {
		t.setTracked(key, false)
		_ = t.objs.Tasks.Delete(key)
		return fail(err)
	}
	return nil
}

// openSession registers session in the kernel under a new key with
// counters of its own, or reopens it after Untrack. created reports whether
// the session did not exist before. Preconditions: trackMu is held.
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
	n, ok := t.freeSlot()
	if !ok {
		return nil, false, full(unix.E2BIG)
	}
	sl := &t.slots[n]
	ss = &session{id: id, key: t.newKey(), slot: n}
	if sl.counts == nil {
		m, err := cebpf.NewMap(t.counterSpec)
		if err != nil {
			return nil, false, full(err)
		}
		if err := t.objs.Counters.Put(n, m); err != nil {
			m.Close()
			return nil, false, full(err)
		}
		sl.counts = m
	} else if err := t.zeroCounters(sl.counts); err != nil {
		return nil, false, full(err)
	}
	ss.counts = sl.counts
	// The counters first, then the owner: see count() in bpf/boundary.c.
	if err := t.objs.SlotOwner.Put(n, ss.key); err != nil {
		return nil, false, full(err)
	}
	if err := t.objs.Sessions.Update(ss.key, &boundarySession{}, cebpf.UpdateNoExist); err != nil {
		_ = t.objs.SlotOwner.Put(n, uint32(0))
		return nil, false, full(err)
	}
	sl.inUse = true
	t.mu.Lock()
	t.sessions[id] = ss
	t.byKey[ss.key] = ss
	t.mu.Unlock()
	return ss, true, nil
}

// freeSlot returns a counters slot no session holds: the lowest one with a
// map installed, else the lowest without. Preconditions: trackMu is held.
func (t *Tracer) freeSlot() (uint32, bool) {
	bare := -1
	for i, sl := range t.slots {
		switch {
		case sl.inUse || sl.releasing:
		case sl.counts != nil:
			return uint32(i), true
		case bare < 0:
			bare = i
		}
	}
	return uint32(bare), bare >= 0
}

// zeroCounters zeroes a slot's counters for its next session.
// Preconditions: trackMu is held and no session owns the slot.
func (t *Tracer) zeroCounters(m *cebpf.Map) error {
	keys := make([]uint32, nrCounted+1)
	for i := range keys {
		keys[i] = uint32(i)
	}
	if _, err := m.BatchUpdate(keys, make([]uint64, len(keys)*t.cpus), nil); err != nil {
		return fmt.Errorf("zero the counters: %w", err)
	}
	return nil
}

// releaseIdle removes, in the background, the counters maps that no
// session holds beyond keepIdleCounters. Preconditions: trackMu is held.
func (t *Tracer) releaseIdle() {
	idle := 0
	for i := range t.slots {
		sl := &t.slots[i]
		if sl.inUse || sl.releasing || sl.counts == nil {
			continue
		}
		if idle++; idle <= keepIdleCounters {
			continue
		}
		sl.releasing = true
		t.releases.Add(1)
		go func(n uint32, m *cebpf.Map) {
			defer t.releases.Done()
			_ = t.objs.Counters.Delete(n) // waits for a grace period
			m.Close()
			t.trackMu.Lock()
			t.slots[n] = slot{}
			t.trackMu.Unlock()
		}(uint32(i), sl.counts)
	}
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

// dropSession removes a session from the kernel and from the tables and
// frees its counters slot. Preconditions: trackMu is held and the session
// is not followed.
func (t *Tracer) dropSession(ss *session) error {
	var errs []error
	// The owner goes first: from now on nothing counts in the slot.
	errs = append(errs, t.objs.SlotOwner.Put(ss.slot, uint32(0)))
	if err := t.objs.Sessions.Delete(ss.key); err != nil && !errors.Is(err, cebpf.ErrKeyNotExist) {
		errs = append(errs, err)
	}
	t.bumpGeneration()
	t.slots[ss.slot].inUse = false
	t.releaseIdle()
	t.mu.Lock()
	delete(t.sessions, ss.id)
	delete(t.byKey, ss.key)
	t.mu.Unlock()
	return errors.Join(errs...)
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
// stay in the map, and counted, until it exits or no session is followed
// any more. When it was the last followed session, the programs are
// detached.
func (t *Tracer) Untrack(session uint32) error {
	t.trackMu.Lock()
	defer t.trackMu.Unlock()
	if ss := t.lookup(session); ss != nil && t.pidBits != nil {
		return t.untrack(ss)
	}
	return nil
}

// untrack: see Untrack. Preconditions: trackMu is held and the tracer is open.
func (t *Tracer) untrack(ss *session) error {
	stale := func(err error) error { return fmt.Errorf("untrack session %d: %w", ss.id, err) }
	var s boundarySession
	if err := t.objs.Sessions.Lookup(ss.key, &s); err != nil {
		return stale(err)
	}
	if s.Closed == 0 {
		s.Closed = 1
		if err := t.objs.Sessions.Update(ss.key, &s, cebpf.UpdateExist); err != nil {
			return stale(err)
		}
	}
	t.setFollowing(ss, false)
	var (
		pid  uint32
		st   boundaryTaskState
		pids []uint32
		iter = t.objs.Tasks.Iterate()
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
		t.setTracked(p, false)
		if err := t.objs.Tasks.Delete(p); err != nil && !errors.Is(err, cebpf.ErrKeyNotExist) {
			return stale(err)
		}
	}
	t.bumpGeneration() // after the entries are gone: see sys_enter
	if err := t.syncHooks(); err != nil {
		return stale(err)
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
	if ss == nil || t.pidBits == nil {
		return nil
	}
	if err := t.untrack(ss); err != nil {
		return err
	}
	fail := func(err error) error { return fmt.Errorf("forget session %d: %w", session, err) }
	if err := t.dropSession(ss); err != nil {
		return fail(err)
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
	return nil
}

// Counts returns session's syscall counts so far, summed over CPUs.
func (t *Tracer) Counts(session uint32) (*Counts, error) {
	t.trackMu.RLock()
	defer t.trackMu.RUnlock()
	ss := t.lookup(session)
	if ss == nil || t.pidBits == nil {
		return nil, fmt.Errorf("counts of session %d: the session is not tracked", session)
	}
	keys := make([]uint32, nrCounted+1)
	perCPU := make([]uint64, len(keys)*t.cpus)
	n, err := ss.counts.BatchLookup(new(cebpf.MapBatchCursor), keys, perCPU, nil)
	if err != nil && !errors.Is(err, cebpf.ErrKeyNotExist) {
		return nil, fmt.Errorf("counts of session %d: %w", session, err)
	}
	c := &Counts{Syscalls: map[string]uint64{}, Categories: map[Category]uint64{}}
	for i := range n {
		var v uint64
		for _, x := range perCPU[i*t.cpus : (i+1)*t.cpus] {
			v += x
		}
		if v == 0 {
			continue
		}
		if keys[i] == idxDrops {
			c.DroppedEvents += v
			continue
		}
		name := t.names.name(keys[i])
		c.Syscalls[name] += v
		c.Total += v
		if cat := CategoryOf(name); cat != "" {
			c.Categories[cat] += v
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
	for i, dst := range []*uint64{&l.Events, &l.Forks} {
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

// MapBytes returns the kernel memory the tracer's maps are charged for,
// the counters of the sessions and those kept for reuse included.
func (t *Tracer) MapBytes() (uint64, error) {
	t.trackMu.RLock()
	defer t.trackMu.RUnlock()
	maps := []*cebpf.Map{t.objs.TrackedPids, t.objs.Tasks, t.objs.Sessions, t.objs.Counters, t.objs.SlotOwner,
		t.objs.ThreadCache, t.objs.Generation, t.objs.SyscallActions, t.objs.SentTo, t.objs.Losses, t.objs.Events}
	for _, sl := range t.slots {
		if sl.counts != nil && !sl.releasing {
			maps = append(maps, sl.counts)
		}
	}
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
	if t.pidBits == nil {
		return fmt.Errorf("workspace of session %d: the tracer is closed", session)
	}
	ss, created, err := t.openSession(session)
	if err != nil {
		return err
	}
	fail := func(err error) error {
		if created {
			_ = t.dropSession(ss)
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
