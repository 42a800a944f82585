package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/dal-runtime/dal/bench"
)

// consistencyBench measures dal-exec consistency --runs 100 --parallel 2
// of a small agent against the ideal: one recording's wall time x 50.
func consistencyBench(tmp string) []bench.Figure {
	const name = "consistency: 100 runs of a small agent, --parallel 2"
	ws := filepath.Join(tmp, "consistency-ws")
	if err := os.MkdirAll(ws, 0o755); err != nil {
		return []bench.Figure{{Name: name, Value: "not measured: " + err.Error()}}
	}
	agent := []string{"python3", "-c", "print(42)"}
	var single bench.Sample
	for i := range 5 {
		d, err := inWorkspace(ws, append([]string{"record", "--no-apply", "--cpus", "all", "--out", filepath.Join(tmp, fmt.Sprintf("consistency-single-%d", i)), "--"}, agent...)...)
		if err != nil {
			return []bench.Figure{{Name: name, Value: "not measured: " + err.Error()}}
		}
		single = append(single, d)
	}
	var whole bench.Sample
	for i := range 2 {
		d, err := inWorkspace(ws, append([]string{"consistency", "--runs", "100", "--parallel", "2", "--cpus", "all",
			"--report", filepath.Join(tmp, fmt.Sprintf("consistency-eval-%d", i)), "--"}, agent...)...)
		if err != nil {
			return []bench.Figure{{Name: name, Value: "not measured: " + err.Error()}}
		}
		whole = append(whole, d)
	}
	ideal := single.Median() * 50
	var ratios bench.Values
	for _, d := range whole {
		ratios = append(ratios, float64(d)/float64(ideal))
	}
	f := bench.Figure{Name: name, Cost: bench.CostTime,
		Baseline: fmt.Sprintf("ideal = one recording (%s) x 50", single.Median().Round(1e6)),
		Target:   "within 1.2x of ideal",
		Detail: fmt.Sprintf("n=%d evaluations of 100 runs: %s; one recording, n=%d: %s (min / median / max)",
			len(whole), whole.Spread(), len(single), single.Spread())}
	f.SetRatios(ratios)
	f.Value, f.Verdict = fmt.Sprintf("%.2fx ideal", f.Ratio), verdict(f.Ratio <= 1.2)
	return []bench.Figure{f}
}
