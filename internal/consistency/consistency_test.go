package consistency

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/dal-runtime/dal/internal/consistency/consensus"
	"github.com/dal-runtime/dal/internal/golden"
	"github.com/dal-runtime/dal/seedrng"
)

// fakeAgent describes what the fake recorder writes for run i.
type fakeAgent func(i int, seed uint64) (exit int, stdout string, durationMS, tokens int64)

func fakeRecorder(agent fakeAgent, calls *atomic.Int32) Recorder {
	return func(ctx context.Context, r RunSpec) error {
		if calls != nil {
			calls.Add(1)
		}
		exit, stdout, dur, tok := agent(r.Index, r.Seed)
		if err := os.MkdirAll(filepath.Join(r.Bundle, "logs"), 0o755); err != nil {
			return err
		}
		man := fmt.Sprintf(`{"metrics":{"duration_ms":%d,"tokens_input":%d,"tokens_output":%d}}`, dur, tok/2, tok-tok/2)
		env := fmt.Sprintf(`{"command":["agent"],"seed":%d,"exit_code":%d}`, r.Seed, exit)
		for name, data := range map[string]string{"env.json": env, "logs/stdout": stdout, "manifest.json": man} {
			if err := os.WriteFile(filepath.Join(r.Bundle, name), []byte(data), 0o644); err != nil {
				return err
			}
		}
		return nil
	}
}

func options(t *testing.T, n int, agent fakeAgent) Options {
	return Options{Dir: t.TempDir(), Command: []string{"agent"}, Mode: "strict", Seeds: Seeds(7, n),
		Strategy: consensus.Majority, Record: fakeRecorder(agent, nil)}
}

func TestSeedsDerivation(t *testing.T) {
	t.Parallel()
	a, b := Seeds(7, 12), Seeds(7, 12)
	seen := map[uint64]bool{}
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("seed %d differs between derivations: %d, %d", i+1, a[i], b[i])
		}
		if want := seedrng.Derive(7, fmt.Sprintf("consistency/run/%d", i+1)).Uint64(); a[i] != want {
			t.Fatalf("seed %d = %d, want %d", i+1, a[i], want)
		}
		if seen[a[i]] {
			t.Fatalf("seed %d repeats", i+1)
		}
		seen[a[i]] = true
	}
	if Seeds(8, 1)[0] == a[0] {
		t.Fatal("base seeds 7 and 8 give the same first run seed")
	}
}

func TestEvaluate(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		strategy  consensus.Strategy
		agent     fakeAgent
		verdict   consensus.Verdict
		successes int
		unanimous bool
		label     string
	}{
		{"identical", consensus.Unanimous, func(i int, _ uint64) (int, string, int64, int64) { return 0, "42\n", 100, 10 },
			consensus.VerdictDecided, 4, true, "High"},
		{"one differs", consensus.Unanimous, func(i int, _ uint64) (int, string, int64, int64) {
			if i == 2 {
				return 0, "41\n", 100, 10
			}
			return 0, "42\n", 100, 10
		}, consensus.VerdictNoConsensus, 4, false, "High"},
		{"majority despite one", consensus.Majority, func(i int, _ uint64) (int, string, int64, int64) {
			if i == 2 {
				return 0, "41\n", 100, 10
			}
			return 0, "42\n", 100, 10
		}, consensus.VerdictDecided, 4, false, "High"},
		{"all fail", consensus.Majority, func(i int, _ uint64) (int, string, int64, int64) { return 1, "", 50 * int64(i), 0 },
			consensus.VerdictFailed, 0, false, "Low"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			o := options(t, 4, tc.agent)
			o.Strategy = tc.strategy
			rep, err := Evaluate(context.Background(), o)
			if err != nil {
				t.Fatal(err)
			}
			if rep.Consensus.Verdict != tc.verdict || rep.Variance.SuccessRate.Successes != tc.successes ||
				rep.Consensus.Unanimous != tc.unanimous || rep.Reliability == nil || string(rep.Reliability.Label) != tc.label {
				t.Fatalf("got verdict %s, %d successes, unanimous %t, reliability %+v", rep.Consensus.Verdict,
					rep.Variance.SuccessRate.Successes, rep.Consensus.Unanimous, rep.Reliability)
			}
			var back Report
			data, err := os.ReadFile(filepath.Join(o.Dir, "report.json"))
			if err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(data, &back); err != nil || back.SchemaVersion != SchemaVersion || len(back.IndividualRuns) != 4 {
				t.Fatalf("report.json does not read back (%v): %s", err, data)
			}
			md, err := os.ReadFile(filepath.Join(o.Dir, "report.md"))
			if err != nil || !strings.Contains(string(md), "| "+string(tc.verdict)+" |") {
				t.Fatalf("report.md lacks the verdict (%v):\n%s", err, md)
			}
		})
	}
}

