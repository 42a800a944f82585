package stats

import (
	"errors"
	"fmt"
)

// Summary describes one per-run metric (duration, tokens, score). Fields that
// a sample is too small (or too large) for are nil rather than invented.
type Summary struct {
	N      int      `json:"n"`
	Mean   float64  `json:"mean"`
	Std    float64  `json:"std"`
	CV     float64  `json:"coefficient_of_variation"` // +Inf is reported as such; see CV
	Min    float64  `json:"min"`
	Max    float64  `json:"max"`
	Median float64  `json:"median"`
	Q1     float64  `json:"q1"`
	Q3     float64  `json:"q3"`
	MeanCI Interval `json:"confidence_interval"`

	Tukey     *Outliers  `json:"tukey,omitempty"`      // nil when n < 4
	ZScore    *Outliers  `json:"zscore,omitempty"`     // always set
	ModifiedZ *Outliers  `json:"modified_z,omitempty"` // always set
	Normality *Normality `json:"normality,omitempty"`  // nil when n > 5000 or all equal
}

// Describe summarises xs with default outlier thresholds and a Student t
// interval for the mean at the given level. It needs at least 3 finite
// observations. Callers serialising to JSON must handle an infinite CV
// (encoding/json rejects ±Inf).
func Describe(xs []float64, level float64) (Summary, error) {
	if err := need(xs, 3); err != nil {
		return Summary{}, fmt.Errorf("describe: %w", err)
	}
	ci, err := MeanInterval(xs, level)
	if err != nil {
		return Summary{}, fmt.Errorf("describe: %w", err)
	}
	s := sorted(xs)
	m := mean(xs)
	sd := stdDev(xs, m)
	sum := Summary{
		N: len(xs), Mean: m, Std: sd, CV: cv(xs, m, sd),
		Min: s[0], Max: s[len(s)-1],
		Median: quantileSorted(s, 0.5), Q1: quantileSorted(s, 0.25), Q3: quantileSorted(s, 0.75),
		MeanCI: ci,
	}
	if len(xs) >= 4 {
		t, err := TukeyFences(xs, DefaultTukeyK)
		if err != nil {
			return Summary{}, fmt.Errorf("describe: %w", err)
		}
		sum.Tukey = &t
	}
	z, err := ZScores(xs, DefaultZThreshold)
	if err != nil {
		return Summary{}, fmt.Errorf("describe: %w", err)
	}
	sum.ZScore = &z
	mz, err := ModifiedZScores(xs, DefaultModifiedZ)
	if err != nil {
		return Summary{}, fmt.Errorf("describe: %w", err)
	}
	sum.ModifiedZ = &mz
	if len(xs) <= MaxShapiroWilkN {
		nt, err := ShapiroWilk(xs)
		switch {
		case err == nil:
			sum.Normality = &nt
		case !errors.Is(err, ErrConstant):
			return Summary{}, fmt.Errorf("describe: %w", err)
		}
	}
	return sum, nil
}
