package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dal-runtime/dal/bench"
)

// The README's summary keeps to maxSummaryRows rows however many figures
// a run has, shows the fidelity line first, and make bench's splice
// replaces only what lies between its markers. Not parallel: the summary
// reads the run's globals.
func TestSummary(t *testing.T) {
	figs, _ := fixture()
	for _, s := range summaryFigures {
		figs = append(figs, bench.Figure{Name: s.name, Value: "1.5x", Baseline: "bare (detail)"})
	}
	got := summary(figs)
	lines := strings.Split(strings.TrimSpace(got), "\n")
	if rows := len(lines) - 2; rows > maxSummaryRows || rows < len(summaryFigures) {
		t.Errorf("the summary has %d rows, want %d to %d:\n%s", rows, len(summaryFigures), maxSummaryRows, got)
	}
	if !strings.HasPrefix(lines[2], "| replays of the example agents, random seeds | 2 of 3 exact |") {
		t.Errorf("the first row is %q, want the fidelity line", lines[2])
	}
	if !strings.Contains(got, "| start-up added to a process (`true`) | 1.5x | bare |") {
		t.Errorf("a figure's row lacks its label, value or shortened baseline:\n%s", got)
	}

	page := filepath.Join(t.TempDir(), "README.md")
	before, after := "# dal\n\nintro\n\n"+summaryBegin+"\n", summaryEnd+"\n\nthe rest\n"
	if err := os.WriteFile(page, []byte(before+"old table\n"+after), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := splice(page, summaryBegin, summaryEnd, got); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != before+got+after {
		t.Errorf("splice wrote\n%s", b)
	}
}