// TestReportHasNoNonFinite: statistics one run cannot support are null.
func TestReportHasNoNonFinite(t *testing.T) {
	t.Parallel()
	o := options(t, 1, func(int, uint64) (int, string, int64, int64) { return 0, "x", 100, 0 })
	rep, err := Evaluate(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if d := rep.Variance.Duration; d.Std != nil || d.ConfidenceInterval != nil || d.Mean == nil || *d.Mean != 100 {
		t.Fatalf("duration of one run: %+v", d)
	}
	data, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(data), "NaN") || strings.Contains(string(data), "Inf") {
		t.Fatalf("non-finite value in %s", data)
	}
}

func TestScoreAndVerify(t *testing.T) {
	t.Parallel()
	agent := func(int, uint64) (int, string, int64, int64) { return 0, "42\n", 100, 10 }
	for _, tc := range []struct {
		name, verify, score string
		successes, scored   int
		warning             string
	}{
		{"score", "", "echo 0.5", 3, 3, ""},
		{"garbage score", "", "echo garbage", 3, 0, `run 1 has no score: the score command gave "garbage"`},
		{"out of range", "", "echo 1.5", 3, 0, "outside [0, 1]"},
		{"failing score", "", "exit 3", 3, 0, "the score command failed"},
		{"score from env", "", `test "$DAL_RUN_INDEX" = 2 && echo 1 || echo 0`, 3, 3, ""},
		{"verify", `test "$DAL_RUN_INDEX" != 2 && test -f "$DAL_RUN_BUNDLE/manifest.json"`, "", 2, 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			o := options(t, 3, agent)
			o.Verify, o.Score = tc.verify, tc.score
			rep, err := Evaluate(context.Background(), o)
			if err != nil {
				t.Fatal(err)
			}
			scored := 0
			for _, r := range rep.IndividualRuns {
				if r.Score != nil {
					scored++
				}
			}
			if rep.Variance.SuccessRate.Successes != tc.successes || scored != tc.scored {
				t.Fatalf("%d successes, %d scored; want %d, %d", rep.Variance.SuccessRate.Successes, scored, tc.successes, tc.scored)
			}
			if tc.warning != "" && (len(rep.Warnings) != 3 || !strings.Contains(rep.Warnings[0], tc.warning)) {
				t.Fatalf("warnings %q, want one per run containing %q", rep.Warnings, tc.warning)
			}
			if tc.scored > 0 && (rep.Variance.Score == nil || rep.Variance.Score.N != tc.scored) {
				t.Fatalf("score summary %+v", rep.Variance.Score)
			}
		})
	}
}

