package consistency

import (
	"encoding/json"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"time"

	"github.com/dal-runtime/dal/internal/atomicfile"
	"github.com/dal-runtime/dal/internal/consistency/consensus"
	"github.com/dal-runtime/dal/internal/consistency/stats"
	"github.com/dal-runtime/dal/internal/plural"
)

// Report is report.json.
type Report struct {
	SchemaVersion int `json:"schema_version"`
	// Framework and Task are Labels' framework and task, where the seed's
	// report has them; Labels holds every --label.
	Framework string `json:"framework,omitempty"`
	Task      string `json:"task,omitempty"`
	Labels    Labels `json:"labels,omitempty"`
	// EvaluationID is Evaluation.ID: the same for a merge as for its
	// shards while they run.
	EvaluationID string   `json:"evaluation_id,omitempty"`
	Command      []string `json:"command"`
	Mode         string   `json:"mode,omitempty"`
	Runs         int      `json:"runs"`
	Seeds        []uint64 `json:"seeds"`
	// AnswerSource says what the runs voted on (AnswerSource.String).
	AnswerSource   string           `json:"answer_source"`
	Consensus      ConsensusReport  `json:"consensus"`
	Variance       Variance         `json:"variance"`
	Reliability    *ReliabilityInfo `json:"reliability"`
	IndividualRuns []RunReport      `json:"individual_runs"`
	Warnings       []string         `json:"warnings,omitempty"`
}

// ConsensusReport is the consensus decision.
type ConsensusReport struct {
	Strategy consensus.Strategy `json:"strategy"`
	Verdict  consensus.Verdict  `json:"verdict"`
	// Decision is the decided answer's hash ("" without a decision);
	// Answer its text, shortened.
	Decision   string  `json:"decision"`
	Answer     string  `json:"answer,omitempty"`
	Confidence float64 `json:"confidence"`
	Reason     string  `json:"reason"`
	// Unanimous: every run succeeded with the same output, whatever the
	// strategy.
	Unanimous bool          `json:"unanimous"`
	Excluded  []int         `json:"excluded"`
	Tally     []AnswerTally `json:"tally"`
	BestRun   *int          `json:"best_run,omitempty"`
	Notes     []string      `json:"notes,omitempty"`
}

// AnswerTally is the support of one answer among the counted successful
// runs, strongest first.
type AnswerTally struct {
	Answer     string  `json:"answer"` // shortened
	AnswerHash string  `json:"answer_hash"`
	Runs       int     `json:"runs"`
	Weight     float64 `json:"weight"`
	FirstRun   int     `json:"first_run"`
}

// Variance holds the spread of the runs.
type Variance struct {
	SuccessRate SuccessRate `json:"success_rate"`
	Duration    *Metric     `json:"duration"`
	Tokens      *Metric     `json:"tokens"`
	Score       *Metric     `json:"score,omitempty"` // only when some run has a score
}

// SuccessRate is successes over runs with its Wilson interval.
type SuccessRate struct {
	Value              float64         `json:"value"`
	Successes          int             `json:"successes"`
	N                  int             `json:"n"`
	ConfidenceInterval *stats.Interval `json:"confidence_interval"`
}

// Metric summarises one per-run measure; statistics the runs cannot support
// are null.
type Metric struct {
	N                  int             `json:"n"`
	Mean               *float64        `json:"mean"`
	Std                *float64        `json:"std"`
	CV                 *float64        `json:"coefficient_of_variation"`
	Min                *float64        `json:"min"`
	Max                *float64        `json:"max"`
	Median             *float64        `json:"median"`
	ConfidenceInterval *stats.Interval `json:"confidence_interval"`
	// Outliers lists run indices flagged by each rule (absent: the rule
	// needs more runs).
	Outliers  map[string][]int `json:"outliers"`
	Normality *stats.Normality `json:"normality"`
	Note      string           `json:"note,omitempty"`
}

// ReliabilityInfo is the reliability score and the inputs it came from.
type ReliabilityInfo struct {
	Score float64     `json:"score"`
	Label stats.Label `json:"label"`
	Note  string      `json:"note,omitempty"`
}

