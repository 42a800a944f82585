package vclock

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/dal-runtime/dal/internal/atomicfile"
)

// FileVersion is the clock.json format version.
const FileVersion = 1

// File is a session's clock log, as written to clock.json: configuration,
// and per process stream the reads, virtual time slept, timer firings and,
// in seeded and logged modes, the real ticks.
type File struct {
	Version   int          `json:"version"`
	Mode      string       `json:"mode"`
	Seed      uint64       `json:"seed"`
	Epoch     time.Time    `json:"epoch"`
	QuantumNS int64        `json:"quantum_ns"`
	Streams   []StreamLog  `json:"streams"`
	Drift     []DriftEntry `json:"drift"`
}

// StreamLog is one process stream in clock.json.
type StreamLog struct {
	Stream   string           `json:"stream"`
	Runtime  string           `json:"runtime"`
	Reported bool             `json:"reported"` // false: the process died before reporting
	Reads    int64            `json:"reads"`
	SleepNS  int64            `json:"sleep_ns"`
	NowNS    int64            `json:"now_ns"`
	Timers   [][2]int64       `json:"timers"`          // [deadline offset ns, registration seq] in firing order
	Draws    map[string]int64 `json:"draws,omitempty"` // bytes drawn per source
	// Unserved counts calls of clock and random APIs the shim left real,
	// by "<category>/<api>" (category clock or random; cpu_clock for the
	// CPU-time clocks and resource usage, real by rule).
	Unserved map[string]int64 `json:"unserved,omitempty"`
	// Logged holds, in logged mode, the real random bytes drawn per
	// source, in draw order.
	Logged map[string][]byte `json:"logged_draws,omitempty"`
	Ticks  TickList          `json:"ticks"`
}

// DriftEntry is one divergence observed while serving a recording.
type DriftEntry struct {
	Stream string `json:"stream"`
	What   string `json:"what"`
	Detail string `json:"detail"`
}

// TickList is a Log in JSON: kinds as a string of 'r' (realtime) and 'm'
// (monotonic), one letter per tick, and the values in ns.
type TickList struct {
	Kinds  string  `json:"kinds"`
	Values []int64 `json:"values"`
}

// FromLog converts a Log.
func FromLog(l *Log) TickList {
	var b strings.Builder
	for _, k := range l.Kinds {
		b.WriteByte("rm"[k])
	}
	return TickList{Kinds: b.String(), Values: append([]int64{}, l.Values...)}
}

// Log converts back, validating the kinds.
func (t TickList) Log() (*Log, error) {
	if len(t.Kinds) != len(t.Values) {
		return nil, fmt.Errorf("%d tick kinds for %d values", len(t.Kinds), len(t.Values))
	}
	l := &Log{Kinds: make([]byte, len(t.Kinds)), Values: t.Values}
	for i := 0; i < len(t.Kinds); i++ {
		switch t.Kinds[i] {
		case 'r':
		case 'm':
			l.Kinds[i] = KindMonotonic
		default:
			return nil, fmt.Errorf("tick %d has kind %q: only r and m exist", i, t.Kinds[i])
		}
	}
	return l, nil
}

// Kind values of Log.Kinds.
const (
	KindRealtime  = 0
	KindMonotonic = 1
)

// ReadFile reads and validates a clock.json.
func ReadFile(path string) (*File, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(b, path)
}

// Parse is [ReadFile] of the bytes b, read from path (named in errors).
func Parse(b []byte, path string) (*File, error) {
	var f File
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("%s is not a clock log: %w", path, err)
	}
	if f.Version != FileVersion {
		return nil, fmt.Errorf("%s has clock log version %d, this build reads %d", path, f.Version, FileVersion)
	}
	for _, s := range f.Streams {
		if err := ValidStream(s.Stream); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if _, err := s.Ticks.Log(); err != nil {
			return nil, fmt.Errorf("%s: stream %s: %w", path, s.Stream, err)
		}
	}
	return &f, nil
}

// WriteFile writes f to path atomically (temporary file, fsync, rename).
func (f *File) WriteFile(path string) error {
	b, err := json.MarshalIndent(f, "", " ")
	if err != nil {
		return err
	}
	// 0600 as before: a clock log may hold real wall-clock readings.
	return atomicfile.WriteFile(path, append(b, '\n'), 0o600)
}
