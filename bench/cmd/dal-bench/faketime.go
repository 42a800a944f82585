package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/dal-runtime/dal/bench"
)

// fakeOrigin is where libfaketime starts the clock in the comparison: the
// origin of dal's strict clock, so both serve the same dates.
const fakeOrigin = "2026-01-01 00:00:00"

var fakeOriginUnix = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Unix()

// clockRow is one clock read's ns per call under one clock provider over
// the rounds of the comparison; the Prometheus textfile reports them.
type clockRow struct {
	runtime, read, under string
	ns                   bench.Values
}

var clockRows []clockRow

// hidden reports whether DAL_BENCH_HIDE (a comma-separated list, e.g.
// "faketime,strace") hides an optional tool: how to see the report of a
// machine without it.
func hidden(tool string) bool {
	return slices.Contains(strings.Split(os.Getenv("DAL_BENCH_HIDE"), ","), tool)
}

// lookTool is exec.LookPath for an optional tool, unless it is hidden.
func lookTool(tool string) (string, error) {
	if hidden(tool) {
		return "", fmt.Errorf("%s is hidden by DAL_BENCH_HIDE", tool)
	}
	return exec.LookPath(tool)
}

// libfaketime finds Debian's libfaketime.so.1 (package faketime), or the
// one DAL_BENCH_LIBFAKETIME names.
func libfaketime() (string, error) {
	if hidden("faketime") {
		return "", errors.New("faketime is hidden by DAL_BENCH_HIDE")
	}
	if p := os.Getenv("DAL_BENCH_LIBFAKETIME"); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("DAL_BENCH_LIBFAKETIME: %w", err)
		}
		return p, nil
	}
	for _, pat := range []string{"/usr/lib/*/faketime/libfaketime.so.1", "/usr/lib/faketime/libfaketime.so.1",
		"/usr/lib64/faketime/libfaketime.so.1", "/usr/local/lib/faketime/libfaketime.so.1"} {
		if m, _ := filepath.Glob(pat); len(m) > 0 {
			return m[0], nil
		}
	}
	return "", errors.New("libfaketime.so.1 not found")
}

// clockOutput is what bench/clock_cmp.{py,js} print.
type clockOutput struct {
	Runtime string  `json:"runtime"`
	Under   string  `json:"under"`
	Now     float64 `json:"now"`
	Reads   []struct {
		Name   string  `json:"name"`
		NS     float64 `json:"ns"`
		Rounds int     `json:"rounds"`
		Calls  int     `json:"calls"`
	} `json:"reads"`
}

// clockCompare times clock reads in Python and Node natively, under
// libfaketime and under dal's shim (strict mode), each in a process of
// its own, the three alternating, none pinned to a CPU.
func clockCompare() []bench.Figure {
	var figs []bench.Figure
	for _, c := range []struct {
		lang, interp, script, calls string
	}{
		{"python", "python3", "bench/clock_cmp.py", "200000"},
		{"node", "node", "bench/clock_cmp.js", "500000"},
	} {
		figs = append(figs, clockCompareOne(c.lang, c.interp, c.script, c.calls)...)
	}
	return figs
}