// RunReport is one run.
type RunReport struct {
	Index      int      `json:"index"`
	Seed       uint64   `json:"seed"`
	Bundle     string   `json:"bundle"` // relative to the report directory
	Success    bool     `json:"success"`
	ExitCode   int      `json:"exit_code"`
	TimedOut   bool     `json:"timed_out,omitempty"`
	Score      *float64 `json:"score"`
	DurationMS int64    `json:"duration_ms"`
	Tokens     int64    `json:"tokens"`
	// OutputHash is the SHA-256 of the run's whole stdout.
	OutputHash string `json:"output_hash"`
	// Answer is what the run answered, shortened; AnswerHash the SHA-256
	// of the whole answer, which is what runs vote on. Both are empty for
	// a failed run.
	Answer     string `json:"answer"`
	AnswerHash string `json:"answer_hash,omitempty"`
	// StartedAt is when the run was recorded (its bundle's env.json).
	StartedAt time.Time `json:"started_at,omitzero"`
}

func fin(x float64) *float64 {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return nil
	}
	return &x
}

func finInterval(iv stats.Interval, err error) *stats.Interval {
	if err != nil || math.IsNaN(iv.Lower) || math.IsNaN(iv.Upper) || math.IsInf(iv.Lower, 0) || math.IsInf(iv.Upper, 0) {
		return nil
	}
	return &iv
}

// describe summarises xs, measured on runs idx (run indices).
func describe(xs []float64, idx []int, level float64) *Metric {
	m := &Metric{N: len(xs), Outliers: map[string][]int{}}
	if len(xs) == 0 {
		m.Note = "no run has this measure"
		return m
	}
	s, err := stats.Describe(xs, level)
	if err != nil {
		// Fewer than 3 runs: what can be said without Describe.
		if v, err := stats.Mean(xs); err == nil {
			m.Mean = fin(v)
		}
		if v, err := stats.StdDev(xs); err == nil {
			m.Std = fin(v)
		}
		if v, err := stats.CV(xs); err == nil {
			m.CV = fin(v)
		}
		if v, err := stats.Median(xs); err == nil {
			m.Median = fin(v)
		}
		m.ConfidenceInterval = finInterval(stats.MeanInterval(xs, level))
		lo, hi := xs[0], xs[0]
		for _, x := range xs {
			lo, hi = min(lo, x), max(hi, x)
		}
		m.Min, m.Max = fin(lo), fin(hi)
		m.Note = fmt.Sprintf("only %s: outlier rules and normality need at least 3", plural.Count(len(xs), "run", "runs"))
		return m
	}
	m.Mean, m.Std, m.CV = fin(s.Mean), fin(s.Std), fin(s.CV)
	m.Min, m.Max, m.Median = fin(s.Min), fin(s.Max), fin(s.Median)
	m.ConfidenceInterval = finInterval(s.MeanCI, nil)
	for name, o := range map[string]*stats.Outliers{"tukey": s.Tukey, "zscore": s.ZScore, "modified_z": s.ModifiedZ} {
		if o == nil {
			continue
		}
		runs := []int{}
		for _, k := range o.Indices {
			runs = append(runs, idx[k])
		}
		m.Outliers[name] = runs
	}
	if nm := s.Normality; nm != nil && fin(nm.W) != nil && fin(nm.P) != nil {
		m.Normality = nm
	}
	if math.IsInf(s.CV, 0) {
		m.Note = "coefficient of variation undefined: the mean is zero"
	}
	return m
}

