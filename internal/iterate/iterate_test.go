package iterate

import (
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/dal-runtime/dal/internal/golden"
	"github.com/dal-runtime/dal/internal/marks"
)

func f(v float64) *float64 { return &v }

func its(scores ...*float64) []*marks.Mark {
	var out []*marks.Mark
	for i, s := range scores {
		out = append(out, &marks.Mark{V: 1, Kind: marks.Iteration, Seq: i + 1, Score: s})
	}
	return out
}

func TestSelect(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name     string
		marks    []*marks.Mark
		policy   Policy
		selected int
		best     int
		override bool
		accepted bool
		flags    []string // "seq kind"
		reason   string   // substring of the rationale
		warn     string   // substring of a warning
	}{
		{name: "peak in the middle", marks: its(f(.72), f(.85), f(.83)), policy: DefaultPolicy(),
			selected: 2, best: 2, accepted: true, reason: "iteration 2 has the highest quality score (85% vs 83% for the final iteration 3)"},
		{name: "final best", marks: its(f(.5), f(.6), f(.9)), policy: DefaultPolicy(), selected: 3, best: 3, accepted: true,
			reason: "the final iteration 3 has the highest"},
		{name: "ties go to the earlier", marks: its(f(.8), f(.9), f(.9)), policy: DefaultPolicy(), selected: 2, best: 2,
			accepted: true, reason: "iteration 3 scored the same; the earlier iteration wins ties"},
		{name: "big drop flagged", marks: its(f(.9), f(.8)), policy: DefaultPolicy(), selected: 1, best: 1, accepted: true,
			flags: []string{"2 drop"}, reason: "quality degraded after iteration 1"},
		{name: "drop of exactly 0.05 is not flagged", marks: its(f(.90), f(.85)), policy: DefaultPolicy(), selected: 1, best: 1, accepted: true},
		{name: "two small drops in a row", marks: its(f(.9), f(.88), f(.86)), policy: DefaultPolicy(), selected: 1, best: 1,
			accepted: true, flags: []string{"3 consecutive_drops"}},
		{name: "below threshold", marks: its(f(.5), f(.6)), policy: DefaultPolicy(), selected: 2, best: 2,
			reason: "BELOW the acceptance threshold 70%"},
		{name: "use final with reason", marks: its(f(.72), f(.85), f(.83)),
			policy: use("final", "reviewer prefers the wording"), selected: 3, best: 2, override: true, accepted: true,
			reason: "the user chose iteration 3 over the automatic pick, iteration 2 (--use final): reviewer prefers the wording"},
		{name: "use N", marks: its(f(.72), f(.85), f(.83)), policy: use("1", "r"), selected: 1, best: 2, override: true, accepted: true},
		{name: "use N agreeing", marks: its(f(.72), f(.85)), policy: use("2", "r"), selected: 2, best: 2, accepted: true,
			reason: "agrees with the automatic pick"},
		{name: "use N missing", marks: its(f(.72), f(.85)), policy: use("7", "r"), selected: 2, best: 2, accepted: true,
			warn: "the agent marked no iteration 7"},
		{name: "no scores", marks: its(nil, nil), policy: DefaultPolicy(), selected: 2, best: 0,
			reason: "no iteration has a score", warn: "iteration 1 has no score"},
		{name: "unscored one skipped", marks: its(f(.6), nil, f(.5)), policy: DefaultPolicy(), selected: 1, best: 1,
			flags: []string{"3 drop"}},
		{name: "dimensions weighed", marks: []*marks.Mark{
			{Seq: 1, Dimensions: map[string]float64{"validation": 1, "completeness": 1, "correctness": 1, "readability": 0, "efficiency": 0}},
			{Seq: 2, Dimensions: map[string]float64{"validation": 1, "completeness": 1, "correctness": 1, "readability": 1, "efficiency": 0}},
		}, policy: DefaultPolicy(), selected: 2, best: 2, accepted: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, err := Select(c.marks, c.policy)
			if err != nil {
				t.Fatal(err)
			}
			if s.Selected != c.selected || s.Best != c.best || s.Override != c.override || s.Accepted != c.accepted {
				t.Errorf("selected %d best %d override %v accepted %v; want %d %d %v %v",
					s.Selected, s.Best, s.Override, s.Accepted, c.selected, c.best, c.override, c.accepted)
			}
			var flags []string
			for _, fl := range s.Degradation {
				flags = append(flags, strings.Join([]string{itoa(fl.Iteration), fl.Kind}, " "))
			}
			if strings.Join(flags, ",") != strings.Join(c.flags, ",") {
				t.Errorf("degradation %v, want %v", flags, c.flags)
			}
			if c.reason != "" && !strings.Contains(strings.Join(s.Rationale, "\n"), c.reason) {
				t.Errorf("rationale %q lacks %q", s.Rationale, c.reason)
			}
			if c.warn != "" && !strings.Contains(strings.Join(s.Warnings, "\n"), c.warn) {
				t.Errorf("warnings %q lack %q", s.Warnings, c.warn)
			}
			md := s.Markdown()
			if !strings.Contains(md, "| "+itoa(c.selected)+" |") || !strings.Contains(md, "✓ SELECTED") {
				t.Errorf("report does not mark iteration %d selected:\n%s", c.selected, md)
			}
		})
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

