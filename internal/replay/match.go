package replay

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/dal-runtime/dal/bundle"
	"github.com/dal-runtime/dal/internal/marks"
	"github.com/dal-runtime/dal/internal/match"
	"github.com/dal-runtime/dal/internal/netcap/prompts"
	"github.com/dal-runtime/dal/internal/record"
	"github.com/dal-runtime/dal/internal/sandbox"
)

// settle gives the offline replay's components their strategies and
// statuses (--match), compares the relaxed ones again under their
// strategy, and sets the verdict's match status, fidelity and exactness.
func (r *replaying) settle(ctx context.Context) {
	scrub := r.secretScrubber()
	recompare := func(name string) (match.Result, bool) {
		spec := r.o.Match
		switch name {
		case "stdout", "stderr":
			rec, err := r.b.ReadFile("logs/" + name)
			if err != nil {
				return match.Result{}, false
			}
			got := r.stdout.Bytes()
			if name == "stderr" {
				got = r.stderr.Bytes()
			}
			return spec.Compare(ctx, name, "", rec, got), true
		case "fs_diff":
			upper := sandbox.Upper(r.cfg)
			return matchFS(ctx, spec, r.changes, r.got,
				func(p string) ([]byte, error) { return r.b.ReadFile("fs-diff/files/" + sandbox.MirrorPath(p)) },
				func(p string) ([]byte, error) {
					b, err := record.ReadNoFollow(filepath.Join(upper, filepath.FromSlash(p)))
					if err == nil {
						b, _ = scrub.Bytes(b)
					}
					return b, err
				}), true
		case "iterations":
			return matchIterations(spec, r.recIts, r.gotIts), true
		case "prompts":
			want, err := prompts.ReadDir(r.b.File("prompts"))
			if err != nil {
				return match.Result{}, false
			}
			es, err := r.nw.Entries(r.xs)
			if err != nil {
				return match.Result{}, false
			}
			return matchPrompts(ctx, spec, want, record.ExtractPrompts(es)), true
		}
		return match.Result{}, false
	}
	r.v.settle(ctx, r.o.Match, recompare)
}

// settle is the part of it shared by offline and live replays.
func (v *Verdict) settle(ctx context.Context, spec match.Spec, recompare func(name string) (match.Result, bool)) {
	if spec.Default == "" {
		spec = match.ExactSpec()
	}
	v.MatchStatus = settleComponents(v.Components, spec, recompare)
	v.Fidelity = Fidelity(v.Components)
	v.Exact = v.MatchStatus == match.ExactMatch
	v.Match, v.Threshold = spec.String(), spec.Threshold
}

// Matched reports whether the replay matched under its strategies: an
// exact or a semantic match (dal-exec replay exits 0).
func (v *Verdict) Matched() bool {
	return v.MatchStatus == match.ExactMatch || v.MatchStatus == match.SemanticMatch
}

// settleComponents sets each component's strategy and status. A
// component that differs byte for byte is compared again with its
// strategy when that is not exact (recompare; false: it cannot be, and it
// stays a difference). A scorer that fails leaves its component not
// compared, and the replay cannot match. It returns the overall status.
func settleComponents(cs []Component, spec match.Spec, recompare func(name string) (match.Result, bool)) string {
	var statuses []string
	failed := false
	for i := range cs {
		c := &cs[i]
		if !c.Compared {
			c.Status = match.NotReplayed
			continue
		}
		st := spec.For(c.Name)
		c.Strategy = string(st)
		switch {
		case c.Match:
			c.Status = match.ExactMatch
			if st == match.Semantic {
				one := 1.0
				c.Similarity = &one
			}
		case st == match.Exact:
			c.Status = match.NoMatch
		default:
			res, ok := recompare(c.Name)
			if !ok {
				c.Status = match.NoMatch
				break
			}
			c.Status, c.Similarity = res.Status, res.Similarity
			switch {
			case res.Err != "":
				c.Compared, c.Error = false, res.Err
				c.First = "not compared: the similarity command failed: " + res.Err
				failed = true
			case res.Matched():
				c.Match, c.First = true, res.First
			case res.First != "":
				c.First = res.First + "\n" + c.First
			}
		}
		statuses = append(statuses, c.Status)
	}
	return match.Overall(statuses, failed)
}

