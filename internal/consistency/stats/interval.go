package stats

import (
	"fmt"
	"math"
)

// Interval is a two-sided confidence interval.
type Interval struct {
	Lower float64 `json:"lower"`
	Upper float64 `json:"upper"`
	Level float64 `json:"level"` // e.g. 0.95
}

func checkLevel(level float64) error {
	if !(level > 0 && level < 1) {
		return fmt.Errorf("confidence level %v is outside (0, 1); use e.g. 0.95", level)
	}
	return nil
}

// MeanInterval returns the two-sided Student t confidence interval for the
// mean of xs at the given level: mean ± t_{(1+level)/2, n-1} · s/√n. It needs
// at least two observations; it assumes independent, roughly normal
// observations (check with ShapiroWilk when n allows).
func MeanInterval(xs []float64, level float64) (Interval, error) {
	if err := checkLevel(level); err != nil {
		return Interval{}, fmt.Errorf("mean interval: %w", err)
	}
	if err := need(xs, 2); err != nil {
		return Interval{}, fmt.Errorf("mean interval: %w", err)
	}
	m := mean(xs)
	sd := stdDev(xs, m)
	n := float64(len(xs))
	t, err := StudentTQuantile((1+level)/2, n-1)
	if err != nil {
		return Interval{}, fmt.Errorf("mean interval: %w", err)
	}
	h := t * sd / math.Sqrt(n)
	return Interval{Lower: m - h, Upper: m + h, Level: level}, nil
}

// Wilson returns the Wilson (1927) score interval for a success rate of
// successes out of n trials at the given level, with z = Φ⁻¹((1+level)/2):
//
//	(p̂ + z²/2n ± z·sqrt(p̂(1-p̂)/n + z²/4n²)) / (1 + z²/n)
//
// With continuity set, the continuity-corrected form of Newcombe (1998,
// method 4) is used; it is wider and guarantees coverage closer to the
// minimum rather than the mean. Its lower limit is 0 when successes = 0 and
// its upper limit is 1 when successes = n (the formula would otherwise cross
// the boundary). Both forms are clipped to [0, 1].
//
// Unlike the Wald interval, Wilson never collapses to zero width at 0 or n
// successes, which matters for 4 runs that all succeed.
func Wilson(successes, n int, level float64, continuity bool) (Interval, error) {
	if err := checkLevel(level); err != nil {
		return Interval{}, fmt.Errorf("wilson interval: %w", err)
	}
	if n <= 0 || successes < 0 || successes > n {
		return Interval{}, fmt.Errorf("wilson interval: %d successes out of %d trials is not a proportion", successes, n)
	}
	z := NormalQuantile((1 + level) / 2)
	z2 := z * z
	fn := float64(n)
	p := float64(successes) / fn
	var lo, hi float64
	if !continuity {
		center := p + z2/(2*fn)
		half := z * math.Sqrt(p*(1-p)/fn+z2/(4*fn*fn))
		den := 1 + z2/fn
		lo, hi = (center-half)/den, (center+half)/den
		// The bounds are exactly 0 and 1 at the edges; rounding would leave
		// 1 - 1e-16.
		if successes == 0 {
			lo = 0
		}
		if successes == n {
			hi = 1
		}
	} else {
		den := 2 * (fn + z2)
		lo, hi = 0, 1
		if successes > 0 {
			lo = (2*fn*p + z2 - 1 - z*math.Sqrt(z2-2-1/fn+4*p*(fn*(1-p)+1))) / den
		}
		if successes < n {
			hi = (2*fn*p + z2 + 1 + z*math.Sqrt(z2+2-1/fn+4*p*(fn*(1-p)-1))) / den
		}
	}
	return Interval{Lower: math.Max(0, lo), Upper: math.Min(1, hi), Level: level}, nil
}
