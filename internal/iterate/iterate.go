// Package iterate selects the best of an agent's refinement iterations.
//
// Quality fluctuates during refinement: the last iteration is often not the
// best. The agent marks each iteration with a score (or quality dimensions
// that are weighed into one) and the artifacts it produced (see
// docs/marks.md); Select picks the highest score, the earlier on ties,
// unless the user overrides it (--use final|N with a reason), flags
// degradation (a drop of more than 0.05, or two drops in a row) and says
// why in a report. The caller applies the selected artifacts.
package iterate

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/dal-runtime/dal/internal/marks"
)

// SchemaVersion is the version of selection.json.
const SchemaVersion = 1

// DefaultWeights are the quality dimensions and their weights.
func DefaultWeights() map[string]float64 {
	return map[string]float64{"validation": 0.30, "completeness": 0.25, "correctness": 0.25, "readability": 0.10, "efficiency": 0.10}
}

// Policy configures the selection.
type Policy struct {
	// Use is "best" (default), "final", or an iteration number.
	Use string `json:"use"`
	// Reason is required when Use is not "best": why the user overrides.
	Reason string `json:"reason,omitempty"`
	// Weights of the quality dimensions; nil means DefaultWeights.
	Weights map[string]float64 `json:"weights"`
	// Threshold is the acceptance threshold (default 0.70).
	Threshold float64 `json:"threshold"`
	// Drop is the score drop flagged as degradation (default 0.05).
	Drop float64 `json:"drop"`
}

// DefaultPolicy selects the best with the default weights and thresholds.
func DefaultPolicy() Policy {
	return Policy{Use: "best", Weights: DefaultWeights(), Threshold: 0.70, Drop: 0.05}
}

// Check reports a policy the user got wrong, in one sentence.
func (p Policy) Check() error {
	switch p.Use {
	case "best":
	case "final":
		if strings.TrimSpace(p.Reason) == "" {
			return errors.New("--use final overrides the best iteration: say why with --reason")
		}
	default:
		n, err := strconv.Atoi(p.Use)
		if err != nil || n < 1 {
			return fmt.Errorf("--use %q: expected best, final or an iteration number (1, 2, ...)", p.Use)
		}
		if strings.TrimSpace(p.Reason) == "" {
			return fmt.Errorf("--use %d overrides the best iteration: say why with --reason", n)
		}
	}
	for k, w := range p.Weights {
		if math.IsNaN(w) || w < 0 {
			return fmt.Errorf("quality weight %s=%v: weights must be numbers >= 0", k, w)
		}
	}
	if math.IsNaN(p.Threshold) || p.Threshold < 0 || p.Threshold > 1 {
		return fmt.Errorf("acceptance threshold %v: must be in [0, 1]", p.Threshold)
	}
	return nil
}

// ParseWeights reads "validation=.3,completeness=.25,..." into a map.
func ParseWeights(s string) (map[string]float64, error) {
	out := map[string]float64{}
	for _, kv := range strings.Split(s, ",") {
		kv = strings.TrimSpace(kv)
		if kv == "" {
			continue
		}
		k, v, ok := strings.Cut(kv, "=")
		w, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if !ok || strings.TrimSpace(k) == "" || err != nil || w < 0 || math.IsNaN(w) || math.IsInf(w, 0) {
			return nil, fmt.Errorf("quality weights %q: expected name=weight pairs separated by commas, weights >= 0", s)
		}
		out[strings.TrimSpace(k)] = w
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("quality weights %q: no name=weight pair", s)
	}
	return out, nil
}

// Iteration is one iteration as judged.
type Iteration struct {
	Seq        int                `json:"iteration"`
	Score      *float64           `json:"quality_score"`
	Source     string             `json:"score_source"` // "agent", "dimensions" or "none"
	Dimensions map[string]float64 `json:"dimensions,omitempty"`
	Note       string             `json:"note,omitempty"`
	Artifacts  []marks.Artifact   `json:"artifacts"`
	Accepted   bool               `json:"accepted"`
	// Delta is the change from the previous scored iteration.
	Delta *float64 `json:"delta,omitempty"`
	// BestSoFar is the running best after this iteration.
	BestSoFar int   `json:"best_so_far"`
	AtNS      int64 `json:"at_ns,omitempty"`
}