func use(u, reason string) Policy {
	p := DefaultPolicy()
	p.Use, p.Reason = u, reason
	return p
}

func TestScoreFromDimensions(t *testing.T) {
	t.Parallel()
	m := &marks.Mark{Seq: 1, Dimensions: map[string]float64{"validation": 1, "completeness": 0.8, "correctness": 0.6, "readability": 0.5, "efficiency": 1, "tone": 0.1}}
	s, src, warn := Score(m, DefaultWeights())
	// .3*1 + .25*.8 + .25*.6 + .1*.5 + .1*1 = .8
	if s == nil || *s != 0.8 || src != "dimensions" {
		t.Fatalf("score %v from %s, want 0.8 from dimensions", s, src)
	}
	if len(warn) != 1 || !strings.Contains(warn[0], "tone") {
		t.Errorf("warnings %q, want one naming tone", warn)
	}
	// An explicit score wins over dimensions.
	m.Score = f(0.4)
	if s, src, _ := Score(m, DefaultWeights()); *s != 0.4 || src != "agent" {
		t.Errorf("score %v from %s, want the agent's 0.4", *s, src)
	}
	// Only some dimensions: normalized over their weights.
	m = &marks.Mark{Seq: 1, Dimensions: map[string]float64{"validation": 1, "readability": 0}}
	if s, _, _ := Score(m, DefaultWeights()); *s != 0.75 {
		t.Errorf("partial dimensions score %v, want 0.75 (0.3 of 0.4)", *s)
	}
}

func TestPolicyCheck(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		p   Policy
		err string
	}{
		{Policy{Use: "final"}, "say why with --reason"},
		{Policy{Use: "2"}, "say why with --reason"},
		{use("zero", "x"), "expected best, final or an iteration number"},
		{use("0", "x"), "expected best, final or an iteration number"},
		{Policy{Use: "best", Threshold: 1.5}, "must be in [0, 1]"},
		{Policy{Use: "best", Weights: map[string]float64{"a": -1}}, "weights must be numbers >= 0"},
		{Policy{Use: "best"}, ""},
	} {
		err := c.p.Check()
		if (err == nil) != (c.err == "") || (err != nil && !strings.Contains(err.Error(), c.err)) {
			t.Errorf("%+v: %v, want %q", c.p, err, c.err)
		}
	}
	if _, err := ParseWeights("validation=.5,readability=.5"); err != nil {
		t.Error(err)
	}
	for _, bad := range []string{"", "x", "x=", "x=-1", "=1", "x=nan"} {
		if _, err := ParseWeights(bad); err == nil {
			t.Errorf("ParseWeights(%q) accepted", bad)
		}
	}
}

// TestReportGolden pins the selection report of the seed document's
// example: 72%, 85%, 83%, with quality dimensions on the last iteration.
func TestReportGolden(t *testing.T) {
	t.Parallel()
	ms := its(f(.72), f(.85), f(.83))
	ms[2].Dimensions = map[string]float64{"validation": 1, "tone": 0.5}
	s, err := Select(ms, DefaultPolicy())
	if err != nil {
		t.Fatal(err)
	}
	s.Applied = []string{"out/report.md"}
	golden.Check(t, filepath.Join("testdata", "report.golden.md"), []byte(s.Markdown()))
}
