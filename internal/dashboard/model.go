package dashboard

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/dal-runtime/dal/internal/consistency"
)

// PageVersion is the version of the data the page reads.
const PageVersion = 1

// Model is what the page shows.
type Model struct {
	Version     int       `json:"version"`
	GeneratedBy string    `json:"generated_by"`
	Roots       []string  `json:"roots"`
	Live        bool      `json:"live"`
	Seq         uint64    `json:"seq"`
	Alpha       float64   `json:"alpha"`
	Evaluations []*Eval   `json:"evaluations"`
	Problems    []Problem `json:"problems"`
}

// Unlabelled stands for a framework or task label an evaluation lacks.
const Unlabelled = "(none)"

// Eval is one evaluation: finished (its report.json), or running (its
// shards or its evaluation.json and the runs finished so far).
type Eval struct {
	Key string `json:"key"`
	// ID is the evaluation's consistency.Evaluation.ID ("" for reports
	// older than it): a running evaluation and its report share it.
	ID        string            `json:"id,omitempty"`
	Dir       string            `json:"dir"`
	Framework string            `json:"framework"`
	Task      string            `json:"task"`
	Labels    map[string]string `json:"labels,omitempty"`
	// Time is when the evaluation's last run started (RFC 3339; "" when
	// no run says); evaluations are ordered by it.
	Time string `json:"time,omitempty"`
	// State is "done" (a report), "running" (runs are being recorded),
	// "stopped" (an evaluation or shard stopped before its end: Stopped
	// says why) or "unmerged" (every shard ended; they wait for a merge).
	State   string   `json:"state"`
	Stopped string   `json:"stopped,omitempty"`
	Total   int      `json:"total"` // runs the evaluation will have
	Shards  string   `json:"shards,omitempty"`
	Command []string `json:"command"`
	// Success: for a running evaluation, runs whose agent exited 0 (a
	// --verify command may decide otherwise at the end).
	N           int         `json:"n"`
	Successes   int         `json:"successes"`
	Rate        float64     `json:"rate"`
	CI          *[2]float64 `json:"ci,omitempty"`
	Level       float64     `json:"level,omitempty"`
	Reliability *float64    `json:"reliability,omitempty"`
	RelLabel    string      `json:"reliability_label,omitempty"`
	Verdict     string      `json:"verdict,omitempty"`
	Strategy    string      `json:"strategy,omitempty"`
	Confidence  float64     `json:"confidence,omitempty"`
	Answer      string      `json:"answer,omitempty"`
	Unanimous   bool        `json:"unanimous,omitempty"`
	Means       Means       `json:"means"`
	Regressions []string    `json:"regressions,omitempty"`
	Previous    string      `json:"previous,omitempty"` // key of the evaluation it was compared with
	Comparison  *Comparison `json:"comparison,omitempty"`
	Runs        Runs        `json:"runs"`
	Report      string      `json:"report,omitempty"` // link to report.html
	Warnings    int         `json:"warnings,omitempty"`

	dirs   map[int]string // run index -> bundle directory (for /run)
	report *consistency.Report
	time   time.Time
}

// Means are the mean per-run measures (nil: no run has the measure).
type Means struct {
	Duration *float64 `json:"duration_ms"`
	Tokens   *float64 `json:"tokens"`
	Score    *float64 `json:"score"`
}

// Comparison is what consistency.Compare said against the previous
// evaluation of the same framework and task.
type Comparison struct {
	SuccessP  float64  `json:"success_p"`
	DurationP *float64 `json:"duration_p"`
	TokensP   *float64 `json:"tokens_p"`
}

// Runs are the runs column by column (a page of 20,000 runs stays small).
type Runs struct {
	Index    []int      `json:"i"`
	Duration []int64    `json:"d"`
	Tokens   []int64    `json:"t"`
	Score    []*float64 `json:"s"`
	OK       []int      `json:"ok"`
	Exit     []int      `json:"x"`
}