// Flag is one degradation finding.
type Flag struct {
	Iteration int    `json:"iteration"`
	Kind      string `json:"kind"` // "drop" or "consecutive_drops"
	Detail    string `json:"detail"`
}

// Selection is the outcome: selection.json.
type Selection struct {
	SchemaVersion int         `json:"schema_version"`
	Policy        Policy      `json:"policy"`
	Iterations    []Iteration `json:"iterations"`
	Best          int         `json:"best"`     // highest score, earlier on ties (0: none scored)
	Final         int         `json:"final"`    // the last iteration
	Selected      int         `json:"selected"` // what is applied
	Override      bool        `json:"override"` // the user chose other than the automatic pick
	Accepted      bool        `json:"accepted"` // the selected score reaches the threshold
	Rationale     []string    `json:"rationale"`
	Degradation   []Flag      `json:"degradation"`
	Warnings      []string    `json:"warnings"`
	// Applied lists the files placed in the workspace from the selected
	// iteration (filled by the caller).
	Applied []string `json:"applied"`
}

// Scored returns the selected iteration's score, if it has one.
func (s *Selection) Scored() (float64, bool) {
	for _, it := range s.Iterations {
		if it.Seq == s.Selected && it.Score != nil {
			return *it.Score, true
		}
	}
	return 0, false
}

// SelectedIteration returns the selected iteration, or nil.
func (s *Selection) SelectedIteration() *Iteration {
	for i := range s.Iterations {
		if s.Iterations[i].Seq == s.Selected {
			return &s.Iterations[i]
		}
	}
	return nil
}

// Score weighs a mark: the agent's own score, else its dimensions by the
// weights (normalized over the weighted dimensions it gave).
func Score(m *marks.Mark, weights map[string]float64) (*float64, string, []string) {
	if m.Score != nil {
		s := *m.Score
		return &s, "agent", nil
	}
	if len(m.Dimensions) == 0 {
		return nil, "none", nil
	}
	var sum, wsum float64
	var unknown []string
	names := make([]string, 0, len(m.Dimensions))
	for k := range m.Dimensions {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		w, ok := weights[k]
		if !ok {
			unknown = append(unknown, k)
			continue
		}
		sum += w * m.Dimensions[k]
		wsum += w
	}
	var warn []string
	if len(unknown) > 0 {
		warn = append(warn, fmt.Sprintf("iteration %d: dimensions %s have no weight and were ignored (set them with --quality-weights)", m.Seq, strings.Join(unknown, ", ")))
	}
	if wsum == 0 {
		return nil, "none", warn
	}
	s := round(sum / wsum)
	return &s, "dimensions", warn
}

func round(v float64) float64 { return math.Round(v*1e9) / 1e9 }

