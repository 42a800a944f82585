package consensus

import (
	"encoding/json"
	"errors"
	"math"
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/dal-runtime/dal/internal/golden"
)

func sc(x float64) *float64 { return &x }

// ok is a successful run; fail a failed one.
func ok(i int, out string, score ...float64) Run {
	r := Run{Index: i, Seed: uint64(1000 + i), Success: true, Output: out, DurationMS: 100, Tokens: 500}
	if len(score) > 0 {
		r.Score = sc(score[0])
	}
	return r
}

func fail(i int, score ...float64) Run {
	r := ok(i, "partial", score...)
	r.Success = false
	return r
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-12 }

type want struct {
	verdict    Verdict
	decision   string
	confidence float64
	tied       []string
	err        error
}

func check(t *testing.T, got Result, err error, w want) {
	t.Helper()
	if !errors.Is(err, w.err) || (err != nil) != (w.err != nil) {
		t.Fatalf("error = %v, want %v", err, w.err)
	}
	if got.Verdict != w.verdict || got.Decision != w.decision {
		t.Errorf("verdict, decision = %q, %q, want %q, %q (reason: %s)", got.Verdict, got.Decision, w.verdict, w.decision, got.Reason)
	}
	if !near(got.Confidence, w.confidence) {
		t.Errorf("confidence = %v, want %v", got.Confidence, w.confidence)
	}
	if !slices.Equal(got.Tied, w.tied) {
		t.Errorf("tied = %q, want %q", got.Tied, w.tied)
	}
	if got.Reason == "" {
		t.Error("empty reason")
	}
	if got.Confidence < 0 || got.Confidence > 1 || math.IsNaN(got.Confidence) {
		t.Errorf("confidence %v outside [0, 1]", got.Confidence)
	}
	if got.Verdict != VerdictDecided && got.Decision != "" {
		t.Errorf("decision %q without verdict decided", got.Decision)
	}
}

