package daemon

import (
	"crypto/subtle"
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
	token   []byte // the capability a shim's hello must carry (hex text)
	owner   uint32 // uid of the dal-exec that opened it
	figures bool   // opened only to report figures: no processes
	num     uint32 // the tracer's key for it
	lim     *Limits
	traced  bool // its process tree is being traced
	mode    string
	seed    uint64
	cfg     vclock.Config
	replay  bool
	mu      sync.Mutex
	closed  bool
	conns   map[*conn]struct{} // its shims' connections, closed with it
	// sock is the session's own socket, for its processes (sessionsock.go);
	// nil for a figures session. boundConns counts the connections
	// accepted on it and not yet gone.
	sock       *sessionSocket
	boundConns int
	streams    map[string]*stream
	// children counts names handed out under each parent stream, by spawn
	// reservation and by hello fallback alike.
	children map[string]int
	drift    []wire.Drift
	// What it holds, against lim.
	claimed, spawns, ticks, drawBytes int
	hit                               map[string]bool // limits already noted as drift
	observed                          map[string]bool // figures reported (observe)
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
	report   *wire.Request     // the process's exit report (counters only)
}

func newSession(id, token string, owner uint32, lim *Limits, req wire.Request) *session {
	cfg := vclock.DefaultConfig()
	if req.EpochNS != 0 {
		cfg.EpochNS = req.EpochNS
	}
	if req.QuantumNS > 0 {
		cfg.QuantumNS = req.QuantumNS
	}
	return &session{
		id: id, token: []byte(token), owner: owner, figures: req.Figures, lim: lim,
		mode: req.Mode, seed: req.Seed, cfg: cfg, replay: req.Replay,
		conns:    make(map[*conn]struct{}),
		streams:  make(map[string]*stream),
		children: make(map[string]int),
		hit:      make(map[string]bool),
		observed: make(map[string]bool),
	}
}

// tokenMatches compares a presented token with the session's in constant
// time.
func (s *session) tokenMatches(token string) bool {
	return subtle.ConstantTimeCompare([]byte(token), s.token) == 1
}

// limitLocked returns err, noting the first refusal at each limit as drift
// so that the run's report shows it.
func (s *session) limitLocked(stream, kind string, err error) error {
	if !s.hit[kind] && len(s.drift) < maxDrift {
		s.hit[kind] = true
		s.drift = append(s.drift, wire.Drift{Stream: stream, What: "limit", Detail: err.Error()})
	}
	return err
}

// addTicksLocked accounts for n more ticks or timer entries.
func (s *session) addTicksLocked(stream string, n int) error {
	if n > 0 && s.ticks+n > s.lim.Ticks {
		return s.limitLocked(stream, "ticks", limitError(fmt.Sprintf("session %s holds %d clock ticks and timers, %d more do not fit", s.id, s.ticks, n), s.lim.Ticks, "max-ticks"))
	}
	s.ticks += n
	return nil
}

// addDrawsLocked appends data to m[label], accounting for its bytes.
func (s *session) addDrawsLocked(stream string, m *map[string][]byte, label string, data []byte) error {
	if len(label) > maxLabel {
		return fmt.Errorf("draw label of %d bytes: labels are source names of at most %d bytes", len(label), maxLabel)
	}
	n := len(data)
	if *m == nil {
		*m = make(map[string][]byte)
	}
	if _, ok := (*m)[label]; !ok {
		if len(*m) >= maxLabels {
			return fmt.Errorf("stream %s already has %d draw labels, the most one stream may have", stream, maxLabels)
		}
		n += len(label)
	}
	if s.drawBytes+n > s.lim.DrawBytes {
		return s.limitLocked(stream, "draws", limitError(fmt.Sprintf("session %s holds %d bytes of random draws, %d more do not fit", s.id, s.drawBytes, n), s.lim.DrawBytes, "max-draw-bytes"))
	}
	s.drawBytes += n
	(*m)[label] = append((*m)[label], data...)
	return nil
}