// Select judges the iterations (complete marks, by number) under p.
func Select(ms []*marks.Mark, p Policy) (*Selection, error) {
	if p.Weights == nil {
		p.Weights = DefaultWeights()
	}
	if p.Use == "" {
		p.Use = "best"
	}
	if err := p.Check(); err != nil {
		return nil, err
	}
	s := &Selection{SchemaVersion: SchemaVersion, Policy: p, Iterations: []Iteration{}, Rationale: []string{},
		Degradation: []Flag{}, Warnings: []string{}, Applied: []string{}}
	if len(ms) == 0 {
		return s, nil
	}
	var prev *float64
	drops := 0
	for _, m := range ms {
		score, src, warn := Score(m, p.Weights)
		s.Warnings = append(s.Warnings, warn...)
		it := Iteration{Seq: m.Seq, Score: score, Source: src, Dimensions: m.Dimensions, Note: m.Note,
			Artifacts: m.Artifacts, AtNS: m.AtNS}
		if it.Artifacts == nil {
			it.Artifacts = []marks.Artifact{}
		}
		if score == nil {
			s.Warnings = append(s.Warnings, fmt.Sprintf("iteration %d has no score: it cannot be selected as the best", m.Seq))
		} else {
			it.Accepted = *score >= p.Threshold
			if s.Best == 0 || *score > *bestScore(s) {
				s.Best = m.Seq
			}
			if prev != nil {
				d := round(*score - *prev)
				it.Delta = &d
				if d < 0 {
					drops++
				} else {
					drops = 0
				}
				if -d > p.Drop {
					s.Degradation = append(s.Degradation, Flag{m.Seq, "drop",
						fmt.Sprintf("quality dropped by %.2f (%.2f to %.2f), more than %.2f", -d, *prev, *score, p.Drop)})
				}
				if drops >= 2 {
					s.Degradation = append(s.Degradation, Flag{m.Seq, "consecutive_drops",
						fmt.Sprintf("quality dropped in %d iterations in a row", drops)})
				}
			}
			prev = score
		}
		it.BestSoFar = s.Best
		s.Iterations = append(s.Iterations, it)
	}
	s.Final = s.Iterations[len(s.Iterations)-1].Seq
	auto := s.Best
	if auto == 0 {
		auto = s.Final
	}
	switch p.Use {
	case "best":
		s.Selected = auto
	case "final":
		s.Selected = s.Final
	default:
		n, _ := strconv.Atoi(p.Use)
		found := false
		for _, it := range s.Iterations {
			found = found || it.Seq == n
		}
		if !found {
			s.Warnings = append(s.Warnings, fmt.Sprintf("--use %d: the agent marked no iteration %d (it marked %d to %d); the best was selected instead", n, n, s.Iterations[0].Seq, s.Final))
			s.Selected = auto
		} else {
			s.Selected = n
		}
	}
	s.Override = s.Selected != auto
	s.rationale(auto)
	if sc, ok := s.Scored(); ok {
		s.Accepted = sc >= p.Threshold
	}
	return s, nil
}

func bestScore(s *Selection) *float64 {
	for _, it := range s.Iterations {
		if it.Seq == s.Best {
			return it.Score
		}
	}
	return nil
}

func (s *Selection) rationale(auto int) {
	add := func(f string, a ...any) { s.Rationale = append(s.Rationale, fmt.Sprintf(f, a...)) }
	sel := s.SelectedIteration()
	final := &s.Iterations[len(s.Iterations)-1]
	switch {
	case s.Best == 0:
		add("no iteration has a score, so the final iteration %d was kept", s.Final)
	case s.Override:
		add("the user chose iteration %d over the automatic pick, iteration %d (--use %s): %s", s.Selected, auto, s.Policy.Use, s.Policy.Reason)
	case s.Selected == s.Final && len(s.Iterations) == 1:
		add("iteration %d is the only iteration", s.Selected)
	case s.Selected == s.Final:
		add("the final iteration %d has the highest quality score (%s)", s.Selected, pct(sel.Score))
	default:
		add("iteration %d has the highest quality score (%s vs %s for the final iteration %d)", s.Selected, pct(sel.Score), pct(final.Score), s.Final)
		ties := []string{}
		for _, it := range s.Iterations {
			if it.Seq > s.Selected && it.Score != nil && *it.Score == *sel.Score {
				ties = append(ties, strconv.Itoa(it.Seq))
			}
		}
		if len(ties) > 0 {
			add("iteration %s scored the same; the earlier iteration wins ties", strings.Join(ties, ", "))
		}
	}
	if !s.Override && s.Policy.Use != "best" {
		add("--use %s was given (%s) and agrees with the automatic pick", s.Policy.Use, s.Policy.Reason)
	}
	for _, f := range s.Degradation {
		if f.Iteration > s.Selected {
			add("quality degraded after iteration %d: %s at iteration %d", s.Selected, f.Detail, f.Iteration)
			break
		}
	}
	if sel != nil && sel.Score != nil {
		if *sel.Score >= s.Policy.Threshold {
			add("its score %s reaches the acceptance threshold %s", pct(sel.Score), pct(&s.Policy.Threshold))
		} else {
			add("its score %s is BELOW the acceptance threshold %s: the output is not accepted", pct(sel.Score), pct(&s.Policy.Threshold))
		}
	}
}

func pct(v *float64) string {
	if v == nil {
		return "no score"
	}
	return strings.TrimSuffix(fmt.Sprintf("%.1f", *v*100), ".0") + "%"
}