func TestStrategies(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		strategy Strategy
		opts     Options
		runs     []Run
		want     want
	}{
		// majority: more than half of the counted runs, failed ones included
		{"majority clear", Majority, Options{}, []Run{ok(0, "A"), ok(1, "A"), ok(2, "B")},
			want{VerdictDecided, "A", 2.0 / 3, nil, nil}},
		{"majority needs more than half", Majority, Options{}, []Run{ok(0, "A"), ok(1, "B"), ok(2, "C"), ok(3, "B")},
			want{VerdictNoConsensus, "", 0.5, nil, nil}},
		{"majority all different", Majority, Options{}, []Run{ok(0, "A"), ok(1, "B"), ok(2, "C"), ok(3, "D"), ok(4, "E")},
			want{VerdictNoConsensus, "", 0.2, []string{"A", "B", "C", "D", "E"}, nil}},
		{"majority tie is no decision", Majority, Options{}, []Run{ok(0, "A"), ok(1, "B"), ok(2, "B"), ok(3, "A")},
			want{VerdictNoConsensus, "", 0.5, []string{"A", "B"}, nil}},
		{"majority failures in denominator", Majority, Options{}, []Run{ok(0, "A"), ok(1, "A"), ok(2, "A"), fail(3), fail(4)},
			want{VerdictDecided, "A", 0.6, nil, nil}},
		{"majority failures deny it", Majority, Options{}, []Run{ok(0, "A"), ok(1, "A"), ok(2, "B"), fail(3), fail(4)},
			want{VerdictNoConsensus, "", 0.4, nil, nil}},
		{"majority failure wins", Majority, Options{}, []Run{ok(0, "A"), fail(1), fail(2)},
			want{VerdictFailed, "", 1.0 / 3, nil, nil}},
		{"majority failure ties leader", Majority, Options{}, []Run{ok(0, "A"), fail(1)},
			want{VerdictNoConsensus, "", 0.5, nil, nil}},
		{"majority failed partial output does not vote", Majority, Options{}, []Run{ok(0, "A"), ok(1, "partial"), ok(2, "A"), ok(5, "A"), fail(3), fail(4)},
			want{VerdictNoConsensus, "", 0.5, nil, nil}},
		{"majority single run", Majority, Options{}, []Run{ok(7, "A")},
			want{VerdictDecided, "A", 1, nil, nil}},

		// plurality: the most common output, never a tie
		{"plurality", Plurality, Options{}, []Run{ok(0, "A"), ok(1, "B"), ok(2, "C"), ok(3, "B")},
			want{VerdictDecided, "B", 0.5, nil, nil}},
		{"plurality tie is no decision", Plurality, Options{}, []Run{ok(0, "B"), ok(1, "A"), ok(2, "B"), ok(3, "A")},
			want{VerdictNoConsensus, "", 0.5, []string{"B", "A"}, nil}},
		{"plurality all different", Plurality, Options{}, []Run{ok(0, "A"), ok(1, "B"), ok(2, "C")},
			want{VerdictNoConsensus, "", 1.0 / 3, []string{"A", "B", "C"}, nil}},
		{"plurality failures in denominator", Plurality, Options{}, []Run{ok(0, "A"), ok(1, "A"), ok(2, "B"), fail(3)},
			want{VerdictDecided, "A", 0.5, nil, nil}},

		// weighted
		{"weighted quality beats numbers", Weighted, Options{}, []Run{ok(0, "A", 0.2), ok(1, "A", 0.2), ok(2, "B", 0.9)},
			want{VerdictDecided, "B", 0.9 / 1.3, nil, nil}},
		{"weighted failed run weighs 1", Weighted, Options{}, []Run{ok(0, "A", 0.5), fail(1, 0)},
			want{VerdictFailed, "", 0.5 / 1.5, nil, nil}},
		{"weighted failure in denominator", Weighted, Options{}, []Run{ok(0, "A", 1), ok(1, "A", 1), ok(2, "B", 0.5), fail(3)},
			want{VerdictDecided, "A", 2 / 3.5, nil, nil}},
		{"weighted float sums tie", Weighted, Options{}, []Run{ok(0, "B", 0.3), ok(1, "A", 0.1), ok(2, "A", 0.2)},
			want{VerdictNoConsensus, "", 0.5, []string{"B", "A"}, nil}},
		{"weighted all zero", Weighted, Options{}, []Run{ok(0, "A", 0), ok(1, "B", 0)},
			want{VerdictNoConsensus, "", 0, []string{"A", "B"}, nil}},
		{"weighted missing score", Weighted, Options{}, []Run{ok(0, "A", 0.5), ok(1, "A")},
			want{VerdictNoRuns, "", 0, nil, ErrInvalidRun}},
		{"weighted unscored failed run is fine", Weighted, Options{}, []Run{ok(0, "A", 0.5), ok(1, "A", 0.5), fail(2)},
			want{VerdictNoConsensus, "", 0.5, nil, nil}},

		// unanimous
		{"unanimous", Unanimous, Options{}, []Run{ok(0, "A"), ok(1, "A"), ok(2, "A")},
			want{VerdictDecided, "A", 1, nil, nil}},
		{"unanimous broken by output", Unanimous, Options{}, []Run{ok(0, "A"), ok(1, "A"), ok(2, "B")},
			want{VerdictNoConsensus, "", 2.0 / 3, nil, nil}},
		{"unanimous broken by failure", Unanimous, Options{}, []Run{ok(0, "A"), ok(1, "A"), ok(2, "A"), fail(3)},
			want{VerdictNoConsensus, "", 0.75, nil, nil}},
		{"unanimous with a tie reports it", Unanimous, Options{}, []Run{ok(0, "A"), ok(1, "B")},
			want{VerdictNoConsensus, "", 0.5, []string{"A", "B"}, nil}},

		// threshold
		{"threshold default 2 of 3 is below 0.67", Threshold, Options{}, []Run{ok(0, "A"), ok(1, "A"), ok(2, "B")},
			want{VerdictNoConsensus, "", 2.0 / 3, nil, nil}},
		{"threshold two thirds", Threshold, Options{Threshold: 2.0 / 3}, []Run{ok(0, "A"), ok(1, "A"), ok(2, "B")},
			want{VerdictDecided, "A", 2.0 / 3, nil, nil}},
		{"threshold default 3 of 4", Threshold, Options{}, []Run{ok(0, "A"), ok(1, "A"), ok(2, "B"), ok(3, "A")},
			want{VerdictDecided, "A", 0.75, nil, nil}},
		{"threshold counts failures", Threshold, Options{Threshold: 0.75}, []Run{ok(0, "A"), ok(1, "A"), ok(2, "A"), fail(3), fail(4)},
			want{VerdictNoConsensus, "", 0.6, nil, nil}},
		{"threshold 1 is unanimity", Threshold, Options{Threshold: 1}, []Run{ok(0, "A"), ok(1, "A")},
			want{VerdictDecided, "A", 1, nil, nil}},
		{"threshold low with tie", Threshold, Options{Threshold: 0.5}, []Run{ok(0, "B"), ok(1, "A"), ok(2, "A"), ok(3, "B")},
			want{VerdictNoConsensus, "", 0.5, []string{"B", "A"}, nil}},

		// best-of-n
		{"best-of-n highest score", BestOfN, Options{}, []Run{ok(0, "A", 0.5), ok(1, "B", 0.9), ok(2, "A", 0.7)},
			want{VerdictDecided, "B", 0.9, nil, nil}},
		{"best-of-n tie between outputs is no decision", BestOfN, Options{}, []Run{ok(2, "B", 0.9), ok(1, "A", 0.9), ok(0, "C", 0.1)},
			want{VerdictNoConsensus, "", 0.9, []string{"A", "B"}, nil}},
		{"best-of-n tie within one output", BestOfN, Options{}, []Run{ok(2, "A", 0.9), ok(1, "A", 0.9), ok(0, "C", 0.1)},
			want{VerdictDecided, "A", 0.9, nil, nil}},
		{"best-of-n failed run never chosen", BestOfN, Options{}, []Run{ok(0, "A", 0.4), fail(1, 1), fail(2)},
			want{VerdictDecided, "A", 0.4, nil, nil}},
		{"best-of-n missing score", BestOfN, Options{}, []Run{ok(0, "A", 0.4), ok(1, "B")},
			want{VerdictNoRuns, "", 0, nil, ErrInvalidRun}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := Decide(tt.strategy, tt.runs, tt.opts)
			if tt.want.err == nil && err == nil {
				check(t, got, err, tt.want)
				if got.Strategy != tt.strategy {
					t.Errorf("strategy = %q", got.Strategy)
				}
				if got.Runs != len(tt.runs) || got.Succeeded+got.Failed != got.Runs {
					t.Errorf("runs, succeeded, failed = %d, %d, %d for %d runs", got.Runs, got.Succeeded, got.Failed, len(tt.runs))
				}
				if got.Verdict == VerdictDecided && len(got.Tied) > 0 && !slices.ContainsFunc(got.Notes, func(n string) bool { return strings.Contains(n, "tie") || strings.Contains(n, "same") }) {
					t.Error("tie not reported in notes")
				}
				return
			}
			if !errors.Is(err, tt.want.err) {
				t.Fatalf("error = %v, want %v", err, tt.want.err)
			}
		})
	}
}