// analyse builds the report from the runs, in index order.
func analyse(o Options, runs []RunReport, warnings []string) *Report {
	rep := &Report{SchemaVersion: SchemaVersion, Framework: o.Labels[LabelFramework], Task: o.Labels[LabelTask],
		Labels: o.Labels, EvaluationID: o.evaluation().ID(), Command: o.Command, Mode: o.Mode, Runs: len(runs),
		Seeds: o.Seeds, AnswerSource: o.Answer.String(), IndividualRuns: runs, Warnings: warnings}
	var (
		dur, tok, score []float64
		all, scored     []int
		cruns           []consensus.Run
		successes       int
		firstOut        string
		unanimous       = len(runs) > 0
		durCV, tokCV    float64
		answers         = map[string]string{} // hash -> shortened text
	)
	for _, r := range runs {
		dur = append(dur, float64(r.DurationMS))
		tok = append(tok, float64(r.Tokens))
		all = append(all, r.Index)
		if r.Score != nil {
			score = append(score, *r.Score)
			scored = append(scored, r.Index)
		}
		if r.Success {
			successes++
		}
		if !r.Success || (firstOut != "" && r.AnswerHash != firstOut) {
			unanimous = false
		}
		if firstOut == "" {
			firstOut = r.AnswerHash
		}
		if r.Success {
			if _, ok := answers[r.AnswerHash]; !ok {
				answers[r.AnswerHash] = r.Answer
			}
		}
		cruns = append(cruns, consensus.Run{Index: r.Index, Seed: r.Seed, Success: r.Success, Score: r.Score,
			Output: r.AnswerHash, DurationMS: r.DurationMS, Tokens: r.Tokens})
	}
	res, err := consensus.Decide(o.Strategy, cruns, o.Consensus)
	rep.Consensus = ConsensusReport{Strategy: o.Strategy, Verdict: res.Verdict, Decision: res.Decision,
		Answer: answers[res.Decision], Confidence: res.Confidence, Reason: res.Reason, Unanimous: unanimous,
		Excluded: res.Excluded, Tally: []AnswerTally{}, BestRun: res.BestRun, Notes: res.Notes}
	for _, t := range res.Tally {
		rep.Consensus.Tally = append(rep.Consensus.Tally, AnswerTally{Answer: answers[t.Output], AnswerHash: t.Output,
			Runs: t.Runs, Weight: t.Weight, FirstRun: t.First})
	}
	if rep.Consensus.Excluded == nil {
		rep.Consensus.Excluded = []int{}
	}
	if err != nil {
		if rep.Consensus.Verdict == consensus.VerdictDecided || rep.Consensus.Verdict == "" {
			rep.Consensus.Verdict = consensus.VerdictNoConsensus
		}
		if rep.Consensus.Reason == "" {
			rep.Consensus.Reason = err.Error()
		}
	}
	if fin(rep.Consensus.Confidence) == nil {
		rep.Consensus.Confidence = 0
	}

	level := o.Level
	sr := SuccessRate{Successes: successes, N: len(runs)}
	if len(runs) > 0 {
		sr.Value = float64(successes) / float64(len(runs))
		sr.ConfidenceInterval = finInterval(stats.Wilson(successes, len(runs), level, false))
	}
	rep.Variance = Variance{SuccessRate: sr, Duration: describe(dur, all, level), Tokens: describe(tok, all, level)}
	if len(score) > 0 {
		rep.Variance.Score = describe(score, scored, level)
	}

	var notes []string
	cvOf := func(name string, xs []float64) float64 {
		cv, err := stats.CV(xs)
		if err != nil || math.IsNaN(cv) {
			notes = append(notes, fmt.Sprintf("%s variation undefined with %d run(s), counted as none", name, len(xs)))
			return 0
		}
		return cv
	}
	durCV, tokCV = cvOf("duration", dur), cvOf("token", tok)
	if rel, err := stats.Score(sr.Value, durCV, tokCV); err == nil && fin(rel.Score) != nil {
		rep.Reliability = &ReliabilityInfo{Score: rel.Score, Label: rel.Label, Note: strings.Join(notes, "; ")}
	}
	return rep
}

// JSON is report.json's content (docs/schema/consistency-report.schema.json),
// ending with a newline.
func (r *Report) JSON() ([]byte, error) {
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("report: %w", err)
	}
	return append(data, '\n'), nil
}

// Write writes report.json, report.md and report.html into dir, each
// atomically.
func (r *Report) Write(dir string) error {
	data, err := r.JSON()
	if err != nil {
		return err
	}
	if err := writeAtomic(filepath.Join(dir, "report.json"), data); err != nil {
		return err
	}
	if err := writeAtomic(filepath.Join(dir, "report.md"), []byte(r.Markdown())); err != nil {
		return err
	}
	page, err := r.HTML(r.lastStart())
	if err != nil {
		return err
	}
	return writeAtomic(filepath.Join(dir, "report.html"), page)
}

