package consistency

import (
	"bytes"
	"cmp"
	"fmt"
	"html/template"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/dal-runtime/dal/internal/consistency/consensus"
	"github.com/dal-runtime/dal/internal/consistency/stats"
	"github.com/dal-runtime/dal/internal/plural"
)

// The plots are SVG drawn here from shapes; html/template escapes every
// value, so a command line or a warning cannot inject markup. Each plot is an
// <svg data-plot="NAME"> whose data marks (one per run, per bin or per
// interval) carry the class "mark"; the tests count them.
//
// A plot's shapes and the table's rows, one per run each, are most of a
// page of many runs: they are written by svg and runRows, not by the
// template (whose reflection took 0.3 s for 10,000 runs), with the
// template's own escaping (escapeHTML; TestEscapeHTMLIsTemplates).

// Plot names (the data-plot attribute).
const (
	plotDuration  = "duration"
	plotTokens    = "tokens"
	plotScore     = "score"
	plotSuccess   = "success"
	plotHistogram = "duration-histogram"
)

// Plot geometry in SVG user units.
const (
	plotW, plotH                      = 520.0, 240.0
	padLeft, padRight, padTop, padBot = 60.0, 14.0, 16.0, 36.0
)

// shape is one SVG element.
type shape struct {
	Kind           string // rect, line, circle, text
	Class          string
	X, Y, W, H     float64 // rect; X, Y for text
	X1, Y1, X2, Y2 float64 // line
	R              float64 // circle at X, Y
	Text           string  // text content
	Anchor         string  // text-anchor
	Title          string  // tooltip
	Run            int     // data-run, 0 = none
	Count          int     // data-count, -1 = none
}

type plotView struct {
	Name, Title, Caption string
	// Note replaces the drawing when the data cannot be plotted.
	Note          string
	Width, Height float64
	Shapes        []shape
	SVG           template.HTML // Shapes, written by svg
}

type runRow struct {
	Index                           int
	Seed                            uint64
	Success                         bool
	Exit                            int
	Score, Duration, Tokens, Answer string
	Hash, Outlier                   string
}

type tallyRow struct {
	Answer, Hash, Weight string
	Runs, First          int
	Decided              bool
}

type pageView struct {
	Command, Mode, Date               string
	Runs                              int
	Strategy, Verdict, VerdictClass   string
	Decision, Reason, Confidence      string
	Answer, AnswerSource              string
	Tally                             []tallyRow
	MoreAnswers, Failed               int
	Unanimous                         bool
	Notes                             []string
	Reliability, ReliabilityLabel     string
	ReliabilityClass, ReliabilityNote string
	Success                           string
	Plots                             []plotView
	RunRows                           template.HTML // rows, written by runRows
	rows                              []runRow
	Warnings                          []string
}

// HTML renders the report as one self-contained page (inline CSS and SVG, no
// script, nothing fetched), stamped with generated.
func (r *Report) HTML(generated time.Time) ([]byte, error) {
	var b bytes.Buffer
	if err := pageTemplate().Execute(&b, r.view(generated)); err != nil {
		return nil, fmt.Errorf("report.html: %w", err)
	}
	return b.Bytes(), nil
}

