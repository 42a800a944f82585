package ebpf

import (
	"errors"
	"time"
)

// ErrNoProcess is returned (wrapped) by Track when the process is gone.
var ErrNoProcess = errors.New("no such process")

// UnavailableError says why Open could not start tracing, in one sentence
// fit for a log line such as "boundary tracing is off: <Error()>".
type UnavailableError struct {
	Reason string // what is not observed and why
	Err    error  // the underlying failure, for errors.Is/As and debugging
}

func (e *UnavailableError) Error() string { return e.Reason }

func (e *UnavailableError) Unwrap() error { return e.Err }

// Options size the tracer's maps. Zero values take the defaults. The kernel
// memory is bounded by these numbers, not by the workload.
type Options struct {
	// MaxSessions is how many sessions may be registered at once (default
	// 4096). Each registered session holds a per-CPU array of counters,
	// 4 KiB plus 4 KiB per CPU, from its first Track or SetWorkspace to
	// its Forget (see the package doc for what Forget keeps for reuse).
	MaxSessions int
	// MaxProcesses is how many live processes may be tracked at once, over
	// all sessions (default 32768). A fork beyond it is not followed and is
	// counted in Losses().Forks; Track beyond it fails.
	MaxProcesses int
	// EventBufferBytes is the ring buffer size, a power of two of at least
	// one page (default 1 MiB, about 3,600 events in flight).
	EventBufferBytes int
	// MaxEventsPerSession caps the events kept in memory per session
	// (default 1024); later ones count as drops.
	MaxEventsPerSession int
	// Stats enables the kernel's BPF run-time statistics while the tracer is
	// open, for Stats(). It adds two clock reads to every BPF program run on
	// the machine (every syscall), so leave it off in production.
	Stats bool
}

func (o Options) withDefaults() Options {
	if o.MaxSessions <= 0 {
		o.MaxSessions = 4096
	}
	if o.MaxProcesses <= 0 {
		o.MaxProcesses = 32768
	}
	if o.EventBufferBytes <= 0 {
		o.EventBufferBytes = 1 << 20
	}
	if o.MaxEventsPerSession <= 0 {
		o.MaxEventsPerSession = 1024
	}
	return o
}

// Counts are a session's syscalls so far, summed over CPUs.
type Counts struct {
	// Syscalls maps a syscall name (as strace names it) to its count.
	// Numbers the table does not know appear as "syscall_<nr>".
	Syscalls map[string]uint64
	// Categories holds the total of each category with a non-zero count.
	// Uncategorized syscalls are in Syscalls and Total only.
	Categories map[Category]uint64
	// Total is the sum of Syscalls.
	Total uint64
	// DroppedEvents is how many of this session's events were lost (ring
	// buffer full, or over Options.MaxEventsPerSession).
	DroppedEvents uint64
}

// Event is a notable boundary crossing.
type Event struct {
	// Kind is "connect", "sendto", "random_device", "exec" or "write_outside".
	Kind string
	// PID is the process (thread group) that crossed.
	PID int
	// Detail is the destination ("93.184.216.34:443", "[::1]:53",
	// "unix:/run/nscd/socket"), the device ("/dev/urandom"), the executed
	// file ("/usr/bin/python3") or the path opened for writing.
	Detail string
}

// ProgramStats is one BPF program's kernel run statistics.
type ProgramStats struct {
	Name     string // "sys_enter", "process_fork", "process_exec", "process_exit"
	RunCount uint64
	RunTime  time.Duration // total time spent in the program
}

// Losses counts what the kernel side could not record, since Open.
type Losses struct {
	Events uint64 // events dropped because the ring buffer was full
	Forks  uint64 // forked processes not followed because the process map was full
}
