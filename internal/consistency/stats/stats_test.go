package stats

import (
	"errors"
	"math"
	"slices"
	"testing"
)

func near(t *testing.T, name string, got, want, tol float64) {
	t.Helper()
	if math.IsNaN(got) || math.Abs(got-want) > tol {
		t.Errorf("%s = %.10g, want %.10g ± %g", name, got, want, tol)
	}
}

// Worked by hand: {2,4,4,4,5,5,7,9} has mean 5, sum of squared deviations
// 32, sample variance 32/7.
func TestDescriptive(t *testing.T) {
	t.Parallel()
	xs := []float64{2, 4, 4, 4, 5, 5, 7, 9}
	m, err := Mean(xs)
	if err != nil {
		t.Fatal(err)
	}
	near(t, "mean", m, 5, 1e-15)
	sd, err := StdDev(xs)
	if err != nil {
		t.Fatal(err)
	}
	near(t, "std", sd, math.Sqrt(32.0/7), 1e-14)
	c, err := CV(xs)
	if err != nil {
		t.Fatal(err)
	}
	near(t, "cv", c, math.Sqrt(32.0/7)/5, 1e-14)
	med, err := Median(xs)
	if err != nil {
		t.Fatal(err)
	}
	near(t, "median", med, 4.5, 0)

	// A large offset must not cost precision.
	big := make([]float64, len(xs))
	for i, x := range xs {
		big[i] = 1e9 + x
	}
	sd, _ = StdDev(big)
	near(t, "std with offset", sd, math.Sqrt(32.0/7), 1e-6)
}