// view is what the page shows.
func (r *Report) view(generated time.Time) pageView {
	v := pageView{Command: strings.Join(r.Command, " "), Mode: r.Mode, Runs: r.Runs, AnswerSource: r.AnswerSource}
	if !generated.IsZero() {
		v.Date = generated.UTC().Format("2006-01-02 15:04 UTC")
	}
	c := r.Consensus
	v.Strategy, v.Verdict, v.Reason, v.Notes = string(c.Strategy), strings.ReplaceAll(string(c.Verdict), "_", " "), c.Reason, c.Notes
	if c.Decision != "" {
		v.Decision, v.Answer = shortHash(c.Decision), shorten(c.Answer, 120)
	}
	for k, t := range c.Tally {
		if k == tallyShown {
			v.MoreAnswers = len(c.Tally) - k
			break
		}
		v.Tally = append(v.Tally, tallyRow{Answer: shorten(t.Answer, 80), Hash: shortHash(t.AnswerHash), Runs: t.Runs,
			Weight: fmt.Sprintf("%.4g", t.Weight), First: t.FirstRun, Decided: t.AnswerHash == c.Decision})
	}
	for _, run := range r.IndividualRuns {
		if !run.Success {
			v.Failed++
		}
	}
	v.Confidence, v.Unanimous = fmt.Sprintf("%.0f%%", 100*c.Confidence), c.Unanimous
	v.VerdictClass = "bad"
	if c.Verdict == consensus.VerdictDecided {
		v.VerdictClass = "good"
	}
	v.Reliability, v.ReliabilityLabel, v.ReliabilityClass = "–", "not available", "bad"
	if rel := r.Reliability; rel != nil {
		v.Reliability, v.ReliabilityLabel, v.ReliabilityNote = fmt.Sprintf("%.3f", rel.Score), string(rel.Label), rel.Note
		switch rel.Label {
		case stats.High:
			v.ReliabilityClass = "good"
		case stats.Medium:
			v.ReliabilityClass = "fair"
		}
	}
	sr := r.Variance.SuccessRate
	v.Success = fmt.Sprintf("%d of %d", sr.Successes, sr.N)

	outliers := func(m *Metric) map[int][]string {
		out := map[int][]string{}
		if m == nil {
			return out
		}
		for _, rule := range []string{"tukey", "zscore", "modified_z"} {
			for _, i := range m.Outliers[rule] {
				out[i] = append(out[i], rule)
			}
		}
		return out
	}
	durOut, tokOut, scoreOut := outliers(r.Variance.Duration), outliers(r.Variance.Tokens), outliers(r.Variance.Score)

	v.Plots = append(v.Plots,
		r.perRunPlot(plotDuration, "Duration per run", "ms", r.Variance.Duration, durOut,
			func(run RunReport) (float64, bool) { return float64(run.DurationMS), true }, false),
		successPlot(sr),
	)
	if tokensRecorded(r.IndividualRuns) {
		v.Plots = append(v.Plots, r.perRunPlot(plotTokens, "Tokens per run", "tokens", r.Variance.Tokens, tokOut,
			func(run RunReport) (float64, bool) { return float64(run.Tokens), true }, false))
	} else {
		v.Plots = append(v.Plots, plotView{Name: plotTokens, Title: "Tokens per run",
			Note: "No run recorded any model tokens, so there is nothing to plot."})
	}
	if r.Variance.Score != nil {
		v.Plots = append(v.Plots, r.perRunPlot(plotScore, "Score per run", "score", r.Variance.Score, scoreOut,
			func(run RunReport) (float64, bool) {
				if run.Score == nil {
					return 0, false
				}
				return *run.Score, true
			}, true))
	}
	v.Plots = append(v.Plots, r.histogram())
	// Drawings first, plots that are only a note last.
	slices.SortStableFunc(v.Plots, func(a, b plotView) int {
		return cmp.Compare(boolInt(a.Note != ""), boolInt(b.Note != ""))
	})

	for k := range v.Plots {
		v.Plots[k].SVG = svg(v.Plots[k].Shapes)
	}
	rows := make([]runRow, 0, len(r.IndividualRuns))
	for _, run := range r.IndividualRuns {
		var flags []string
		for _, o := range []struct {
			name string
			m    map[int][]string
		}{{"duration", durOut}, {"tokens", tokOut}, {"score", scoreOut}} {
			if len(o.m[run.Index]) > 0 {
				flags = append(flags, o.name)
			}
		}
		rows = append(rows, runRow{Index: run.Index, Seed: run.Seed, Success: run.Success, Exit: run.ExitCode,
			Score: num(run.Score, "%.3f"), Duration: strconv.FormatInt(run.DurationMS, 10),
			Tokens: strconv.FormatInt(run.Tokens, 10), Answer: shorten(run.Answer, 40), Hash: shortHash(run.AnswerHash),
			Outlier: strings.Join(flags, ", ")})
	}
	v.rows, v.RunRows = rows, runRows(rows)
	v.Warnings = r.Warnings
	return v
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func tokensRecorded(runs []RunReport) bool {
	for _, r := range runs {
		if r.Tokens != 0 {
			return true
		}
	}
	return false
}

// frame maps data to the plot area: x in [x0, x1], y in [y0, y1].
type frame struct{ x0, x1, y0, y1 float64 }

func (f frame) px(x float64) float64 {
	if f.x1 == f.x0 {
		return padLeft
	}
	return padLeft + (x-f.x0)/(f.x1-f.x0)*(plotW-padLeft-padRight)
}

func (f frame) py(y float64) float64 {
	if f.y1 == f.y0 {
		return plotH - padBot
	}
	return plotH - padBot - (y-f.y0)/(f.y1-f.y0)*(plotH-padTop-padBot)
}

// yAxis draws horizontal grid lines with labels at ticks.
func (f frame) yAxis(ticks []float64, format string) []shape {
	var s []shape
	for _, t := range ticks {
		y := f.py(t)
		s = append(s, shape{Kind: "line", Class: "grid", X1: padLeft, Y1: y, X2: plotW - padRight, Y2: y, Count: -1},
			shape{Kind: "text", Class: "tick", X: padLeft - 6, Y: y + 4, Anchor: "end", Text: short(t, format), Count: -1})
	}
	s = append(s, shape{Kind: "line", Class: "axis", X1: padLeft, Y1: plotH - padBot, X2: plotW - padRight, Y2: plotH - padBot, Count: -1})
	return s
}

// short formats a tick label, thousands as k.
func short(x float64, format string) string {
	if math.Abs(x) >= 10000 {
		return strconv.FormatFloat(x/1000, 'f', -1, 64) + "k"
	}
	return fmt.Sprintf(format, x)
}

// niceTicks returns about n round tick values covering [lo, hi].
func niceTicks(lo, hi float64, n int) []float64 {
	if !(hi > lo) {
		hi = lo + 1
	}
	raw := (hi - lo) / float64(n)
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	step := mag
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if m*mag >= raw {
			step = m * mag
			break
		}
	}
	var ticks []float64
	for t := math.Floor(lo/step) * step; t <= hi+step*1e-9; t += step {
		ticks = append(ticks, math.Round(t/step)*step)
	}
	if last := ticks[len(ticks)-1]; last < hi {
		ticks = append(ticks, last+step)
	}
	return ticks
}

