package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// consistencyReport is the part of report.json the tests read.
type consistencyReport struct {
	SchemaVersion int `json:"schema_version"`
	Runs          int `json:"runs"`
	Consensus     struct {
		Verdict    string  `json:"verdict"`
		Confidence float64 `json:"confidence"`
		Unanimous  bool    `json:"unanimous"`
	} `json:"consensus"`
	Variance struct {
		SuccessRate struct {
			Value              float64 `json:"value"`
			ConfidenceInterval struct {
				Lower float64 `json:"lower"`
				Upper float64 `json:"upper"`
			} `json:"confidence_interval"`
		} `json:"success_rate"`
	} `json:"variance"`
	Reliability struct {
		Label string `json:"label"`
	} `json:"reliability"`
	IndividualRuns []struct {
		Seed       uint64 `json:"seed"`
		Success    bool   `json:"success"`
		OutputHash string `json:"output_hash"`
	} `json:"individual_runs"`
}

// consistency runs dal-exec consistency into a new report directory (or dir)
// and reads its report.
func consistency(t *testing.T, dir string, args ...string) (result, consistencyReport) {
	t.Helper()
	env := []string{"DAL_KEY=" + filepath.Join(t.TempDir(), "k")}
	r := dalExec(t, env, append([]string{"consistency", "--workspace", t.TempDir(), "--report", dir}, args...)...)
	var rep consistencyReport
	data, err := os.ReadFile(filepath.Join(dir, "report.json"))
	if err != nil {
		t.Fatalf("no report (exit %d): %v\n%s", r.code, err, r.stderr)
	}
	if err := json.Unmarshal(data, &rep); err != nil || rep.SchemaVersion != 2 {
		t.Fatalf("report.json (%v): %s", err, data)
	}
	return r, rep
}

func TestConsistencyDeterministicAgentIsUnanimous(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "eval")
	r, rep := consistency(t, dir, "--runs", "4", "--parallel", "2", "--strategy", "unanimous", "--", "python3", "-c", "print(42)")
	if r.code != 0 || rep.Runs != 4 || rep.Consensus.Verdict != "decided" || !rep.Consensus.Unanimous ||
		rep.Consensus.Confidence != 1 || rep.Reliability.Label != "High" {
		t.Fatalf("exit %d, report %+v\n%s", r.code, rep, r.stderr)
	}
	// A line of its own: the summary's paths hold random digits.
	if strings.Contains("\n"+r.stdout, "\n42\n") {
		t.Fatalf("the agent's output reached the terminal: %q", r.stdout)
	}
	if n := strings.Count(r.stderr, "dal: run "); n != 4 {
		t.Fatalf("%d progress lines, want 4:\n%s", n, r.stderr)
	}
	for i, run := range rep.IndividualRuns {
		if run.OutputHash != rep.IndividualRuns[0].OutputHash || !run.Success {
			t.Fatalf("run %d differs: %+v", i+1, run)
		}
	}
	md, err := os.ReadFile(filepath.Join(dir, "report.md"))
	if err != nil || !strings.Contains(string(md), "| unanimous | decided | 1.000 | true |") {
		t.Fatalf("report.md (%v):\n%s", err, md)
	}
}

func TestConsistencyCoinFlipIsReproducible(t *testing.T) {
	t.Parallel()
	agent := []string{"--runs", "12", "--seed", "7", "--", "python3", "-c", "import random,sys; sys.exit(random.random()<0.5)"}
	pattern := func(rep consistencyReport) string {
		var b strings.Builder
		for _, run := range rep.IndividualRuns {
			if run.Success {
				b.WriteByte('1')
			} else {
				b.WriteByte('0')
			}
		}
		return b.String()
	}
	r1, rep1 := consistency(t, filepath.Join(t.TempDir(), "a"), agent...)
	sr := rep1.Variance.SuccessRate
	if !(sr.Value > 0 && sr.Value < 1) || !(sr.ConfidenceInterval.Lower < sr.Value && sr.Value < sr.ConfidenceInterval.Upper) {
		t.Fatalf("success rate %+v (exit %d)\n%s", sr, r1.code, r1.stderr)
	}
	if (r1.code == 0) != (rep1.Consensus.Verdict == "decided") || r1.code > 1 {
		t.Fatalf("exit %d with verdict %s", r1.code, rep1.Consensus.Verdict)
	}
	_, rep2 := consistency(t, filepath.Join(t.TempDir(), "b"), agent...)
	if p1, p2 := pattern(rep1), pattern(rep2); p1 != p2 {
		t.Fatalf("same base seed, different success patterns: %s, %s", p1, p2)
	}
}

