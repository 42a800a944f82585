package consensus

import (
	"slices"
	"strings"
	"testing"
)

// timed is a successful run with a duration and token count.
func timed(i int, out string, ms, tokens int64) Run {
	r := ok(i, out)
	r.DurationMS, r.Tokens = ms, tokens
	return r
}

func TestExclusion(t *testing.T) {
	t.Parallel()
	// Two slow B runs carry the majority; without them A wins.
	flip := []Run{timed(0, "A", 100, 50), timed(1, "A", 101, 50), timed(2, "B", 99, 50), timed(3, "B", 9000, 50), timed(4, "B", 8000, 50)}
	steady := []Run{timed(0, "A", 100, 1), timed(1, "A", 101, 2), timed(2, "A", 102, 3), timed(3, "A", 103, 4),
		timed(4, "A", 104, 5), timed(5, "A", 105, 6), timed(6, "A", 106, 7), timed(7, "B", 9000, 8)}
	tokenOutlier := []Run{timed(0, "A", 100, 500), timed(1, "A", 100, 510), timed(2, "A", 100, 490), timed(3, "B", 100, 90000)}
	fastFail := fail(3)
	fastFail.DurationMS = 1
	withFailure := []Run{timed(0, "A", 100, 50), timed(1, "A", 101, 50), timed(2, "A", 102, 50), fastFail, timed(4, "A", 99, 50)}

	tests := []struct {
		name     string
		runs     []Run
		ex       Exclusion
		excluded []int
		decision string
		conf     float64
		note     string // substring expected in Notes
	}{
		{"none keeps outliers", flip, Exclusion{}, []int{}, "B", 0.6, ""},
		{"modified z flips the vote", flip, Exclusion{Method: ModifiedZ}, []int{3, 4}, "A", 2.0 / 3, ""},
		{"tukey on this spread flags nothing", flip, Exclusion{Method: Tukey}, []int{}, "B", 0.6, ""},
		{"tukey flags the far run", steady, Exclusion{Method: Tukey}, []int{7}, "A", 1, ""},
		{"tukey wide k keeps it", steady, Exclusion{Method: Tukey, Cutoff: 5000}, []int{}, "A", 7.0 / 8, ""},
		{"tokens outlier by default", tokenOutlier, Exclusion{Method: ModifiedZ}, []int{3}, "A", 1, ""},
		{"duration only ignores tokens", tokenOutlier, Exclusion{Method: ModifiedZ, Metrics: []Metric{Duration}}, []int{}, "A", 0.75, ""},
		{"failed run is never excluded", withFailure, Exclusion{Method: ModifiedZ}, []int{}, "A", 0.8, ""},
		{"too few runs for tukey", flip[:3], Exclusion{Method: Tukey}, []int{}, "A", 2.0 / 3, "needs at least 4"},
		{"too few runs for modified z", flip[:2], Exclusion{Method: ModifiedZ}, []int{}, "A", 1, "needs at least 3"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := Decide(Majority, tt.runs, Options{Exclude: tt.ex})
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got.Excluded, tt.excluded) {
				t.Errorf("excluded = %v, want %v", got.Excluded, tt.excluded)
			}
			if got.Runs != len(tt.runs)-len(tt.excluded) {
				t.Errorf("runs counted = %d, want %d", got.Runs, len(tt.runs)-len(tt.excluded))
			}
			if got.Decision != tt.decision || !near(got.Confidence, tt.conf) {
				t.Errorf("decision, confidence = %q, %v, want %q, %v (%s)", got.Decision, got.Confidence, tt.decision, tt.conf, got.Reason)
			}
			if tt.note != "" && !slices.ContainsFunc(got.Notes, func(n string) bool { return strings.Contains(n, tt.note) }) {
				t.Errorf("notes %q lack %q", got.Notes, tt.note)
			}
		})
	}
}

func TestParseOutlierMethod(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]OutlierMethod{"": NoExclusion, "none": NoExclusion, "modified_z": ModifiedZ, "MZ": ModifiedZ, "tukey": Tukey} {
		if got, err := ParseOutlierMethod(in); err != nil || got != want {
			t.Errorf("ParseOutlierMethod(%q) = %q, %v, want %q", in, got, err, want)
		}
	}
	if _, err := ParseOutlierMethod("grubbs"); err == nil {
		t.Error("ParseOutlierMethod(\"grubbs\") did not fail")
	}
}