// perRunPlot draws one mark per run that has the value: bars from zero, or
// dots on [0, 1] for scores, over the t interval of the mean (shaded) and the
// mean (a line), with outliers ringed.
func (r *Report) perRunPlot(name, title, unit string, m *Metric, outliers map[int][]string,
	value func(RunReport) (float64, bool), dots bool) plotView {
	p := plotView{Name: name, Title: title, Width: plotW, Height: plotH}
	type point struct {
		run RunReport
		v   float64
	}
	var pts []point
	hi := 0.0
	for _, run := range r.IndividualRuns {
		if x, ok := value(run); ok && !math.IsNaN(x) && !math.IsInf(x, 0) {
			pts = append(pts, point{run, x})
			hi = max(hi, x)
		}
	}
	if len(pts) == 0 {
		p.Note = "No run has a value to plot."
		return p
	}
	level := 0.95
	if m != nil && m.ConfidenceInterval != nil {
		level = m.ConfidenceInterval.Level
		hi = max(hi, m.ConfidenceInterval.Upper)
	}
	format := "%.0f"
	var ticks []float64
	if dots {
		ticks, format = []float64{0, 0.25, 0.5, 0.75, 1}, "%.2f"
	} else {
		ticks = niceTicks(0, hi, 4)
	}
	f := frame{x0: 0, x1: float64(len(r.IndividualRuns)), y0: ticks[0], y1: ticks[len(ticks)-1]}
	clampY := func(y float64) float64 { return min(max(y, f.y0), f.y1) }

	var caption []string
	if m != nil && m.ConfidenceInterval != nil {
		iv := m.ConfidenceInterval
		top, bottom := f.py(clampY(iv.Upper)), f.py(clampY(iv.Lower))
		p.Shapes = append(p.Shapes, shape{Kind: "rect", Class: "band", X: padLeft, Y: top, W: plotW - padLeft - padRight,
			H: bottom - top, Title: fmt.Sprintf("%.0f%% t interval of the mean: [%.4g, %.4g] %s", 100*level, iv.Lower, iv.Upper, unit), Count: -1})
		caption = append(caption, fmt.Sprintf("shaded: %.0f%% t interval of the mean [%.4g, %.4g]", 100*level, iv.Lower, iv.Upper))
	} else {
		caption = append(caption, "no interval: it needs at least 2 runs with a value")
	}
	p.Shapes = append(p.Shapes, f.yAxis(ticks, format)...)

	slot := (plotW - padLeft - padRight) / float64(len(r.IndividualRuns))
	labelEvery := max(1, int(math.Ceil(float64(len(r.IndividualRuns))/20)))
	pos := map[int]int{}
	for k, run := range r.IndividualRuns {
		pos[run.Index] = k
		if k%labelEvery == 0 {
			p.Shapes = append(p.Shapes, shape{Kind: "text", Class: "tick", X: padLeft + (float64(k)+0.5)*slot,
				Y: plotH - padBot + 16, Anchor: "middle", Text: strconv.Itoa(run.Index), Count: -1})
		}
	}
	p.Shapes = append(p.Shapes, shape{Kind: "text", Class: "label", X: padLeft + (plotW-padLeft-padRight)/2,
		Y: plotH - 4, Anchor: "middle", Text: "run", Count: -1})

	var rings []shape
	for _, pt := range pts {
		cx := padLeft + (float64(pos[pt.run.Index])+0.5)*slot
		class := "mark ok"
		status := "succeeded"
		if !pt.run.Success {
			class, status = "mark fail", "failed"
		}
		tip := fmt.Sprintf("run %d (%s): %.4g %s", pt.run.Index, status, pt.v, unit)
		y := f.py(clampY(pt.v))
		if dots {
			p.Shapes = append(p.Shapes, shape{Kind: "circle", Class: class, X: cx, Y: y, R: min(6, max(2, slot*0.3)),
				Title: tip, Run: pt.run.Index, Count: -1})
		} else {
			w := max(0.5, min(40, slot*0.7))
			p.Shapes = append(p.Shapes, shape{Kind: "rect", Class: class, X: cx - w/2, Y: y, W: w, H: f.py(f.y0) - y,
				Title: tip, Run: pt.run.Index, Count: -1})
		}
		if rules := outliers[pt.run.Index]; len(rules) > 0 {
			rings = append(rings, shape{Kind: "circle", Class: "outlier", X: cx, Y: y, R: min(10, max(4, slot*0.45)),
				Title: fmt.Sprintf("run %d is an outlier (%s)", pt.run.Index, strings.Join(rules, ", ")), Run: pt.run.Index, Count: -1})
		}
	}
	if m != nil && m.Mean != nil {
		y := f.py(clampY(*m.Mean))
		p.Shapes = append(p.Shapes, shape{Kind: "line", Class: "mean", X1: padLeft, Y1: y, X2: plotW - padRight, Y2: y,
			Title: fmt.Sprintf("mean %.4g %s", *m.Mean, unit), Count: -1},
			shape{Kind: "text", Class: "meanlabel", X: plotW - padRight - 2, Y: y - 5, Anchor: "end",
				Text: fmt.Sprintf("mean %.4g", *m.Mean), Count: -1})
		caption = append([]string{fmt.Sprintf("line: mean %.4g %s", *m.Mean, unit)}, caption...)
	}
	p.Shapes = append(p.Shapes, rings...)
	if len(rings) > 0 {
		caption = append(caption, fmt.Sprintf("ringed: %d outlier(s)", len(rings)))
	}
	if missing := len(r.IndividualRuns) - len(pts); missing > 0 {
		caption = append(caption, fmt.Sprintf("%d run(s) without a value", missing))
	}
	if m != nil && m.Note != "" {
		caption = append(caption, m.Note)
	}
	p.Caption = strings.Join(caption, "; ") + "."
	return p
}

