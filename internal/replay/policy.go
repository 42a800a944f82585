package replay

import (
	"context"
	"fmt"

	"github.com/dal-runtime/dal/internal/netcap"
	"github.com/dal-runtime/dal/internal/netcap/har"
	"github.com/dal-runtime/dal/internal/policy"
	"github.com/dal-runtime/dal/internal/record"
)

// startPolicy opens the gate of a replay: the recorded decisions are
// applied again and the current policy (--policy, else the bundle's own)
// is evaluated beside them. Nothing is done for a bundle without
// policy.json and a replay without --policy.
func (r *replaying) startPolicy() error {
	audit, recorded, err := policy.ReadAudit(context.Background(), r.b.ReadFile)
	if err != nil {
		return err
	}
	p := r.o.Policy.Policy
	if p == nil {
		p = recorded
	}
	if p == nil {
		return nil
	}
	var decisions []policy.Record
	if audit != nil {
		decisions = audit.Decisions
	}
	r.gate = policy.Replay(p, decisions, policy.Options{Log: r.o.Log, Redact: r.secretScrubber().String})
	r.cleanup = append(r.cleanup, r.gate.Close)
	return nil
}

// policyHooks are the replay proxy's hooks.
func (r *replaying) policyHooks() []func(context.Context, *har.Exchange) *netcap.Answer {
	if r.gate == nil {
		return nil
	}
	return []func(context.Context, *har.Exchange) *netcap.Answer{record.HTTPGate(r.gate, func() *record.Network { return r.nw }, true)}
}

// gatePolicy hands the replay's sandbox the exec and connect gate.
func (r *replaying) gatePolicy() error {
	if r.gate != nil {
		r.cfg.Policy = record.SandboxGate(r.gate, r.nw)
	}
	return nil
}

// comparePolicy is the policy component: every decision the replay made
// agrees with the recorded one, and none is missing.
func (r *replaying) comparePolicy() Component {
	c := Component{Name: "policy"}
	if r.gate == nil {
		return c
	}
	record.ObserveWrites(r.gate, r.cfg)
	c.Compared, c.Match = true, true
	n, first := 0, ""
	for _, rec := range r.gate.Records() {
		if rec.Drift != "" {
			if n == 0 {
				first = rec.Drift
			}
			n++
		}
	}
	if n > 0 {
		c.Match = false
		c.First = first
		if n > 1 {
			c.First += fmt.Sprintf(" (and %d more)", n-1)
		}
		return c
	}
	if s := r.gate.Unreplayed(); s != "" {
		c.Match, c.First = false, s
	}
	return c
}
