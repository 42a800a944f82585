package stats

import (
	"fmt"
	"math"
)

// Label grades a reliability score.
type Label string

// Reliability labels and their lower bounds.
const (
	High   Label = "High"   // score >= 0.8
	Medium Label = "Medium" // 0.6 <= score < 0.8
	Low    Label = "Low"    // score < 0.6
)

// Reliability is the combined reliability of a set of runs.
type Reliability struct {
	Score float64 `json:"score"`
	Label Label   `json:"label"`
}

// Score computes
//
//	0.6·successRate + 0.2·(1 - clamp(cvDuration, 0, 1)) + 0.2·(1 - clamp(cvTokens, 0, 1))
//
// and labels it High (>= 0.8), Medium (>= 0.6) or Low.
//
// Why the coefficient of variation: the seed ADR's formula puts the standard
// deviation of z-scores in the variance terms, but z-scores are standardised
// to standard deviation 1 by construction, so both terms would always be
// 1 - clamp(1, 0, 1) = 0 and the score could never exceed 0.6 (Low) however
// steady the runs. The coefficient of variation (std/mean, see CV) is the
// scale-free spread the ADR intended: 0 for identical durations or token
// counts, 1 or more for spread as large as the mean, so the clamp to [0, 1]
// maps "no variation" to the full 0.2 and "as variable as a coin flip" to 0.
// An infinite CV (zero mean, nonzero spread) counts as 1.
//
// successRate must be in [0, 1]; CVs must not be NaN or negative.
func Score(successRate, cvDuration, cvTokens float64) (Reliability, error) {
	if !(successRate >= 0 && successRate <= 1) {
		return Reliability{}, fmt.Errorf("reliability: success rate %v is outside [0, 1]", successRate)
	}
	for _, c := range []float64{cvDuration, cvTokens} {
		if math.IsNaN(c) || c < 0 {
			return Reliability{}, fmt.Errorf("reliability: coefficient of variation %v must be a non-negative number", c)
		}
	}
	s := 0.6*successRate + 0.2*(1-clamp01(cvDuration)) + 0.2*(1-clamp01(cvTokens))
	return Reliability{Score: s, Label: LabelFor(s)}, nil
}

// LabelFor returns the label of a reliability score.
func LabelFor(score float64) Label {
	switch {
	case score >= 0.8:
		return High
	case score >= 0.6:
		return Medium
	default:
		return Low
	}
}

func clamp01(x float64) float64 {
	return math.Min(1, math.Max(0, x))
}
