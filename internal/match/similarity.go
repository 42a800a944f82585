package match

import (
	"bytes"
	"math"
	"strings"
	"unicode"
)

// Similarity is dal's built-in semantic similarity of two texts, in
// [0, 1], deterministic and offline (docs/validation.md states it exactly):
//
//  1. Normalize: lowercase (Unicode simple folding), split into words,
//     the maximal runs of letters and digits; everything else separates.
//  2. Word score: the cosine of the two word-count vectors.
//  3. Character score: the cosine of the two count vectors of character
//     trigrams of the words joined by single spaces, with a space added
//     at both ends (a text of one or two characters is its own gram).
//  4. Similarity = (word score + character score) / 2, rounded to six
//     decimals.
//
// Identical bytes score 1. Two texts without words score 1 when they are
// equal once whitespace is collapsed, else 0; a text without words
// against one with words scores 0. Counts and dot products are integers,
// so the figure is the same on every machine.
func Similarity(a, b []byte) float64 {
	if bytes.Equal(a, b) {
		return 1
	}
	wa, wb := words(string(a)), words(string(b))
	switch {
	case len(wa) == 0 && len(wb) == 0:
		if strings.Join(strings.Fields(string(a)), " ") == strings.Join(strings.Fields(string(b)), " ") {
			return 1
		}
		return 0
	case len(wa) == 0 || len(wb) == 0:
		return 0
	}
	word := cosine(counts(wa), counts(wb))
	char := cosine(counts(trigrams(wa)), counts(trigrams(wb)))
	return round6((word + char) / 2)
}

// words lowercases s and splits it into runs of letters and digits.
func words(s string) []string {
	return strings.FieldsFunc(strings.ToLower(s), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r)
	})
}

// trigrams are the character trigrams of " w1 w2 ... wn ".
func trigrams(ws []string) []string {
	r := []rune(" " + strings.Join(ws, " ") + " ")
	if len(r) < 3 {
		return []string{string(r)}
	}
	out := make([]string, 0, len(r)-2)
	for i := 0; i+3 <= len(r); i++ {
		out = append(out, string(r[i:i+3]))
	}
	return out
}

func counts(xs []string) map[string]int64 {
	m := make(map[string]int64, len(xs))
	for _, x := range xs {
		m[x]++
	}
	return m
}

// cosine of two count vectors; integer sums, one division.
func cosine(a, b map[string]int64) float64 {
	var dot, na, nb int64
	for k, x := range a {
		na += x * x
		dot += x * b[k]
	}
	for _, y := range b {
		nb += y * y
	}
	if na == 0 || nb == 0 {
		return 0
	}
	return float64(dot) / math.Sqrt(float64(na)*float64(nb))
}

func round6(x float64) float64 {
	return math.Round(x*1e6) / 1e6
}
