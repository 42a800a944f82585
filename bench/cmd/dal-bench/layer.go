package main

import (
	"fmt"

	"github.com/dal-runtime/dal/bench"
)

// layerBench measures the syscall layer (issue 14) with the benchmarks of
// internal/sandbox (a C loop of one call, run natively, in a plain
// sandbox and under the layer; start-up subtracted) and of e2e (a
// goroutine-heavy Go program under `dal-exec run`, strict against default).
func layerBench(tmp string) []bench.Figure {
	const name = "syscall layer"
	bin, err := testBinary(tmp, "./internal/sandbox")
	if err != nil {
		return []bench.Figure{notMeasured(name, err)}
	}
	// Enough calls a run that the work dwarfs the noise of a sandbox's
	// start-up (milliseconds): about 0.2 s of calls under the layer.
	runs := benchRuns{}
	var figs []bench.Figure
	for _, c := range []struct{ bench, calls string }{
		{"ClockRead", "2000000x"}, {"Getrandom16", "20000x"}, {"UnhandledGetppid", "1000000x"},
	} {
		r, err := runBench(bin, "internal/sandbox", "^BenchmarkVirt"+c.bench+"$", c.calls, 3)
		if err != nil {
			figs = append(figs, notMeasured(name, err))
		}
		for k, v := range r {
			runs[k] = v
		}
	}
	ns := func(b, variant string) bench.Values { return runs.values(b, variant+"-ns/call") }
	if layer, native := ns("BenchmarkVirtClockRead", "layer"), ns("BenchmarkVirtClockRead", "native"); len(layer) > 0 && len(native) > 0 {
		f := bench.Figure{Name: "syscall layer: clock_gettime(CLOCK_REALTIME) from C, strict mode", Cost: bench.CostTime,
			Value:    fmt.Sprintf("%.0f ns a read", layer.Median()),
			Baseline: fmt.Sprintf("native %.0f ns (the kernel's vDSO)", native.Median()),
			Detail: fmt.Sprintf("n=%d, each the best of 3 runs of 2,000,000 reads less the best of 3 of none; dal's vDSO %s; the supervisor's round trip (no vDSO) %s; native %s",
				len(layer), layer.Spread("%.0f ns"), ns("BenchmarkVirtClockRead", "layer_novdso").Spread("%.0f ns"), native.Spread("%.0f ns")),
			Target: "at most 2 µs", Verdict: verdict(layer.Median() <= 2000)}
		if ft := ns("BenchmarkVirtClockRead", "faketime"); len(ft) > 0 {
			f.Detail += fmt.Sprintf("; libfaketime %s", ft.Spread("%.0f ns"))
		}
		f.SetRatios(bench.Div(layer, native))
		figs = append(figs, f)
	}
	if layer, native := ns("BenchmarkVirtGetrandom16", "layer"), ns("BenchmarkVirtGetrandom16", "native"); len(layer) > 0 && len(native) > 0 {
		f := bench.Figure{Name: "syscall layer: getrandom(16 bytes) from C (glibc's system call), strict mode", Cost: bench.CostTime,
			Value:    fmt.Sprintf("%.1f µs a call", layer.Median()/1000),
			Baseline: fmt.Sprintf("native %.1f µs", native.Median()/1000),
			Detail: fmt.Sprintf("n=%d x 20,000 calls; served by the supervisor (a seccomp round trip: glibc 2.36 makes the system call, dal's vDSO serves glibc 2.41+ and Go) %s; native %s",
				len(layer), layer.Spread("%.0f ns"), native.Spread("%.0f ns")),
			Target: "at most 2 µs", Verdict: verdict(layer.Median() <= 2000)}
		f.SetRatios(bench.Div(layer, native))
		figs = append(figs, f)
	}
	if layer, native, floor := ns("BenchmarkVirtUnhandledGetppid", "layer"), ns("BenchmarkVirtUnhandledGetppid", "native"), ns("BenchmarkVirtUnhandledGetppid", "filter_floor"); len(layer) > 0 && len(native) > 0 {
		f := bench.Figure{Name: "syscall layer: getppid, a call it does not handle", Cost: bench.CostTime,
			Baseline: fmt.Sprintf("native %.0f ns", native.Median()),
			Detail: fmt.Sprintf("n=%d x 1,000,000 calls; under the layer %s (its seccomp filter's cost); in a plain sandbox %s; native %s; natively under a one-instruction filter that allows all (any filter's floor) %s",
				len(layer), layer.Spread("%.0f ns"), ns("BenchmarkVirtUnhandledGetppid", "sandbox").Spread("%.0f ns"), native.Spread("%.0f ns"), floor.Spread("%.0f ns")),
			Target: "at most 1.2x native"}
		f.SetRatios(bench.Div(layer, native))
		f.Value, f.Verdict = fmt.Sprintf("%.2fx native", f.Ratio), verdict(f.Ratio <= 1.2)
		if len(floor) > 0 {
			f.Value += fmt.Sprintf(" (any filter: %.2fx)", floor.Median()/native.Median())
		}
		figs = append(figs, f)
	}

	e2e, err := testBinary(tmp, "./e2e")
	if err != nil {
		return append(figs, notMeasured(name+": goroutine-heavy Go", err))
	}
	heavy, err := runBench(e2e, "e2e", "^BenchmarkGoroutineHeavyUnderTheLayer$", "3x", 3)
	if err != nil {
		figs = append(figs, notMeasured(name+": goroutine-heavy Go", err))
	}
	for _, c := range []struct{ name, sub string }{
		{"syscall layer: Go channel ping-pong, 1,000,000 round trips", "pingpong"},
		{"syscall layer: Go timer-heavy loop, 1,000 timers", "timers"},
	} {
		b := "BenchmarkGoroutineHeavyUnderTheLayer/" + c.sub
		x, strict, plain := heavy.values(b, "x-default"), heavy.values(b, "strict-ms"), heavy.values(b, "default-ms")
		if len(x) == 0 {
			continue
		}
		f := bench.Figure{Name: c.name, Cost: bench.CostTime,
			Baseline: fmt.Sprintf("dal-exec run --mode default (no layer) %.0f ms", plain.Median()),
			Detail:   fmt.Sprintf("n=%d x 3 runs each, start-up subtracted; strict %s; default %s", len(x), strict.Spread("%.0f ms"), plain.Spread("%.0f ms")),
			Target:   "at most 1.5x"}
		f.SetRatios(x)
		f.Value, f.Verdict = fmt.Sprintf("%.2fx run without the layer", f.Ratio), verdict(f.Ratio <= 1.5)
		figs = append(figs, f)
	}
	return append(figs, toolFigures(e2e)...)
}

