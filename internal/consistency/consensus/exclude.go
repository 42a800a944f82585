package consensus

import (
	"fmt"
	"slices"
	"strings"

	"github.com/dal-runtime/dal/internal/consistency/stats"
)

// OutlierMethod names the rule that flags outliers.
type OutlierMethod string

// Outlier rules. The zero value excludes nothing.
const (
	NoExclusion OutlierMethod = ""
	ModifiedZ   OutlierMethod = "modified-z" // |M| > Cutoff, default stats.DefaultModifiedZ (3.5)
	Tukey       OutlierMethod = "tukey"      // outside Q1 - k·IQR, Q3 + k·IQR, k = Cutoff, default stats.DefaultTukeyK (1.5)
)

// ParseOutlierMethod reads a method as a user types it: "none", "modified-z"
// (or "modified_z", "mz"), "tukey".
func ParseOutlierMethod(s string) (OutlierMethod, error) {
	switch strings.ReplaceAll(strings.ToLower(strings.TrimSpace(s)), "_", "-") {
	case "", "none":
		return NoExclusion, nil
	case "modified-z", "modified-zscore", "mz":
		return ModifiedZ, nil
	case "tukey":
		return Tukey, nil
	}
	return "", fmt.Errorf("unknown outlier method %q; use none, modified-z or tukey", s)
}

// Metric is a per-run measure outliers are looked for in.
type Metric string

// Metrics.
const (
	Duration Metric = "duration"
	Tokens   Metric = "tokens"
)

// Exclusion configures outlier exclusion before voting. The zero value
// excludes nothing.
type Exclusion struct {
	Method OutlierMethod
	// Cutoff is the modified z-score threshold or the Tukey k; <= 0 means
	// the method's default.
	Cutoff float64
	// Metrics to examine; empty means duration and tokens. A run that is an
	// outlier in any of them is excluded.
	Metrics []Metric
}

// minRuns is how many successful runs each method needs.
var minRuns = map[OutlierMethod]int{ModifiedZ: 3, Tukey: 4}

// exclude drops the successful runs that are outliers by ex from runs
// (sorted by Index) and returns the runs kept, the Index of each excluded
// run (ascending) and notes for the user.
func exclude(runs []Run, ex Exclusion) (kept []Run, excluded []int, notes []string, err error) {
	excluded = []int{}
	if ex.Method == NoExclusion {
		return runs, excluded, nil, nil
	}
	need, ok := minRuns[ex.Method]
	if !ok {
		_, err := ParseOutlierMethod(string(ex.Method))
		return nil, nil, nil, fmt.Errorf("consensus: %w", err)
	}
	metrics := ex.Metrics
	if len(metrics) == 0 {
		metrics = []Metric{Duration, Tokens}
	}
	var ok2 []Run // successful runs, the only candidates
	for _, r := range runs {
		if r.Success {
			ok2 = append(ok2, r)
		}
	}
	if len(ok2) < need {
		notes = append(notes, fmt.Sprintf("no outliers excluded: %d successful runs, %s needs at least %d", len(ok2), ex.Method, need))
		return runs, excluded, notes, nil
	}
	out := map[int]bool{}
	why := map[Metric][]int{}
	for _, m := range metrics {
		xs := make([]float64, len(ok2))
		for i, r := range ok2 {
			switch m {
			case Duration:
				xs[i] = float64(r.DurationMS)
			case Tokens:
				xs[i] = float64(r.Tokens)
			default:
				return nil, nil, nil, fmt.Errorf("consensus: unknown outlier metric %q; use duration or tokens", m)
			}
		}
		var o stats.Outliers
		if ex.Method == Tukey {
			o, err = stats.TukeyFences(xs, ex.Cutoff)
		} else {
			o, err = stats.ModifiedZScores(xs, ex.Cutoff)
		}
		if err != nil {
			return nil, nil, nil, fmt.Errorf("consensus: outliers in %s: %w", m, err)
		}
		for _, i := range o.Indices {
			out[ok2[i].Index] = true
			why[m] = append(why[m], ok2[i].Index)
		}
	}
	for _, r := range runs {
		if out[r.Index] {
			excluded = append(excluded, r.Index)
		} else {
			kept = append(kept, r)
		}
	}
	slices.Sort(excluded)
	for _, m := range metrics {
		if len(why[m]) > 0 {
			notes = append(notes, fmt.Sprintf("runs %s excluded as %s outliers by %s", list(why[m]), m, ex.Method))
		}
	}
	return kept, excluded, notes, nil
}
