package dashboard

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/dal-runtime/dal/internal/consistency"
	"github.com/dal-runtime/dal/internal/consistency/consensus"
)

// evalSpec describes a synthetic finished evaluation: its runs succeed
// with probability rate and last around dur ms.
type evalSpec struct {
	dir, framework, task string
	runs                 int
	rate                 float64
	dur                  int64
	at                   time.Time
	seed                 uint64
}

// writeEval writes the report.json, .md and .html the real analysis
// gives for the spec's runs (the runs' bundles are not written).
func writeEval(t testing.TB, s evalSpec) *consistency.Report {
	t.Helper()
	rng := rand.New(rand.NewPCG(s.seed, 1))
	seeds := consistency.Seeds(s.seed, s.runs)
	var runs []consistency.RunReport
	for i := 1; i <= s.runs; i++ {
		ok := rng.Float64() < s.rate
		exit, ans, hash := 1, "", ""
		if ok {
			exit, ans, hash = 0, "42", "73475cb40a568e8da8a045ced110137e159f890ac4da883b6b17dc651b3a8049"
		}
		score := rng.Float64()
		runs = append(runs, consistency.RunReport{Index: i, Seed: seeds[i-1], Bundle: fmt.Sprintf("runs/%03d", i), Success: ok, ExitCode: exit,
			Score: &score, DurationMS: s.dur + rng.Int64N(s.dur/5+1), Tokens: 1000 + rng.Int64N(400), Answer: ans, AnswerHash: hash,
			StartedAt: s.at.Add(time.Duration(i) * time.Second)})
	}
	labels := consistency.Labels{}
	if s.framework != "" {
		labels["framework"] = s.framework
	}
	if s.task != "" {
		labels["task"] = s.task
	}
	rep := consistency.Analyse(consistency.Options{Command: []string{"python3", "agent.py"}, Mode: "strict", Seeds: seeds,
		Strategy: consensus.Majority, Labels: labels}, runs, nil)
	if err := os.MkdirAll(s.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := rep.Write(s.dir); err != nil {
		t.Fatal(err)
	}
	return rep
}

// corpus writes evaluations frameworks × tasks × per into root, one day
// apart, and returns root.
func corpus(t testing.TB, root string, frameworks, tasks []string, per, runs int) string {
	t.Helper()
	day := time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC)
	n := uint64(0)
	for _, fw := range frameworks {
		for _, task := range tasks {
			for k := range per {
				n++
				writeEval(t, evalSpec{dir: filepath.Join(root, fw, task, fmt.Sprintf("e%03d", k)), framework: fw, task: task, runs: runs,
					rate: 0.9, dur: 800, at: day.AddDate(0, 0, k), seed: n})
			}
		}
	}
	return root
}
