package main

import (
	"bytes"
	"fmt"
	"math"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/dal-runtime/dal/bench"
)

// promWriter writes the Prometheus text exposition format: each metric's
// HELP and TYPE once, before its first sample.
type promWriter struct {
	buf  bytes.Buffer
	help map[string][2]string // name -> help, type
	rows map[string][]string  // name -> sample lines
	seq  []string
}

func newPromWriter() *promWriter {
	return &promWriter{help: map[string][2]string{}, rows: map[string][]string{}}
}

// gauge adds one sample of a gauge; labels are name, value pairs. NaN and
// infinite values are left out: every sample is a measurement.
func (p *promWriter) gauge(name, help string, v float64, labels ...string) {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return
	}
	if _, ok := p.help[name]; !ok {
		p.help[name] = [2]string{help, "gauge"}
		p.seq = append(p.seq, name)
	}
	var l []string
	for i := 0; i+1 < len(labels); i += 2 {
		l = append(l, labels[i]+`="`+escapeLabel(labels[i+1])+`"`)
	}
	line := name
	if len(l) > 0 {
		line += "{" + strings.Join(l, ",") + "}"
	}
	p.rows[name] = append(p.rows[name], line+" "+promFloat(v))
}

func (p *promWriter) bytes() []byte {
	names := append([]string(nil), p.seq...)
	sort.Strings(names)
	for _, n := range names {
		h := p.help[n]
		fmt.Fprintf(&p.buf, "# HELP %s %s\n# TYPE %s %s\n", n, h[0], n, h[1])
		rows := p.rows[n]
		seen := map[string]bool{}
		for _, r := range rows {
			key := r[:strings.LastIndexByte(r, ' ')]
			if seen[key] { // a duplicate series: keep the first
				continue
			}
			seen[key] = true
			p.buf.WriteString(r + "\n")
		}
	}
	return p.buf.Bytes()
}

// promFloat prints integers exactly and the rest to 6 significant digits:
// no measurement here is more precise than that.
func promFloat(v float64) string {
	if v == math.Trunc(v) && math.Abs(v) < 1e15 {
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
	return strconv.FormatFloat(v, 'g', 6, 64)
}

func escapeLabel(s string) string {
	return strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(s)
}

// promText renders the report's figures as Prometheus metrics, for a
// node_exporter textfile collector or a push to a gateway.
func promText(figs []bench.Figure, m machine, took time.Duration) []byte {
	p := newPromWriter()
	p.gauge("dal_bench_info", "Always 1; its labels describe the benchmark run and the machine.", 1,
		"suite", suiteName(), "cpu", m.CPU, "cpus", strconv.Itoa(m.CPUs), "kernel", m.Kernel, "os", m.OS, "go", m.Go)
	p.gauge("dal_bench_run_duration_seconds", "Wall time of the whole benchmark run.", took.Seconds())
	for _, f := range figs {
		if strings.HasPrefix(f.Value, "not measured") {
			p.gauge("dal_bench_not_measured", "Always 1: a comparison that could not be measured in this run; install names the missing tool (empty when something else failed).", 1,
				"benchmark", f.Name, "install", f.Install)
			continue
		}
		if f.Ratio > 0 {
			const help = "A figure's ratio to its baseline over the repeats (stat min, median or max): dal over its baseline unless the report says otherwise."
			if f.Repeats > 0 {
				p.gauge("dal_bench_baseline_ratio", help, f.RatioMin, "benchmark", f.Name, "stat", "min")
				p.gauge("dal_bench_baseline_ratio", help, f.Ratio, "benchmark", f.Name, "stat", "median")
				p.gauge("dal_bench_baseline_ratio", help, f.RatioMax, "benchmark", f.Name, "stat", "max")
				p.gauge("dal_bench_repeats", "How many repeats a figure's ratio is over.", float64(f.Repeats), "benchmark", f.Name)
			} else {
				p.gauge("dal_bench_baseline_ratio", help, f.Ratio, "benchmark", f.Name, "stat", "median")
			}
		}
		if f.Cost != "" && f.Ratio > 0 {
			_, slower := f.Slower()
			p.gauge("dal_bench_slower_than_baseline", "1 when dal is slower than the figure's baseline (by the median ratio), else 0.", b2f(slower), "benchmark", f.Name)
		}
		if f.Verdict != "" {
			p.gauge("dal_bench_target_met", "1 when the figure meets its target, 0 when it misses it.", b2f(f.Verdict == "meets"), "benchmark", f.Name, "target", f.Target)
		}
	}
	for _, r := range clockRows {
		if len(r.ns) == 0 {
			continue
		}
		const help = "Seconds per clock read in a process of its own (stat min, median or max over the rounds), by runtime, read and provider (native, faketime, dal)."
		for _, s := range []struct {
			stat string
			v    float64
		}{{"min", r.ns.Min()}, {"median", r.ns.Median()}, {"max", r.ns.Max()}} {
			p.gauge("dal_bench_clock_read_seconds", help, s.v/1e9, "runtime", r.runtime, "read", r.read, "provider", r.under, "stat", s.stat)
		}
	}
	for _, a := range aggregateFidelity() {
		p.gauge("dal_bench_replays", "Replays of the agent in the fidelity suite.", float64(a.runs), "agent", a.agent)
		p.gauge("dal_bench_replays_exact_ratio", "Fraction of the agent's replays that were exact.", float64(a.exact)/float64(a.runs), "agent", a.agent)
	}
	for _, r := range fidelityRuns {
		seed := strconv.FormatUint(r.Seed, 10)
		l := []string{"agent", r.Agent, "seed", seed}
		p.gauge("dal_bench_replay_exact", "1 when the replay of this recording was exact, else 0.", b2f(r.Exact), l...)
		if r.Fidelity >= 0 {
			p.gauge("dal_bench_replay_fidelity_ratio", "Replay fidelity of the run: matching components over compared ones.", r.Fidelity, l...)
		}
		if r.Coverage >= 0 {
			p.gauge("dal_bench_boundary_coverage_ratio", "Boundary coverage of the recording (bundle syscalls.json).", r.Coverage, l...)
		}
		p.gauge("dal_bench_record_duration_seconds", "Wall time of dal-exec record.", r.RecordS, l...)
		if r.ReplayS > 0 {
			p.gauge("dal_bench_replay_duration_seconds", "Wall time of dal-exec replay.", r.ReplayS, l...)
		}
		if r.RevertS > 0 {
			p.gauge("dal_bench_revert_duration_seconds", "Wall time of dal-exec revert of the applied run.", r.RevertS, l...)
		}
		if r.RestoreS >= 0 {
			p.gauge("dal_bench_revert_restore_seconds", "The revert's own restore time (its dal_revert_duration_seconds).", r.RestoreS, l...)
		}
		if r.BundleBytes > 0 {
			p.gauge("dal_bench_bundle_size_bytes", "Size of the recorded bundle.", float64(r.BundleBytes), l...)
		}
	}
	return p.bytes()
}

func b2f(ok bool) float64 {
	if ok {
		return 1
	}
	return 0
}

// checkProm runs promtool check metrics on the textfile: "ok", "fails: ..."
// or "not checked: install prometheus (promtool)".
func checkProm(text []byte) string {
	bin, err := lookTool("promtool")
	if err != nil {
		return "not checked: install promtool (apt-get install prometheus)"
	}
	cmd := exec.Command(bin, "check", "metrics")
	cmd.Stdin = bytes.NewReader(text)
	if o, err := cmd.CombinedOutput(); err != nil {
		return "fails: " + strings.Join(strings.Fields(string(o)), " ")
	}
	return "ok"
}
