package consistency

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strings"

	"github.com/dal-runtime/dal/internal/consistency/stats"
)

// Comparison is comparison.json: how a new evaluation of an agent differs
// from a base one, for a CI gate between agent versions. Success rates
// are compared with a two-sided two-proportion z-test (pooled), mean
// durations and token counts with Welch's t-test; a change is significant
// when its p-value is below Alpha. A regression is a significant change
// for the worse: a lower success rate, a longer duration, more tokens.
type Comparison struct {
	SchemaVersion int               `json:"schema_version"`
	Base          string            `json:"base"`
	New           string            `json:"new"`
	Alpha         float64           `json:"alpha"`
	SuccessRate   ProportionChange  `json:"success_rate"`
	Reliability   ReliabilityChange `json:"reliability"`
	Duration      MeanChange        `json:"duration"`
	Tokens        MeanChange        `json:"tokens"`
	// Regressions names the measures that regressed: "success_rate",
	// "duration", "tokens".
	Regressions []string `json:"regressions"`
}

// ProportionChange compares two success rates.
type ProportionChange struct {
	Base        Proportion `json:"base"`
	New         Proportion `json:"new"`
	Difference  float64    `json:"difference"` // new - base
	Z           float64    `json:"z"`
	P           float64    `json:"p_value"`
	Significant bool       `json:"significant"`
	Regression  bool       `json:"regression"`
}

// Proportion is successes of n.
type Proportion struct {
	Value     float64 `json:"value"`
	Successes int     `json:"successes"`
	N         int     `json:"n"`
}

// ReliabilityChange compares reliability scores (no test: the score is
// not an estimate with a known distribution).
type ReliabilityChange struct {
	Base       *float64 `json:"base"`
	New        *float64 `json:"new"`
	Difference *float64 `json:"difference"`
}

// MeanChange compares the means of a per-run measure.
type MeanChange struct {
	BaseN      int      `json:"base_n"`
	NewN       int      `json:"new_n"`
	BaseMean   *float64 `json:"base_mean"`
	NewMean    *float64 `json:"new_mean"`
	Difference *float64 `json:"difference"` // new - base
	// Ratio is new over base mean; null when the base mean is 0.
	Ratio       *float64 `json:"ratio"`
	T           *float64 `json:"t"`
	DF          *float64 `json:"df"`
	P           *float64 `json:"p_value"`
	Significant bool     `json:"significant"`
	Regression  bool     `json:"regression"`
	Note        string   `json:"note,omitempty"`
}

// ReadReport reads report.json from path, a report directory or the
// file itself.
func ReadReport(path string) (*Report, error) {
	file := path
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		file = filepath.Join(path, "report.json")
	}
	data, err := os.ReadFile(file)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%s holds no report.json: give the --report directory of an evaluation (or of a merge)", path)
	}
	if err != nil {
		return nil, err
	}
	var r Report
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("%s is not a consistency report: %v", file, err)
	}
	if r.SchemaVersion < 1 || r.SchemaVersion > SchemaVersion {
		return nil, fmt.Errorf("%s has report format %d, this dal reads 1 to %d: compare with a newer dal", file, r.SchemaVersion, SchemaVersion)
	}
	return &r, nil
}

// Compare compares the evaluations base and new at significance alpha
// (0 means 0.05).
func Compare(baseName string, base *Report, newName string, next *Report, alpha float64) (*Comparison, error) {
	if alpha == 0 {
		alpha = 0.05
	}
	if !(alpha > 0 && alpha < 1) {
		return nil, fmt.Errorf("significance level %v must be in (0, 1), e.g. 0.05", alpha)
	}
	c := &Comparison{SchemaVersion: 1, Base: baseName, New: newName, Alpha: alpha, Regressions: []string{}}
	c.SuccessRate = compareProportions(base.Variance.SuccessRate, next.Variance.SuccessRate, alpha)
	if c.SuccessRate.Regression {
		c.Regressions = append(c.Regressions, "success_rate")
	}
	if base.Reliability != nil {
		c.Reliability.Base = fin(base.Reliability.Score)
	}
	if next.Reliability != nil {
		c.Reliability.New = fin(next.Reliability.Score)
	}
	if c.Reliability.Base != nil && c.Reliability.New != nil {
		c.Reliability.Difference = fin(*c.Reliability.New - *c.Reliability.Base)
	}
	measure := func(f func(RunReport) float64) func(*Report) []float64 {
		return func(r *Report) []float64 {
			var xs []float64
			for _, run := range r.IndividualRuns {
				xs = append(xs, f(run))
			}
			return xs
		}
	}
	dur := measure(func(r RunReport) float64 { return float64(r.DurationMS) })
	tok := measure(func(r RunReport) float64 { return float64(r.Tokens) })
	c.Duration = compareMeans(dur(base), dur(next), alpha)
	c.Tokens = compareMeans(tok(base), tok(next), alpha)
	if c.Duration.Regression {
		c.Regressions = append(c.Regressions, "duration")
	}
	if c.Tokens.Regression {
		c.Regressions = append(c.Regressions, "tokens")
	}
	return c, nil
}