// lastStart is when the last run started: the date report.html shows, so
// that the report depends only on the runs (a merge of shards writes the
// same bytes as one machine). Zero when no run says.
func (r *Report) lastStart() time.Time {
	var t time.Time
	for _, run := range r.IndividualRuns {
		if run.StartedAt.After(t) {
			t = run.StartedAt
		}
	}
	return t
}

func writeAtomic(path string, data []byte) error {
	if err := atomicfile.WriteFile(path, data, 0o644); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	return nil
}

func num(p *float64, format string) string {
	if p == nil {
		return "–"
	}
	return fmt.Sprintf(format, *p)
}

func ci(iv *stats.Interval, format string) string {
	if iv == nil {
		return "–"
	}
	return fmt.Sprintf("["+format+", "+format+"]", iv.Lower, iv.Upper)
}

// Markdown renders the report for a person.
func (r *Report) Markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Consistency of `%s`\n\n", strings.Join(r.Command, " "))
	b.WriteString(plural.Count(r.Runs, "run", "runs"))
	if r.Mode != "" {
		fmt.Fprintf(&b, " in %s mode", r.Mode)
	}
	b.WriteString(".\n\n")
	if len(r.Labels) > 0 {
		fmt.Fprintf(&b, "Labels: %s\n\n", mdCode(r.Labels.String()))
	}
	b.WriteString("## Consensus\n\n")
	c := r.Consensus
	fmt.Fprintf(&b, "| strategy | verdict | confidence | unanimous |\n|---|---|---|---|\n| %s | %s | %.3f | %t |\n\n", c.Strategy, c.Verdict, c.Confidence, c.Unanimous)
	fmt.Fprintf(&b, "%s\n\n", c.Reason)
	if c.Decision != "" {
		fmt.Fprintf(&b, "Answer: %s (`%s`)\n\n", mdCode(shorten(c.Answer, 80)), shortHash(c.Decision))
	}
	for _, n := range c.Notes {
		fmt.Fprintf(&b, "- %s\n", n)
	}
	if len(c.Notes) > 0 {
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "Runs voted on %s.\n\n", r.AnswerSource)
	if len(c.Tally) > 0 {
		b.WriteString("| answer | runs | weight | hash | first run |\n|---|---|---|---|---|\n")
		for k, t := range c.Tally {
			if k == tallyShown {
				fmt.Fprintf(&b, "| … %d more answers | | | | |\n", len(c.Tally)-k)
				break
			}
			fmt.Fprintf(&b, "| %s | %d | %.4g | `%s` | %d |\n", mdCode(shorten(t.Answer, 60)), t.Runs, t.Weight, shortHash(t.AnswerHash), t.FirstRun)
		}
		b.WriteString("\n")
	}
	sr := r.Variance.SuccessRate
	b.WriteString("## Variance\n\n")
	level := 0.95
	if sr.ConfidenceInterval != nil {
		level = sr.ConfidenceInterval.Level
	}
	fmt.Fprintf(&b, "| measure | n | mean | std | CV | min | max | %.0f%% interval |\n|---|---|---|---|---|---|---|---|\n", level*100)
	v := sr.Value
	fmt.Fprintf(&b, "| success rate | %d | %.3f (%d/%d) | | | | | %s |\n", sr.N, v, sr.Successes, sr.N, ci(sr.ConfidenceInterval, "%.3f"))
	for _, row := range []struct {
		name string
		m    *Metric
		f    string
	}{{"duration (ms)", r.Variance.Duration, "%.1f"}, {"tokens", r.Variance.Tokens, "%.1f"}, {"score", r.Variance.Score, "%.3f"}} {
		if row.m == nil {
			continue
		}
		m := row.m
		fmt.Fprintf(&b, "| %s | %d | %s | %s | %s | %s | %s | %s |\n", row.name, m.N, num(m.Mean, row.f), num(m.Std, row.f),
			num(m.CV, "%.3f"), num(m.Min, row.f), num(m.Max, row.f), ci(m.ConfidenceInterval, row.f))
	}
	b.WriteString("\n## Reliability\n\n")
	if r.Reliability != nil {
		fmt.Fprintf(&b, "**%.3f (%s)** = 0.6·success rate + 0.2·(1 − clamp(CV duration)) + 0.2·(1 − clamp(CV tokens))\n\n", r.Reliability.Score, r.Reliability.Label)
		b.WriteString("It says how steadily the runs succeed and at what cost, not whether their answers agree: that is the consensus above.\n\n")
	} else {
		b.WriteString("not available\n\n")
	}
	b.WriteString("## Runs\n\n| run | seed | success | exit | score | duration (ms) | tokens | answer |\n|---|---|---|---|---|---|---|---|\n")
	for _, run := range r.IndividualRuns {
		ans := "–"
		if run.AnswerHash != "" {
			ans = fmt.Sprintf("%s `%s`", mdCode(shorten(run.Answer, 40)), shortHash(run.AnswerHash))
		}
		fmt.Fprintf(&b, "| %d | %d | %t | %d | %s | %d | %d | %s |\n", run.Index, run.Seed, run.Success, run.ExitCode,
			num(run.Score, "%.3f"), run.DurationMS, run.Tokens, ans)
	}
	if len(r.Warnings) > 0 {
		b.WriteString("\n## Warnings\n\n")
		for _, w := range r.Warnings {
			fmt.Fprintf(&b, "- %s\n", w)
		}
	}
	return b.String()
}

