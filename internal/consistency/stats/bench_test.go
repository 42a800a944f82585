package stats

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// runs10k returns synthetic per-run figures for 10,000 runs (fixed seed).
func runs10k() (durations, tokens []float64, successes int) {
	r := rand.New(rand.NewPCG(42, 6))
	durations = make([]float64, 10000)
	tokens = make([]float64, 10000)
	for i := range durations {
		durations[i] = 2.3 + 0.4*r.NormFloat64()
		tokens[i] = float64(1500 + r.IntN(300))
		if r.Float64() < 0.8 {
			successes++
		}
	}
	return durations, tokens, successes
}

func analyze(b *testing.B, durations, tokens []float64, successes int) {
	d, err := Describe(durations, 0.95)
	if err != nil {
		b.Fatal(err)
	}
	tk, err := Describe(tokens, 0.95)
	if err != nil {
		b.Fatal(err)
	}
	// Shapiro-Wilk is validated to n = 5000: test the first 5000 runs.
	if _, err := ShapiroWilk(durations[:MaxShapiroWilkN]); err != nil {
		b.Fatal(err)
	}
	if _, err := Wilson(successes, len(durations), 0.95, false); err != nil {
		b.Fatal(err)
	}
	if _, err := Score(float64(successes)/float64(len(durations)), d.CV, tk.CV); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkAnalyze10k is the "analysis of 10,000 recorded runs"
// (statistics only, no bundle I/O). Compare with BenchmarkSort10kBaseline,
// one sort of the same durations, in the same run.
func BenchmarkAnalyze10k(b *testing.B) {
	durations, tokens, successes := runs10k()
	for b.Loop() {
		analyze(b, durations, tokens, successes)
	}
}

func BenchmarkSort10kBaseline(b *testing.B) {
	durations, _, _ := runs10k()
	for b.Loop() {
		s := slices.Clone(durations)
		slices.Sort(s)
	}
}