func TestBestOfNDetails(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		runs   []Run
		best   int
		margin *float64
	}{
		{"margin to the best rival", []Run{ok(0, "A", 0.5), ok(1, "B", 0.9), ok(2, "A", 0.7)}, 1, sc(0.9 - 0.7)},
		{"rival with the same output is no rival", []Run{ok(0, "A", 0.5), ok(1, "A", 0.9)}, 1, nil},
		{"failed runs are no rivals", []Run{ok(0, "A", 0.6), fail(1, 0.99)}, 0, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := Decide(BestOfN, tt.runs, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if got.BestRun == nil || *got.BestRun != tt.best {
				t.Errorf("best run = %v, want %d", got.BestRun, tt.best)
			}
			switch {
			case (got.Margin == nil) != (tt.margin == nil):
				t.Errorf("margin = %v, want %v", got.Margin, tt.margin)
			case got.Margin != nil && !near(*got.Margin, *tt.margin):
				t.Errorf("margin = %v, want %v", *got.Margin, *tt.margin)
			}
		})
	}
}

func TestBadInput(t *testing.T) {
	t.Parallel()
	nan := ok(1, "A")
	nan.Score = sc(math.NaN())
	neg := ok(1, "A")
	neg.DurationMS = -5
	tests := []struct {
		name     string
		strategy Strategy
		opts     Options
		runs     []Run
		err      error
		verdict  Verdict
	}{
		{"nil runs", Majority, Options{}, nil, ErrNoRuns, VerdictNoRuns},
		{"empty runs", BestOfN, Options{}, []Run{}, ErrNoRuns, VerdictNoRuns},
		{"duplicate index", Majority, Options{}, []Run{ok(1, "A"), ok(1, "A")}, ErrInvalidRun, VerdictNoRuns},
		{"score above 1", Weighted, Options{}, []Run{ok(0, "A", 1.2)}, ErrInvalidRun, VerdictNoRuns},
		{"score NaN", Majority, Options{}, []Run{ok(0, "A"), nan}, ErrInvalidRun, VerdictNoRuns},
		{"negative duration", Majority, Options{}, []Run{ok(0, "A"), neg}, ErrInvalidRun, VerdictNoRuns},
		{"empty output", Majority, Options{}, []Run{ok(0, "")}, ErrInvalidRun, VerdictNoRuns},
		{"threshold above 1", Threshold, Options{Threshold: 1.5}, []Run{ok(0, "A")}, nil, VerdictNoRuns},
		{"threshold negative", Majority, Options{Threshold: -0.1}, []Run{ok(0, "A")}, nil, VerdictNoRuns},
		{"unknown strategy", Strategy("mode"), Options{}, []Run{ok(0, "A")}, nil, VerdictNoRuns},
		{"unknown outlier method", Majority, Options{Exclude: Exclusion{Method: "iqr"}}, []Run{ok(0, "A")}, nil, VerdictNoRuns},
		{"unknown metric", Majority, Options{Exclude: Exclusion{Method: ModifiedZ, Metrics: []Metric{"memory"}}},
			[]Run{ok(0, "A"), ok(1, "A"), ok(2, "A")}, nil, VerdictNoRuns},
	}
	for _, s := range Strategies() {
		tests = append(tests, struct {
			name     string
			strategy Strategy
			opts     Options
			runs     []Run
			err      error
			verdict  Verdict
		}{"all failed " + string(s), s, Options{}, []Run{fail(0), fail(1, 0.5)}, ErrAllFailed, VerdictFailed})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := Decide(tt.strategy, tt.runs, tt.opts)
			if err == nil {
				t.Fatalf("no error; result %+v", got)
			}
			if tt.err != nil && !errors.Is(err, tt.err) {
				t.Errorf("error = %v, want %v", err, tt.err)
			}
			if got.Verdict != tt.verdict || got.Decision != "" {
				t.Errorf("verdict, decision = %q, %q, want %q, \"\"", got.Verdict, got.Decision, tt.verdict)
			}
			if got.Excluded == nil || got.Tally == nil {
				t.Error("nil slices in the result would serialise as null")
			}
		})
	}
}

