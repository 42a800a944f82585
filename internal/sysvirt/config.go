package sysvirt

import (
	"encoding/json"
	"fmt"
	"sort"
	"time"
)

// Config is what the supervisor serves. The zero Config serves nothing.
type Config struct {
	// Clock: realtime and monotonic reads, sleeps and timed waits are
	// virtual (strict mode).
	Clock bool `json:"clock,omitempty"`
	// Random: getrandom and AT_RANDOM come from the process's stream
	// (strict and seeded modes).
	Random    bool   `json:"random,omitempty"`
	Seed      uint64 `json:"seed,omitempty"`
	EpochNS   int64  `json:"epoch_ns,omitempty"`
	MonoNS    int64  `json:"mono_ns,omitempty"`
	QuantumNS int64  `json:"quantum_ns,omitempty"`
	// NoVDSO serves strict mode's clock reads and getrandom through the
	// supervisor only, as seeded mode does, instead of dal's vDSO: the
	// slow path, kept for comparison (benchmarks).
	NoVDSO bool `json:"no_vdso,omitempty"`
	// StartNS is when the run began on the real clock, before the
	// sandbox made anything: file times from then on are the run's
	// (filetimes.go). 0: when the supervisor starts.
	StartNS int64 `json:"start_ns,omitempty"`
	// StallLimit is how long, in real time, a timed wait may be held
	// while I/O it waits on is outstanding before it expires anyway (an
	// escape: real time decided it). A wait's own timeout is the least
	// it waits for real. 0: DefaultStallLimit.
	StallLimit time.Duration `json:"stall_limit,omitempty"`
}

// DefaultStallLimit is Config.StallLimit's default: longer than an LLM
// answer takes, short enough that a server that never answers does not
// hang a run for long.
const DefaultStallLimit = 60 * time.Second

// stallLimit is c's StallLimit, or its default.
func (c Config) stallLimit() time.Duration {
	if c.StallLimit > 0 {
		return c.StallLimit
	}
	return DefaultStallLimit
}

// Enabled reports whether c serves anything.
func (c Config) Enabled() bool { return c.Clock || c.Random }

// Category is what a served call serves: the keys of [Counts].Served and
// Escapes, and the table's category column.
type Category string

const (
	Clock     Category = "clock"      // clock reads (and sysinfo's uptime, times, adjtimex)
	Sleep     Category = "sleep"      // nanosleep, clock_nanosleep
	Wait      Category = "wait"       // timed waits: poll, select, epoll, rt_sigtimedwait
	Random    Category = "random"     // getrandom
	AtRandom  Category = "at_random"  // the AT_RANDOM bytes of an exec
	Deadline  Category = "deadline"   // an absolute deadline translated to the real clock
	Timer     Category = "timer"      // a timer call answered, or a timer fired on the virtual clock
	FileTimes Category = "file_times" // the stat family's file times
	Port      Category = "port"       // a bind to port 0 given the tree's next port
	Stall     Category = "stall"      // a timed wait expired on real time, its I/O outstanding at the stall limit (an escape)
)

// Reason is why a call ran on real time: the keys of [Counts].Real.
type Reason string

const (
	CPUClock        Reason = "cpu_clock"        // a CPU-time clock read
	OtherClock      Reason = "other_clock"      // a clock the layer does not serve
	SleepThreaded   Reason = "sleep_threaded"   // a sleep of a process with threads
	WaitSigmask     Reason = "wait_sigmask"     // a wait whose signal mask a timer's signal could end
	WaitOutstanding Reason = "wait_outstanding" // held in real time until its I/O was ready or its process could jump: t never moved with latency
	CPUTimer        Reason = "cpu_timer"        // a POSIX timer on a CPU-time clock
	ClockAdjust     Reason = "clock_adjust"     // adjtimex or clock_adjtime asked to change the clock: the kernel's to refuse or do
)

// Counts is what a supervisor served and what it let through, by
// category, for the whole process tree.
type Counts struct {
	// Processes is how many processes ran under the supervisor (execs
	// included: each image counts once); Unpatched those whose auxiliary
	// vector could not be edited (their vDSO reads escape).
	Processes int `json:"processes"`
	Unpatched int `json:"unpatched,omitempty"`
	// Served counts calls answered from the streams, by category
	// (Timer: a timer call answered, or a timer fired on the virtual
	// clock).
	Served map[Category]int64 `json:"served,omitempty"`
	// Real counts calls that ran on real time or real randomness, by
	// reason.
	Real map[Reason]int64 `json:"real,omitempty"`
	// Escapes are calls that returned real clock or random values where a
	// virtual one was due, Timer: timers that fired on the real clock,
	// and Stall: timed waits that expired because their I/O was still
	// outstanding at the stall limit (real time decided what the agent
	// saw); any makes the category uncaptured.
	Escapes map[Category]int64 `json:"escapes,omitempty"`
	// Calls counts, by system call name, the calls the supervisor answered
	// itself: they never reached the kernel's syscall entry, where the
	// eBPF tracer counts, and are added to its counts.
	Calls map[string]int64 `json:"calls,omitempty"`
	// Injected counts, by system call name, the calls the supervisor made
	// a process run to map dal's vDSO (mmap, mprotect at each exec): the
	// eBPF tracer counts them, the program never made them, and they are
	// taken off its counts.
	Injected map[string]int64 `json:"injected,omitempty"`
	// Notes are one-line explanations of escapes (a kernel without a
	// feature, an image that could not be edited).
	Notes []string `json:"notes,omitempty"`
}

func add[K ~string](m *map[K]int64, k K, n int64) {
	if *m == nil {
		*m = map[K]int64{}
	}
	(*m)[k] += n
}

func (c *Counts) note(format string, args ...any) {
	s := fmt.Sprintf(format, args...)
	for _, n := range c.Notes {
		if n == s {
			return
		}
	}
	if len(c.Notes) < 20 {
		c.Notes = append(c.Notes, s)
	}
}

// MarshalJSON writes the notes sorted, for stable files.
func (c Counts) MarshalJSON() ([]byte, error) {
	type plain Counts
	p := plain(c)
	p.Notes = append([]string(nil), c.Notes...)
	sort.Strings(p.Notes)
	return json.Marshal(p)
}
