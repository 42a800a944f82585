package policy

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/user"
	"strings"
	"sync"
	"time"

	"github.com/dal-runtime/dal/internal/policy/gate"
	"github.com/dal-runtime/dal/internal/termsafe"
)

// DefaultAskTimeout is how long an ask waits for a person (--ask-timeout).
const DefaultAskTimeout = 5 * time.Minute

// Options configure a run's gate.
type Options struct {
	// AskTimeout: an ask nobody answers in time is denied (0: the default).
	AskTimeout time.Duration
	// Log receives one line per decision ("dal: policy: ...").
	Log io.Writer
	// Terminal, when set, is where asks are also put to the person at
	// dal-exec's terminal, who answers y or n there. The caller passes it
	// only when the agent does not read that terminal itself.
	Terminal *os.File
	// Run is the run's command line, shown with each ask.
	Run string
	// Dir is where the approval socket goes ("" = gate.Dir()).
	Dir string
	// Redact, when set, replaces the run's secret values in what people
	// see (log lines, asks) and in the keys replay matches decisions by
	// (a recorded key was scrubbed with the bundle). The policy itself
	// sees the call as it is.
	Redact func(string) string
}

// Record is one decision, as the bundle's policy.json keeps it.
type Record struct {
	Seq     int            `json:"seq"`
	At      time.Time      `json:"at"`
	Kind    string         `json:"kind"`
	Subject string         `json:"subject"`
	Key     string         `json:"key"`
	Input   map[string]any `json:"input"`
	// Action and Reason are what the policy said (Defined false: the
	// default applied); Allowed is the outcome, after a person's answer
	// to an ask.
	Action   Action        `json:"action"`
	Reason   string        `json:"reason,omitempty"`
	Defined  bool          `json:"defined"`
	Allowed  bool          `json:"allowed"`
	Approval *gate.Verdict `json:"approval,omitempty"`
	ID       string        `json:"id,omitempty"` // the ask's request ID
	Replayed bool          `json:"replayed,omitempty"`
	Drift    string        `json:"drift,omitempty"` // replay: how the current policy differs
	// After: decided after the fact (a write the sandbox refused).
	After bool `json:"after,omitempty"`
}

// Gate applies a policy to one run: it decides, asks people, and keeps
// every decision for the audit. Its methods are safe for concurrent use.
type Gate struct {
	p   *Policy
	o   Options
	q   *gate.Queue
	srv *gate.Server

	ctx    context.Context // ends at Close: held calls are denied
	cancel context.CancelFunc
	closed sync.Once

	mu       sync.Mutex
	seq      int
	records  []Record
	replay   map[string][]Record // replay: recorded decisions by key, in order
	replayed bool
}

// Start opens the gate of a recorded run: its approval socket in o.Dir
// and, with o.Terminal, the prompt there.
func Start(p *Policy, o Options) (*Gate, error) {
	g := newGate(p, o)
	dir := o.Dir
	if dir == "" {
		dir = gate.Dir()
	}
	srv, err := gate.Serve(g.q, dir)
	if err != nil {
		g.cancel()
		return nil, err
	}
	g.srv = srv
	if o.Terminal != nil {
		go g.terminal(o.Terminal)
	}
	return g, nil
}

// Replay opens the gate of a replay: recorded decisions are applied again
// (nobody is asked), the policy p is evaluated too and a decision that
// differs is drift.
func Replay(p *Policy, recorded []Record, o Options) *Gate {
	g := newGate(p, o)
	g.replayed = true
	g.replay = map[string][]Record{}
	for _, r := range recorded {
		g.replay[r.Key] = append(g.replay[r.Key], r)
	}
	return g
}

