// Package gate is the rendezvous between a run whose policy asked a person
// and the people who may answer: the pending requests of one run (a
// [Queue]), served on a Unix socket in a per-user directory ([Dir]) so that
// `dal-exec approve ID`, `dal-exec deny ID` and dald's Gate page can list
// and decide them ([List], [Decide], [Watch]).
//
// It is not the policy: it neither evaluates Rego nor records the audit
// (package policy does both) and imports nothing of OPA, so dald serves
// the Gate page without carrying the Rego engine.
//
// Who may decide: a connection is served only when its peer (SO_PEERCRED)
// runs as the same user as the run, or as root, and in the same PID
// namespace. The agent runs in a PID namespace of its own (package
// sandbox) and may see the directory read-only, so it can connect but
// never approve its own request. The directory is created 0700 and
// refused when it is a symbolic link or belongs to someone else; each
// socket is 0600.
//
// Protocol: one JSON object per line in each direction. {"op":"list"}
// answers {"run":...,"pending":[...]}; {"op":"decide","id":...,
// "approve":bool,"via":...,"reason":...} answers {} or {"error":...};
// {"op":"watch"} answers the list now and again at every change until
// the client hangs up.
package gate

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/dal-runtime/dal/internal/wire"
)

// Request is one pending question: a call the policy holds until a person
// decides.
type Request struct {
	ID      string    `json:"id"`      // "<dal-exec pid>.<n>", typed by people
	Kind    string    `json:"kind"`    // http, exec, write, connect
	Summary string    `json:"summary"` // one line: "POST https://api.example.com/v1/x"
	Reason  string    `json:"reason"`  // the policy's reason for asking
	Input   any       `json:"input"`   // the policy's input (secrets redacted)
	Since   time.Time `json:"since"`
	Run     string    `json:"run"` // the run's command line
}

// Verdict is a person's (or the timeout's) answer.
type Verdict struct {
	Approve bool      `json:"approve"`
	By      string    `json:"by"` // "uid 1000 (alice) via dal-exec approve", "terminal", "timeout"
	Reason  string    `json:"reason,omitempty"`
	At      time.Time `json:"at"`
}

// ErrUnknown is Decide's error for an ID that is not pending (decided
// already, or never asked).
var ErrUnknown = errors.New("no pending request has this ID")

// Queue holds one run's pending requests. Its methods are safe for
// concurrent use.
type Queue struct {
	run    string
	prefix string

	mu      sync.Mutex
	n       int
	pending map[string]*waiting
	subs    map[chan struct{}]bool
}

type waiting struct {
	req     Request
	done    chan Verdict // buffered, receives exactly one verdict
	decided bool         // no longer pending; Wait removes it
}

// NewQueue returns the queue of a run whose command line is run; IDs are
// numbered under this process's pid, so they are unique on the host.
func NewQueue(run string) *Queue {
	return &Queue{run: run, prefix: strconv.Itoa(os.Getpid()) + ".", pending: map[string]*waiting{}, subs: map[chan struct{}]bool{}}
}

// Add makes r pending (its ID, Since and Run are set) and returns it.
// The caller must then Wait for its verdict, which forgets it.
func (q *Queue) Add(r Request) Request {
	q.mu.Lock()
	q.n++
	r.ID = q.prefix + strconv.Itoa(q.n)
	r.Since = time.Now().UTC()
	r.Run = q.run
	q.pending[r.ID] = &waiting{req: r, done: make(chan Verdict, 1)}
	q.mu.Unlock()
	q.changed()
	return r
}

// Wait blocks until id is decided, or ctx ends: then it is denied "by
// timeout" (ctx's deadline) or "by cancellation", and no longer pending.
func (q *Queue) Wait(ctx context.Context, id string) Verdict {
	q.mu.Lock()
	w := q.pending[id]
	q.mu.Unlock()
	if w == nil {
		return Verdict{By: "nobody (unknown request)", At: time.Now().UTC()}
	}
	defer func() {
		q.mu.Lock()
		delete(q.pending, id)
		q.mu.Unlock()
	}()
	select {
	case v := <-w.done:
		return v
	case <-ctx.Done():
		by := "cancellation"
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			by = "timeout"
		}
		q.Decide(id, Verdict{By: by}) // loses to an answer given just before
		return <-w.done
	}
}

// Decide answers id once; later answers get ErrUnknown. At is set when zero.
func (q *Queue) Decide(id string, v Verdict) error {
	if v.At.IsZero() {
		v.At = time.Now().UTC()
	}
	q.mu.Lock()
	w := q.pending[id]
	if w == nil || w.decided {
		q.mu.Unlock()
		return fmt.Errorf("%s: %w", id, ErrUnknown)
	}
	w.decided = true
	q.mu.Unlock()
	w.done <- v
	q.changed()
	return nil
}

// Pending lists the pending requests, oldest first.
func (q *Queue) Pending() []Request {
	q.mu.Lock()
	out := make([]Request, 0, len(q.pending))
	for _, w := range q.pending {
		if !w.decided {
			out = append(out, w.req)
		}
	}
	q.mu.Unlock()
	sort.Slice(out, func(i, j int) bool {
		if !out[i].Since.Equal(out[j].Since) {
			return out[i].Since.Before(out[j].Since)
		}
		return idLess(out[i].ID, out[j].ID)
	})
	return out
}

func idLess(a, b string) bool {
	if len(a) != len(b) {
		return len(a) < len(b)
	}
	return a < b
}

// Subscribe returns a channel that receives (without blocking the queue:
// coalesced) after every change of the pending set, and its cancel.
func (q *Queue) Subscribe() (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	q.mu.Lock()
	q.subs[ch] = true
	q.mu.Unlock()
	return ch, func() {
		q.mu.Lock()
		delete(q.subs, ch)
		q.mu.Unlock()
	}
}

func (q *Queue) changed() {
	q.mu.Lock()
	subs := make([]chan struct{}, 0, len(q.subs))
	for ch := range q.subs {
		subs = append(subs, ch)
	}
	q.mu.Unlock()
	for _, ch := range subs {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// Dir is the directory of the gate sockets of the calling user's runs:
// "gate" beside dald's default socket ($XDG_RUNTIME_DIR/dal/gate,
// /run/dal/gate for root, else $TMPDIR/dal-UID/gate).
func Dir() string {
	return filepath.Join(filepath.Dir(wire.DefaultSocket()), "gate")
}

// Sockets lists the gate sockets in dir, sorted.
func Sockets(dir string) []string {
	m, _ := filepath.Glob(filepath.Join(dir, "*.sock"))
	return slices.Sorted(slices.Values(m))
}
