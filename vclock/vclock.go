package vclock

import (
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// DefaultEpoch is the virtual realtime origin of a strict session.
var DefaultEpoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// Defaults of a strict session.
const (
	DefaultQuantum = time.Microsecond
	DefaultMono    = int64(time.Second) // monotonic clocks start here
)

// Config fixes a session's virtual time.
type Config struct {
	EpochNS   int64 // realtime origin, ns since the Unix epoch
	MonoNS    int64 // monotonic origin, ns
	QuantumNS int64 // added by every read
}

// DefaultConfig returns the strict defaults.
func DefaultConfig() Config {
	return Config{EpochNS: DefaultEpoch.UnixNano(), MonoNS: DefaultMono, QuantumNS: int64(DefaultQuantum)}
}

// Clock is one stream's virtual clock. Reads are lock-free and make no
// system call; it is safe for concurrent use (concurrent readers observe a
// total order, which is deterministic only if their interleaving is).
type Clock struct {
	cfg Config
	t   atomic.Int64
	// reads counts clock reads, sleepNS the virtual time slept.
	reads   atomic.Int64
	sleepNS atomic.Int64
}

// New returns a clock at offset 0.
func New(cfg Config) *Clock { return &Clock{cfg: cfg} }

// Config returns the clock's configuration.
func (c *Clock) Config() Config { return c.cfg }

// RealtimeNS reads the realtime clock: it advances the stream by one quantum.
func (c *Clock) RealtimeNS() int64 {
	c.reads.Add(1)
	return c.cfg.EpochNS + c.t.Add(c.cfg.QuantumNS)
}

// MonotonicNS reads the monotonic clock: it advances the stream by one quantum.
func (c *Clock) MonotonicNS() int64 {
	c.reads.Add(1)
	return c.cfg.MonoNS + c.t.Add(c.cfg.QuantumNS)
}

// Now is RealtimeNS as a time.Time in UTC.
func (c *Clock) Now() time.Time { return time.Unix(0, c.RealtimeNS()).UTC() }

// Sleep advances the stream by d without waiting. Negative d is no sleep.
func (c *Clock) Sleep(d time.Duration) {
	if d > 0 {
		c.sleepNS.Add(int64(d))
		c.t.Add(int64(d))
	}
}

// AdvanceTo moves the offset forward to off if it is behind; it never moves
// time backwards. It returns the offset afterwards.
func (c *Clock) AdvanceTo(off int64) int64 {
	for {
		cur := c.t.Load()
		if cur >= off {
			return cur
		}
		if c.t.CompareAndSwap(cur, off) {
			return off
		}
	}
}

// Offset returns the current offset without reading the clock.
func (c *Clock) Offset() int64 { return c.t.Load() }

// Reads returns how many times the clock was read.
func (c *Clock) Reads() int64 { return c.reads.Load() }

// SleptNS returns the virtual time slept.
func (c *Clock) SleptNS() int64 { return c.sleepNS.Load() }

// Root is the stream name of a session's first process.
const Root = "0"

// Child returns the name of parent's k-th child (k from 1).
func Child(parent string, k int) string { return parent + "." + strconv.Itoa(k) }

// ValidStream reports whether name is a well-formed stream name.
func ValidStream(name string) error {
	parts := strings.Split(name, ".")
	if parts[0] != Root {
		return fmt.Errorf("stream %q does not start at the root %q", name, Root)
	}
	for _, p := range parts[1:] {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || strconv.Itoa(n) != p {
			return fmt.Errorf("stream %q: %q is not a spawn index", name, p)
		}
	}
	return nil
}