// successPlot draws the success rate as a point on [0, 1] inside its Wilson
// interval.
func successPlot(sr SuccessRate) plotView {
	const h = 110.0
	p := plotView{Name: plotSuccess, Title: "Success rate", Width: plotW, Height: h}
	if sr.N == 0 {
		p.Note = "No runs."
		return p
	}
	x := func(v float64) float64 { return padLeft + v*(plotW-padLeft-padRight) }
	mid := 46.0
	for _, t := range []float64{0, 0.25, 0.5, 0.75, 1} {
		p.Shapes = append(p.Shapes, shape{Kind: "line", Class: "grid", X1: x(t), Y1: 16, X2: x(t), Y2: 76, Count: -1},
			shape{Kind: "text", Class: "tick", X: x(t), Y: 94, Anchor: "middle", Text: fmt.Sprintf("%.0f%%", 100*t), Count: -1})
	}
	p.Shapes = append(p.Shapes, shape{Kind: "line", Class: "axis", X1: x(0), Y1: 76, X2: x(1), Y2: 76, Count: -1})
	caption := fmt.Sprintf("%d of %s succeeded (%.1f%%)", sr.Successes, plural.Count(sr.N, "run", "runs"), 100*sr.Value)
	if iv := sr.ConfidenceInterval; iv != nil {
		p.Shapes = append(p.Shapes, shape{Kind: "rect", Class: "mark interval", X: x(iv.Lower), Y: mid - 9,
			W: max(1, x(iv.Upper)-x(iv.Lower)), H: 18, Count: -1,
			Title: fmt.Sprintf("%.0f%% Wilson interval [%.3f, %.3f]", 100*iv.Level, iv.Lower, iv.Upper)})
		caption += fmt.Sprintf("; bar: %.0f%% Wilson interval [%.1f%%, %.1f%%]", 100*iv.Level, 100*iv.Lower, 100*iv.Upper)
	}
	p.Shapes = append(p.Shapes, shape{Kind: "circle", Class: "mark point", X: x(sr.Value), Y: mid, R: 7, Count: -1,
		Title: fmt.Sprintf("success rate %.3f", sr.Value)},
		shape{Kind: "text", Class: "label", X: x(sr.Value), Y: mid - 14, Anchor: "middle", Text: fmt.Sprintf("%.0f%%", 100*sr.Value), Count: -1})
	p.Caption = caption + "."
	return p
}