func (rs *Runs) add(r consistency.RunReport) {
	rs.Index = append(rs.Index, r.Index)
	rs.Duration = append(rs.Duration, r.DurationMS)
	rs.Tokens = append(rs.Tokens, r.Tokens)
	rs.Score = append(rs.Score, r.Score)
	ok := 0
	if r.Success {
		ok = 1
	}
	rs.OK = append(rs.OK, ok)
	rs.Exit = append(rs.Exit, r.ExitCode)
}

func keyOf(parts ...string) string {
	sum := sha256.Sum256([]byte(strings.Join(parts, "\x00")))
	return hex.EncodeToString(sum[:6])
}

func labelOr(v string) string {
	if v == "" {
		return Unlabelled
	}
	return v
}

// display is p relative to the root it was found under.
func display(roots []string, p string) string {
	for _, r := range roots {
		if rel, err := filepath.Rel(r, p); err == nil && !strings.HasPrefix(rel, "..") {
			return filepath.Join(filepath.Base(filepath.Clean(r)), rel)
		}
	}
	return p
}

// build makes the evaluations of what scan found, in order: framework,
// task, time.
func build(roots []string, fs []found, alpha float64) []*Eval {
	var evals []*Eval
	merged := map[string]bool{} // evaluation IDs that have a report
	for _, f := range fs {
		if f.report != nil && f.report.EvaluationID != "" {
			merged[f.report.EvaluationID] = true
		}
	}
	groups := map[string]*Eval{}
	for _, f := range fs {
		if f.report != nil && !f.running {
			evals = append(evals, fromReport(roots, f))
		}
		var (
			id     string
			labels consistency.Labels
			cmd    []string
			total  int
			shard  consistency.Shard
			runs   []consistency.RunReport
			start  time.Time
		)
		switch {
		case f.running:
			p := f.progress
			id, labels, cmd, total, runs, start = p.EvaluationID, p.Labels, p.Command, p.Runs, f.runs, p.StartedAt
			if p.Shard != nil {
				shard = *p.Shard
			}
		case f.shard != nil:
			e := f.shard.Evaluation
			id, labels, cmd, total, shard = e.ID(), e.Labels, e.Command, len(e.Seeds), f.shard.Shard
			if merged[id] {
				continue // merged already: the report stands for it
			}
			for _, r := range f.shard.Runs {
				runs = append(runs, r.RunReport)
			}
		default:
			continue
		}
		g := groups[id]
		if g == nil {
			g = &Eval{Key: "live-" + keyOf(id), ID: id, Framework: labelOr(labels[consistency.LabelFramework]),
				Task: labelOr(labels[consistency.LabelTask]), Labels: labels, Command: cmd, Total: total,
				State: "unmerged", dirs: map[int]string{}}
			groups[id] = g
			evals = append(evals, g)
		}
		switch {
		case f.running && f.progress.Stopped != "":
			if g.State != "running" {
				g.State = "stopped"
			}
			g.Stopped = f.progress.Stopped
		case f.running:
			g.State = "running"
		}
		if g.Dir != "" {
			g.Dir += ", "
		}
		g.Dir += display(roots, f.dir)
		if shard.Count > 0 {
			g.Shards = fmt.Sprintf("%d shards", shard.Count)
		}
		if start.After(g.time) {
			g.time = start
		}
		for _, r := range runs {
			g.dirs[r.Index] = filepath.Join(f.dir, filepath.FromSlash(r.Bundle))
			if r.StartedAt.After(g.time) {
				g.time = r.StartedAt
			}
		}
		g.report = mergeRuns(g.report, runs)
	}
	for _, g := range groups {
		finishGroup(g)
	}
	slices.SortStableFunc(evals, func(a, b *Eval) int {
		return cmp.Or(cmp.Compare(a.Framework, b.Framework), cmp.Compare(a.Task, b.Task), a.time.Compare(b.time), cmp.Compare(a.Dir, b.Dir))
	})
	// Each finished evaluation against the finished one before it, as
	// consistency compare would.
	var prev *Eval
	for _, e := range evals {
		if prev != nil && (prev.Framework != e.Framework || prev.Task != e.Task) {
			prev = nil
		}
		if e.State != "done" {
			continue
		}
		if prev != nil {
			if c, err := consistency.Compare(prev.Dir, prev.report, e.Dir, e.report, alpha); err == nil {
				e.Regressions, e.Previous = c.Regressions, prev.Key
				e.Comparison = &Comparison{SuccessP: c.SuccessRate.P, DurationP: c.Duration.P, TokensP: c.Tokens.P}
			}
		}
		prev = e
	}
	return evals
}

