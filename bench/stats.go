// Package bench measures dal against its baselines: every figure is a ratio
// or a difference against a baseline measured in the same run, with the
// number of repeats and the spread. cmd/dal-bench drives it; `make bench`
// writes bench/out/report.md and regenerates the README's figures.
package bench

import (
	"fmt"
	"slices"
	"time"
)

// Sample is repeated measurements of one thing.
type Sample []time.Duration

// Min, Median and Max summarize a sample.
func (s Sample) Min() time.Duration    { return slices.Min(s) }
func (s Sample) Max() time.Duration    { return slices.Max(s) }
func (s Sample) Median() time.Duration { c := slices.Clone(s); slices.Sort(c); return c[len(c)/2] }

// Spread renders "min / median / max".
func (s Sample) Spread() string {
	return fmt.Sprintf("%s / %s / %s", ms(s.Min()), ms(s.Median()), ms(s.Max()))
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d)/1e6) }

// Figure is one line of the report.
type Figure struct {
	Name     string  // benchmark name
	Value    string  // the headline, e.g. "1.3x native" or "+4.1 ms"
	Ratio    float64 // against the baseline (0 when the figure is a difference)
	Baseline string  // what it is compared with
	Detail   string  // repeats, spread
	Target   string  // the target, if any
	Verdict  string  // "meets", "misses" or ""
}

// Values is repeated measurements of a quantity that is not a duration
// (a ratio, MB/s, ns per syscall).
type Values []float64

// Min, Median and Max summarize the values.
func (v Values) Min() float64    { return slices.Min(v) }
func (v Values) Max() float64    { return slices.Max(v) }
func (v Values) Median() float64 { c := slices.Clone(v); slices.Sort(c); return c[len(c)/2] }

// Spread renders "min / median / max" with format (e.g. "%.1f µs").
func (v Values) Spread(format string) string {
	return fmt.Sprintf(format+" / "+format+" / "+format, v.Min(), v.Median(), v.Max())
}