func clockCompareOne(lang, interp, script, smokeCalls string) []bench.Figure {
	name := lang + " clock reads: dal shim vs libfaketime vs native"
	if _, err := lookTool(interp); err != nil {
		return []bench.Figure{missingTool(name, interp)}
	}
	script, _ = filepath.Abs(script)
	var figs []bench.Figure
	lib, libErr := libfaketime()
	if libErr != nil {
		figs = append(figs, missingTool(lang+" clock reads under libfaketime", "faketime"))
	}
	rounds, env := 5, []string{"BENCH_ROUNDS=5"}
	if *smoke {
		rounds, env = 3, []string{"BENCH_ROUNDS=3", "BENCH_CALLS=" + smokeCalls}
	}
	runners := map[string]func() (clockOutput, error){
		"native": func() (clockOutput, error) { return runClock(env, interp, script) },
		"dal": func() (clockOutput, error) {
			// --cpus all: not pinned, as the native and libfaketime runs
			return runClock(env, *dal, "run", "--cpus", "all", "--keep-env", "BENCH_*", "--", interp, script)
		},
	}
	unders := []string{"native", "dal"}
	if libErr == nil {
		unders = append(unders, "faketime")
		fenv := append(slices.Clone(env), "LD_PRELOAD="+lib, "FAKETIME=@"+fakeOrigin)
		runners["faketime"] = func() (clockOutput, error) {
			o, err := runClock(fenv, interp, script)
			if err == nil && (o.Now < float64(fakeOriginUnix) || o.Now > float64(fakeOriginUnix+3600)) {
				err = fmt.Errorf("libfaketime did not take effect: the clock read %.0f, not %s", o.Now, fakeOrigin)
			}
			return o, err
		}
	}
	ns := map[string]map[string]bench.Values{} // read -> under -> ns per round
	var order []string
	var runtime string
	var inner clockOutput
	for r := range rounds {
		for i := range unders {
			u := unders[(i+r)%len(unders)] // rotate, so no provider always runs first
			o, err := runners[u]()
			if err != nil {
				return append(figs, notMeasured(name, fmt.Sprintf("%s: %v", u, err)))
			}
			runtime, inner = o.Runtime, o
			for _, rd := range o.Reads {
				if ns[rd.Name] == nil {
					ns[rd.Name] = map[string]bench.Values{}
					order = append(order, rd.Name)
				}
				ns[rd.Name][u] = append(ns[rd.Name][u], rd.NS)
			}
		}
	}
	per := ""
	if len(inner.Reads) > 0 {
		per = fmt.Sprintf("each the median of %d rounds of %d calls", inner.Reads[0].Rounds, inner.Reads[0].Calls)
	}
	for _, read := range order {
		v := ns[read]
		for _, u := range unders {
			clockRows = append(clockRows, clockRow{lang, read, u, v[u]})
		}
		f := bench.Figure{Name: fmt.Sprintf("%s %s: dal shim vs libfaketime", lang, read), Cost: bench.CostTime,
			Detail: fmt.Sprintf("n=%d processes per provider, alternating, none pinned to a CPU (%s; %s); ns per read native %s, dal %s",
				len(v["dal"]), per, runtime, v["native"].Spread("%.1f"), v["dal"].Spread("%.1f"))}
		dalNative := bench.Div(v["dal"], v["native"])
		if libErr != nil {
			f.Name = fmt.Sprintf("%s %s: dal shim vs native (libfaketime not measured: install faketime)", lang, read)
			f.Baseline = fmt.Sprintf("native %.1f ns, a process without dal", v["native"].Median())
			f.SetRatios(dalNative)
			f.Value = fmt.Sprintf("dal %.1f ns, native %.1f ns", v["dal"].Median(), v["native"].Median())
		} else {
			f.Baseline = fmt.Sprintf("libfaketime %.1f ns (LD_PRELOAD, FAKETIME=\"@%s\")", v["faketime"].Median(), fakeOrigin)
			f.SetRatios(bench.Div(v["dal"], v["faketime"]))
			f.Value = fmt.Sprintf("dal %.1f ns, libfaketime %.1f ns, native %.1f ns", v["dal"].Median(), v["faketime"].Median(), v["native"].Median())
			f.Detail += fmt.Sprintf(", libfaketime %s (min / median / max); dal/native %s, libfaketime/native %s",
				v["faketime"].Spread("%.1f"), dalNative.Spread("%.2fx"), bench.Div(v["faketime"], v["native"]).Spread("%.2fx"))
		}
		if libErr != nil {
			f.Detail += " (min / median / max)"
		}
		if targeted[lang+" "+read] {
			f.Target, f.Verdict = "dal at most 2x native (a process without dal)", verdict(dalNative.Median() <= 2)
		}
		figs = append(figs, f)
	}
	return figs
}

// runClock runs a clock_cmp script (argv, env added) and reads its JSON.
func runClock(env []string, argv ...string) (clockOutput, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), env...)
	var o clockOutput
	b, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return o, fmt.Errorf("%v: %s", err, lastLines(ee.Stderr, 3))
		}
		return o, err
	}
	if err := json.Unmarshal(lastJSONObject(b), &o); err != nil {
		return o, fmt.Errorf("unreadable output %q", lastLines(b, 2))
	}
	if len(o.Reads) == 0 {
		return o, fmt.Errorf("no reads in %q", lastLines(b, 2))
	}
	return o, nil
}

// lastJSONObject returns the last line of b that starts with "{".
func lastJSONObject(b []byte) []byte {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if l := strings.TrimSpace(lines[i]); strings.HasPrefix(l, "{") {
			return []byte(l)
		}
	}
	return nil
}