// toolFigures are the stat family's cost per call and the tools agents
// run (issue 37), each strict against `--mode default` and bare, measured
// in the same run (e2e's BenchmarkStatUnderTheLayer and
// BenchmarkToolsUnderTheLayer).
func toolFigures(e2e string) []bench.Figure {
	const name = "syscall layer: tools"
	var figs []bench.Figure
	stat, err := runBench(e2e, "e2e", "^BenchmarkStatUnderTheLayer$", "1x", 1)
	if err != nil {
		figs = append(figs, notMeasured("syscall layer: stat family", err))
	}
	for _, c := range []struct{ sub, what string }{
		{"stat-at", "fstatat of a name in a directory descriptor (find, ls)"},
		{"stat-rel", "stat of a path relative to the working directory (git)"},
		{"stat-abs", "stat of an absolute path (Python's imports)"},
		{"fstat", "fstat"},
	} {
		b := "BenchmarkStatUnderTheLayer/" + c.sub
		layer, native := stat.values(b, "layer-ns/call"), stat.values(b, "native-ns/call")
		if len(layer) == 0 || len(native) == 0 {
			continue
		}
		added := layer.Median() - native.Median()
		f := bench.Figure{Name: "syscall layer: " + c.what + ", strict record", Cost: bench.CostTime,
			Value:    fmt.Sprintf("%.1f µs added a call", added/1000),
			Baseline: fmt.Sprintf("native %.1f µs", native.Median()/1000),
			Detail:   fmt.Sprintf("a C loop of 20,000 calls on a file it made, the best of 3 runs less the best of 3 of none; under the layer %.1f µs", layer.Median()/1000),
			Target:   "at most 1.5 µs added", Verdict: verdict(added <= 1500)}
		f.SetRatios(bench.Div(layer, native))
		figs = append(figs, f)
	}
	tools, err := runBench(e2e, "e2e", "^BenchmarkToolsUnderTheLayer$", "5x", 1)
	if err != nil {
		figs = append(figs, notMeasured(name, err))
	}
	for _, c := range []struct {
		sub, what string
		target    float64
	}{
		{"find", "`find /usr/lib -type f | wc -l`", 1.3},
		{"grep", "`grep -rl zstd /usr/share/doc`", 1.3},
		{"git_status", "`git status` in a repository of 10,000 files", 1.3},
		{"python", "`python3 -c pass` start-up", 1.5},
	} {
		b := "BenchmarkToolsUnderTheLayer/" + c.sub
		x, strict, plain, bare := tools.values(b, "x-default"), tools.values(b, "strict-ms"), tools.values(b, "default-ms"), tools.values(b, "bare-ms")
		if len(x) == 0 {
			continue
		}
		f := bench.Figure{Name: "syscall layer: " + c.what + ", strict `dal-exec run`", Cost: bench.CostTime,
			Baseline: fmt.Sprintf("`dal-exec run --mode default` %.0f ms, bare %.0f ms", plain.Median(), bare.Median()),
			Detail:   fmt.Sprintf("medians of 5 rounds, bare, default and strict interleaved in each; strict %.0f ms, %.2fx bare", strict.Median(), tools.values(b, "x-bare").Median()),
			Target:   fmt.Sprintf("at most %.1fx default", c.target)}
		f.SetRatios(x)
		f.Value, f.Verdict = fmt.Sprintf("%.2fx default", f.Ratio), verdict(f.Ratio <= c.target)
		figs = append(figs, f)
	}
	return figs
}