func TestCVEdgeCases(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		xs   []float64
		want float64
	}{
		{"constant", []float64{3, 3, 3}, 0},
		{"constant zero", []float64{0, 0, 0}, 0},
		{"zero mean", []float64{-1, 1}, math.Inf(1)},
		{"negative mean uses |mean|", []float64{-2, -4}, math.Sqrt2 / 3},
	}
	for _, tc := range tests {
		got, err := CV(tc.xs)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if !(got == tc.want || math.Abs(got-tc.want) < 1e-15) {
			t.Errorf("%s: CV = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// Type 7 quantiles of 1..9,100 worked by hand: h = 9p, Q = x[⌊h⌋] + frac(h)·gap.
func TestQuantileType7(t *testing.T) {
	t.Parallel()
	xs := []float64{100, 1, 2, 3, 4, 5, 6, 7, 8, 9} // unsorted on purpose
	tests := []struct{ p, want float64 }{
		{0, 1}, {0.25, 3.25}, {0.5, 5.5}, {0.75, 7.75}, {0.9, 18.1}, {1, 100},
	}
	for _, tc := range tests {
		got, err := Quantile(xs, tc.p)
		if err != nil {
			t.Fatal(err)
		}
		near(t, "quantile", got, tc.want, 1e-12)
	}
	if xs[0] != 100 {
		t.Error("Quantile modified its input")
	}
	if _, err := Quantile(xs, 1.5); err == nil {
		t.Error("Quantile(p=1.5) did not fail")
	}
}

// Two-sided Student t critical values t_{p, df} from the NIST/SEMATECH
// e-Handbook of Statistical Methods, section 1.3.6.7.2 "Critical values of
// the Student's t distribution" (3 decimals, so tolerance 0.0005 plus
// rounding slack).
func TestStudentTQuantileTable(t *testing.T) {
	t.Parallel()
	t975 := []float64{
		12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
		2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
		2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
	}
	for i, want := range t975 {
		df := float64(i + 1)
		got, err := StudentTQuantile(0.975, df)
		if err != nil {
			t.Fatal(err)
		}
		near(t, "t_0.975", got, want, 0.0005+1e-9)
		neg, _ := StudentTQuantile(0.025, df)
		near(t, "t_0.025 symmetry", neg, -got, 1e-12)
	}
	others := []struct{ p, df, want float64 }{
		{0.95, 1, 6.314}, {0.95, 5, 2.015}, {0.95, 10, 1.812}, {0.95, 20, 1.725}, {0.95, 30, 1.697},
		{0.995, 1, 63.657}, {0.995, 5, 4.032}, {0.995, 10, 3.169}, {0.995, 20, 2.845}, {0.995, 30, 2.750},
		{0.90, 10, 1.372}, {0.999, 10, 4.144}, {0.999, 30, 3.385},
	}
	for _, tc := range others {
		got, err := StudentTQuantile(tc.p, tc.df)
		if err != nil {
			t.Fatal(err)
		}
		near(t, "t quantile", got, tc.want, 0.0005+1e-9)
	}
}

// Closed forms give many more digits than tables: df=1 is Cauchy,
// t = tan(π(p-½)); df=2 has a closed-form CDF that the quantile must invert;
// df=4 has the exact CDF F(t) = ½ + t(t²+6)/(2(t²+4)^{3/2}) (Johnson, Kotz
// and Balakrishnan, Continuous Univariate Distributions vol. 2, ch. 28),
// which exercises the iterative path independently of the continued fraction.
func TestStudentTAnalytic(t *testing.T) {
	t.Parallel()
	for _, p := range []float64{0.6, 0.9, 0.975, 0.999} {
		got, _ := StudentTQuantile(p, 1)
		near(t, "df=1", got, math.Tan(math.Pi*(p-0.5)), 1e-12)
		near(t, "df=1 cdf", StudentTCDF(got, 1), p, 1e-13)
		got, _ = StudentTQuantile(p, 2)
		near(t, "df=2 cdf", StudentTCDF(got, 2), p, 1e-13)
		got, _ = StudentTQuantile(p, 4)
		f4 := 0.5 + got*(got*got+6)/(2*math.Pow(got*got+4, 1.5))
		near(t, "df=4 exact cdf at quantile", f4, p, 1e-12)
	}
	// Large df tends to the normal: z_0.975 = 1.959963984540054.
	got, _ := StudentTQuantile(0.975, 1e7)
	near(t, "df=1e7", got, 1.959963984540054, 1e-6)
	near(t, "normal quantile", NormalQuantile(0.975), 1.959963984540054, 1e-15)
	for _, bad := range [][2]float64{{0, 5}, {1, 5}, {0.5, 0}, {math.NaN(), 3}, {0.9, -1}} {
		if _, err := StudentTQuantile(bad[0], bad[1]); err == nil {
			t.Errorf("StudentTQuantile(%v, %v) did not fail", bad[0], bad[1])
		}
	}
}

// Mean interval: for n = 2 the 95% interval is mean ± 12.706·s/√2 (NIST
// table value for df = 1); {9, 11}: mean 10, s = √2, so ± 12.706.
func TestMeanInterval(t *testing.T) {
	t.Parallel()
	ci, err := MeanInterval([]float64{9, 11}, 0.95)
	if err != nil {
		t.Fatal(err)
	}
	near(t, "lower", ci.Lower, 10-12.706, 0.0005)
	near(t, "upper", ci.Upper, 10+12.706, 0.0005)
	if _, err := MeanInterval([]float64{1}, 0.95); !errors.Is(err, ErrEmpty) {
		t.Errorf("one observation: err = %v, want ErrEmpty", err)
	}
	if _, err := MeanInterval([]float64{1, 2}, 95); err == nil {
		t.Error("level 95 did not fail")
	}
}

// Wilson score intervals from Newcombe (1998), "Two-sided confidence
// intervals for the single proportion: comparison of seven methods",
// Statistics in Medicine 17, 857-872: the worked examples for method 3
// (score, no continuity correction) and method 4 (score with continuity
// correction), 95%, published to 4 decimals (tolerance 5e-5 + slack).
func TestWilsonNewcombe(t *testing.T) {
	t.Parallel()
	tests := []struct {
		k, n       int
		cc         bool
		lower, upp float64
	}{
		{81, 263, false, 0.2553, 0.3662},
		{81, 263, true, 0.2535, 0.3682},
		{15, 148, false, 0.0624, 0.1605},
		{15, 148, true, 0.0598, 0.1644},
		{0, 20, false, 0.0000, 0.1611},
		{0, 20, true, 0.0000, 0.2005},
		{1, 29, false, 0.0061, 0.1718},
		{1, 29, true, 0.0018, 0.1963},
	}
	for _, tc := range tests {
		ci, err := Wilson(tc.k, tc.n, 0.95, tc.cc)
		if err != nil {
			t.Fatal(err)
		}
		near(t, "wilson lower", ci.Lower, tc.lower, 5e-5+1e-9)
		near(t, "wilson upper", ci.Upper, tc.upp, 5e-5+1e-9)
	}
	// All runs succeeded: the interval still has width (1 - lower > 0).
	ci, _ := Wilson(4, 4, 0.95, false)
	if !(ci.Upper == 1 && ci.Lower < 1 && ci.Lower > 0) {
		t.Errorf("4/4: %+v, want (0, 1) lower and upper 1", ci)
	}
	for _, bad := range [][2]int{{1, 0}, {-1, 3}, {4, 3}} {
		if _, err := Wilson(bad[0], bad[1], 0.95, false); err == nil {
			t.Errorf("Wilson(%d, %d) did not fail", bad[0], bad[1])
		}
	}
}

// Tukey fences worked by hand on 1..9,100 (type 7): Q1 = 3.25, Q3 = 7.75,
// IQR = 4.5, fences 3.25 - 6.75 = -3.5 and 7.75 + 6.75 = 14.5; only 100 is
// out. With k = 3 the fences are -10.25 and 21.25.
func TestTukeyFences(t *testing.T) {
	t.Parallel()
	xs := []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 100}
	tests := []struct {
		k, lo, hi float64
		idx       []int
	}{
		{0, -3.5, 14.5, []int{9}},
		{1.5, -3.5, 14.5, []int{9}},
		{3, -10.25, 21.25, []int{9}},
		{20, -86.75, 97.75, []int{9}},
		{25, -109.25, 120.25, []int{}},
	}
	for _, tc := range tests {
		o, err := TukeyFences(xs, tc.k)
		if err != nil {
			t.Fatal(err)
		}
		near(t, "lower fence", o.Lower, tc.lo, 1e-12)
		near(t, "upper fence", o.Upper, tc.hi, 1e-12)
		if !slices.Equal(o.Indices, tc.idx) {
			t.Errorf("k=%v: outliers %v, want %v", tc.k, o.Indices, tc.idx)
		}
	}
	if _, err := TukeyFences([]float64{1, 2, 3}, 1.5); !errors.Is(err, ErrEmpty) {
		t.Errorf("n=3: err = %v, want ErrEmpty", err)
	}
}

// z-scores: with n observations no |z| can exceed (n-1)/√n (Shiffler 1988),
// and 19 zeros and a one attain it: z = 19/√20 ≈ 4.2485 > 3. Nine zeros and
// a one reach only 9/√10 ≈ 2.846, so nothing is flagged.
func TestZScores(t *testing.T) {
	t.Parallel()
	xs := make([]float64, 20)
	xs[7] = 1
	o, err := ZScores(xs, 0)
	if err != nil {
		t.Fatal(err)
	}
	near(t, "max z", o.Scores[7], 19/math.Sqrt(20), 1e-12)
	if !slices.Equal(o.Indices, []int{7}) {
		t.Errorf("outliers %v, want [7]", o.Indices)
	}
	small := make([]float64, 10)
	small[0] = 1
	o, _ = ZScores(small, 0)
	near(t, "max z, n=10", o.Scores[0], 9/math.Sqrt(10), 1e-12)
	if len(o.Indices) != 0 {
		t.Errorf("n=10 flagged %v; |z| > 3 is impossible", o.Indices)
	}
	o, _ = ZScores([]float64{5, 5, 5}, 0)
	if len(o.Indices) != 0 {
		t.Errorf("constant data flagged %v", o.Indices)
	}
}

// Modified z-scores worked by hand: {1,2,3,4,100} has median 3, absolute
// deviations {2,1,0,1,97}, MAD 1, so M = 0.6745·(x-3): 100 → 65.4265 > 3.5,
// 1 → -1.349.
func TestModifiedZScores(t *testing.T) {
	t.Parallel()
	o, err := ModifiedZScores([]float64{1, 2, 3, 4, 100}, 0)
	if err != nil {
		t.Fatal(err)
	}
	near(t, "M(100)", o.Scores[4], 0.6745*97, 1e-12)
	near(t, "M(1)", o.Scores[0], -1.349, 1e-12)
	if !slices.Equal(o.Indices, []int{4}) {
		t.Errorf("outliers %v, want [4]", o.Indices)
	}
	// MAD = 0 (most values equal): fallback to 1.253314·meanAD. Median 5,
	// deviations {0,0,0,0,5}, meanAD 1, M(10) = 5/1.253314 = 3.9894 > 3.5.
	o, _ = ModifiedZScores([]float64{5, 5, 5, 5, 10}, 0)
	near(t, "M with MAD=0", o.Scores[4], 5/1.253314, 1e-12)
	if !slices.Equal(o.Indices, []int{4}) {
		t.Errorf("MAD=0: outliers %v, want [4]", o.Indices)
	}
	o, _ = ModifiedZScores([]float64{2, 2, 2}, 0)
	if len(o.Indices) != 0 {
		t.Errorf("constant data flagged %v", o.Indices)
	}
}

func TestReliability(t *testing.T) {
	t.Parallel()
	tests := []struct {
		rate, cvd, cvt float64
		score          float64
		label          Label
	}{
		{1, 0, 0, 1, High},               // deterministic agent
		{1, 2, math.Inf(1), 0.6, Medium}, // CVs clamp to 1
		{0.5, 0.1, 0.2, 0.3 + 0.18 + 0.16, Medium},
		{0.5, 0.5, 0.5, 0.5, Low},
		{0.9, 0.25, 0.25, 0.84, High},
		{0, 0, 0, 0.4, Low},
	}
	for _, tc := range tests {
		r, err := Score(tc.rate, tc.cvd, tc.cvt)
		if err != nil {
			t.Fatal(err)
		}
		near(t, "score", r.Score, tc.score, 1e-12)
		if r.Label != tc.label {
			t.Errorf("score %v: label %s, want %s", r.Score, r.Label, tc.label)
		}
	}
	for _, l := range []struct {
		s float64
		l Label
	}{{0.8, High}, {0.7999, Medium}, {0.6, Medium}, {0.5999, Low}} {
		if got := LabelFor(l.s); got != l.l {
			t.Errorf("LabelFor(%v) = %s, want %s", l.s, got, l.l)
		}
	}
	for _, bad := range [][3]float64{{1.1, 0, 0}, {math.NaN(), 0, 0}, {1, -1, 0}, {1, 0, math.NaN()}} {
		if _, err := Score(bad[0], bad[1], bad[2]); err == nil {
			t.Errorf("Score%v did not fail", bad)
		}
	}
}

func TestBadInput(t *testing.T) {
	t.Parallel()
	nan := []float64{1, math.NaN(), 3, 4}
	if _, err := Mean(nil); !errors.Is(err, ErrEmpty) {
		t.Errorf("Mean(nil): %v", err)
	}
	if _, err := Mean(nan); !errors.Is(err, ErrNotFinite) {
		t.Errorf("Mean(NaN): %v", err)
	}
	if _, err := StdDev([]float64{1}); !errors.Is(err, ErrEmpty) {
		t.Errorf("StdDev(1 value): %v", err)
	}
	if _, err := ShapiroWilk(nan); !errors.Is(err, ErrNotFinite) {
		t.Errorf("ShapiroWilk(NaN): %v", err)
	}
	if _, err := Describe([]float64{1, math.Inf(1), 2}, 0.95); !errors.Is(err, ErrNotFinite) {
		t.Errorf("Describe(Inf): %v", err)
	}
}