// tallyShown is how many answers a tally lists before "N more".
const tallyShown = 10

// mdCode shows s as Markdown code that a | or ` in it cannot break.
func mdCode(s string) string {
	if s == "" {
		return "(empty)"
	}
	s = strings.ReplaceAll(s, "|", "\\|")
	fence := "`"
	for strings.Contains(s, fence) {
		fence += "`"
	}
	if strings.HasPrefix(s, "`") || strings.HasSuffix(s, "`") {
		return fence + " " + s + " " + fence
	}
	return fence + s + fence
}

// Summary is what dal-exec consistency prints on the terminal: the
// verdict, the decided answer and the tally, success rate and
// reliability.
func (r *Report) Summary() string {
	var b strings.Builder
	c := r.Consensus
	fmt.Fprintf(&b, "consensus: %s (%s, confidence %.2f): %s\n", c.Verdict, c.Strategy, c.Confidence, c.Reason)
	if c.Decision != "" {
		fmt.Fprintf(&b, "answer: %q (%s)\n", shorten(c.Answer, 60), shortHash(c.Decision))
	}
	failed := 0
	for _, run := range r.IndividualRuns {
		if !run.Success {
			failed++
		}
	}
	if len(c.Tally) > 0 || failed > 0 {
		fmt.Fprintf(&b, "tally (%s):\n", r.AnswerSource)
		for k, t := range c.Tally {
			if k == 5 {
				fmt.Fprintf(&b, "  … %d more answers\n", len(c.Tally)-k)
				break
			}
			fmt.Fprintf(&b, "  %4d  %q (%s)\n", t.Runs, shorten(t.Answer, 60), shortHash(t.AnswerHash))
		}
		if failed > 0 {
			fmt.Fprintf(&b, "  %4d  failed\n", failed)
		}
	}
	sr := r.Variance.SuccessRate
	if iv := sr.ConfidenceInterval; iv != nil {
		fmt.Fprintf(&b, "success rate: %.3f (%d/%d), %.0f%% interval [%.3f, %.3f]\n", sr.Value, sr.Successes, sr.N, iv.Level*100, iv.Lower, iv.Upper)
	}
	if rel := r.Reliability; rel != nil {
		// Reliability measures success and steady cost, not agreement: a
		// reader seeing no_consensus beside High must be told why both hold.
		fmt.Fprintf(&b, "reliability: %.3f %s (steady success and cost, not agreement on the answer)\n", rel.Score, rel.Label)
	}
	return b.String()
}

// ExitCode is dal-exec consistency's exit status for the report: 0 when
// the runs decided, 1 when they did not (2, dal's own failure, never comes
// from a report).
func (r *Report) ExitCode() int {
	if r.Consensus.Verdict == consensus.VerdictDecided {
		return 0
	}
	return 1
}