func TestResumeKeepsFinishedRuns(t *testing.T) {
	t.Parallel()
	agent := func(int, uint64) (int, string, int64, int64) { return 0, "42\n", 100, 10 }
	o := options(t, 5, agent)
	var calls atomic.Int32
	ok := fakeRecorder(agent, &calls)
	o.Record = func(ctx context.Context, r RunSpec) error {
		if r.Index == 3 {
			return errors.New("sandbox broke")
		}
		return ok(ctx, r)
	}
	if _, err := Evaluate(context.Background(), o); err == nil || !strings.Contains(err.Error(), "run 3: sandbox broke") {
		t.Fatalf("first evaluation: %v", err)
	}
	if _, err := os.Stat(filepath.Join(BundlePath(o.Dir, 2), "manifest.json")); err != nil {
		t.Fatalf("run 2 not kept: %v", err)
	}
	before := calls.Load()
	o.Record = ok
	rep, err := Evaluate(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if got := calls.Load() - before; got != 3 || rep.Runs != 5 {
		t.Fatalf("resumed evaluation recorded %d runs, want 3 (runs 3-5); report has %d runs", got, rep.Runs)
	}

	o.Seeds = Seeds(8, 5)
	if _, err := Evaluate(context.Background(), o); err == nil || !strings.Contains(err.Error(), "recorded with seed") {
		t.Fatalf("evaluation with other seeds into the same directory: %v", err)
	}

	// A run directory without a manifest is a bundle that was never
	// finished: it is neither kept nor recorded over.
	o.Seeds = Seeds(7, 6)
	if err := os.MkdirAll(filepath.Join(BundlePath(o.Dir, 6), "logs"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := Evaluate(context.Background(), o); err == nil || !strings.Contains(err.Error(), "run 6's bundle") || !strings.Contains(err.Error(), "is incomplete (no manifest.json)") {
		t.Fatalf("evaluation over an unfinished bundle: %v", err)
	}
}

func TestParallelLimit(t *testing.T) {
	t.Parallel()
	for _, par := range []int{1, 3} {
		o := options(t, 9, func(int, uint64) (int, string, int64, int64) { return 0, "", 1, 1 })
		o.Parallel = par
		var active, peak atomic.Int32
		var mu sync.Mutex
		rec := o.Record
		o.Record = func(ctx context.Context, r RunSpec) error {
			n := active.Add(1)
			mu.Lock()
			peak.Store(max(peak.Load(), n))
			mu.Unlock()
			defer active.Add(-1)
			return rec(ctx, r)
		}
		if _, err := Evaluate(context.Background(), o); err != nil {
			t.Fatal(err)
		}
		if p := peak.Load(); p > int32(par) {
			t.Fatalf("parallel %d: %d runs at once", par, p)
		}
	}
}

func TestUnwritableReportDir(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "file")
	os.WriteFile(file, nil, 0o644)
	var calls atomic.Int32
	o := Options{Dir: filepath.Join(file, "report"), Seeds: Seeds(1, 2), Strategy: consensus.Majority,
		Record: fakeRecorder(func(int, uint64) (int, string, int64, int64) { return 0, "", 1, 1 }, &calls)}
	_, err := Evaluate(context.Background(), o)
	if err == nil || !strings.Contains(err.Error(), "cannot create the report directory") || calls.Load() != 0 {
		t.Fatalf("error %v after %d runs", err, calls.Load())
	}
}

// TestAllDifferentIsNoMajority is issue 20's first report: five runs that
// agree on nothing were "decided (majority, confidence 0.20)".
func TestAllDifferentIsNoMajority(t *testing.T) {
	t.Parallel()
	o := options(t, 5, func(i int, _ uint64) (int, string, int64, int64) { return 0, fmt.Sprintf("answer %d\n", i), 100, 10 })
	rep, err := Evaluate(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Consensus.Verdict == consensus.VerdictDecided || rep.Consensus.Decision != "" {
		t.Fatalf("five different outputs: verdict %s, decision %q (%s)", rep.Consensus.Verdict, rep.Consensus.Decision, rep.Consensus.Reason)
	}
}

// TestVerdictGoldens pins what a user sees (terminal summary, exit code,
// report.md) for the evaluations a CI gate must not pass: runs that agree
// on nothing, a tie, every run failed; and one that must pass.
func TestVerdictGoldens(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		strategy consensus.Strategy
		n        int
		agent    fakeAgent
		exit     int
	}{
		{"all-different", consensus.Majority, 5, func(i int, _ uint64) (int, string, int64, int64) {
			return 0, fmt.Sprintf("answer %d\n", i), 100 + int64(i), 10
		}, 1},
		{"tie", consensus.Plurality, 4, func(i int, _ uint64) (int, string, int64, int64) {
			return 0, []string{"", "A\n", "B\n", "B\n", "A\n"}[i], 100, 10
		}, 1},
		{"all-failed", consensus.Majority, 3, func(i int, _ uint64) (int, string, int64, int64) { return 1, "", 50 * int64(i), 0 }, 1},
		{"majority", consensus.Majority, 5, func(i int, _ uint64) (int, string, int64, int64) {
			return []int{0, 0, 0, 1, 0, 0}[i], []string{"", "42\n", "42\n", "", "41\n", " 42 \n"}[i], 100 * int64(i), 10 * int64(i)
		}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			o := options(t, tc.n, tc.agent)
			o.Strategy = tc.strategy
			rep, err := Evaluate(context.Background(), o)
			if err != nil {
				t.Fatal(err)
			}
			if rep.ExitCode() != tc.exit {
				t.Errorf("exit code %d, want %d (%s)", rep.ExitCode(), tc.exit, rep.Consensus.Reason)
			}
			md, err := os.ReadFile(filepath.Join(o.Dir, "report.md"))
			if err != nil {
				t.Fatal(err)
			}
			got := fmt.Sprintf("$ dal-exec consistency --strategy %s ...\n%sexit %d\n\n--- report.md\n%s", tc.strategy, rep.Summary(), rep.ExitCode(), md)
			golden.Check(t, filepath.Join("testdata", "verdict-"+tc.name+".golden"), []byte(got))
		})
	}
}

// TestKeptBundleLinkNotFollowed: a kept bundle whose stdout is a symbolic
// link to a file elsewhere is refused, and the file never becomes an
// answer in the report.
func TestKeptBundleLinkNotFollowed(t *testing.T) {
	t.Parallel()
	o := options(t, 2, func(int, uint64) (int, string, int64, int64) { return 0, "42\n", 100, 10 })
	if _, err := Evaluate(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte("private key\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	stdout := filepath.Join(BundlePath(o.Dir, 2), "logs", "stdout")
	if err := os.Remove(stdout); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(secret, stdout); err != nil {
		t.Fatal(err)
	}
	_, err := Evaluate(context.Background(), o)
	if err == nil || !strings.Contains(err.Error(), "run 2") || !strings.Contains(err.Error(), "symlink") {
		t.Fatalf("evaluation over a bundle with a planted link: %v", err)
	}
	t.Log(err)
	if data, _ := os.ReadFile(filepath.Join(o.Dir, "report.json")); strings.Contains(string(data), "private key") {
		t.Fatal("the link's target became part of the report")
	}
}
