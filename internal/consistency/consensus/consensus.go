package consensus

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/dal-runtime/dal/internal/plural"
)

// Run is the outcome of one run of a consistency evaluation.
type Run struct {
	Index      int      `json:"index"` // position in the evaluation; unique
	Seed       uint64   `json:"seed"`
	Success    bool     `json:"success"`
	Score      *float64 `json:"score,omitempty"` // quality in [0, 1]; nil when not scored
	Output     string   `json:"output"`          // answer or its hash; equal Outputs agree
	DurationMS int64    `json:"duration_ms"`
	Tokens     int64    `json:"tokens"`
}

// Strategy names a consensus strategy.
type Strategy string

// The consensus strategies.
const (
	Majority  Strategy = "majority"
	Plurality Strategy = "plurality"
	Weighted  Strategy = "weighted"
	Unanimous Strategy = "unanimous"
	Threshold Strategy = "threshold"
	BestOfN   Strategy = "best-of-n"
)

// Strategies lists every strategy, in the order a help text shows them.
func Strategies() []Strategy {
	return []Strategy{Majority, Plurality, Weighted, Unanimous, Threshold, BestOfN}
}

// ParseStrategy reads a strategy name as a user types it
// ("best-of-n" and "best_of_n" are both accepted, case does not matter).
func ParseStrategy(s string) (Strategy, error) {
	name := strings.ReplaceAll(strings.ToLower(strings.TrimSpace(s)), "_", "-")
	for _, st := range Strategies() {
		if name == string(st) {
			return st, nil
		}
	}
	names := make([]string, 0, len(Strategies()))
	for _, st := range Strategies() {
		names = append(names, string(st))
	}
	return "", fmt.Errorf("unknown consensus strategy %q; use one of %s", s, strings.Join(names, ", "))
}

// Verdict says how a strategy concluded.
type Verdict string

// Verdicts.
const (
	VerdictDecided     Verdict = "decided"      // Decision holds the agreed output
	VerdictNoConsensus Verdict = "no_consensus" // the strategy's bar was not met
	VerdictFailed      Verdict = "failed"       // failure outnumbers or outweighs every answer
	VerdictNoRuns      Verdict = "no_runs"      // nothing to decide on
)

// DefaultThreshold is the fraction the threshold strategy needs by default.
const DefaultThreshold = 0.67

// tieEpsilon is how close two weights must be to count as tied.
const tieEpsilon = 1e-9

// Errors callers may check with errors.Is. When Decide returns one of them
// the Result is still filled in (Verdict, Reason, counts) so that a report
// can show why there is no decision.
var (
	ErrNoRuns     = errors.New("consensus: no runs to decide on")
	ErrAllFailed  = errors.New("consensus: every run failed")
	ErrInvalidRun = errors.New("consensus: invalid run")
)

// Options tune Decide. The zero value is valid: threshold 0.67, no outlier
// exclusion.
type Options struct {
	// Threshold is the share of counted runs the threshold strategy's
	// leading answer must reach, in (0, 1]; 0 means DefaultThreshold.
	Threshold float64
	// Exclude configures outlier exclusion before voting.
	Exclude Exclusion
}

// Tally is the support of one output among the counted successful runs.
type Tally struct {
	Output string  `json:"output"`
	Runs   int     `json:"runs"`
	Weight float64 `json:"weight"`    // runs for unweighted strategies, sum of scores for weighted
	First  int     `json:"first_run"` // lowest Index of a run with this output
}

