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
	return figs
}
