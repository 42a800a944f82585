// Package bench measures dal against its baselines: every figure is a ratio
// or a difference against a baseline measured in the same run, with the
// number of repeats and the spread. cmd/dal-bench drives it; `make bench`
// writes bench/out/report.md and regenerates the README's figures.
package bench

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/dal-runtime/dal/internal/consistency/stats"
)

// Sample is repeated measurements of one thing.
type Sample []time.Duration

// Min, Median and Max summarize a sample; like Min and Max, Median panics
// on an empty sample. Median is stats.Median's (the mean of the two middle
// values when n is even), rounded to the nanosecond, so that every median
// dal reports — bench figures and consistency reports — has one definition.
func (s Sample) Min() time.Duration { return slices.Min(s) }
func (s Sample) Max() time.Duration { return slices.Max(s) }
func (s Sample) Median() time.Duration {
	v := make([]float64, len(s))
	for i, d := range s {
		v[i] = float64(d)
	}
	return time.Duration(math.Round(median(v)))
}

// Spread renders "min / median / max".
func (s Sample) Spread() string {
	return fmt.Sprintf("%s / %s / %s", ms(s.Min()), ms(s.Median()), ms(s.Max()))
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d)/1e6) }

// Figure is one line of the report.
type Figure struct {
	Name     string  // benchmark name
	Value    string  // the headline, e.g. "1.3x native" or "+4.1 ms"
	Ratio    float64 // against the baseline, the median over repeats (0 when the figure is a difference)
	Baseline string  // what it is compared with
	Detail   string  // repeats, spread
	Target   string  // the target, if any
	Verdict  string  // "meets", "misses" or ""

	// RatioMin and RatioMax are the spread of the per-repeat ratios and
	// Repeats their number (0 when the ratio is not from repeated pairs).
	RatioMin, RatioMax float64
	Repeats            int
	// Cost says how Ratio reads: CostTime (dal's time over the
	// baseline's: above 1 dal is slower), CostRate (dal's throughput over
	// the baseline's: below 1 dal is slower) or "" (not a cost of dal).
	Cost string
	// Install names what to install when the figure is "not measured"
	// for want of an optional tool.
	Install string
}

// How a Figure's Ratio reads; see Figure.Cost.
const (
	CostTime = "time"
	CostRate = "rate"
)

// SetRatios sets the figure's ratio to the median of per-repeat ratios
// and records their spread and number.
func (f *Figure) SetRatios(v Values) {
	if len(v) == 0 {
		return
	}
	f.Ratio, f.RatioMin, f.RatioMax, f.Repeats = v.Median(), v.Min(), v.Max(), len(v)
}

// Slower reports whether the figure shows dal slower than its baseline
// (by its median ratio), and by what factor.
func (f Figure) Slower() (float64, bool) {
	switch {
	case f.Ratio <= 0:
		return 0, false
	case f.Cost == CostTime && f.Ratio > 1:
		return f.Ratio, true
	case f.Cost == CostRate && f.Ratio < 1:
		return 1 / f.Ratio, true
	}
	return 0, false
}

// Ratios pairs two samples taken in alternation (a[i] with b[i]) and
// returns a[i]/b[i] for each pair.
func Ratios(a, b Sample) Values {
	var v Values
	for i := range min(len(a), len(b)) {
		if b[i] > 0 {
			v = append(v, float64(a[i])/float64(b[i]))
		}
	}
	return v
}

// Div returns a[i]/b[i] for each pair of values.
func Div(a, b Values) Values {
	var v Values
	for i := range min(len(a), len(b)) {
		if b[i] != 0 {
			v = append(v, a[i]/b[i])
		}
	}
	return v
}

// Values is repeated measurements of a quantity that is not a duration
// (a ratio, MB/s, ns per syscall).
type Values []float64

// Min, Median and Max summarize the values; Median is stats.Median's, as
// for Sample, and all three panic on no values.
func (v Values) Min() float64    { return slices.Min(v) }
func (v Values) Max() float64    { return slices.Max(v) }
func (v Values) Median() float64 { return median(v) }

// median is stats.Median, which errs only on an empty slice.
func median(v []float64) float64 {
	m, err := stats.Median(v)
	if err != nil {
		panic("bench: median of no values")
	}
	return m
}

// Spread renders "min / median / max" with format (e.g. "%.1f µs").
func (v Values) Spread(format string) string {
	return fmt.Sprintf(format+" / "+format+" / "+format, v.Min(), v.Median(), v.Max())
}