// Result is a consensus decision and the evidence for it.
type Result struct {
	Strategy Strategy `json:"strategy"`
	Verdict  Verdict  `json:"verdict"`
	// Decision is the agreed output, "" unless Verdict is VerdictDecided.
	Decision string `json:"decision"`
	// Confidence in [0, 1]; see the package documentation per strategy.
	Confidence float64 `json:"confidence"`
	Runs       int     `json:"runs"`      // runs counted (after exclusion)
	Succeeded  int     `json:"succeeded"` // of which succeeded
	Failed     int     `json:"failed"`    // of which failed
	// Excluded holds the Index of every run left out as an outlier, ascending.
	Excluded []int `json:"excluded"`
	// Tally lists the outputs of the counted successful runs, strongest
	// first (equal ones in the order of their earliest run).
	Tally []Tally `json:"tally"`
	// Tied lists the outputs that tied for the lead, in the order of their
	// earliest run; empty without a tie. A tie is never a decision.
	Tied []string `json:"tied,omitempty"`
	// BestRun is the Index of the run best-of-N chose.
	BestRun *int `json:"best_run,omitempty"`
	// Margin (best-of-N) is the chosen run's score minus the best score of a
	// successful run with a different output; nil when all agree.
	Margin *float64 `json:"margin,omitempty"`
	// Reason is one sentence a user reads: what was decided and why.
	Reason string `json:"reason"`
	// Notes are further facts a user should know (ties broken, exclusion
	// skipped, one run only).
	Notes []string `json:"notes,omitempty"`
}

// Decide applies strategy s to runs. Runs may come in any order; the result
// depends only on their contents.
func Decide(s Strategy, runs []Run, opts Options) (Result, error) {
	res := Result{Strategy: s, Verdict: VerdictNoRuns, Excluded: []int{}, Tally: []Tally{}}
	if !slices.Contains(Strategies(), s) {
		return res, fmt.Errorf("consensus: unknown strategy %q; parse user input with ParseStrategy", s)
	}
	threshold := opts.Threshold
	if threshold == 0 {
		threshold = DefaultThreshold
	}
	if !(threshold > 0 && threshold <= 1) {
		return res, fmt.Errorf("consensus: threshold %v is outside (0, 1]; use e.g. 0.67", opts.Threshold)
	}
	sorted, err := validate(runs)
	if err != nil {
		return res, err
	}
	if len(sorted) == 0 {
		res.Reason = "no runs to decide on"
		return res, ErrNoRuns
	}
	counted, excluded, notes, err := exclude(sorted, opts.Exclude)
	if err != nil {
		return res, err
	}
	res.Excluded = excluded
	res.Notes = notes
	res.Runs = len(counted)
	for _, r := range counted {
		if r.Success {
			res.Succeeded++
		} else {
			res.Failed++
		}
	}
	if res.Succeeded == 0 {
		res.Verdict = VerdictFailed
		res.Reason = allRuns(res.Failed, "failed", "failed")
		return res, fmt.Errorf("%w (%s)", ErrAllFailed, plural.Count(res.Failed, "run", "runs"))
	}
	if len(counted) == 1 {
		res.Notes = append(res.Notes, "only one run was counted: there is no agreement to measure")
	}
	switch s {
	case BestOfN:
		err = bestOfN(&res, counted)
	case Weighted:
		err = vote(&res, counted, rule{weighted: true})
	case Majority:
		err = vote(&res, counted, rule{majority: true})
	case Plurality:
		err = vote(&res, counted, rule{})
	case Threshold:
		err = vote(&res, counted, rule{need: threshold})
	case Unanimous:
		err = vote(&res, counted, rule{unanimous: true})
	}
	return res, err
}

// validate checks every run and returns a copy sorted by Index.
func validate(runs []Run) ([]Run, error) {
	sorted := slices.Clone(runs)
	slices.SortFunc(sorted, func(a, b Run) int { return a.Index - b.Index })
	for i, r := range sorted {
		if i > 0 && sorted[i-1].Index == r.Index {
			return nil, fmt.Errorf("%w: two runs have index %d; indices must be unique", ErrInvalidRun, r.Index)
		}
		if r.Score != nil && !(*r.Score >= 0 && *r.Score <= 1) {
			return nil, fmt.Errorf("%w: run %d has score %v; scores must be in [0, 1]", ErrInvalidRun, r.Index, *r.Score)
		}
		if r.DurationMS < 0 || r.Tokens < 0 {
			return nil, fmt.Errorf("%w: run %d has a negative duration or token count", ErrInvalidRun, r.Index)
		}
		if r.Success && r.Output == "" {
			return nil, fmt.Errorf("%w: run %d succeeded with an empty output; set Output to the answer, its hash, or a constant such as \"ok\"", ErrInvalidRun, r.Index)
		}
	}
	return sorted, nil
}

