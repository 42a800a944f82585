// Package trace adapts the eBPF boundary tracer (package ebpf) to dald: it
// opens it once per daemon, or says in one sentence why tracing is off,
// and answers the daemon's questions in wire terms.
package trace

import (
	"errors"

	"github.com/dal-runtime/dal/ebpf"
	"github.com/dal-runtime/dal/internal/wire"
)

// Tracer is an open boundary tracer. It implements daemon.Tracer.
type Tracer struct {
	t *ebpf.Tracer
}

// Open loads and attaches the tracer. When it cannot (not root, no BTF, a
// locked-down kernel, or disabled), it returns nil and the reason, one
// sentence.
func Open(disabled, stats bool) (*Tracer, string) {
	if disabled {
		return nil, "disabled with --no-trace"
	}
	t, err := ebpf.Open(ebpf.Options{Stats: stats})
	if err != nil {
		var ue *ebpf.UnavailableError
		if errors.As(err, &ue) {
			return nil, ue.Reason
		}
		return nil, err.Error()
	}
	return &Tracer{t: t}, ""
}

// Close detaches the tracer.
func (t *Tracer) Close() error { return t.t.Close() }

// Track implements daemon.Tracer.
func (t *Tracer) Track(pid int, session uint32, countFromExec int) error {
	return t.t.Track(pid, session, countFromExec)
}

// Syscalls implements daemon.Tracer.
func (t *Tracer) Syscalls(session uint32) (map[string]uint64, []wire.TraceEvent, uint64, error) {
	c, err := t.t.Counts(session)
	if err != nil {
		return nil, nil, 0, err
	}
	var evs []wire.TraceEvent
	for _, e := range t.t.Events(session) {
		evs = append(evs, wire.TraceEvent{Kind: e.Kind, PID: e.PID, Detail: e.Detail})
	}
	return c.Syscalls, evs, c.DroppedEvents, nil
}

// Category implements daemon.Tracer.
func (t *Tracer) Category(name string) string { return string(ebpf.CategoryOf(name)) }

// Attached implements daemon.Tracer: whether the eBPF programs are attached
// to their hooks now (only while a traced session is open).
func (t *Tracer) Attached() bool { return t.t.Attached() }

// Forget implements daemon.Tracer.
func (t *Tracer) Forget(session uint32) { t.t.Forget(session) }

// Stats are the kernel's run statistics of the tracer's programs.
func (t *Tracer) Stats() ([]ebpf.ProgramStats, error) { return t.t.Stats() }