// how describes how a component was matched, for Render.
func (c Component) how() string {
	switch {
	case c.Error != "":
		return " (not compared: scorer failed)"
	case !c.Compared:
		return " (not in this bundle)"
	case c.Strategy == "" || c.Strategy == string(match.Exact):
		return ""
	case c.Similarity != nil:
		return fmt.Sprintf(" (%s, %s, similarity %.4f)", c.Strategy, c.Status, *c.Similarity)
	default:
		return fmt.Sprintf(" (%s, %s)", c.Strategy, c.Status)
	}
}

// addMatch copies the verdict's match figures into a stored outcome.
func addMatch(o *bundle.ReplayOutcome, v *Verdict) {
	o.MatchStatus = v.MatchStatus
	o.Match, o.Threshold, o.Live = v.Match, v.Threshold, v.Live
	for _, c := range v.Components {
		if c.Similarity != nil {
			if o.Similarity == nil {
				o.Similarity = map[string]float64{}
			}
			o.Similarity[c.Name] = *c.Similarity
		}
		if c.Error != "" {
			o.Divergences[c.Name] = c.First
		}
	}
}

// matchFS compares file changes under the fs_diff strategy: every path
// must be changed the same way (operation, kind, mode, link target) by
// both runs; files whose content differs are compared with the strategy
// (structural by the file's name). The similarity is the lowest among the
// files compared semantically.
func matchFS(ctx context.Context, spec match.Spec, want, got []sandbox.Change, readWant, readGot func(string) ([]byte, error)) match.Result {
	res := match.Result{Strategy: spec.For("fs_diff"), Status: match.ExactMatch}
	w, g, paths := byPath(want, got)
	differ := func(first string) match.Result {
		res.Status, res.First = match.NoMatch, first
		return res
	}
	for _, p := range paths {
		a, inW := w[p]
		b, inG := g[p]
		if !inW || !inG || a.Op != b.Op || a.Kind != b.Kind || a.Mode != b.Mode || a.LinkTarget != b.LinkTarget {
			var as, bs []sandbox.Change
			if inW {
				as = append(as, a)
			}
			if inG {
				bs = append(bs, b)
			}
			return differ(compareFS(as, bs, "recording", "replay").First)
		}
		if a.Hash == b.Hash {
			continue
		}
		if a.Kind != sandbox.KindFile {
			return differ(p + ": different after the replay")
		}
		ca, err := readWant(p)
		if err != nil {
			return differ(fmt.Sprintf("%s: %v", p, err))
		}
		cb, err := readGot(p)
		if err != nil {
			return differ(fmt.Sprintf("%s: %v", p, err))
		}
		r := spec.Compare(ctx, "fs_diff", p, ca, cb)
		if r.Similarity != nil && (res.Similarity == nil || *r.Similarity < *res.Similarity) {
			res.Similarity = r.Similarity
		}
		switch {
		case r.Err != "":
			res.Status, res.Err = match.NotReplayed, p+": "+r.Err
			return res
		case !r.Matched():
			return differ(p + ": " + r.First)
		case r.Status == match.SemanticMatch:
			res.Status = match.SemanticMatch
			if res.First == "" {
				res.First = p + ": " + r.First
				if r.First == "" {
					res.First = p + ": same structure, different values"
				}
			}
		}
	}
	if res.Status == match.SemanticMatch && res.First == "" {
		res.First = "same structure, different values"
	}
	return res
}