// mergeRuns adds runs to the pseudo-report of a running evaluation.
func mergeRuns(r *consistency.Report, runs []consistency.RunReport) *consistency.Report {
	if r == nil {
		r = &consistency.Report{}
	}
	r.IndividualRuns = append(r.IndividualRuns, runs...)
	return r
}

func finishGroup(g *Eval) {
	runs := g.report.IndividualRuns
	slices.SortFunc(runs, func(a, b consistency.RunReport) int { return a.Index - b.Index })
	for _, r := range runs {
		g.Runs.add(r)
		if r.Success {
			g.Successes++
		}
	}
	g.N = len(runs)
	if g.N > 0 {
		g.Rate = float64(g.Successes) / float64(g.N)
	}
	g.Means = means(runs)
	if !g.time.IsZero() {
		g.Time = g.time.UTC().Format(time.RFC3339)
	}
}

func means(runs []consistency.RunReport) Means {
	var m Means
	var d, t, s float64
	var ns int
	for _, r := range runs {
		d += float64(r.DurationMS)
		t += float64(r.Tokens)
		if r.Score != nil {
			s += *r.Score
			ns++
		}
	}
	if n := float64(len(runs)); n > 0 {
		d, t = d/n, t/n
		m.Duration, m.Tokens = &d, &t
	}
	if ns > 0 {
		s /= float64(ns)
		m.Score = &s
	}
	return m
}

func fromReport(roots []string, f found) *Eval {
	r := f.report
	e := &Eval{Key: "eval-" + keyOf(f.dir), ID: r.EvaluationID, Dir: display(roots, f.dir), Framework: labelOr(r.Framework), Task: labelOr(r.Task),
		Labels: r.Labels, State: "done", Total: r.Runs, Command: r.Command, N: r.Runs, Successes: r.Variance.SuccessRate.Successes,
		Rate: r.Variance.SuccessRate.Value, Verdict: string(r.Consensus.Verdict), Strategy: string(r.Consensus.Strategy),
		Confidence: r.Consensus.Confidence, Answer: r.Consensus.Answer, Unanimous: r.Consensus.Unanimous, Warnings: len(r.Warnings),
		report: r, time: r.LastStart(), dirs: map[int]string{}}
	if e.Framework == Unlabelled && r.Labels[consistency.LabelFramework] != "" {
		e.Framework = r.Labels[consistency.LabelFramework]
	}
	if e.Task == Unlabelled && r.Labels[consistency.LabelTask] != "" {
		e.Task = r.Labels[consistency.LabelTask]
	}
	if iv := r.Variance.SuccessRate.ConfidenceInterval; iv != nil {
		e.CI, e.Level = &[2]float64{iv.Lower, iv.Upper}, iv.Level
	}
	if rel := r.Reliability; rel != nil {
		score := rel.Score
		e.Reliability, e.RelLabel = &score, string(rel.Label)
	}
	for _, run := range r.IndividualRuns {
		e.Runs.add(run)
		if b := filepath.FromSlash(run.Bundle); run.Bundle == filepath.ToSlash(filepath.Join("runs", filepath.Base(b))) {
			e.dirs[run.Index] = filepath.Join(f.dir, b)
		}
	}
	e.Means = means(r.IndividualRuns)
	if !e.time.IsZero() {
		e.Time = e.time.UTC().Format(time.RFC3339)
	}
	return e
}