// histogram bins the durations (Sturges' rule) and draws one bar per bin.
func (r *Report) histogram() plotView {
	p := plotView{Name: plotHistogram, Title: "Distribution of durations", Width: plotW, Height: plotH}
	var xs []float64
	for _, run := range r.IndividualRuns {
		xs = append(xs, float64(run.DurationMS))
	}
	if len(xs) == 0 {
		p.Note = "No runs."
		return p
	}
	lo, hi := slices.Min(xs), slices.Max(xs)
	bins := 1
	if hi > lo {
		bins = int(math.Ceil(math.Log2(float64(len(xs))))) + 1
	}
	width := (hi - lo) / float64(bins)
	if width == 0 {
		width = 1
	}
	counts := make([]int, bins)
	for _, x := range xs {
		k := min(int((x-lo)/width), bins-1)
		counts[k]++
	}
	top := slices.Max(counts)
	var ticks []float64
	if top <= 5 {
		for t := 0; t <= top; t++ {
			ticks = append(ticks, float64(t))
		}
	} else {
		ticks = niceTicks(0, float64(top), 4)
	}
	f := frame{x0: lo, x1: lo + width*float64(bins), y0: 0, y1: ticks[len(ticks)-1]}
	p.Shapes = append(p.Shapes, f.yAxis(ticks, "%.0f")...)
	for k, c := range counts {
		a, b := lo+float64(k)*width, lo+float64(k+1)*width
		x0, x1 := f.px(a), f.px(b)
		if bins == 1 {
			x0, x1 = padLeft+(plotW-padLeft-padRight)*0.3, padLeft+(plotW-padLeft-padRight)*0.7
		}
		y := f.py(float64(c))
		tip := fmt.Sprintf("%.4g–%.4g ms: %d run(s)", a, b, c)
		if bins == 1 {
			tip = fmt.Sprintf("%.4g ms: %d run(s)", lo, c)
		}
		p.Shapes = append(p.Shapes, shape{Kind: "rect", Class: "mark hist", X: x0 + 1, Y: y, W: max(0.5, x1-x0-2),
			H: f.py(0) - y, Title: tip, Count: c})
		if k == 0 || k == bins-1 || bins <= 8 {
			p.Shapes = append(p.Shapes, shape{Kind: "text", Class: "tick", X: x0, Y: plotH - padBot + 16, Anchor: "middle",
				Text: short(a, "%.0f"), Count: -1})
		}
	}
	if bins > 1 {
		p.Shapes = append(p.Shapes, shape{Kind: "text", Class: "tick", X: f.px(lo + width*float64(bins)), Y: plotH - padBot + 16,
			Anchor: "middle", Text: short(lo+width*float64(bins), "%.0f"), Count: -1})
	}
	p.Shapes = append(p.Shapes, shape{Kind: "text", Class: "label", X: padLeft + (plotW-padLeft-padRight)/2,
		Y: plotH - 4, Anchor: "middle", Text: "duration (ms)", Count: -1})
	p.Caption = fmt.Sprintf("%d run(s) in %d bin(s); bar height: runs per bin.", len(xs), bins)
	return p
}

