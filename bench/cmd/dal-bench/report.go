package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/dal-runtime/dal/bench"
)

// notes are remarks on the conditions of this run, printed above the table.
var notes []string

// machine describes where the figures were measured.
type machine struct {
	Date, CPU, Kernel, KernelBuild, OS, Memory, Virtual, Go string
	CPUs                                                    int
	Tools                                                   []string // "python 3.11.7", "libfaketime at ..."
}

func describeMachine() machine {
	m := machine{Date: time.Now().UTC().Format("2006-01-02 15:04 UTC"), CPU: cpuModel(), CPUs: runtime.NumCPU(),
		Kernel: firstLine(cmdOutput("uname", "-r")), KernelBuild: firstLine(cmdOutput("uname", "-v")), Go: runtime.Version()}
	if b, err := os.ReadFile("/etc/os-release"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "PRETTY_NAME="); ok {
				m.OS = strings.Trim(v, `"`)
			}
		}
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if f := strings.Fields(l); len(f) >= 2 && f[0] == "MemTotal:" {
				kb, _ := strconv.ParseFloat(f[1], 64)
				m.Memory = fmt.Sprintf("%.1f GiB RAM", kb/1024/1024)
			}
		}
	}
	m.Virtual = "bare metal or undetected"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil && bytes.Contains(b, []byte(" hypervisor")) {
		m.Virtual = "a virtual machine (cpuinfo flag hypervisor)"
	}
	for _, t := range []string{"python3", "node", "strace"} {
		if _, err := lookTool(t); err != nil {
			m.Tools = append(m.Tools, t+" not installed")
			continue
		}
		v := strings.TrimPrefix(firstLine(cmdOutput(t, "--version")), "strace -- version ")
		m.Tools = append(m.Tools, t+" "+strings.TrimPrefix(strings.TrimPrefix(v, "Python "), "v"))
	}
	if lib, err := libfaketime(); err == nil {
		v := firstLine(cmdOutput("dpkg-query", "-W", "-f", "${Version}", "libfaketime"))
		m.Tools = append(m.Tools, strings.TrimSpace("libfaketime "+v)+" ("+lib+")")
	} else {
		m.Tools = append(m.Tools, "libfaketime not installed")
	}
	return m
}

func cmdOutput(name string, args ...string) string {
	b, err := exec.Command(name, args...).Output()
	if err != nil {
		return ""
	}
	return string(b)
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	return l
}

func cpuModel() string {
	b, _ := os.ReadFile("/proc/cpuinfo")
	for _, l := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return runtime.GOARCH
}

// suiteName is "smoke", "full" or "partial (sections)".
func suiteName() string {
	switch {
	case *smoke:
		return "smoke"
	case *only != "":
		return "partial (" + *only + ")"
	}
	return "full"
}

// write writes report.md, report.json and bench.prom to *out, prints the
// Markdown and, after a full run, regenerates docs/benchmarks.md's figures.
func write(figs []bench.Figure, took time.Duration) error {
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return err
	}
	m := describeMachine()
	prom := promText(figs, m, took)
	promCheck := checkProm(prom)
	body := markdown(figs, m, took, promCheck, false)
	md := "# dal benchmark report (" + suiteName() + ")\n\n" + markdown(figs, m, took, promCheck, true)
	if err := os.WriteFile(*out+"/report.md", []byte(md), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(*out+"/bench.prom", prom, 0o644); err != nil {
		return err
	}
	j, _ := json.MarshalIndent(map[string]any{"suite": suiteName(), "machine": m, "seconds": took.Seconds(), "notes": notes,
		"fidelity_runs": fidelityRuns, "figures": figs}, "", "  ")
	if err := os.WriteFile(*out+"/report.json", j, 0o644); err != nil {
		return err
	}
	os.Stdout.WriteString(md)
	if strings.HasPrefix(promCheck, "fails") {
		return fmt.Errorf("%s/bench.prom: promtool check metrics %s", *out, promCheck)
	}
	if *only != "" || *smoke {
		return nil
	}
	if *readme != "" {
		if err := splice(*readme, begin, end, body); err != nil {
			return err
		}
	}
	if *summaryPage != "" {
		return splice(*summaryPage, summaryBegin, summaryEnd, summary(figs))
	}
	return nil
}

