package main

import (
	"fmt"
	"os"
	"strconv"

	"github.com/dal-runtime/dal/bench"
)

// tracingBench is syscall tracing as a user meets it: dd bs=1 (two
// syscalls per byte) bare, under `dal-exec run --mode default
// --metrics-textfile` (default mode: the tracer alone, without the syscall
// layer, whose virtual clock would also serve dd's own timing; dald's
// eBPF tracer follows the session: an embedded dald traces a run when
// metrics are asked for, and every record) and under `strace -f`,
// alternating, none pinned to a CPU. dd times its own copy, which leaves process start-up out;
// strace copies fewer bytes (it is three orders of magnitude slower), so
// the figures are µs per byte. Every traced run's syscall count is checked.
func tracingBench() []bench.Figure {
	const name = "syscall tracing: dd bs=1, dal-exec run (eBPF) vs strace -f vs bare"
	if _, err := lookTool("dd"); err != nil {
		return []bench.Figure{missingTool(name, "dd")}
	}
	rounds, count, straceCount := 5, 500000, 20000
	if *smoke {
		rounds, count, straceCount = 3, 200000, 10000
	}
	_, errStrace := lookTool("strace")
	var bare, traced, straced bench.Values // µs per byte
	perByte := func(n int, prefix ...string) (float64, error) {
		s, err := ddTime(n, prefix...)
		return s * 1e6 / float64(n), err
	}
	prom, err := os.CreateTemp("", "dal-bench-*.prom")
	if err != nil {
		return []bench.Figure{notMeasured(name, err)}
	}
	prom.Close()
	defer os.Remove(prom.Name())
	var counted bench.Values
	for range rounds {
		b, err := perByte(count)
		if err != nil {
			return []bench.Figure{notMeasured(name, err)}
		}
		t, err := perByte(count, *dal, "run", "--mode", "default", "--cpus", "all", "--metrics-textfile", prom.Name(), "--")
		if err != nil {
			return []bench.Figure{notMeasured(name, err)}
		}
		text, _ := os.ReadFile(prom.Name())
		if n := sumMetric(text, "dal_syscalls_total"); n < float64(2*count) {
			return []bench.Figure{notMeasured(name, fmt.Sprintf("dald's eBPF tracer did not trace dd under dal-exec run (%.0f syscalls counted, at least %d made); see dal-exec status", n, 2*count))}
		} else {
			counted = append(counted, n)
		}
		bare, traced = append(bare, b), append(traced, t)
		if errStrace == nil {
			s, err := perByte(straceCount, "strace", "-f", "-o", os.DevNull, "--")
			if err != nil {
				return []bench.Figure{notMeasured(name, err)}
			}
			straced = append(straced, s)
		}
	}
	f := bench.Figure{Name: "syscall tracing: dd bs=1 under dal-exec run (eBPF) vs bare", Cost: bench.CostTime,
		Baseline: fmt.Sprintf("bare dd, %.3f µs per byte", bare.Median()),
		Detail: fmt.Sprintf("n=%d, alternating; µs per byte (two syscalls) from dd's own timing of %s bytes: bare %s, dal-exec run --mode default %s (min / median / max); every traced run counted by eBPF (%.0f syscalls each, median)",
			rounds, strconv.Itoa(count), bare.Spread("%.3f"), traced.Spread("%.3f"), counted.Median())}
	f.SetRatios(bench.Div(traced, bare))
	f.Value = fmt.Sprintf("%.2fx bare", f.Ratio)
	figs := []bench.Figure{f}
	if errStrace != nil {
		return append(figs, missingTool("syscall tracing: dd bs=1 under strace -f vs dal-exec run", "strace"))
	}
	s := bench.Figure{Name: "syscall tracing: dd bs=1 under dal-exec run (eBPF) vs strace -f", Cost: bench.CostTime,
		Baseline: fmt.Sprintf("strace -f -o /dev/null, %.2f µs per byte (%.0fx bare)", straced.Median(), bench.Div(straced, bare).Median()),
		Detail: fmt.Sprintf("n=%d, alternating; µs per byte: strace -f %s over %d bytes, dal-exec run %s; strace/bare %s (min / median / max)",
			rounds, straced.Spread("%.2f"), straceCount, traced.Spread("%.3f"), bench.Div(straced, bare).Spread("%.0fx"))}
	s.SetRatios(bench.Div(traced, straced))
	s.Value = fmt.Sprintf("%.4fx strace (%.0fx faster)", s.Ratio, 1/s.Ratio)
	return append(figs, s)
}