// htmlEscaper escapes text and quoted attribute values as html/template
// does for a string (its htmlEscaper, attrEscaper and rcdataEscaper share
// one table).
var htmlEscaper = strings.NewReplacer("\x00", "\uFFFD", `"`, "&#34;", "&", "&amp;", "'", "&#39;", "+", "&#43;", "<", "&lt;", ">", "&gt;")

// escapeHTML escapes s for an element's text or a quoted attribute value.
func escapeHTML(s string) string { return htmlEscaper.Replace(s) }

// svg writes the shapes of a plot, each on a line of its own.
func svg(shapes []shape) template.HTML {
	var b strings.Builder
	b.Grow(len(shapes) * 120)
	attr := func(name, value string) {
		b.WriteString(" " + name + `="`)
		b.WriteString(value)
		b.WriteByte('"')
	}
	run := func(s shape) {
		if s.Run != 0 {
			attr("data-run", strconv.Itoa(s.Run))
		}
	}
	title := func(s shape) {
		if s.Title != "" {
			b.WriteString("<title>" + escapeHTML(s.Title) + "</title>")
		}
	}
	for _, s := range shapes {
		switch s.Kind {
		case "rect":
			b.WriteString("\n<rect")
			attr("class", escapeHTML(s.Class))
			attr("x", coord(s.X))
			attr("y", coord(s.Y))
			attr("width", coord(s.W))
			attr("height", coord(s.H))
			run(s)
			if s.Count >= 0 {
				attr("data-count", strconv.Itoa(s.Count))
			}
			b.WriteByte('>')
			title(s)
			b.WriteString("</rect>")
		case "circle":
			b.WriteString("\n<circle")
			attr("class", escapeHTML(s.Class))
			attr("cx", coord(s.X))
			attr("cy", coord(s.Y))
			attr("r", coord(s.R))
			run(s)
			b.WriteByte('>')
			title(s)
			b.WriteString("</circle>")
		case "line":
			b.WriteString("\n<line")
			attr("class", escapeHTML(s.Class))
			attr("x1", coord(s.X1))
			attr("y1", coord(s.Y1))
			attr("x2", coord(s.X2))
			attr("y2", coord(s.Y2))
			b.WriteByte('>')
			title(s)
			b.WriteString("</line>")
		case "text":
			b.WriteString("\n<text")
			attr("class", escapeHTML(s.Class))
			attr("x", coord(s.X))
			attr("y", coord(s.Y))
			attr("text-anchor", escapeHTML(s.Anchor))
			b.WriteString(">" + escapeHTML(s.Text) + "</text>")
		}
	}
	return template.HTML(b.String())
}