func newGate(p *Policy, o Options) *Gate {
	if o.AskTimeout <= 0 {
		o.AskTimeout = DefaultAskTimeout
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Gate{p: p, o: o, q: gate.NewQueue(o.Run), ctx: ctx, cancel: cancel}
}

// Close denies what is still held and closes the approval socket.
func (g *Gate) Close() {
	g.closed.Do(func() {
		g.cancel()
		if g.srv != nil {
			g.srv.Close()
		}
	})
}

// Policy is the gate's policy.
func (g *Gate) Policy() *Policy { return g.p }

// Records are the decisions so far, in order.
func (g *Gate) Records() []Record {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]Record(nil), g.records...)
}

// Check decides in: it evaluates the policy and, for an ask, holds the
// caller until a person answers, the ask times out or ctx ends (each a
// deny). It returns whether the call may go on, and the record kept.
func (g *Gate) Check(ctx context.Context, in *Input) (bool, Record) {
	return g.check(ctx, in, false)
}

// Observe decides in after the fact, for the audit: a write outside the
// workspace, which the sandbox refused whatever the policy says. Nobody
// is asked; the outcome is denied.
func (g *Gate) Observe(ctx context.Context, in *Input) Record {
	_, rec := g.check(ctx, in, true)
	return rec
}

func (g *Gate) check(ctx context.Context, in *Input, after bool) (bool, Record) {
	d := g.decide(ctx, in)
	rec := Record{At: time.Now().UTC(), Kind: in.Kind, Subject: g.redact(in.Subject), Key: g.redact(in.Key), Input: g.redactDoc(in.Doc),
		Action: d.Action, Reason: d.Reason, Defined: d.Defined, After: after}
	if g.replayed {
		g.applyRecorded(&rec)
		if after {
			rec.Allowed = false
		}
	} else if !after {
		switch d.Action {
		case Allow:
			rec.Allowed = true
		case Ask:
			g.ask(ctx, in, &rec)
		}
	}
	g.mu.Lock()
	g.seq++
	rec.Seq = g.seq
	g.records = append(g.records, rec)
	g.mu.Unlock()
	g.log(&rec)
	return rec.Allowed, rec
}

func (g *Gate) decide(ctx context.Context, in *Input) Decision {
	v, err := g.p.input(in)
	if err != nil {
		return Decision{Action: Deny, Reason: "the input could not be given to the policy: " + err.Error(), Defined: true}
	}
	return g.p.Decide(ctx, v)
}

// applyRecorded takes the outcome of the recorded decision of the same
// call, and notes where the current policy says otherwise.
func (g *Gate) applyRecorded(rec *Record) {
	g.mu.Lock()
	q := g.replay[rec.Key]
	var was *Record
	if len(q) > 0 {
		was = &q[0]
		g.replay[rec.Key] = q[1:]
	}
	g.mu.Unlock()
	rec.Replayed = true
	if was == nil {
		rec.Allowed = rec.Action == Allow
		rec.Drift = fmt.Sprintf("%s %s was not decided in the recording; the current policy says %s", rec.Kind, rec.Subject, rec.Action)
		return
	}
	rec.Allowed, rec.Approval, rec.ID = was.Allowed, was.Approval, was.ID
	if was.Action != rec.Action {
		rec.Drift = fmt.Sprintf("%s %s: the recording's policy said %s%s, the current one says %s%s", rec.Kind, rec.Subject,
			was.Action, because(was.Reason), rec.Action, because(rec.Reason))
	}
}

func because(reason string) string {
	if reason == "" {
		return ""
	}
	return " (" + reason + ")"
}

// Unreplayed describes the recorded decisions the replay never made, ""
// when it made them all.
func (g *Gate) Unreplayed() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	n, first := 0, (*Record)(nil)
	for _, q := range g.replay {
		for i := range q {
			n++
			if first == nil || q[i].Seq < first.Seq {
				first = &q[i]
			}
		}
	}
	if n == 0 {
		return ""
	}
	return fmt.Sprintf("%d recorded decision(s) were not made in the replay; the first: %s %s", n, first.Kind, first.Subject)
}

func (g *Gate) redact(s string) string {
	if g.o.Redact == nil {
		return s
	}
	return g.o.Redact(s)
}