// addDriftLocked keeps one drift report.
func (s *session) addDriftLocked(d wire.Drift) error {
	if len(s.drift) >= maxDrift {
		return fmt.Errorf("session %s already holds %d drift reports, the most it keeps: the run has drifted, later reports add nothing", s.id, maxDrift)
	}
	if len(d.What) > 64 {
		d.What = d.What[:64]
	}
	if len(d.Detail) > maxDriftText {
		d.Detail = d.Detail[:maxDriftText] + "..."
	}
	s.drift = append(s.drift, d)
	return nil
}

// setReportLocked keeps a process's exit report, replacing an earlier one.
func (s *session) setReportLocked(st *stream, req wire.Request) error {
	if len(req.Timers) > maxReportTimers {
		return fmt.Errorf("report lists %d timers, the most a report may carry is %d", len(req.Timers), maxReportTimers)
	}
	if len(req.Draws) > maxLabels {
		return fmt.Errorf("report lists %d draw sources, the most a report may carry is %d", len(req.Draws), maxLabels)
	}
	for label := range req.Draws {
		if len(label) > maxLabel {
			return fmt.Errorf("report names a draw source of %d bytes: source names are at most %d bytes", len(label), maxLabel)
		}
	}
	if len(req.Unserved) > maxLabels {
		return fmt.Errorf("report lists %d unserved APIs, the most a report may carry is %d", len(req.Unserved), maxLabels)
	}
	for name := range req.Unserved {
		if len(name) > maxLabel {
			return fmt.Errorf("report names an unserved API of %d bytes: names are at most %d bytes", len(name), maxLabel)
		}
	}
	old := 0
	if st.report != nil {
		old = len(st.report.Timers)
	}
	if err := s.addTicksLocked(st.name, len(req.Timers)-old); err != nil {
		return err
	}
	st.report = &wire.Request{Reads: req.Reads, SleepNS: req.SleepNS, NowNS: req.NowNS, Timers: req.Timers, Draws: req.Draws, Unserved: req.Unserved}
	return nil
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

// claim grants a stream to a process that says hello with hint, and
// attaches its connection to the session.
func (s *session) claim(c *conn, hint string, pid int, runtime string) (string, error) {
	if hint == "" {
		hint = vclock.Root
	}
	if len(hint) > maxStreamName {
		return "", fmt.Errorf("DAL_STREAM of %d bytes: stream names are at most %d bytes", len(hint), maxStreamName)
	}
	if err := vclock.ValidStream(hint); err != nil {
		return "", fmt.Errorf("DAL_STREAM: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return "", fmt.Errorf("session %q has ended", s.id)
	}
	if s.claimed >= s.lim.Streams {
		return "", s.limitLocked(hint, "streams", limitError(fmt.Sprintf("session %s already has %d processes", s.id, s.claimed), s.lim.Streams, "max-streams"))
	}
	name := hint
	if st := s.streams[hint]; st != nil && st.claimed {
		// Inherited through a process without a shim: the next child of
		// the nearest shimmed ancestor.
		name = s.nextChildLocked(hint)
	}
	if len(name) > maxStreamName {
		return "", fmt.Errorf("stream %s would be %d bytes: stream names are at most %d bytes", hint, len(name), maxStreamName)
	}
	st := s.streamLocked(name)
	if st.reserved {
		s.spawns--
	}
	st.reserved, st.claimed, st.live = false, true, true
	st.pid, st.runtime = pid, runtime
	s.claimed++
	s.conns[c] = struct{}{}
	return name, nil
}

// spawn reserves the next child name of parent.
func (s *session) spawn(parent string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.spawns >= s.lim.Spawns {
		return "", s.limitLocked(parent, "spawns", limitError(fmt.Sprintf("session %s holds %d child names reserved with spawn and not yet claimed", s.id, s.spawns), s.lim.Spawns, "max-spawns"))
	}
	name := s.nextChildLocked(parent)
	if len(name) > maxStreamName {
		return "", fmt.Errorf("stream %s would be %d bytes: stream names are at most %d bytes", name, len(name), maxStreamName)
	}
	s.streamLocked(name).reserved = true
	s.spawns++
	return name, nil
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
			ss.Reads, ss.SleepNS, ss.NowNS, ss.Timers, ss.Draws, ss.Unserved = r.Reads, r.SleepNS, r.NowNS, r.Timers, r.Draws, r.Unserved
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
