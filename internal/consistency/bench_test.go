package consistency

import (
	"context"
	"errors"
	"testing"

	"github.com/dal-runtime/dal/internal/consistency/consensus"
)

// BenchmarkAnalyse10kRecordedRuns is the issue's "analysis of 10,000
// recorded runs": Evaluate over 10,000 runs already recorded (each a bundle
// directory on disk, kept from an earlier evaluation), so it reads every
// bundle's env.json, manifest and stdout, computes consensus, variance and
// reliability, and writes report.json, report.md and report.html.
func BenchmarkAnalyse10kRecordedRuns(b *testing.B) {
	const n = 10000
	agent := func(i int, seed uint64) (int, string, int64, int64) {
		exit := 0
		if seed%5 == 0 {
			exit = 1
		}
		return exit, []string{"a\n", "b\n"}[i%7/6], 900 + int64(seed%200), 1500 + int64(seed%300)
	}
	o := Options{Dir: b.TempDir(), Command: []string{"agent"}, Mode: "strict", Seeds: Seeds(7, n),
		Strategy: consensus.Majority, Record: fakeRecorder(agent, nil), Parallel: 4}
	if _, err := Evaluate(context.Background(), o); err != nil {
		b.Fatal(err)
	}
	o.Record = func(context.Context, RunSpec) error { return errors.New("a kept run was recorded again") }
	for b.Loop() {
		rep, err := Evaluate(context.Background(), o)
		if err != nil {
			b.Fatal(err)
		}
		if rep.Runs != n {
			b.Fatalf("%d runs", rep.Runs)
		}
	}
}
