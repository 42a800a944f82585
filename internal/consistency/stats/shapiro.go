package stats

import (
	"errors"
	"fmt"
	"math"
)

// MaxShapiroWilkN is the largest sample for which Royston's approximation of
// the Shapiro-Wilk p-value is validated.
const MaxShapiroWilkN = 5000

// ErrConstant is returned when a statistic is undefined because every
// observation is equal.
var ErrConstant = errors.New("stats: all observations are equal")

// Normality is the result of a Shapiro-Wilk test.
type Normality struct {
	N int     `json:"n"`
	W float64 `json:"w"`
	P float64 `json:"p_value"`
}

// Polynomial coefficients of Royston (1992, 1995), ascending powers.
var (
	swC1 = []float64{0, 0.221157, -0.147981, -2.071190, 4.434685, -2.706056} // a_n in u = 1/√n
	swC2 = []float64{0, 0.042981, -0.293762, -1.752461, 5.682633, -3.582633} // a_{n-1} in u
	swG  = []float64{-2.273, 0.459}                                          // γ(n), 4 <= n <= 11
	swC3 = []float64{0.5440, -0.39978, 0.025054, -6.714e-4}                  // μ(n), 4 <= n <= 11
	swC4 = []float64{1.3822, -0.77857, 0.062767, -0.0020322}                 // log σ(n), 4 <= n <= 11
	swC5 = []float64{-1.5861, -0.31082, -0.083751, 0.0038915}                // μ(log n), n >= 12
	swC6 = []float64{-0.4803, -0.082676, 0.0030302}                          // log σ(log n), n >= 12
)

func poly(c []float64, x float64) float64 {
	r := 0.0
	for i := len(c) - 1; i >= 0; i-- {
		r = r*x + c[i]
	}
	return r
}

// ShapiroWilk tests xs for normality: W = (Σ a_i x_(i))² / Σ (x_i - x̄)², with
// small W (and small P) evidence against normality. It needs 3 <= n <= 5000
// observations that are not all equal.
//
// Method: Royston's algorithm AS R94 (Royston 1995, Applied Statistics 44,
// 547-551, building on Royston 1992, Statistics and Computing 2, 117-119),
// the algorithm of R's shapiro.test. The coefficients a_i come from the
// normal scores m_i = Φ⁻¹((i - 3/8)/(n + 1/4)) normalised to unit length,
// with the one (n <= 5) or two (n > 5) most extreme coefficients replaced by
// Royston's polynomial approximations in 1/√n. The p-value is exact for
// n = 3 (P = 6/π·(asin √W - asin √¾), Shapiro and Wilk 1965); for 4 <= n <=
// 11, -log(γ - log(1-W)) and for n >= 12, log(1-W) are treated as normal with
// Royston's polynomial mean and standard deviation. Royston states the
// p-value is adequate below 0.1; above it, read P as "no evidence".
func ShapiroWilk(xs []float64) (Normality, error) {
	n := len(xs)
	if err := need(xs, 3); err != nil {
		return Normality{}, fmt.Errorf("shapiro-wilk: %w", err)
	}
	if n > MaxShapiroWilkN {
		return Normality{}, fmt.Errorf("shapiro-wilk: %d observations, the p-value is validated up to %d", n, MaxShapiroWilkN)
	}
	s := sorted(xs)
	rng := s[n-1] - s[0]
	if !(rng > 0) {
		return Normality{}, fmt.Errorf("shapiro-wilk: %w", ErrConstant)
	}
	a := swCoefficients(n)

	// Work on centred data scaled by the range, as AS R94 does, so that large
	// offsets (epoch timestamps, token counts) do not cost precision.
	m := mean(s)
	var b, ss float64
	for i := range n / 2 {
		b += a[i] * (s[n-1-i] - s[i]) / rng
	}
	for _, x := range s {
		d := (x - m) / rng
		ss += d * d
	}
	var suma2 float64
	for _, ai := range a {
		suma2 += 2 * ai * ai
	}
	w := b * b / (suma2 * ss)
	if w > 1 {
		w = 1
	}
	res := Normality{N: n, W: w}

	fn := float64(n)
	if n == 3 {
		// Exact distribution for n = 3 (Shapiro and Wilk 1965).
		p := 6 / math.Pi * (math.Asin(math.Sqrt(w)) - math.Pi/3)
		res.P = math.Min(1, math.Max(0, p))
		return res, nil
	}
	y := math.Log(1 - w)
	var mu, sigma float64
	if n <= 11 {
		gamma := poly(swG, fn)
		if y >= gamma {
			res.P = 0 // W far below anything normal samples produce
			return res, nil
		}
		y = -math.Log(gamma - y)
		mu = poly(swC3, fn)
		sigma = math.Exp(poly(swC4, fn))
	} else {
		ln := math.Log(fn)
		mu = poly(swC5, ln)
		sigma = math.Exp(poly(swC6, ln))
	}
	res.P = 1 - NormalCDF((y-mu)/sigma)
	return res, nil
}

// swCoefficients returns the upper half of the antisymmetric Shapiro-Wilk
// coefficients, a[0] for the pair (x_(n), x_(1)), a[1] for (x_(n-1), x_(2)),
// and so on; the full vector has unit length.
func swCoefficients(n int) []float64 {
	half := n / 2
	a := make([]float64, half)
	if n == 3 {
		a[0] = math.Sqrt(0.5)
		return a
	}
	fn := float64(n)
	// mm[i] = -m_{i+1} > 0: normal scores of the upper order statistics.
	mm := make([]float64, half)
	var summ2 float64
	for i := range half {
		mm[i] = -NormalQuantile((float64(i+1) - 0.375) / (fn + 0.25))
		summ2 += 2 * mm[i] * mm[i]
	}
	u := 1 / math.Sqrt(fn)
	norm := math.Sqrt(summ2)
	a[0] = mm[0]/norm + poly(swC1, u)
	first := 1
	var phi float64
	if n > 5 {
		a[1] = mm[1]/norm + poly(swC2, u)
		first = 2
		phi = (summ2 - 2*mm[0]*mm[0] - 2*mm[1]*mm[1]) / (1 - 2*a[0]*a[0] - 2*a[1]*a[1])
	} else {
		phi = (summ2 - 2*mm[0]*mm[0]) / (1 - 2*a[0]*a[0])
	}
	f := math.Sqrt(phi)
	for i := first; i < half; i++ {
		a[i] = mm[i] / f
	}
	return a
}
