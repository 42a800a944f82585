package daemon

import (
	"fmt"
	"time"

	"github.com/dal-runtime/dal/internal/wire"
	"golang.org/x/sys/unix"
)

// Tracer traces sessions' process trees from the kernel's side (package
// ebpf's boundary tracer, adapted by its owner).
type Tracer interface {
	// Track makes pid and everything it forks from now on part of session;
	// nothing is counted for a process until its lineage's countFromExec-th
	// exec (0: at once).
	Track(pid int, session uint32, countFromExec int) error
	// Syscalls returns the session's counts by syscall name, its notable
	// crossings, and how many events were lost system-wide.
	Syscalls(session uint32) (map[string]uint64, []wire.TraceEvent, uint64, error)
	// Category names a syscall's nondeterminism category ("" for none).
	Category(syscall string) string
	// Forget releases a session's counters.
	Forget(session uint32)
	// Attached reports whether the tracer's hooks are attached now: they
	// are only while a traced session is open, and cost nothing otherwise.
	Attached() bool
}

// traceStart starts tracing the session's dal-exec, the peer of this
// connection (its PID from SO_PEERCRED), before it starts the agent; the
// reply is the go-ahead. Without a tracer it says why tracing is off.
func (s *Server) traceStart(ss *session, peer *unix.Ucred, fromExec int) (wire.Reply, error) {
	if s.opts.Tracer == nil {
		return wire.Reply{Tracing: false, Reason: s.opts.TracerOff}, nil
	}
	if fromExec < 0 || fromExec > 8 {
		return wire.Reply{}, fmt.Errorf("trace.start: from_exec %d is out of range 0..8", fromExec)
	}
	if peer == nil || peer.Pid <= 0 {
		return wire.Reply{Tracing: false, Reason: "the client's process id is unknown"}, nil
	}
	if err := s.opts.Tracer.Track(int(peer.Pid), ss.num, fromExec); err != nil {
		return wire.Reply{Tracing: false, Reason: err.Error()}, nil
	}
	ss.mu.Lock()
	ss.traced = true
	ss.mu.Unlock()
	return wire.Reply{Tracing: true}, nil
}

// traceReport returns what the tracer counted for the session so far.
func (s *Server) traceReport(ss *session) (wire.Reply, error) {
	ss.mu.Lock()
	traced := ss.traced
	ss.mu.Unlock()
	if s.opts.Tracer == nil || !traced {
		reason := s.opts.TracerOff
		if s.opts.Tracer != nil {
			reason = "tracing was not started for this session"
		}
		return wire.Reply{Tracing: false, Reason: reason}, nil
	}
	counts, events, drops, err := s.opts.Tracer.Syscalls(ss.num)
	if err != nil {
		return wire.Reply{Tracing: false, Reason: err.Error()}, nil
	}
	if m := s.opts.Metrics; m != nil {
		byCat := map[string]uint64{}
		for name, n := range counts {
			c := s.opts.Tracer.Category(name)
			if c == "" {
				c = "other"
			}
			byCat[c] += n
		}
		for c, n := range byCat {
			m.AddSyscalls(c, n)
		}
	}
	return wire.Reply{Tracing: true, Syscalls: counts, Events: events, Drops: drops}, nil
}

// observe takes a figure dal-exec measured into the metrics. It arrives on
// the connection that opened ss, and each figure (each network outcome) is
// taken once per session: a client adds to /metrics only what its own
// session measured, once.
func (s *Server) observe(ss *session, req wire.Request) error {
	key := req.What
	switch req.What {
	case "replay", "coverage", "revert":
	case "network":
		if len(req.Counts) != 1 {
			return fmt.Errorf("observe: a network figure carries one outcome, got %d", len(req.Counts))
		}
		for k := range req.Counts {
			key += "/" + k
		}
	default:
		return fmt.Errorf("observe: unknown figure %q (replay, coverage, revert or network)", req.What)
	}
	ss.mu.Lock()
	seen, full := ss.observed[key], len(ss.observed) >= maxLabels
	if !seen && !full {
		ss.observed[key] = true
	}
	ss.mu.Unlock()
	switch {
	case seen:
		return fmt.Errorf("observe: session %s already reported its %s figure: a session reports each figure once", ss.id, key)
	case full:
		return fmt.Errorf("observe: session %s already reported %d figures, the most a session may", ss.id, maxLabels)
	}
	m := s.opts.Metrics
	if m == nil {
		return nil
	}
	switch req.What {
	case "replay":
		m.ObserveReplay(req.Value)
	case "coverage":
		esc := map[string]int{}
		for k, v := range req.Counts {
			esc[k] = int(v)
		}
		m.ObserveCoverage(req.Value, esc)
	case "revert":
		m.ObserveRevert(time.Duration(req.Value * float64(time.Second)))
	case "network":
		for k, v := range req.Counts {
			if err := m.AddNetwork(k, uint64(v)); err != nil {
				return err
			}
		}
	}
	return nil
}