// tally counts the successful runs' outputs, strongest first, equal ones in
// the order of their earliest run. weighted sums scores instead of counting.
func tally(runs []Run, weighted bool) ([]Tally, error) {
	at := map[string]int{}
	var ts []Tally
	for _, r := range runs {
		if !r.Success {
			continue
		}
		w := 1.0
		if weighted {
			if r.Score == nil {
				return nil, fmt.Errorf("%w: run %d succeeded but has no score; weighted voting needs a score on every successful run", ErrInvalidRun, r.Index)
			}
			w = *r.Score
		}
		i, ok := at[r.Output]
		if !ok {
			i = len(ts)
			at[r.Output] = i
			ts = append(ts, Tally{Output: r.Output, First: r.Index})
		}
		ts[i].Runs++
		ts[i].Weight += w
	}
	// Runs come in Index order, so First is already the lowest Index and
	// sums are taken in a fixed order.
	slices.SortStableFunc(ts, func(a, b Tally) int {
		if !tied(a.Weight, b.Weight) {
			if a.Weight > b.Weight {
				return -1
			}
			return 1
		}
		return a.First - b.First
	})
	return ts, nil
}

func tied(a, b float64) bool { return math.Abs(a-b) <= tieEpsilon }

// rule is what a voting strategy asks of the leading answer.
type rule struct {
	weighted  bool    // weigh runs by score
	majority  bool    // the leader needs more than half of the counted runs
	need      float64 // share the leader must reach; 0: a plurality is enough
	unanimous bool    // every counted run must succeed with the same output
}

// vote runs the voting strategies.
func vote(res *Result, runs []Run, rl rule) error {
	weighted, need := rl.weighted, rl.need
	ts, err := tally(runs, weighted)
	if err != nil {
		return err
	}
	res.Tally = ts
	failWeight := float64(res.Failed) // a failed run weighs 1
	total := failWeight
	for _, t := range ts {
		total += t.Weight
	}
	lead := ts[0]
	for _, t := range ts[1:] {
		if tied(t.Weight, lead.Weight) {
			if len(res.Tied) == 0 {
				res.Tied = []string{lead.Output}
			}
			res.Tied = append(res.Tied, t.Output)
		}
	}
	if total > 0 {
		res.Confidence = min(1, lead.Weight/total)
	}
	unit := "runs"
	if weighted {
		unit = "weight"
	}
	share := fmt.Sprintf("%s of %s %s", num(lead.Weight), num(total), unit)
	switch {
	case total == 0:
		res.Verdict = VerdictNoConsensus
		res.Reason = "every counted run scored 0, so no answer carries any weight"
		return nil
	case failWeight > lead.Weight && !tied(failWeight, lead.Weight):
		res.Verdict = VerdictFailed
		res.Reason = fmt.Sprintf("failure outweighs every answer: %d of %s failed, the leading answer has %s", res.Failed, plural.Count(res.Runs, "run", "runs"), share)
		return nil
	case tied(failWeight, lead.Weight):
		res.Verdict = VerdictNoConsensus
		res.Reason = fmt.Sprintf("as much support for failure (%d of %s failed) as for the leading answer (%s)", res.Failed, plural.Count(res.Runs, "run", "runs"), share)
		return nil
	}
	switch {
	case len(res.Tied) > 0:
		res.Verdict = VerdictNoConsensus
		res.Reason = fmt.Sprintf("%d answers tie for the lead with %s each: a tie is never a decision", len(res.Tied), share)
		return nil
	case rl.unanimous && (len(ts) > 1 || res.Failed > 0):
		res.Verdict = VerdictNoConsensus
		res.Reason = fmt.Sprintf("not unanimous: the leading answer has %d of %s (%s, %d failed)", lead.Runs, plural.Count(res.Runs, "run", "runs"), plural.Count(len(ts)-1, "other answer", "other answers"), res.Failed)
		return nil
	case rl.majority && !(2*lead.Weight > total):
		res.Verdict = VerdictNoConsensus
		res.Reason = fmt.Sprintf("no majority: the leading answer has %s, and a majority needs more than half (failed runs count)", share)
		return nil
	case need > 0 && lead.Weight/total < need:
		res.Verdict = VerdictNoConsensus
		res.Reason = fmt.Sprintf("the leading answer has %s (%.3f), below the threshold %v", share, lead.Weight/total, need)
		return nil
	}
	res.Verdict = VerdictDecided
	res.Decision = lead.Output
	switch {
	case rl.unanimous:
		res.Reason = allRuns(res.Runs, "agrees", "agree")
	case need > 0:
		res.Reason = fmt.Sprintf("the leading answer has %s (%.3f), reaching the threshold %v", share, res.Confidence, need)
	case rl.majority:
		res.Reason = fmt.Sprintf("the leading answer has %s, more than half", share)
	default:
		res.Reason = fmt.Sprintf("the leading answer has %s, more than any other", share)
	}
	return nil
}