func TestConsistencyResumes(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "eval")
	agent := []string{"--", "python3", "-c", "print(1)"}
	r, rep := consistency(t, dir, append([]string{"--runs", "2"}, agent...)...)
	if r.code != 0 || rep.Runs != 2 {
		t.Fatalf("first evaluation: exit %d, %d runs\n%s", r.code, rep.Runs, r.stderr)
	}
	first, err := os.Stat(filepath.Join(dir, "runs", "001", "manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	r, rep = consistency(t, dir, append([]string{"--runs", "3"}, agent...)...)
	if r.code != 0 || rep.Runs != 3 || strings.Count(r.stderr, "kept from an earlier evaluation") != 2 {
		t.Fatalf("resumed evaluation: exit %d, %d runs\n%s", r.code, rep.Runs, r.stderr)
	}
	again, err := os.Stat(filepath.Join(dir, "runs", "001", "manifest.json"))
	if err != nil || !again.ModTime().Equal(first.ModTime()) {
		t.Fatalf("run 1 was recorded again (%v)", err)
	}
}

func TestConsistencyUnwritableReport(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	r := dalExec(t, nil, "consistency", "--runs", "2", "--report", filepath.Join(file, "eval"), "--", "python3", "-c", "print(1)")
	if r.code != 2 || !strings.Contains(r.stderr, "cannot create the report directory") || strings.Contains(r.stderr, "dal: run") {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
}

// chromium is where the screenshot test expects a headless browser.
const chromium = "/usr/bin/chromium"

// reportFrame is the test's page around report.html: the report in an
// iframe of the width under test (a headless window cannot be narrower than
// 500 px), and a script (the test's, the report has none) that measures
// the report's layout into <pre id="layout">.
const reportFrame = `<!DOCTYPE html>
<html><head><meta charset="utf-8"><style>body{margin:0}iframe{border:0;display:block}</style></head><body>
<iframe id="f" src="report.html" width="%d" height="%d"></iframe><pre id="layout"></pre>
<script>
document.getElementById("f").addEventListener("load", () => {
  const w = document.getElementById("f").contentWindow, d = w.document;
  const box = e => { const r = e.getBoundingClientRect(); return {left: r.left, top: r.top, right: r.right, bottom: r.bottom}; };
  let overflow = [];
  for (const e of d.body.querySelectorAll("*")) {
    const r = e.getBoundingClientRect();
    if (r.width > 0 && (r.right > w.innerWidth + 0.5 || r.left < -0.5)) overflow.push(e.tagName + (e.id ? "#" + e.id : "") + " " + Math.round(r.left) + "-" + Math.round(r.right));
  }
  document.getElementById("layout").textContent = JSON.stringify({
    width: w.innerWidth, scrollWidth: d.documentElement.scrollWidth,
    cards: ["consensus", "reliability", "success"].map(id => box(d.getElementById(id))),
    plots: Array.from(d.querySelectorAll("figure.plot")).map(box),
    rows: Array.from(d.querySelectorAll("#runs tr")).slice(1, 3).map(box),
    cells: Array.from(d.querySelectorAll("#runs tr:nth-child(2) td")).map(box),
    overflow: overflow.slice(0, 5)});
});
</script></body></html>`

// rect is a DOMRect as the frame's script reports it.
type rect struct{ Left, Top, Right, Bottom float64 }

type reportLayout struct {
	Width, ScrollWidth int
	Cards, Plots       []rect
	Rows, Cells        []rect
	Overflow           []string
}

// chromiumRun runs headless Chromium with args on page.
func chromiumRun(t *testing.T, page string, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	base := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync", "--allow-file-access-from-files",
		"--virtual-time-budget=5000", "--user-data-dir=" + t.TempDir()}
	cmd := exec.CommandContext(ctx, chromium, append(append(base, args...), "file://"+page)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("chromium: %v\n%s", err, stderr.String())
	}
	return stdout.Bytes()
}

// TestConsistencyReportHTMLScreenshot renders report.html in headless
// Chromium at a phone's 420 px and a desktop's 1440 px: the layout reflows
// (nothing wider than the viewport, cards and plots stacked on the phone,
// side by side on the desktop), and the screenshots show the page's plot
// colours.
func TestConsistencyReportHTMLScreenshot(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat(chromium); err != nil {
		t.Fatalf("%s is missing: install it with apt-get install -y chromium (%v)", chromium, err)
	}
	dir := filepath.Join(t.TempDir(), "eval")
	// Run 3 fails verification, so both success and failure colours are
	// drawn; the long answer must wrap, not widen the page.
	r, rep := consistency(t, dir, "--runs", "4", "--verify", `test "$DAL_RUN_INDEX" != 3`,
		"--score", `echo "0.$DAL_RUN_INDEX"`, "--", "python3", "-c", "print('the answer is ' + 'forty-two-' * 30)")
	if rep.Runs != 4 {
		t.Fatalf("exit %d, %d runs\n%s", r.code, rep.Runs, r.stderr)
	}
	page := filepath.Join(dir, "report.html")
	html, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	for _, plot := range []string{`data-plot="duration"`, `data-plot="score"`, `data-plot="success"`, `data-plot="duration-histogram"`} {
		if !bytes.Contains(html, []byte(plot)) {
			t.Fatalf("report.html has no %s plot", plot)
		}
	}

	for _, width := range []int{420, 1440} {
		frame := filepath.Join(dir, fmt.Sprintf("frame-%d.html", width))
		if err := os.WriteFile(frame, []byte(fmt.Sprintf(reportFrame, width, 3000)), 0o644); err != nil {
			t.Fatal(err)
		}
		dom := chromiumRun(t, frame, "--window-size="+strconv.Itoa(max(width, 500))+",3000", "--dump-dom")
		_, after, _ := bytes.Cut(dom, []byte(`<pre id="layout">`))
		text, _, _ := bytes.Cut(after, []byte("</pre>"))
		var l reportLayout
		if err := json.Unmarshal(text, &l); err != nil {
			t.Fatalf("%d px: no layout from the page (%v):\n%s", width, err, dom)
		}
		t.Logf("%d px: %+v", width, l)
		if l.Width != width || l.ScrollWidth > width || len(l.Overflow) > 0 {
			t.Errorf("%d px: the report is %d px wide in a %d px viewport; sticking out: %q", width, l.ScrollWidth, l.Width, l.Overflow)
		}
		c, p := l.Cards, l.Plots
		if len(c) != 3 || len(p) < 4 || len(l.Rows) != 2 {
			t.Fatalf("%d px: %d cards, %d plots, %d rows", width, len(c), len(p), len(l.Rows))
		}
		switch width {
		case 420:
			if !(c[0].Bottom <= c[1].Top && c[1].Bottom <= c[2].Top && c[0].Left == c[2].Left) {
				t.Errorf("420 px: the cards are not stacked: %+v", c)
			}
			if !(p[0].Bottom <= p[1].Top && p[0].Left == p[1].Left) {
				t.Errorf("420 px: the plots are not stacked: %+v", p[:2])
			}
			// A run is a block of labelled lines, not a row of nine cells.
			if cells := l.Cells; len(cells) < 2 || !(cells[0].Bottom <= cells[1].Top) || l.Rows[0].Bottom-l.Rows[0].Top < 100 {
				t.Errorf("420 px: the runs table does not reflow into blocks: row %+v, cells %+v", l.Rows[0], l.Cells)
			}
		case 1440:
			if !(c[0].Top == c[1].Top && c[1].Top == c[2].Top && c[0].Right <= c[1].Left && c[1].Right <= c[2].Left) {
				t.Errorf("1440 px: the cards are not side by side: %+v", c)
			}
			if !(p[0].Top == p[1].Top && p[0].Right <= p[1].Left) {
				t.Errorf("1440 px: the plots are not two to a row: %+v", p[:2])
			}
			if cells := l.Cells; len(cells) != 9 || cells[0].Top != cells[8].Top {
				t.Errorf("1440 px: the runs table is not a table: %+v", cells)
			}
		}

		shot := filepath.Join(t.TempDir(), "report.png")
		chromiumRun(t, frame, "--window-size="+strconv.Itoa(max(width, 500))+",2400", "--screenshot="+shot)
		checkScreenshot(t, shot, width)
	}
}

// checkScreenshot checks that the report's part (the left width pixels)
// of a screenshot shows the page: many colours, and each plot colour of
// html.go's stylesheet over a visible area.
func checkScreenshot(t *testing.T, shot string, width int) {
	t.Helper()
	f, err := os.Open(shot)
	if err != nil {
		t.Fatalf("no screenshot: %v", err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	plotColours := map[string][3]int{
		"success bars": {0x2e, 0x9d, 0x5b}, "failure bar": {0xd6, 0x45, 0x45}, "interval band": {0xcf, 0xe0, 0xf5},
		"histogram bars": {0x6c, 0x5f, 0xc7}, "Wilson interval": {0x7f, 0xb0, 0xe6},
	}
	seen := map[string]int{}
	distinct := map[[3]int]bool{}
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Min.X+min(width, b.Dx()); x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			px := [3]int{int(r >> 8), int(g >> 8), int(bl >> 8)}
			distinct[px] = true
			for name, c := range plotColours {
				if abs(px[0]-c[0]) <= 3 && abs(px[1]-c[1]) <= 3 && abs(px[2]-c[2]) <= 3 {
					seen[name]++
				}
			}
		}
	}
	if b.Dx() < width || b.Dy() != 2400 || len(distinct) < 100 {
		t.Fatalf("%d px: screenshot %dx%d with %d distinct colours: blank or not the page", width, b.Dx(), b.Dy(), len(distinct))
	}
	for name := range plotColours {
		if seen[name] < 200 {
			t.Errorf("%d px: the screenshot shows %d pixels of the %s colour, want at least 200", width, seen[name], name)
		}
	}
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

// runScores reads the per-run scores and warnings of report.json.
func runScores(t *testing.T, dir string) ([]*float64, []string) {
	t.Helper()
	var rep struct {
		IndividualRuns []struct {
			Score *float64 `json:"score"`
		} `json:"individual_runs"`
		Warnings []string `json:"warnings"`
	}
	data, err := os.ReadFile(filepath.Join(dir, "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &rep); err != nil {
		t.Fatal(err)
	}
	var out []*float64
	for _, r := range rep.IndividualRuns {
		out = append(out, r.Score)
	}
	return out, rep.Warnings
}

// TestConsistencyScoreFromTheAgent: the agent writes its own score file
// (--score-file), or marks iterations and is scored by the selected one; a
// score file with garbage is a warning naming it, and the run is kept.
func TestConsistencyScoreFromTheAgent(t *testing.T) {
	t.Parallel()
	env := []string{"DAL_KEY=" + filepath.Join(t.TempDir(), "k"), "DAL_EXEC=" + bin.exec}

	dir := filepath.Join(t.TempDir(), "file")
	script := `if [ "$AGENT_SEED" = 2 ]; then echo lots > score.txt; else echo "0.$AGENT_SEED" > score.txt; fi`
	r := dalExec(t, env, "consistency", "--workspace", t.TempDir(), "--report", dir, "--seeds", "1,2,7", "--score-file", "score.txt", "--", "sh", "-c", script)
	if r.code > 1 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	scores, warnings := runScores(t, dir)
	if len(scores) != 3 || scores[0] == nil || *scores[0] != 0.1 || scores[1] != nil || scores[2] == nil || *scores[2] != 0.7 {
		t.Errorf("scores %v, want 0.1, none, 0.7", scores)
	}
	if len(warnings) != 1 || !strings.Contains(warnings[0], `run 2 has no score: the score file score.txt gave "lots"`) {
		t.Errorf("warnings %q", warnings)
	}

	dir = filepath.Join(t.TempDir(), "iterations")
	r = dalExec(t, env, "consistency", "--workspace", refineWorkspace(t), "--report", dir, "--runs", "2", "--keep-env", "DAL_EXEC", "--", "sh", "refine.sh")
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	if scores, _ := runScores(t, dir); len(scores) != 2 || scores[0] == nil || *scores[0] != 0.85 || scores[1] == nil || *scores[1] != 0.85 {
		t.Errorf("scores %v, want the selected iteration's 0.85 for both runs", scores)
	}
}

// TestConsistencyRunTimesOut: a run that hangs is killed at --timeout,
// reported as timed out and failed; the evaluation goes on.
func TestConsistencyRunTimesOut(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "eval")
	script := `import os
if os.environ["AGENT_SEED"] == "2":
    while True: pass
print("done")`
	r, rep := consistency(t, dir, "--seeds", "1,2,3", "--timeout", "5s", "--", "python3", "-c", script)
	if r.code > 1 || len(rep.IndividualRuns) != 3 {
		t.Fatalf("exit %d, %d runs\n%s", r.code, len(rep.IndividualRuns), r.stderr)
	}
	if !(rep.IndividualRuns[0].Success && !rep.IndividualRuns[1].Success && rep.IndividualRuns[2].Success) {
		t.Errorf("runs %+v, want run 2 alone failed", rep.IndividualRuns)
	}
	data, _ := os.ReadFile(filepath.Join(dir, "report.json"))
	if !strings.Contains(string(data), `"timed_out": true`) || !strings.Contains(r.stderr, "timed out") {
		t.Errorf("the timeout is not reported:\n%s", r.stderr)
	}
}

// TestConsistencyInterruptedResumes: SIGINT stops the evaluation with a
// message that says how to resume; the finished runs are kept and the next
// evaluation records only the rest.
func TestConsistencyInterruptedResumes(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "eval")
	ws := t.TempDir()
	// Run 1 finishes, runs 2 and 3 spin until the interrupt.
	script := `import os
seed = os.environ["AGENT_SEED"]
if seed != "1":
    while True: pass
print("ok")`
	cmd := exec.Command(bin.exec, "consistency", "--workspace", ws, "--report", dir, "--seeds", "1,2,3", "--", "python3", "-c", script)
	cmd.Env = append(os.Environ(), "DAL_KEY="+filepath.Join(t.TempDir(), "k"))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool {
		_, err := os.Stat(filepath.Join(dir, "runs", "001", "manifest.json"))
		return err == nil
	})
	cmd.Process.Signal(os.Interrupt)
	err := cmd.Wait()
	ee, _ := err.(*exec.ExitError)
	if ee == nil || ee.ExitCode() != 2 || !strings.Contains(stderr.String(), "finished runs are kept; run again to resume") {
		t.Fatalf("interrupted evaluation: %v\n%s", err, stderr.String())
	}
	if _, err := os.Stat(filepath.Join(dir, "runs", "002", "manifest.json")); err == nil {
		t.Fatalf("the interrupted run 2 left a bundle")
	}
	r := dalExec(t, []string{"DAL_KEY=" + filepath.Join(t.TempDir(), "k")}, "consistency", "--workspace", ws, "--report", dir,
		"--seeds", "1,2,3", "--timeout", "1s", "--", "python3", "-c", script)
	if r.code > 1 || strings.Count(r.stderr, "kept from an earlier evaluation") != 1 {
		t.Fatalf("resumed: exit %d\n%s", r.code, r.stderr)
	}
}
