package vclock

import (
	"fmt"
	"sync"
)

// Log is one stream's recorded tick log: real clock readings in read order.
type Log struct {
	Kinds  []byte  `json:"kinds"`  // one per tick: 0 realtime, 1 monotonic
	Values []int64 `json:"values"` // ns
}

// Len returns the number of ticks.
func (l *Log) Len() int { return len(l.Values) }

// Append adds ticks; kinds and values must have the same length.
func (l *Log) Append(kinds []byte, values []int64) error {
	if len(kinds) != len(values) {
		return fmt.Errorf("tick batch has %d kinds for %d values", len(kinds), len(values))
	}
	for i, k := range kinds {
		if k > 1 {
			return fmt.Errorf("tick %d has kind %d: only 0 (realtime) and 1 (monotonic) exist", len(l.Kinds)+i, k)
		}
	}
	l.Kinds = append(l.Kinds, kinds...)
	l.Values = append(l.Values, values...)
	return nil
}

// Page returns ticks [from, from+max) and whether the log ends there.
func (l *Log) Page(from, max int) (kinds []byte, values []int64, end bool) {
	if from < 0 {
		from = 0
	}
	if from > len(l.Values) {
		from = len(l.Values)
	}
	to := min(from+max, len(l.Values))
	return l.Kinds[from:to], l.Values[from:to], to == len(l.Values)
}

// Drift describes a read the recording cannot answer.
type Drift struct {
	Index  int    // 0-based read index
	Reason string // one sentence
}

func (d *Drift) Error() string { return d.Reason }

// Player serves a Log back in order. Past the end, or on a kind mismatch, it
// reports drift once and continues from the last served value plus the
// quantum, so the process stays deterministic. Safe for concurrent use.
type Player struct {
	mu      sync.Mutex
	log     *Log
	next    int
	last    [2]int64
	quantum int64
	drift   *Drift
}

// NewPlayer serves log, continuing past its end in steps of quantum.
func NewPlayer(log *Log, quantum int64) *Player {
	return &Player{log: log, quantum: quantum}
}

// Read serves the next tick of kind. drifted is non-nil on the first read
// that diverges from the recording, nil afterwards and before.
func (p *Player) Read(kind byte) (value int64, drifted *Drift) {
	p.mu.Lock()
	defer p.mu.Unlock()
	i := p.next
	p.next++
	if i < p.log.Len() && p.log.Kinds[i] == kind {
		p.last[kind] = p.log.Values[i]
		return p.last[kind], nil
	}
	p.last[kind] += p.quantum
	if p.drift != nil {
		return p.last[kind], nil
	}
	if i >= p.log.Len() {
		p.drift = &Drift{Index: i, Reason: fmt.Sprintf("clock read %d is past the %d recorded ticks", i+1, p.log.Len())}
	} else {
		p.drift = &Drift{Index: i, Reason: fmt.Sprintf("clock read %d is %s, the recording has %s", i+1, kindName(kind), kindName(p.log.Kinds[i]))}
	}
	return p.last[kind], p.drift
}

// Served returns the number of reads served so far.
func (p *Player) Served() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.next
}

func kindName(k byte) string {
	if k == 0 {
		return "realtime"
	}
	return "monotonic"
}
