package record

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/dal-runtime/dal/bundle"
	"github.com/dal-runtime/dal/internal/netcap"
	"github.com/dal-runtime/dal/internal/netcap/har"
	"github.com/dal-runtime/dal/internal/netcap/prompts"
	"github.com/dal-runtime/dal/internal/policy"
	"github.com/dal-runtime/dal/internal/sandbox"
)

// Policy is the policy gate of a record or a replay (--policy,
// docs/policy.md): every request through the proxy, every exec of the
// agent's tree and every connect to a loopback service is decided by the
// policy; writes outside the workspace, which the sandbox refuses anyway,
// are decided after the fact for the audit. The decisions go to the
// bundle's policy.json, the policy's files to policy/.
type Policy struct {
	// Policy is the compiled policy; nil: none. A replay without one
	// evaluates the bundle's own recorded policy.
	Policy     *policy.Policy
	AskTimeout time.Duration
	// Terminal, when set, is where a record also asks its questions.
	Terminal *os.File
}

// logVia writes to whatever *w is at the time of the write: the gate is
// made before the run's logs are opened.
type logVia struct{ w *io.Writer }

func (l logVia) Write(p []byte) (int, error) { return (*l.w).Write(p) }

// startPolicy opens the gate of a recording and puts its HTTP hook first
// among the proxy's (before buildSandbox, which builds the proxy).
func (r *recording) startPolicy() error {
	p := r.o.Policy.Policy
	if p == nil {
		return nil
	}
	s := NewScrubber(keptSecretValues(r.spec.KeepEnv, r.o.SecretEnv))
	g, err := policy.Start(p, policy.Options{AskTimeout: r.o.Policy.AskTimeout, Log: logVia{&r.spec.Log},
		Terminal: r.o.Policy.Terminal, Run: strings.Join(r.spec.Args, " "), Redact: s.String})
	if err != nil {
		return err
	}
	r.gate = g
	hook := HTTPGate(g, func() *Network { return r.nw }, false)
	r.o.Network.Before = append([]func(context.Context, *har.Exchange) *netcap.Answer{hook}, r.o.Network.Before...)
	return nil
}

// gatePolicy hands the sandbox the exec and connect gate (after
// buildSandbox, which configures the sandbox).
func (r *recording) gatePolicy() error {
	if r.gate != nil {
		r.cfg.Policy = SandboxGate(r.gate, r.nw)
	}
	return nil
}

// writePolicy decides the refused writes after the fact, closes the gate
// and writes policy.json and policy/ into the bundle (before the secret
// scrub, which then covers them).
func (r *recording) writePolicy() error {
	if r.gate == nil {
		return nil
	}
	if err := ObserveWrites(r.gate, r.cfg); err != nil {
		return err
	}
	r.gate.Close()
	if err := policy.WriteAudit(r.w.Dir(), r.gate.Audit(), r.gate.Policy()); err != nil {
		return fmt.Errorf("write the policy's audit: %w", err)
	}
	return nil
}

// policyManifest names the policy in the manifest.
func policyManifest(m *bundle.Manifest, g *policy.Gate) {
	if g == nil {
		return
	}
	if m.Config.Agent == nil {
		m.Config.Agent = &bundle.Agent{}
	}
	m.Config.Agent.RulesActive = g.Policy().RulesActive()
}

// ObserveWrites gives the gate g the writes outside the workspace that the
// sandbox cfg refused, decided after the fact for the audit.
func ObserveWrites(g *policy.Gate, cfg sandbox.Config) error {
	denied, err := sandbox.Denied(cfg)
	if err != nil {
		return err
	}
	for _, d := range denied {
		if d.Path != "" {
			g.Observe(context.Background(), policy.Write(d.Path, d.Op))
		}
	}
	return nil
}

// SandboxGate decides the sandbox's gated calls (execs, connects) with g;
// connects to dal's own proxy nw (nil: none) are not gated (the policy
// sees its requests one by one).
func SandboxGate(g *policy.Gate, nw *Network) *sandbox.PolicyGate {
	pg := &sandbox.PolicyGate{Decide: func(c sandbox.PolicyCall) bool {
		var in *policy.Input
		switch c.Kind {
		case "exec":
			in = policy.Exec(c.Path, c.Argv, c.Cwd, c.Stream, c.Truncated)
		case "connect":
			in = policy.Connect(c.Addr, c.Stream)
		default:
			return false
		}
		ok, _ := g.Check(context.Background(), in)
		return ok
	}}
	if nw != nil {
		pg.Exempt = []string{nw.env.Proxy}
	}
	return pg
}

// HTTPGate is the proxy hook: it decides each request with g and answers
// a denied one with 403 in dal's place. In a replay the recording answers
// (a recorded denial is a recorded 403): the hook only compares. nw gives
// the run's network, which is built after the hook.
func HTTPGate(g *policy.Gate, nw func() *Network, replay bool) func(context.Context, *har.Exchange) *netcap.Answer {
	var tally tokenTally
	return func(ctx context.Context, x *har.Exchange) *netcap.Answer {
		n := nw()
		in, err := policy.HTTP(x, n.redactor, tally.update(n))
		if err != nil {
			return &netcap.Answer{Status: http.StatusForbidden, By: "policy", Type: "dal_policy_denied",
				Message: "dal policy: the request could not be given to the policy: " + err.Error()}
		}
		ok, rec := g.Check(ctx, in)
		if ok || replay {
			return nil
		}
		msg := "dal policy: denied"
		if rec.Reason != "" {
			msg += ": " + rec.Reason
		}
		if rec.Approval != nil {
			msg += fmt.Sprintf(" (asked %s, denied by %s)", rec.ID, rec.Approval.By)
		}
		return &netcap.Answer{Status: http.StatusForbidden, By: "policy", Type: "dal_policy_denied", Message: msg}
	}
}

// tokenTally counts the tokens of the LLM calls answered so far (the
// exchanges the proxy has recorded), each once.
type tokenTally struct {
	mu     sync.Mutex
	seen   int
	tokens int
}

func (t *tokenTally) update(n *Network) int {
	n.mu.Lock()
	xs := append([]*har.Exchange(nil), n.exchanges...)
	n.mu.Unlock()
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, x := range xs[min(t.seen, len(xs)):] {
		if x.Response == nil || x.Answered != "" {
			continue
		}
		e, err := har.FromExchange(x, n.redactor)
		if err != nil {
			continue
		}
		if p, ok := prompts.Extract(&e); ok {
			t.tokens += p.Usage.TotalTokens
		}
	}
	t.seen = len(xs)
	return t.tokens
}