func TestParseStrategy(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]Strategy{
		"majority": Majority, "Plurality": Plurality, " Weighted ": Weighted, "unanimous": Unanimous, "THRESHOLD": Threshold,
		"best-of-n": BestOfN, "best_of_n": BestOfN,
	} {
		got, err := ParseStrategy(in)
		if err != nil || got != want {
			t.Errorf("ParseStrategy(%q) = %q, %v, want %q", in, got, err, want)
		}
	}
	if _, err := ParseStrategy("vote"); err == nil {
		t.Error("ParseStrategy(\"vote\") did not fail")
	}
}

// fixture is a mixed evaluation used by the determinism and golden tests.
func fixture() []Run {
	runs := []Run{
		ok(0, "sha256:aa", 0.8), ok(1, "sha256:bb", 0.95), ok(2, "sha256:aa", 0.7), fail(3, 0.1),
		ok(4, "sha256:aa", 0.75), ok(5, "sha256:bb", 0.9), ok(6, "sha256:cc", 0.95), ok(7, "sha256:aa", 0.6),
	}
	for i := range runs {
		runs[i].DurationMS = int64(1000 + 7*i)
		runs[i].Tokens = int64(2000 + 3*i)
	}
	runs[5].DurationMS = 60000 // an outlier
	runs[3].DurationMS = 5     // failed fast: not excluded
	return runs
}

