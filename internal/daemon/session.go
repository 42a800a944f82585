package daemon

import (
	"fmt"
	"sort"
	"sync"

	"github.com/dal-runtime/dal/internal/wire"
	"github.com/dal-runtime/dal/vclock"
)

// session is one dal-exec run: its clock configuration, the streams its
// processes own, and their tick logs.
type session struct {
	id      string
	num     uint32 // the tracer's key for it
	traced  bool   // its process tree is being traced
	mode    string
	seed    uint64
	cfg     vclock.Config
	replay  bool
	mu      sync.Mutex
	streams map[string]*stream
	// children counts names handed out under each parent stream, by spawn
	// reservation and by hello fallback alike.
	children map[string]int
	drift    []wire.Drift
}

// stream is one process's record.
type stream struct {
	name     string
	reserved bool // named by spawn, not yet claimed
	claimed  bool
	pid      int
	runtime  string
	live     bool
	log      vclock.Log        // recorded ticks
	recorded *vclock.Log       // ticks to serve (replay)
	draws    map[string][]byte // logged random bytes per label
	served   map[string][]byte // random bytes to serve (replay)
	schedule [][2]int64        // recorded timer firings to serve
	report   *wire.Request     // the process's exit report
	fired    [][2]int64
}

func newSession(id string, req wire.Request) *session {
	cfg := vclock.DefaultConfig()
	if req.EpochNS != 0 {
		cfg.EpochNS = req.EpochNS
	}
	if req.QuantumNS > 0 {
		cfg.QuantumNS = req.QuantumNS
	}
	return &session{
		id: id, mode: req.Mode, seed: req.Seed, cfg: cfg, replay: req.Replay,
		streams:  make(map[string]*stream),
		children: make(map[string]int),
	}
}

// streamLocked returns the record for name, creating it.
func (s *session) streamLocked(name string) *stream {
	st := s.streams[name]
	if st == nil {
		st = &stream{name: name}
		s.streams[name] = st
	}
	return st
}

// nextChildLocked reserves the next unused child name of parent.
func (s *session) nextChildLocked(parent string) string {
	for {
		s.children[parent]++
		name := vclock.Child(parent, s.children[parent])
		if st := s.streams[name]; st == nil || (!st.claimed && !st.reserved) {
			return name
		}
	}
}

// claim grants a stream to a process that says hello with hint.
func (s *session) claim(hint string, pid int, runtime string) (string, error) {
	if hint == "" {
		hint = vclock.Root
	}
	if err := vclock.ValidStream(hint); err != nil {
		return "", fmt.Errorf("DAL_STREAM: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	name := hint
	if st := s.streams[hint]; st != nil && st.claimed {
		// Inherited through a process without a shim: the next child of
		// the nearest shimmed ancestor.
		name = s.nextChildLocked(hint)
	}
	st := s.streamLocked(name)
	st.reserved, st.claimed, st.live = false, true, true
	st.pid, st.runtime = pid, runtime
	return name, nil
}

func (s *session) spawn(parent string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	name := s.nextChildLocked(parent)
	s.streamLocked(name).reserved = true
	return name
}

func (s *session) status() wire.SessionStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := wire.SessionStatus{ID: s.id, Mode: s.mode, Seed: s.seed, Drift: len(s.drift)}
	for _, x := range s.streams {
		if x.claimed {
			st.Streams++
		}
		if x.live {
			st.Live++
		}
	}
	return st
}

func (s *session) dump() ([]wire.StreamStatus, []wire.Drift) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []wire.StreamStatus
	for _, x := range s.streams {
		if !x.claimed {
			continue
		}
		ss := wire.StreamStatus{Stream: x.name, PID: x.pid, Runtime: x.runtime, Ticks: x.log.Len()}
		if r := x.report; r != nil {
			ss.Reported = true
			ss.Reads, ss.SleepNS, ss.NowNS, ss.Timers, ss.Draws = r.Reads, r.SleepNS, r.NowNS, r.Timers, r.Draws
		}
		out = append(out, ss)
	}
	sort.Slice(out, func(i, j int) bool { return streamLess(out[i].Stream, out[j].Stream) })
	return out, append([]wire.Drift(nil), s.drift...)
}

// streamLess orders stream names as a tree walk: 0, 0.1, 0.1.1, 0.2, 0.10.
func streamLess(a, b string) bool {
	pa, pb := splitStream(a), splitStream(b)
	for i := 0; i < len(pa) && i < len(pb); i++ {
		if pa[i] != pb[i] {
			return pa[i] < pb[i]
		}
	}
	return len(pa) < len(pb)
}

func splitStream(s string) []int {
	var out []int
	n := 0
	for i := 0; i < len(s); i++ {
		if s[i] == '.' {
			out = append(out, n)
			n = 0
			continue
		}
		n = n*10 + int(s[i]-'0')
	}
	return append(out, n)
}
