package stats

import (
	"errors"
	"fmt"
	"math"
	"slices"
)

// ErrEmpty is returned when a computation needs more observations than it was
// given.
var ErrEmpty = errors.New("stats: not enough observations")

// ErrNotFinite is returned when an input holds NaN or an infinity.
var ErrNotFinite = errors.New("stats: value is NaN or infinite")

func checkFinite(xs []float64) error {
	for i, x := range xs {
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return fmt.Errorf("observation %d (%v): %w", i, x, ErrNotFinite)
		}
	}
	return nil
}

func need(xs []float64, n int) error {
	if len(xs) < n {
		return fmt.Errorf("%d observations, need at least %d: %w", len(xs), n, ErrEmpty)
	}
	return checkFinite(xs)
}

// Mean returns the arithmetic mean of xs, computed with a second
// compensating pass so that large offsets (timestamps, token counts) do not
// lose precision.
func Mean(xs []float64) (float64, error) {
	if err := need(xs, 1); err != nil {
		return 0, fmt.Errorf("mean: %w", err)
	}
	return mean(xs), nil
}

func mean(xs []float64) float64 {
	var s float64
	for _, x := range xs {
		s += x
	}
	m := s / float64(len(xs))
	var c float64
	for _, x := range xs {
		c += x - m
	}
	return m + c/float64(len(xs))
}

// StdDev returns the sample standard deviation of xs (divisor n-1). It needs
// at least two observations.
func StdDev(xs []float64) (float64, error) {
	if err := need(xs, 2); err != nil {
		return 0, fmt.Errorf("standard deviation: %w", err)
	}
	return stdDev(xs, mean(xs)), nil
}

func stdDev(xs []float64, m float64) float64 {
	var ss, c float64
	for _, x := range xs {
		d := x - m
		ss += d * d
		c += d
	}
	n := float64(len(xs))
	return math.Sqrt((ss - c*c/n) / (n - 1))
}

// CV returns the coefficient of variation, std/|mean|, of xs.
//
// The zero-mean case is defined, not an error: when every observation is
// equal the spread is nil and CV is 0 (even if the value is 0); when the
// observations differ but the mean is zero (|mean| <= 1e-12 times the mean
// absolute value) CV is +Inf. Reliability clamps CV to [0, 1], so +Inf counts
// as maximal variation. Durations and token counts are non-negative, so the
// +Inf case only arises for signed metrics.
func CV(xs []float64) (float64, error) {
	if err := need(xs, 2); err != nil {
		return 0, fmt.Errorf("coefficient of variation: %w", err)
	}
	m := mean(xs)
	return cv(xs, m, stdDev(xs, m)), nil
}

func cv(xs []float64, m, sd float64) float64 {
	if sd == 0 {
		return 0
	}
	var abs float64
	for _, x := range xs {
		abs += math.Abs(x)
	}
	abs /= float64(len(xs))
	if math.Abs(m) <= 1e-12*abs {
		return math.Inf(1)
	}
	return sd / math.Abs(m)
}

// Median returns the median of xs (the mean of the two middle values when n
// is even).
func Median(xs []float64) (float64, error) {
	return Quantile(xs, 0.5)
}

// Quantile returns the p-quantile of xs by linear interpolation between order
// statistics (Hyndman and Fan 1996, definition 7; R's default type = 7):
// with sorted x[0..n-1] and h = (n-1)p, Q = x[floor h] + (h - floor h)
// (x[floor h + 1] - x[floor h]). p must be in [0, 1].
func Quantile(xs []float64, p float64) (float64, error) {
	if err := need(xs, 1); err != nil {
		return 0, fmt.Errorf("quantile: %w", err)
	}
	if !(p >= 0 && p <= 1) {
		return 0, fmt.Errorf("quantile: probability %v is outside [0, 1]", p)
	}
	return quantileSorted(sorted(xs), p), nil
}

func sorted(xs []float64) []float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s
}

func quantileSorted(s []float64, p float64) float64 {
	h := float64(len(s)-1) * p
	lo := math.Floor(h)
	i := int(lo)
	if i >= len(s)-1 {
		return s[len(s)-1]
	}
	return s[i] + (h-lo)*(s[i+1]-s[i])
}
