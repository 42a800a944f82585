package stats

import (
	"errors"
	"math"
	"testing"
)

// Reference values are R's shapiro.test (a C translation of AS R94, the
// algorithm implemented here) on datasets shipped with R, as printed in R
// and widely reproduced (W to 5 decimals, p to 4 significant digits):
//
//	shapiro.test(mtcars$mpg)      W = 0.94756, p-value = 0.1229
//	shapiro.test(ToothGrowth$len) W = 0.96743, p-value = 0.1091
//
// mtcars: Henderson and Velleman (1981), Biometrics 37, 391-411.
// ToothGrowth: Crampton (1947), J. Nutrition 33, 491-504.
var (
	mtcarsMPG = []float64{
		21.0, 21.0, 22.8, 21.4, 18.7, 18.1, 14.3, 24.4, 22.8, 19.2, 17.8,
		16.4, 17.3, 15.2, 10.4, 10.4, 14.7, 32.4, 30.4, 33.9, 21.5, 15.5,
		15.2, 13.3, 19.2, 27.3, 26.0, 30.4, 15.8, 19.7, 15.0, 21.4,
	}
	toothGrowthLen = []float64{
		4.2, 11.5, 7.3, 5.8, 6.4, 10.0, 11.2, 11.2, 5.2, 7.0,
		16.5, 16.5, 15.2, 17.3, 22.5, 17.3, 13.6, 14.5, 18.8, 15.5,
		23.6, 18.5, 33.9, 25.5, 26.4, 32.5, 26.7, 21.5, 23.3, 29.5,
		15.2, 21.5, 17.6, 9.7, 14.5, 10.0, 8.2, 9.4, 16.5, 9.7,
		19.7, 23.3, 23.6, 26.4, 20.0, 25.2, 25.8, 21.2, 14.5, 27.3,
		25.5, 26.4, 22.4, 24.5, 24.8, 30.9, 26.4, 27.3, 29.4, 23.0,
	}
	// Shapiro and Wilk (1965), Biometrika 52, 591-611, section 4 example:
	// weights in pounds of 11 men; the paper reports W = 0.79 (2 decimals)
	// and significance below the 1% point. SciPy 1.10's shapiro (also AS
	// R94) gives W = 0.788815, p = 0.0067038; it also reproduces the two R
	// values above (0.947565 / 0.122882 and 0.967429 / 0.109101).
	shapiroWilkWeights = []float64{148, 154, 158, 160, 161, 162, 166, 170, 182, 195, 236}
)

func TestShapiroWilkReference(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		xs         []float64
		w, wTol    float64
		p, pTol    float64
		pBelowOnly bool
	}{
		{"R mtcars$mpg", mtcarsMPG, 0.94756, 5e-6, 0.1229, 5e-5, false},
		{"R ToothGrowth$len", toothGrowthLen, 0.96743, 5e-6, 0.1091, 5e-5, false},
		{"Shapiro-Wilk 1965 weights", shapiroWilkWeights, 0.79, 0.005, 0.01, 0, true},
		{"SciPy on the 1965 weights", shapiroWilkWeights, 0.788815, 5e-6, 0.0067038, 5e-7, false},
	}
	for _, tc := range tests {
		got, err := ShapiroWilk(tc.xs)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got.N != len(tc.xs) {
			t.Errorf("%s: N = %d", tc.name, got.N)
		}
		near(t, tc.name+" W", got.W, tc.w, tc.wTol)
		if tc.pBelowOnly {
			if !(got.P < tc.p) {
				t.Errorf("%s: P = %v, want < %v", tc.name, got.P, tc.p)
			}
		} else {
			near(t, tc.name+" P", got.P, tc.p, tc.pTol)
		}
		// W and P do not depend on location or scale.
		shifted := make([]float64, len(tc.xs))
		for i, x := range tc.xs {
			shifted[i] = 1e6 + 3*x
		}
		again, _ := ShapiroWilk(shifted)
		near(t, tc.name+" W (affine)", again.W, got.W, 1e-9)
	}
}

// n = 3 has an exact null distribution (Shapiro and Wilk 1965):
// P(W <= w) = (6/π)(asin √w - asin √¾), W >= 3/4. With a = (-1/√2, 0, 1/√2):
// {0,0,1} gives b² = ½, SS = ⅔, W = ¾ and P = 0; {1,2,4} gives b² = 9/2,
// SS = 42/9, W = 27/28; {1,2,3} gives W = 1 and P = 1.
func TestShapiroWilkExactN3(t *testing.T) {
	t.Parallel()
	exact := func(w float64) float64 { return 6 / math.Pi * (math.Asin(math.Sqrt(w)) - math.Pi/3) }
	tests := []struct {
		xs   []float64
		w, p float64
	}{
		{[]float64{0, 0, 1}, 0.75, 0},
		{[]float64{4, 1, 2}, 27.0 / 28, exact(27.0 / 28)},
		{[]float64{1, 2, 3}, 1, 1},
	}
	for _, tc := range tests {
		got, err := ShapiroWilk(tc.xs)
		if err != nil {
			t.Fatal(err)
		}
		near(t, "W n=3", got.W, tc.w, 1e-12)
		near(t, "P n=3", got.P, tc.p, 1e-7)
	}
}

func TestShapiroWilkBadInput(t *testing.T) {
	t.Parallel()
	if _, err := ShapiroWilk([]float64{1, 2}); !errors.Is(err, ErrEmpty) {
		t.Errorf("n=2: %v", err)
	}
	if _, err := ShapiroWilk([]float64{7, 7, 7, 7}); !errors.Is(err, ErrConstant) {
		t.Errorf("constant: %v", err)
	}
	if _, err := ShapiroWilk(make([]float64, MaxShapiroWilkN+1)); err == nil {
		t.Error("n=5001 did not fail")
	}
}

// Coefficients have unit length and are antisymmetric by construction; the
// n = 3 path is exact.
func TestShapiroWilkCoefficients(t *testing.T) {
	t.Parallel()
	for _, n := range []int{3, 4, 5, 6, 11, 12, 50, 5000} {
		a := swCoefficients(n)
		var s float64
		for _, ai := range a {
			s += 2 * ai * ai
		}
		near(t, "Σa²", s, 1, 1e-12)
		for i := 1; i < len(a); i++ {
			if !(a[i] < a[i-1] && a[i] > 0) {
				t.Errorf("n=%d: coefficients not decreasing and positive: %v", n, a[:i+1])
				break
			}
		}
	}
}
