package consistency

import (
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/dal-runtime/dal/internal/consistency/consensus"
)

// evaluation builds a report from per-run (success, duration, tokens).
func evaluation(runs [][3]int) *Report {
	var rr []RunReport
	for i, r := range runs {
		run := RunReport{Index: i + 1, Success: r[0] == 1, DurationMS: int64(r[1]), Tokens: int64(r[2])}
		if run.Success {
			run.AnswerHash, run.Answer = newAnswer("42").hash, "42"
		}
		rr = append(rr, run)
	}
	return analyse(Options{Command: []string{"agent"}, Strategy: consensus.Majority, Level: 0.95}, rr, nil)
}

func many(n, successes, dur, tok int) [][3]int {
	var out [][3]int
	for i := range n {
		s := 0
		if i < successes {
			s = 1
		}
		out = append(out, [3]int{s, dur + i%7, tok + i%5})
	}
	return out
}

func TestCompare(t *testing.T) {
	t.Parallel()
	schema := compileSchema(t, "consistency-comparison.schema.json")
	for _, tc := range []struct {
		name        string
		base, next  [][3]int
		regressions []string
		p           float64 // success rate p-value, -1: not checked
	}{
		{"same", many(40, 36, 1000, 500), many(40, 36, 1000, 500), nil, 1},
		// 36/40 against 24/40: z = -3.098, p = 0.00195.
		{"success drops", many(40, 36, 1000, 500), many(40, 24, 1000, 500), []string{"success_rate"}, 0.001946},
		// 9/10 against 8/10 is noise.
		{"small drop is noise", many(10, 9, 1000, 500), many(10, 8, 1000, 500), nil, -1},
		{"success rises", many(40, 24, 1000, 500), many(40, 36, 1000, 500), nil, 0.001946},
		{"slower and more tokens", many(30, 30, 1000, 500), many(30, 30, 1300, 900), []string{"duration", "tokens"}, 1},
		{"faster", many(30, 30, 1300, 500), many(30, 30, 1000, 500), nil, 1},
		{"one run each", many(1, 1, 1000, 500), many(1, 0, 1000, 500), nil, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, err := Compare("base", evaluation(tc.base), "new", evaluation(tc.next), 0)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(c.Regressions, append([]string{}, tc.regressions...)) {
				t.Errorf("regressions %q, want %q\n%s", c.Regressions, tc.regressions, c.Markdown())
			}
			if tc.p >= 0 && math.Abs(c.SuccessRate.P-tc.p) > 1e-5 {
				t.Errorf("success rate p = %v, want %v", c.SuccessRate.P, tc.p)
			}
			data, err := c.JSON()
			if err != nil {
				t.Fatal(err)
			}
			validate(t, schema, data) // what compare --json prints and comparison.json holds
			md := c.Markdown()
			if (len(tc.regressions) > 0) != strings.Contains(md, "**Regression**") {
				t.Errorf("markdown:\n%s", md)
			}
		})
	}
	if _, err := Compare("a", evaluation(nil), "b", evaluation(nil), 1.5); err == nil {
		t.Error("alpha 1.5 accepted")
	}
}

func TestCompareReadsReports(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := evaluation(many(5, 5, 10, 10)).Write(dir); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{dir, filepath.Join(dir, "report.json")} {
		if r, err := ReadReport(p); err != nil || r.Runs != 5 {
			t.Errorf("ReadReport(%s): %v", p, err)
		}
	}
	if _, err := ReadReport(t.TempDir()); err == nil || !strings.Contains(err.Error(), "holds no report.json") {
		t.Errorf("a directory without a report: %v", err)
	}
	bad := filepath.Join(t.TempDir(), "report.json")
	os.WriteFile(bad, []byte(`{"schema_version": 99}`), 0o644)
	if _, err := ReadReport(bad); err == nil || !strings.Contains(err.Error(), "format 99") {
		t.Errorf("a report of a newer dal: %v", err)
	}
	c, _ := Compare("a", evaluation(many(5, 5, 10, 10)), "b", evaluation(many(5, 4, 10, 10)), 0)
	out := filepath.Join(t.TempDir(), "cmp")
	if err := c.Write(out); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"comparison.json", "comparison.md"} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Error(err)
		}
	}
}