// markdown renders the report; perRun adds the per-run outcomes table
// (the README leaves it out, points to bench/out/report.md and nests its
// headings one level deeper, under its own "Measured figures").
func markdown(figs []bench.Figure, m machine, took time.Duration, promCheck string, perRun bool) string {
	var b strings.Builder
	h := heading(perRun)
	fmt.Fprintf(&b, "Measured %s on %s (%d CPUs, %s), %s, Linux %s (%s), %s; %s. Suite %s, %.0f s in all. Every figure comes from a measurement in this run, against a baseline measured in the same run; ratios are dal over its baseline, median with min / max over the repeats.\n\n",
		m.Date, m.CPU, m.CPUs, m.Memory, m.Virtual, m.Kernel, m.KernelBuild, m.OS, m.Go, suiteName(), took.Seconds())
	fmt.Fprintf(&b, "Tools: %s.\n\n", strings.Join(m.Tools, "; "))
	for _, n := range notes {
		fmt.Fprintf(&b, "Note: %s\n\n", n)
	}
	if len(fidelityRuns) > 0 {
		writeFidelity(&b, perRun)
	}

	var slower, missing []string
	var measured []bench.Figure
	for _, f := range figs {
		if strings.HasPrefix(f.Value, "not measured") {
			missing = append(missing, fmt.Sprintf("- %s: %s", f.Name, f.Value))
			continue
		}
		measured = append(measured, f)
		if x, ok := f.Slower(); ok {
			s := fmt.Sprintf("- **%s**: dal %.2fx slower than %s", f.Name, x, f.Baseline)
			if f.Cost == bench.CostRate {
				s = fmt.Sprintf("- **%s**: dal's throughput %.2fx of %s (%.2fx slower)", f.Name, f.Ratio, f.Baseline, x)
			}
			if f.Repeats > 0 {
				s += fmt.Sprintf(" (ratio %s, n=%d", ratioSpread(f), f.Repeats)
				if (f.Cost == bench.CostTime && f.RatioMin <= 1) || (f.Cost == bench.CostRate && f.RatioMax >= 1) {
					s += "; some repeats were not slower: within noise"
				}
				s += ")"
			}
			slower = append(slower, s)
		}
	}
	b.WriteString(h + " Where dal is slower than its baseline\n\n")
	if len(slower) == 0 {
		b.WriteString("Nowhere among the comparisons measured in this run.\n\n")
	} else {
		fmt.Fprintf(&b, "In %d of the comparisons measured in this run dal takes longer than what it is compared with:\n\n%s\n\n", len(slower), strings.Join(slower, "\n"))
	}
	if len(missing) > 0 {
		fmt.Fprintf(&b, "%s Not measured\n\n%s\n\n", h, strings.Join(missing, "\n"))
	}
	if len(measured) > 0 {
		b.WriteString(h + " Comparisons and costs\n\n")
		b.WriteString("| benchmark | result | ratio | min / max | n | baseline | target | detail |\n")
		b.WriteString("|---|---|---|---|---|---|---|---|\n")
		for _, f := range measured {
			ratio, spread, n := "", "", ""
			if f.Ratio > 0 {
				ratio = fmtRatio(f.Ratio)
			}
			if f.Repeats > 0 {
				spread, n = fmtRatio(f.RatioMin)+" / "+fmtRatio(f.RatioMax), strconv.Itoa(f.Repeats)
			}
			target := f.Target
			if f.Verdict != "" {
				target += " (" + f.Verdict + ")"
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s |\n", f.Name, f.Value, ratio, spread, n, f.Baseline, target, f.Detail)
		}
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "The same figures as Prometheus metrics: `%s/bench.prom` (promtool check metrics: %s).\n", *out, promCheck)
	return b.String()
}

// heading is the level of the report's sections: ## in bench/out, ### in
// the README.
func heading(report bool) string {
	if report {
		return "##"
	}
	return "###"
}

func ratioSpread(f bench.Figure) string {
	return fmtRatio(f.RatioMin) + " / " + fmtRatio(f.Ratio) + " / " + fmtRatio(f.RatioMax)
}

// fmtRatio prints a ratio with two decimals, or three significant
// digits when it is below 0.1 (dal against strace is a few 0.001).
func fmtRatio(x float64) string {
	if x < 0.1 {
		return strconv.FormatFloat(x, 'g', 3, 64)
	}
	return fmt.Sprintf("%.2f", x)
}

// writeFidelity renders the fidelity suite: the aggregate per agent and,
// with perRun, every run.
func writeFidelity(b *strings.Builder, perRun bool) {
	aggs := aggregateFidelity()
	total, exact := 0, 0
	for _, a := range aggs {
		total, exact = total+a.runs, exact+a.exact
	}
	b.WriteString(heading(perRun) + " Replay fidelity\n\n")
	fmt.Fprintf(b, "Each example agent recorded in strict mode with %d random seeds (`dal-exec record --seed S`, changes applied to a scratch workspace), replayed offline (`dal-exec replay`), then reverted (`dal-exec revert`, checked against the pre-run tree). Every agent here is deterministic: a replay that is not exact fails the suite.\n\n", *seeds)
	if exact == total {
		fmt.Fprintf(b, "**%d of %d replays exact (fraction 1.00).**\n\n", exact, total)
	} else {
		fmt.Fprintf(b, "**FAILED: %d of %d replays exact (fraction %.2f); see the per-run outcomes.**\n\n", exact, total, float64(exact)/float64(total))
	}
	b.WriteString("| agent | runs | exact | replay_fidelity min / median / max | boundary_coverage min / median / max | record ms | replay ms | revert ms (restore ms) | bundle KiB |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|\n")
	for _, a := range aggs {
		cov := "not measured: " + a.coverageWhy
		if len(a.coverage) > 0 {
			cov = a.coverage.Spread("%.2f")
		}
		fmt.Fprintf(b, "| %s | %d | %d (%.2f) | %s | %s | %s | %s | %s (%s) | %s |\n", a.agent, a.runs, a.exact, float64(a.exact)/float64(a.runs),
			spreadOr(a.fidelity, "%.2f"), cov, spreadOr(a.record, "%.0f"), spreadOr(a.replay, "%.0f"),
			spreadOr(a.revert, "%.0f"), spreadOr(a.restore, "%.1f"), spreadOr(a.kb, "%.1f"))
	}
	b.WriteString("\nTimes are wall times of the dal-exec command (min / median / max); restore ms is the revert's own `dal_revert_duration_seconds`. Agents:\n\n")
	for _, a := range aggs {
		fmt.Fprintf(b, "- %s: %s\n", a.agent, fidelityAbout[a.agent])
	}
	b.WriteString("\n")
	if !perRun {
		fmt.Fprintf(b, "Per-run outcomes (seed, drifted components, times, bundle size): `bench/out/report.md`.\n\n")
		return
	}
	b.WriteString("### Per-run outcomes\n\n")
	b.WriteString("| agent | seed | outcome | replay_fidelity | boundary_coverage | record ms | replay ms | revert ms | restore ms | reverted | bundle bytes |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range fidelityRuns {
		outcome := "exact"
		if !r.Exact {
			outcome = "**NOT EXACT**"
			if len(r.Drifted) > 0 {
				outcome += ": drifted " + strings.Join(r.Drifted, ", ")
			}
		}
		if r.Error != "" {
			outcome += "; " + strings.ReplaceAll(r.Error, "|", "/")
		}
		fmt.Fprintf(b, "| %s | %d | %s | %s | %s | %.0f | %.0f | %.0f | %s | %s | %d |\n", r.Agent, r.Seed, outcome,
			numOr(r.Fidelity, "%.2f"), numOr(r.Coverage, "%.2f"), r.RecordS*1e3, r.ReplayS*1e3, r.RevertS*1e3,
			numOr(r.RestoreS*1e3, "%.1f"), yesNo(r.Reverted), r.BundleBytes)
	}
	b.WriteString("\n")
}

func spreadOr(v bench.Values, format string) string {
	if len(v) == 0 {
		return "-"
	}
	return v.Spread(format)
}

func numOr(x float64, format string) string {
	if x < 0 {
		return "-"
	}
	return fmt.Sprintf(format, x)
}

func yesNo(ok bool) string {
	if ok {
		return "yes"
	}
	return "**no**"
}

const begin, end = "<!-- bench:begin (generated by make bench) -->", "<!-- bench:end -->"

// splice replaces what lies between the lines begin and end in the page
// at path with body.
func splice(path, begin, end, body string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	s := string(b)
	i, j := strings.Index(s, begin), strings.Index(s, end)
	if i < 0 || j < i {
		return fmt.Errorf("%s has no %q ... %q section", path, begin, end)
	}
	return os.WriteFile(path, []byte(s[:i+len(begin)]+"\n"+body+s[j:]), 0o644)
}

// sumMetric sums the samples of one metric in Prometheus text.
func sumMetric(text []byte, name string) float64 {
	var sum float64
	sc := bufio.NewScanner(bytes.NewReader(text))
	for sc.Scan() {
		l := sc.Text()
		rest, ok := strings.CutPrefix(l, name)
		if !ok || (rest != "" && rest[0] != ' ' && rest[0] != '{') {
			continue
		}
		f := strings.Fields(l)
		if v, err := strconv.ParseFloat(f[len(f)-1], 64); err == nil && !math.IsNaN(v) {
			sum += v
		}
	}
	return sum
}