// matchPrompts compares LLM calls under the prompts strategy: the same
// number of calls, each to the same model with the same tool calls, and
// the answers' text and tool-call arguments compared with the strategy.
// What the agent sent is not compared: under a relaxed strategy it may
// quote earlier answers, which may differ.
func matchPrompts(ctx context.Context, spec match.Spec, want, got []*prompts.Prompt) match.Result {
	res := match.Result{Strategy: spec.For("prompts"), Status: match.ExactMatch}
	if len(want) != len(got) {
		res.Status, res.First = match.NoMatch, fmt.Sprintf("%d LLM calls in the recording, %d in the replay", len(want), len(got))
		return res
	}
	for i := range want {
		a, b := want[i], got[i]
		if a.Model != b.Model {
			res.Status, res.First = match.NoMatch, fmt.Sprintf("LLM call %d: model %s in the recording, %s in the replay", i+1, a.Model, b.Model)
			return res
		}
		if toolNames(a) != toolNames(b) {
			res.Status, res.First = match.NoMatch, fmt.Sprintf("LLM call %d: tool calls %s in the recording, %s in the replay", i+1, toolNames(a), toolNames(b))
			return res
		}
		r := spec.Compare(ctx, "prompts", "", answer(a), answer(b))
		if r.Similarity != nil && (res.Similarity == nil || *r.Similarity < *res.Similarity) {
			res.Similarity = r.Similarity
		}
		switch {
		case r.Err != "":
			res.Status, res.Err = match.NotReplayed, fmt.Sprintf("LLM call %d: %s", i+1, r.Err)
			return res
		case !r.Matched():
			res.Status, res.First = match.NoMatch, fmt.Sprintf("LLM call %d: %s", i+1, r.First)
			return res
		case r.Status == match.SemanticMatch:
			res.Status = match.SemanticMatch
			if res.First == "" {
				res.First = fmt.Sprintf("LLM call %d: %s", i+1, r.First)
			}
		}
	}
	return res
}

func toolNames(p *prompts.Prompt) string {
	var names []string
	for _, t := range p.Response.ToolCalls {
		names = append(names, t.Name)
	}
	return "[" + strings.Join(names, " ") + "]"
}

// answer is what a call's answer says: its text and its tool calls'
// arguments, one per line.
func answer(p *prompts.Prompt) []byte {
	var b strings.Builder
	b.WriteString(p.Response.Text)
	for _, t := range p.Response.ToolCalls {
		b.WriteString("\n" + t.Arguments)
	}
	return []byte(b.String())
}

// matchIterations compares iterations under a relaxed strategy: the same
// number of iterations with the same scores and the same artifact paths.
// Their contents are not compared here: the selected iteration's
// artifacts are the run's output, which fs_diff compares with its own
// strategy.
func matchIterations(spec match.Spec, want, got []*marks.Mark) match.Result {
	res := match.Result{Strategy: spec.For("iterations"), Status: match.NoMatch}
	if len(want) != len(got) {
		res.First = fmt.Sprintf("%d iterations in the recording, %d in the replay", len(want), len(got))
		return res
	}
	for i := range want {
		a, b := want[i], got[i]
		if score(a) != score(b) {
			res.First = fmt.Sprintf("iteration %d: score %s in the recording, %s in the replay", i+1, score(a), score(b))
			return res
		}
		if paths(a) != paths(b) {
			res.First = fmt.Sprintf("iteration %d: artifacts %s in the recording, %s in the replay", i+1, paths(a), paths(b))
			return res
		}
	}
	res.Status, res.First = match.SemanticMatch, "the same iterations, scores and artifact paths (contents under fs_diff)"
	return res
}

func score(m *marks.Mark) string {
	if m.Score == nil {
		return "none"
	}
	return fmt.Sprint(*m.Score)
}

func paths(m *marks.Mark) string {
	var ps []string
	for _, a := range m.Artifacts {
		ps = append(ps, a.Path)
	}
	return "[" + strings.Join(ps, " ") + "]"
}
