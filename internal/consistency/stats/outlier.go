package stats

import (
	"fmt"
	"math"
)

// Default thresholds of the outlier rules.
const (
	DefaultTukeyK      = 1.5 // Tukey (1977): 1.5 IQR "outside", 3 IQR "far out"
	DefaultZThreshold  = 3.0
	DefaultModifiedZ   = 3.5 // Iglewicz and Hoaglin (1993)
	modifiedZConstant  = 0.6745
	meanADScaleToSigma = 1.253314 // sqrt(π/2): mean absolute deviation → σ for normal data
)

// Outliers is the result of one outlier rule: the indices (into the input,
// ascending) flagged, and the rule's bounds or scores for a report.
type Outliers struct {
	Method  string    `json:"method"` // "tukey", "zscore", "modified_zscore"
	Indices []int     `json:"indices"`
	Lower   float64   `json:"lower,omitempty"` // Tukey fences; ±threshold for the score rules
	Upper   float64   `json:"upper,omitempty"`
	Scores  []float64 `json:"scores,omitempty"` // per observation, for the score rules
}

// TukeyFences flags observations outside [Q1 - k·IQR, Q3 + k·IQR], with Q1
// and Q3 by type 7 interpolation (see Quantile); k <= 0 means
// DefaultTukeyK. Other quartile definitions (e.g. Tukey's hinges) give
// slightly different fences on small samples. Needs at least 4 observations.
func TukeyFences(xs []float64, k float64) (Outliers, error) {
	if err := need(xs, 4); err != nil {
		return Outliers{}, fmt.Errorf("tukey fences: %w", err)
	}
	if k <= 0 {
		k = DefaultTukeyK
	}
	s := sorted(xs)
	q1, q3 := quantileSorted(s, 0.25), quantileSorted(s, 0.75)
	iqr := q3 - q1
	o := Outliers{Method: "tukey", Indices: []int{}, Lower: q1 - k*iqr, Upper: q3 + k*iqr}
	for i, x := range xs {
		if x < o.Lower || x > o.Upper {
			o.Indices = append(o.Indices, i)
		}
	}
	return o, nil
}

// ZScores flags observations with |x - mean|/s > threshold (s the sample
// standard deviation); threshold <= 0 means DefaultZThreshold.
//
// Beware small samples: no observation can have |z| > (n-1)/√n (Shiffler
// 1988), so with n <= 10 the default threshold of 3 can never fire. When
// all observations are equal no scores are defined and none is flagged.
func ZScores(xs []float64, threshold float64) (Outliers, error) {
	if err := need(xs, 2); err != nil {
		return Outliers{}, fmt.Errorf("z-scores: %w", err)
	}
	if threshold <= 0 {
		threshold = DefaultZThreshold
	}
	m := mean(xs)
	sd := stdDev(xs, m)
	o := Outliers{Method: "zscore", Indices: []int{}, Lower: -threshold, Upper: threshold, Scores: make([]float64, len(xs))}
	if sd == 0 {
		return o, nil
	}
	for i, x := range xs {
		z := (x - m) / sd
		o.Scores[i] = z
		if math.Abs(z) > threshold {
			o.Indices = append(o.Indices, i)
		}
	}
	return o, nil
}

// ModifiedZScores flags observations by the modified z-score of Iglewicz and
// Hoaglin (1993), M = 0.6745·(x - median)/MAD with MAD the median absolute
// deviation from the median, when |M| > threshold (threshold <= 0 means
// DefaultModifiedZ, 3.5).
//
// When more than half the observations are equal MAD is 0; M is then
// computed with 1.253314·meanAD in place of MAD/0.6745 (meanAD the mean
// absolute deviation from the median, the usual fallback), and when that is
// 0 too all observations are equal and none is flagged.
func ModifiedZScores(xs []float64, threshold float64) (Outliers, error) {
	if err := need(xs, 3); err != nil {
		return Outliers{}, fmt.Errorf("modified z-scores: %w", err)
	}
	if threshold <= 0 {
		threshold = DefaultModifiedZ
	}
	s := sorted(xs)
	med := quantileSorted(s, 0.5)
	dev := make([]float64, len(xs))
	var meanAD float64
	for i, x := range xs {
		dev[i] = math.Abs(x - med)
		meanAD += dev[i]
	}
	meanAD /= float64(len(xs))
	mad := quantileSorted(sorted(dev), 0.5)
	var scale float64 // M = (x - median) / scale
	switch {
	case mad > 0:
		scale = mad / modifiedZConstant
	case meanAD > 0:
		scale = meanADScaleToSigma * meanAD
	}
	o := Outliers{Method: "modified_zscore", Indices: []int{}, Lower: -threshold, Upper: threshold, Scores: make([]float64, len(xs))}
	if scale == 0 {
		return o, nil
	}
	for i, x := range xs {
		m := (x - med) / scale
		o.Scores[i] = m
		if math.Abs(m) > threshold {
			o.Indices = append(o.Indices, i)
		}
	}
	return o, nil
}