// bestOfN picks the successful run with the highest score, the earliest on
// ties.
func bestOfN(res *Result, runs []Run) error {
	ts, err := tally(runs, false)
	if err != nil {
		return err
	}
	res.Tally = ts
	var best *Run
	var tiedRuns []int
	for i := range runs {
		r := &runs[i]
		if !r.Success {
			continue
		}
		if r.Score == nil {
			return fmt.Errorf("%w: run %d succeeded but has no score; best-of-n needs a score on every successful run", ErrInvalidRun, r.Index)
		}
		switch {
		case best == nil || *r.Score > *best.Score && !tied(*r.Score, *best.Score):
			best, tiedRuns = r, nil
		case tied(*r.Score, *best.Score):
			tiedRuns = append(tiedRuns, r.Index)
		}
	}
	idx, score := best.Index, *best.Score
	res.Verdict = VerdictDecided
	res.Decision = best.Output
	res.Confidence = score
	res.BestRun = &idx
	var rival *float64
	for _, r := range runs {
		if r.Success && r.Output != best.Output && (rival == nil || *r.Score > *rival) {
			s := *r.Score
			rival = &s
		}
	}
	if rival != nil {
		m := score - *rival
		res.Margin = &m
	}
	res.Reason = fmt.Sprintf("run %d has the highest score, %s, of %s", idx, num(score), plural.Count(res.Succeeded, "successful run", "successful runs"))
	if len(tiedRuns) > 0 {
		tiedSet := map[int]bool{}
		for _, i := range tiedRuns {
			tiedSet[i] = true
		}
		outs := []string{best.Output}
		seen := map[string]bool{best.Output: true}
		for _, r := range runs {
			if tiedSet[r.Index] && !seen[r.Output] {
				seen[r.Output] = true
				outs = append(outs, r.Output)
			}
		}
		if len(outs) > 1 {
			res.Tied = outs
			res.Verdict, res.Decision, res.BestRun = VerdictNoConsensus, "", nil
			res.Reason = fmt.Sprintf("%d runs with %d different answers tie for the highest score, %s (runs %s): a tie is never a decision",
				len(tiedRuns)+1, len(outs), num(score), list(append([]int{idx}, tiedRuns...)))
			return nil
		}
		res.Notes = append(res.Notes, fmt.Sprintf("%d runs with the same answer tie at score %s; the earliest, run %d, is shown (the others: %s)", len(tiedRuns)+1, num(score), idx, list(tiedRuns)))
	}
	return nil
}

// num formats a count or weight without trailing zeros.
func num(x float64) string { return fmt.Sprintf("%.4g", x) }

// list shows run indices, the first ten of them when there are more.
func list(idx []int) string {
	if len(idx) <= 10 {
		return fmt.Sprint(idx)
	}
	return fmt.Sprintf("%v and %d more", idx[:10], len(idx)-10)
}

// allRuns says that all n runs did what: "all 5 runs agree", and for one
// run "the one run agrees".
func allRuns(n int, one, many string) string {
	if n == 1 {
		return "the one run " + one
	}
	return fmt.Sprintf("all %d runs %s", n, many)
}
