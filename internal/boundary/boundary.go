// Package boundary is the format of a bundle's syscalls.json: which
// nondeterminism boundaries the agent's process tree crossed
// (docs/design.md §8), seen from the kernel by dald's eBPF tracer and from
// the shims, and whether the bundle captured each. dal-exec record writes
// it (package record computes it); dal-exec show reads it. It imports
// nothing of dal: record converts what the tracer and the syscall layer
// report into these types.
package boundary

import (
	"encoding/json"
	"sort"
)

// Version is the syscalls.json format version.
const Version = 1

// Boundary is syscalls.json.
type Boundary struct {
	Version int `json:"version"`
	// Observed is false when the kernel side was not traced; Reason says
	// why, and Syscalls and Coverage are then absent rather than wrong.
	Observed bool   `json:"observed"`
	Reason   string `json:"reason,omitempty"`
	// Syscalls counts every system call of the session's processes by
	// name, from each process's exec of the agent on (as strace -f -c).
	Syscalls   map[string]uint64         `json:"syscalls,omitempty"`
	Categories map[string]*CategoryCover `json:"categories"`
	// Coverage is |captured ∩ touched| / |touched| (1 when nothing was
	// touched); nil when not observed.
	Coverage *float64 `json:"coverage,omitempty"`
	Escapes  []Escape `json:"escapes"`
	// Events are the notable crossings the tracer reported.
	Events        []Event `json:"events,omitempty"`
	DroppedEvents uint64  `json:"dropped_events"`
	// NotObservable names what no syscall hook can see.
	NotObservable []string `json:"not_observable"`
	// Unshimmed counts the exec'd processes that never reached dald through
	// a shim; UnshimmedFiles names the programs among them that are not
	// Python or Node.
	Unshimmed      int      `json:"unshimmed"`
	UnshimmedFiles []string `json:"unshimmed_files,omitempty"`
	// Real counts, by "<reason>/<api>", what the shims left real by rule
	// rather than for want of a way to serve it: "cpu_clock" (CPU-time
	// clocks and resource usage, which measure work, not time: real in
	// every language, as syscall_layer.real counts them for every other
	// program). Not escapes: the category stays captured.
	Real map[string]int64 `json:"real,omitempty"`
	// SyscallLayer is what the syscall layer (package sysvirt) served every
	// process of the tree, shimmed or not; absent when it was off (logged
	// and default modes) or left no count.
	SyscallLayer *SyscallLayer `json:"syscall_layer,omitempty"`
}

// Event is a notable crossing the tracer reported (wire.TraceEvent).
type Event struct {
	Kind   string `json:"kind"`
	PID    int    `json:"pid"`
	Detail string `json:"detail"`
}

// LayerCategory is a category of calls the syscall layer serves
// (sysvirt.Category): "clock", "sleep", "wait", "random", "at_random",
// "deadline", "timer", "file_times", "stall".
type LayerCategory string

// LayerReason is why the syscall layer let a call run on real time
// (sysvirt.Reason): "cpu_clock", "other_clock", ...
type LayerReason string

// SyscallLayer is syscalls.json's syscall_layer: sysvirt.Counts as the
// file holds it (record's test holds the two field for field).
type SyscallLayer struct {
	Processes int                     `json:"processes"`
	Unpatched int                     `json:"unpatched,omitempty"`
	Served    map[LayerCategory]int64 `json:"served,omitempty"`
	Real      map[LayerReason]int64   `json:"real,omitempty"`
	Escapes   map[LayerCategory]int64 `json:"escapes,omitempty"`
	Calls     map[string]int64        `json:"calls,omitempty"`
	Injected  map[string]int64        `json:"injected,omitempty"`
	Notes     []string                `json:"notes,omitempty"`
}

// MarshalJSON writes the notes sorted, for stable files.
func (c SyscallLayer) MarshalJSON() ([]byte, error) {
	type plain SyscallLayer
	p := plain(c)
	p.Notes = append([]string(nil), c.Notes...)
	sort.Strings(p.Notes)
	return json.Marshal(p)
}

// CategoryCover is one category's observation.
type CategoryCover struct {
	Touched  bool   `json:"touched"`
	Captured bool   `json:"captured"`
	Syscalls uint64 `json:"syscalls"`
	// Shim counts what the runtime shims served: clock reads, random
	// draws (bytes), or recorded exchanges for network.
	Shim int64 `json:"shim"`
	// Record names the bundle file that holds the category's record.
	Record string `json:"record,omitempty"`
}

// Escape is a crossing the bundle did not capture.
type Escape struct {
	Category string `json:"category"`
	Detail   string `json:"detail"`
	PID      int    `json:"pid,omitempty"`
}

// EscapeCounts counts escapes by category, for the metrics.
func (b *Boundary) EscapeCounts() map[string]int {
	m := map[string]int{}
	for _, e := range b.Escapes {
		m[e.Category]++
	}
	return m
}