func TestDeterministicUnderPermutation(t *testing.T) {
	t.Parallel()
	opts := []Options{{}, {Exclude: Exclusion{Method: ModifiedZ}}, {Exclude: Exclusion{Method: Tukey}}, {Threshold: 0.5}}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, s := range Strategies() {
		for _, o := range opts {
			base := fixture()
			want, err := Decide(s, base, o)
			if err != nil {
				t.Fatalf("%s: %v", s, err)
			}
			if !reflect.DeepEqual(base, fixture()) {
				t.Fatalf("%s: Decide modified its input", s)
			}
			for range 20 {
				runs := fixture()
				rng.Shuffle(len(runs), func(i, j int) { runs[i], runs[j] = runs[j], runs[i] })
				got, err := Decide(s, runs, o)
				if err != nil {
					t.Fatalf("%s: %v", s, err)
				}
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("%s %+v: result depends on input order:\n got %+v\nwant %+v", s, o, got, want)
				}
			}
		}
	}
}

// TestGolden pins the JSON a report embeds, for every strategy on the
// fixture, with and without outlier exclusion.
func TestGolden(t *testing.T) {
	t.Parallel()
	var out []Result
	for _, ex := range []Exclusion{{}, {Method: ModifiedZ}} {
		for _, s := range Strategies() {
			r, err := Decide(s, fixture(), Options{Exclude: ex})
			if err != nil {
				t.Fatalf("%s: %v", s, err)
			}
			out = append(out, r)
		}
	}
	got, err := json.MarshalIndent(out, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, '\n')
	golden.Check(t, filepath.Join("testdata", "fixture.golden.json"), got)
}

// FuzzDecide checks the invariants on arbitrary runs: no panic, confidence
// in [0, 1], a decision only with verdict decided, order independence.
func FuzzDecide(f *testing.F) {
	f.Add([]byte{1, 2, 3, 4, 5, 6, 7, 8, 9}, 0.67)
	f.Add([]byte{0, 0, 0, 255, 255, 255}, 1.0)
	f.Add([]byte{}, 0.5)
	f.Fuzz(func(t *testing.T, data []byte, threshold float64) {
		var runs []Run
		for i := 0; i+2 < len(data); i += 3 {
			r := Run{Index: int(data[i+2]) % 16, Success: data[i]&1 == 1, Output: string('A' + rune(data[i+1]%3)),
				DurationMS: int64(data[i+1]) * 10, Tokens: int64(data[i])}
			r.Score = sc(float64(data[i+2]) / 255)
			runs = append(runs, r)
		}
		for _, s := range Strategies() {
			for _, ex := range []Exclusion{{}, {Method: ModifiedZ}, {Method: Tukey}} {
				o := Options{Threshold: threshold, Exclude: ex}
				got, err := Decide(s, runs, o)
				if got.Confidence < 0 || got.Confidence > 1 || math.IsNaN(got.Confidence) {
					t.Fatalf("%s: confidence %v", s, got.Confidence)
				}
				if got.Decision != "" && got.Verdict != VerdictDecided {
					t.Fatalf("%s: decision %q with verdict %q", s, got.Decision, got.Verdict)
				}
				if err == nil && got.Verdict == VerdictNoRuns {
					t.Fatalf("%s: verdict no_runs without an error", s)
				}
				rev := slices.Clone(runs)
				slices.Reverse(rev)
				again, err2 := Decide(s, rev, o)
				if (err == nil) != (err2 == nil) || !reflect.DeepEqual(got, again) {
					t.Fatalf("%s: order dependence:\n%+v\n%+v", s, got, again)
				}
			}
		}
	})
}
