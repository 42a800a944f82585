package main

import (
	"errors"
	"fmt"

	"github.com/dal-runtime/dal/bench"
)

// netcapBench runs the network-capture benchmarks of internal/netcap (a
// loopback client direct against the same client through the recording
// proxy, in one process) and of internal/netcap/har (matching a request
// against a recorded log). With -smoke, only the latency ones, shorter.
func netcapBench(tmp string) []bench.Figure {
	const name = "network capture"
	bin, err := testBinary(tmp, "./internal/netcap")
	if err != nil {
		return []bench.Figure{notMeasured(name, err)}
	}
	var figs []bench.Figure
	benchtime := "1s"
	if *smoke {
		benchtime = "300ms"
	}
	lat, err := runBench(bin, "internal/netcap", "^Benchmark(Latency|FirstSSEChunk)", benchtime, 3)
	if err != nil {
		figs = append(figs, notMeasured(name+": latency", err))
	}
	for _, c := range []struct{ name, base, proxied string }{
		{"network capture: added latency per request (HTTP_PROXY)", "BenchmarkLatencyDirect", "BenchmarkLatencyProxy"},
		{"network capture: added latency per request (transparent, loopback mirror)", "BenchmarkLatencyDirect", "BenchmarkLatencyTransparent"},
		{"network capture: added time to first SSE chunk", "BenchmarkFirstSSEChunk/direct", "BenchmarkFirstSSEChunk/proxy"},
	} {
		if f, ok := addedLatency(lat, benchtime, c.name, c.base, c.proxied); ok {
			figs = append(figs, f)
		}
	}
	if *smoke {
		return figs
	}

	thr, err := runBench(bin, "internal/netcap", "^BenchmarkThroughput100MB$", "5x", 3)
	if err != nil {
		figs = append(figs, notMeasured(name+": throughput", err))
	}
	for _, c := range []struct{ name, path string }{
		{"network capture: 100 MB download, Content-Length", "sized"},
		{"network capture: 100 MB download, chunked", "chunked"},
	} {
		direct := thr.values("BenchmarkThroughput100MB/direct/"+c.path, "MB/s")
		proxied := thr.values("BenchmarkThroughput100MB/proxy/"+c.path, "MB/s")
		if len(direct) == 0 || len(proxied) == 0 {
			continue
		}
		f := bench.Figure{Name: c.name, Cost: bench.CostRate,
			Baseline: fmt.Sprintf("direct download %.0f MB/s", direct.Median()),
			Detail: fmt.Sprintf("n=%d x 5 downloads; proxied %s; direct %s (min / median / max)",
				len(proxied), proxied.Spread("%.0f MB/s"), direct.Spread("%.0f MB/s"))}
		f.SetRatios(bench.Div(proxied, direct))
		f.Value = fmt.Sprintf("%.2fx direct throughput", f.Ratio)
		figs = append(figs, f)
	}
	return append(figs, harBench(tmp)...)
}

// addedLatency is proxied minus direct at p50 and p99, from benchmarks
// that report p50-µs and p99-µs.
func addedLatency(runs benchRuns, benchtime, name, base, proxied string) (bench.Figure, bool) {
	b50, b99 := runs.values(base, "p50-µs"), runs.values(base, "p99-µs")
	p50, p99 := runs.values(proxied, "p50-µs"), runs.values(proxied, "p99-µs")
	if len(b50) == 0 || len(p50) == 0 || len(b99) == 0 || len(p99) == 0 {
		return bench.Figure{}, false
	}
	add50, add99 := p50.Median()-b50.Median(), p99.Median()-b99.Median()
	f := bench.Figure{Name: name, Value: fmt.Sprintf("p50 %+.0f µs, p99 %+.0f µs", add50, add99),
		Cost:     bench.CostTime,
		Baseline: fmt.Sprintf("direct on loopback: p50 %.0f µs, p99 %.0f µs", b50.Median(), b99.Median()),
		Detail: fmt.Sprintf("n=%d runs of %s each, ratio of p50s; p50 µs direct %s, proxied %s; p99 µs direct %s, proxied %s (min / median / max)",
			len(p50), benchtime, b50.Spread("%.0f"), p50.Spread("%.0f"), b99.Spread("%.0f"), p99.Spread("%.0f")),
	}
	f.SetRatios(bench.Div(p50, b50))
	if base == "BenchmarkLatencyDirect" {
		f.Target, f.Verdict = "p50 at most 0.5 ms added", verdict(add50 <= 500)
	}
	return f, true
}

// harBench compares matching a live request against a 1,000-entry log
// (and computing its match key) with decoding the request's JSON body.
func harBench(tmp string) []bench.Figure {
	bin, err := testBinary(tmp, "./internal/netcap/har")
	if err != nil {
		return []bench.Figure{notMeasured("HAR match", err)}
	}
	runs, err := runBench(bin, "internal/netcap/har", "^Benchmark(IndexNext|Key)$", "500ms", 3)
	var figs []bench.Figure
	for _, c := range []struct{ name, bench, sub string }{
		{"HAR match: next recorded response for a 1.5 KB chat request (1,000-entry log)", "BenchmarkIndexNext", "next"},
		{"HAR match: match key of a 1.5 KB chat request", "BenchmarkKey", "key"},
	} {
		v := runs.values(c.bench+"/"+c.sub, "ns/op")
		b := runs.values(c.bench+"/baseline=json.Unmarshal", "ns/op")
		if len(v) == 0 || len(b) == 0 {
			continue
		}
		allocs := runs.values(c.bench+"/"+c.sub, "allocs/op")
		f := bench.Figure{Name: c.name, Value: fmt.Sprintf("%.1f µs", v.Median()/1e3), Cost: bench.CostTime,
			Baseline: fmt.Sprintf("json.Unmarshal of the body %.1f µs", b.Median()/1e3),
			Detail:   fmt.Sprintf("n=%d; %s; baseline %s (min / median / max)", len(v), v.Spread("%.0f ns"), b.Spread("%.0f ns"))}
		if len(allocs) > 0 {
			f.Detail += fmt.Sprintf("; %.0f allocs/op", allocs.Median())
		}
		f.SetRatios(bench.Div(v, b))
		figs = append(figs, f)
	}
	if err != nil {
		figs = append(figs, notMeasured("HAR match", err))
	} else if len(figs) == 0 {
		figs = append(figs, notMeasured("HAR match", errors.New("the har benchmarks printed none of BenchmarkIndexNext/next, BenchmarkKey/key")))
	}
	return figs
}