func compareProportions(a, b SuccessRate, alpha float64) ProportionChange {
	pc := ProportionChange{Base: Proportion{a.Value, a.Successes, a.N}, New: Proportion{b.Value, b.Successes, b.N}, P: 1}
	if a.N == 0 || b.N == 0 {
		return pc
	}
	p1, p2 := float64(a.Successes)/float64(a.N), float64(b.Successes)/float64(b.N)
	pc.Difference = p2 - p1
	pool := float64(a.Successes+b.Successes) / float64(a.N+b.N)
	se := math.Sqrt(pool * (1 - pool) * (1/float64(a.N) + 1/float64(b.N)))
	if se > 0 {
		pc.Z = pc.Difference / se
		pc.P = 2 * (1 - stats.NormalCDF(math.Abs(pc.Z)))
	}
	pc.Significant = pc.P < alpha
	pc.Regression = pc.Significant && pc.Difference < 0
	return pc
}

func compareMeans(a, b []float64, alpha float64) MeanChange {
	mc := MeanChange{BaseN: len(a), NewN: len(b)}
	ma, errA := stats.Mean(a)
	mb, errB := stats.Mean(b)
	if errA != nil || errB != nil {
		mc.Note = "an evaluation has no runs"
		return mc
	}
	mc.BaseMean, mc.NewMean, mc.Difference = fin(ma), fin(mb), fin(mb-ma)
	if ma != 0 {
		mc.Ratio = fin(mb / ma)
	}
	if len(a) < 2 || len(b) < 2 {
		mc.Note = "Welch's t-test needs at least 2 runs on each side"
		return mc
	}
	va, _ := stats.StdDev(a)
	vb, _ := stats.StdDev(b)
	qa, qb := va*va/float64(len(a)), vb*vb/float64(len(b))
	se := math.Sqrt(qa + qb)
	var t, df, p float64
	switch {
	case se == 0 && ma == mb:
		p = 1
	case se == 0:
		// Every run of each evaluation measured the same: the difference
		// is certain.
		t, df, p = math.Copysign(math.Inf(1), mb-ma), float64(len(a)+len(b)-2), 0
	default:
		t = (mb - ma) / se
		df = (qa + qb) * (qa + qb) / (qa*qa/float64(len(a)-1) + qb*qb/float64(len(b)-1))
		p = 2 * (1 - stats.StudentTCDF(math.Abs(t), df))
	}
	mc.T, mc.P = fin(t), fin(p)
	if df > 0 {
		mc.DF = fin(df)
	}
	mc.Significant = p < alpha
	mc.Regression = mc.Significant && mb > ma
	return mc
}

// Markdown renders the comparison for a person (and a CI log).
func (c *Comparison) Markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Consistency: %s against %s\n\n", c.New, c.Base)
	if len(c.Regressions) == 0 {
		fmt.Fprintf(&b, "No significant regression (α = %v).\n\n", c.Alpha)
	} else {
		fmt.Fprintf(&b, "**Regression** in %s (α = %v).\n\n", strings.ReplaceAll(strings.Join(c.Regressions, ", "), "_", " "), c.Alpha)
	}
	b.WriteString("| measure | base | new | change | test | p | verdict |\n|---|---|---|---|---|---|---|\n")
	s := c.SuccessRate
	fmt.Fprintf(&b, "| success rate | %.3f (%d/%d) | %.3f (%d/%d) | %+.3f | two-proportion z = %.3f | %s | %s |\n",
		s.Base.Value, s.Base.Successes, s.Base.N, s.New.Value, s.New.Successes, s.New.N, s.Difference, s.Z, pval(&s.P),
		verdictWord(s.Significant, s.Regression))
	r := c.Reliability
	fmt.Fprintf(&b, "| reliability | %s | %s | %s | – | – | – |\n", num(r.Base, "%.3f"), num(r.New, "%.3f"), num(r.Difference, "%+.3f"))
	for _, row := range []struct {
		name string
		m    MeanChange
	}{{"duration (ms, mean)", c.Duration}, {"tokens (mean)", c.Tokens}} {
		m := row.m
		test := "–"
		if m.T != nil {
			test = fmt.Sprintf("Welch t = %.3f, df %s", *m.T, num(m.DF, "%.1f"))
		} else if m.P != nil {
			test = "Welch t: no variance"
		}
		change := num(m.Difference, "%+.1f")
		if m.Ratio != nil {
			change += fmt.Sprintf(" (×%.3f)", *m.Ratio)
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s |\n", row.name, num(m.BaseMean, "%.1f"), num(m.NewMean, "%.1f"),
			change, test, pval(m.P), verdictWord(m.Significant, m.Regression))
	}
	for _, m := range []MeanChange{c.Duration, c.Tokens} {
		if m.Note != "" {
			fmt.Fprintf(&b, "\n%s.\n", m.Note)
			break
		}
	}
	return b.String()
}

func pval(p *float64) string {
	if p == nil {
		return "–"
	}
	if *p < 0.0001 {
		return "< 0.0001"
	}
	return fmt.Sprintf("%.4f", *p)
}

func verdictWord(significant, regression bool) string {
	switch {
	case regression:
		return "**regression**"
	case significant:
		return "improvement"
	}
	return "no significant change"
}

// JSON is comparison.json's content
// (docs/schema/consistency-comparison.schema.json), ending with a newline.
func (c *Comparison) JSON() ([]byte, error) {
	data, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("comparison: %w", err)
	}
	return append(data, '\n'), nil
}

// Write writes comparison.json and comparison.md into dir.
func (c *Comparison) Write(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("cannot create %s: %w", dir, err)
	}
	data, err := c.JSON()
	if err != nil {
		return err
	}
	if err := writeAtomic(filepath.Join(dir, "comparison.json"), data); err != nil {
		return err
	}
	return writeAtomic(filepath.Join(dir, "comparison.md"), []byte(c.Markdown()))
}