// runRows writes the rows of the runs table.
func runRows(rows []runRow) template.HTML {
	var b strings.Builder
	b.Grow(len(rows) * 480)
	for _, r := range rows {
		b.WriteString("\n<tr><td data-label=\"run\">" + strconv.Itoa(r.Index) + "</td>")
		b.WriteString(`<td class="l" data-label="seed">` + strconv.FormatUint(r.Seed, 10) + "</td>")
		b.WriteString(`<td class="l" data-label="result">`)
		if r.Success {
			b.WriteString(`<span class="pill ok">ok</span>`)
		} else {
			b.WriteString(`<span class="pill fail">failed</span>`)
		}
		b.WriteString(`</td><td data-label="exit">` + strconv.Itoa(r.Exit) + "</td>")
		b.WriteString(`<td data-label="score">` + escapeHTML(r.Score) + "</td>")
		b.WriteString(`<td data-label="duration (ms)">` + escapeHTML(r.Duration) + "</td>")
		b.WriteString(`<td data-label="tokens">` + escapeHTML(r.Tokens) + "</td>")
		b.WriteString(`<td class="l" data-label="answer">`)
		if r.Hash != "" {
			b.WriteString("<code>" + escapeHTML(r.Answer) + "</code> <code>" + escapeHTML(r.Hash) + "</code>")
		} else {
			b.WriteString("–")
		}
		b.WriteString(`</td><td class="l" data-label="outlier in">` + escapeHTML(r.Outlier) + "</td></tr>")
	}
	return template.HTML(b.String())
}

// coord formats an SVG coordinate.
func coord(x float64) string { return strconv.FormatFloat(math.Round(x*10)/10, 'f', -1, 64) }

// pageTemplate is parsed on first use, not at every dal-exec start.
var pageTemplate = sync.OnceValue(func() *template.Template {
	return template.Must(template.New("report.html").Funcs(template.FuncMap{"c": coord}).Parse(pageSource))
})