// redactDoc is doc with the secrets' values replaced (a copy; doc is
// left as the policy saw it).
func (g *Gate) redactDoc(doc map[string]any) map[string]any {
	if g.o.Redact == nil {
		return doc
	}
	b, err := json.Marshal(doc)
	if err != nil {
		return doc
	}
	var out map[string]any
	if json.Unmarshal([]byte(g.o.Redact(string(b))), &out) != nil {
		return doc
	}
	return out
}

// ask holds the call until a person decides.
func (g *Gate) ask(ctx context.Context, in *Input, rec *Record) {
	r := g.q.Add(gate.Request{Kind: in.Kind, Summary: rec.Subject, Reason: rec.Reason, Input: rec.Input})
	rec.ID = r.ID
	fmt.Fprintf(g.o.Log, "dal: policy asks (%s) before %s %s%s: answer with dal-exec approve %s or dal-exec deny %s, or on dald's Gate page; denied in %s without an answer\n",
		r.ID, in.Kind, termsafe.Line(rec.Subject), termsafe.Line(because(rec.Reason)), r.ID, r.ID, g.o.AskTimeout)
	ctx, cancel := context.WithTimeout(ctx, g.o.AskTimeout)
	defer cancel()
	stop := context.AfterFunc(g.ctx, cancel)
	defer stop()
	v := g.q.Wait(ctx, r.ID)
	rec.Approval = &v
	rec.Allowed = v.Approve
}

func (g *Gate) log(rec *Record) {
	what := "allows"
	if !rec.Allowed {
		what = "denies"
	}
	how := ""
	switch {
	case rec.Approval != nil:
		verb := "denied"
		if rec.Approval.Approve {
			verb = "approved"
		}
		how = fmt.Sprintf(" (asked %s, %s by %s)", rec.ID, verb, termsafe.Line(rec.Approval.By))
	case !rec.Defined:
		how = " (no rule decided: the default)"
	}
	if rec.After {
		what, how = "says "+string(rec.Action)+" to", how+" (after the fact: the sandbox refused it)"
	}
	if rec.Replayed {
		how += " [as recorded]"
	}
	fmt.Fprintf(g.o.Log, "dal: policy %s %s %s%s%s\n", what, rec.Kind, termsafe.Line(rec.Subject), termsafe.Line(because(rec.Reason)), how)
	if rec.Drift != "" {
		fmt.Fprintf(g.o.Log, "dal: policy drift: %s\n", termsafe.Line(rec.Drift))
	}
}

// terminal puts asks to the person at f, one at a time, and reads y or n.
func (g *Gate) terminal(f *os.File) {
	ch, unsubscribe := g.q.Subscribe()
	defer unsubscribe()
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			case <-g.ctx.Done():
				return
			}
		}
	}()
	who := "terminal"
	if u, err := user.Current(); err == nil {
		who += " (" + u.Username + ")"
	}
	shown := ""
	for {
		if shown == "" {
			if p := g.q.Pending(); len(p) > 0 {
				shown = p[0].ID
				fmt.Fprintf(f, "dal: policy asks (%s): %s %s%s\n     allow it? [y/N] ", shown, p[0].Kind, termsafe.Line(p[0].Summary), termsafe.Line(because(p[0].Reason)))
			}
		}
		select {
		case <-ch:
			if shown != "" && !g.pending(shown) {
				fmt.Fprintf(f, "\ndal: %s was decided elsewhere\n", shown)
				shown = ""
			}
		case l := <-lines:
			if shown == "" {
				continue
			}
			a := strings.ToLower(strings.TrimSpace(l))
			g.q.Decide(shown, gate.Verdict{Approve: a == "y" || a == "yes", By: who})
			shown = ""
		case <-g.ctx.Done():
			return
		}
	}
}

func (g *Gate) pending(id string) bool {
	for _, r := range g.q.Pending() {
		if r.ID == id {
			return true
		}
	}
	return false
}