const pageSource = `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Consistency of {{.Command}}</title>
<style>
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:#1d2733;background:#f5f7fa;margin:0}
main{max-width:1120px;margin:0 auto;padding:20px 24px 40px}
h1{font-size:22px;margin:0 0 4px;overflow-wrap:anywhere}h2{font-size:15px;margin:0 0 6px}
h2.section{margin:20px 0 0}
code{font:13px ui-monospace,SFMono-Regular,Menlo,monospace;background:#e8edf3;padding:1px 5px;border-radius:4px}
.meta{color:#56657a;margin:0 0 16px}
.cards{display:grid;grid-template-columns:repeat(3,1fr);gap:14px;margin-bottom:16px}
.card,.plot{background:#fff;border:1px solid #dde3ea;border-radius:10px;padding:14px 16px}
.big{font-size:28px;font-weight:650;margin:2px 0}
.good .big{color:#1f8a4c}.fair .big{color:#c27c00}.bad .big{color:#c43d3d}
.small{color:#56657a;font-size:12.5px;margin:4px 0 0}
.plots{display:grid;grid-template-columns:repeat(2,1fr);gap:14px}
.plot{margin:0}.plot svg{width:100%;height:auto;display:block}
.card code{overflow-wrap:anywhere}
.note{color:#56657a;font-style:italic;padding:30px 0;text-align:center}
svg text{font:11px system-ui,sans-serif;fill:#56657a}
svg .label{fill:#1d2733;font-size:12px}
svg .meanlabel{fill:#1f3b63;font-weight:600}
.grid{stroke:#e6eaef;stroke-width:1}.axis{stroke:#8a97a8;stroke-width:1}
.band{fill:#cfe0f5}
.ok{fill:#2e9d5b}.fail{fill:#d64545}
.mean{stroke:#1f3b63;stroke-width:2;stroke-dasharray:6 3}
.outlier{fill:none;stroke:#f28c00;stroke-width:2.5}
.interval{fill:#7fb0e6}.point{fill:#1f3b63}
.hist{fill:#6c5fc7}
table{border-collapse:collapse;width:100%;background:#fff;border:1px solid #dde3ea;border-radius:10px;margin-top:10px;font-size:13px}
th,td{padding:5px 10px;border-bottom:1px solid #eef1f5;text-align:right}th{background:#f0f3f7}
td.l,th.l{text-align:left}
.pill{display:inline-block;padding:0 8px;border-radius:9px;color:#fff;font-size:12px}
.pill.ok{background:#2e9d5b}.pill.fail{background:#d64545}
.warn{background:#fff7e6;border:1px solid #f2d49b;border-radius:10px;padding:8px 16px;margin-top:16px}
.answer{font-size:15px;overflow-wrap:anywhere}
#tally td.l code,#runs td.l code{overflow-wrap:anywhere}
tr.decided td{background:#eef8f1}
@media (max-width:900px){.cards{grid-template-columns:1fr 1fr}.plots{grid-template-columns:1fr}}
@media (max-width:640px){
main{padding:12px 10px 28px}
.cards{grid-template-columns:1fr}
table,thead,tbody,tr,td{display:block;width:auto}
table{border:0;background:none}
tr.head{display:none}
tr{background:#fff;border:1px solid #dde3ea;border-radius:10px;margin-bottom:8px;padding:4px 0}
td,td.l{text-align:right;border:0;padding:2px 12px;overflow-wrap:anywhere}
td::before{content:attr(data-label);float:left;color:#56657a;padding-right:12px}
}
</style>
</head>
<body>
<main>
<h1>Consistency of <code>{{.Command}}</code></h1>
<p class="meta">{{.Runs}} run{{if ne .Runs 1}}s{{end}}{{if .Mode}} in {{.Mode}} mode{{end}}{{if .Date}} · last run started {{.Date}}{{end}}</p>
<section class="cards">
<div class="card {{.VerdictClass}}" id="consensus"><h2>Consensus ({{.Strategy}})</h2>
<p class="big">{{.Verdict}}</p>
<p>confidence <b>{{.Confidence}}</b>{{if .Unanimous}} · unanimous{{end}}</p>
{{if .Decision}}<p class="answer">answer <code>{{.Answer}}</code></p><p class="small">hash <code>{{.Decision}}</code></p>{{end}}
<p class="small">{{.Reason}}</p>{{range .Notes}}
<p class="small">{{.}}</p>{{end}}</div>
<div class="card {{.ReliabilityClass}}" id="reliability"><h2>Reliability</h2>
<p class="big">{{.Reliability}} <span>{{.ReliabilityLabel}}</span></p>
<p class="small">0.6·success rate + 0.2·(1 − CV duration) + 0.2·(1 − CV tokens), CVs clamped to [0, 1]; High ≥ 0.8, Medium ≥ 0.6. Success and steady cost, not agreement on the answer (that is the consensus).</p>{{if .ReliabilityNote}}
<p class="small">{{.ReliabilityNote}}</p>{{end}}</div>
<div class="card" id="success"><h2>Runs that succeeded</h2>
<p class="big">{{.Success}}</p>
<p class="small">A run succeeds when its agent (or the verify command) exits 0.</p></div>
</section>
<section class="plots">{{range .Plots}}
<figure class="plot" id="plot-{{.Name}}"><h2>{{.Title}}</h2>{{if .Note}}
<p class="note">{{.Note}}</p>{{else}}
<svg data-plot="{{.Name}}" viewBox="0 0 {{c .Width}} {{c .Height}}" xmlns="http://www.w3.org/2000/svg" role="img">{{.SVG}}
</svg>
<figcaption class="small">{{.Caption}}</figcaption>{{end}}</figure>{{end}}
</section>
<h2 class="section">Answers ({{.AnswerSource}})</h2>
<table id="tally">
<tr class="head"><th class="l">answer</th><th>runs</th><th>weight</th><th class="l">hash</th><th>first run</th></tr>{{range .Tally}}
<tr{{if .Decided}} class="decided"{{end}}><td class="l" data-label="answer"><code>{{.Answer}}</code></td><td data-label="runs">{{.Runs}}</td><td data-label="weight">{{.Weight}}</td><td class="l" data-label="hash"><code>{{.Hash}}</code></td><td data-label="first run">{{.First}}</td></tr>{{end}}{{if .MoreAnswers}}
<tr><td class="l" data-label="answer">… {{.MoreAnswers}} more answers</td><td></td><td></td><td></td><td></td></tr>{{end}}{{if .Failed}}
<tr><td class="l" data-label="answer">failed</td><td data-label="runs">{{.Failed}}</td><td></td><td></td><td></td></tr>{{end}}
</table>
<table id="runs">
<tr class="head"><th>run</th><th class="l">seed</th><th class="l">result</th><th>exit</th><th>score</th><th>duration (ms)</th><th>tokens</th><th class="l">answer</th><th class="l">outlier in</th></tr>{{.RunRows}}
</table>{{if .Warnings}}
<div class="warn"><h2>Warnings</h2><ul>{{range .Warnings}}<li>{{.}}</li>{{end}}</ul></div>{{end}}
</main>
</body>
</html>
`
