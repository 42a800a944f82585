package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"

	"github.com/dal-runtime/dal/bench"
)

// ddCount is the bytes dd copies one at a time: two syscalls per byte.
const ddCount = 1000000

var ddSeconds = regexp.MustCompile(`copied, ([0-9.]+) s`)

// ddTime runs dd bs=1 over count bytes, under the command prefix if any,
// and returns the copy time dd itself reports, which leaves process
// start-up out.
func ddTime(count int, prefix ...string) (float64, error) {
	argv := append(prefix, "dd", "if=/dev/zero", "of=/dev/null", "bs=1", "count="+strconv.Itoa(count))
	out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput()
	if err != nil {
		return 0, fmt.Errorf("dd: %v: %s", err, out)
	}
	m := ddSeconds.FindSubmatch(out)
	if m == nil {
		return 0, fmt.Errorf("no time in dd's output %q", out)
	}
	return strconv.ParseFloat(string(m[1]), 64)
}

// boundaryBench runs the eBPF boundary tracer's benchmarks (package
// ebpf), each against its baseline in the same process: bare syscalls,
// bare dd, an empty sys_enter program.
func boundaryBench(tmp string) []bench.Figure {
	const name = "eBPF boundary tracing"
	if os.Geteuid() != 0 {
		return []bench.Figure{notMeasured(name, "needs root (or CAP_BPF and CAP_PERFMON) and a kernel with BTF")}
	}
	bin, err := testBinary(tmp, "./ebpf")
	if err != nil {
		return []bench.Figure{notMeasured(name, err)}
	}
	run := func(pattern, benchtime string) benchRuns {
		r, err := runBench(bin, "ebpf", pattern, benchtime, 3)
		if err != nil {
			fmt.Fprintln(os.Stderr, "dal-bench:", err)
		}
		return r
	}
	var figs []bench.Figure
	if n, err := otherSysEnterHooks(); err == nil && n > 0 {
		notes = append(notes, fmt.Sprintf("when the eBPF benchmarks started, other processes had %d program(s) attached to sys_enter (a dald left running?). Every syscall paid for them, the bare baselines too, so the eBPF ratios read low; the added nanoseconds are unaffected.", n))
	}

	// dd: bare, tracked, under strace -f.
	_, errDD := lookTool("dd")
	_, errStrace := lookTool("strace")
	syscall := run("^BenchmarkSyscall$", "5x")
	hookAdded := syscall.values("BenchmarkSyscall", "empty-hook-added-ns")
	switch {
	case errDD != nil:
		figs = append(figs, notMeasured(name+": dd bs=1", "dd is not installed (coreutils)"))
	case errStrace != nil:
		figs = append(figs, missingTool(name+": dd bs=1 (bare vs tracked vs strace -f)", "strace"))
	default:
		figs = append(figs, ddFigures(run("^BenchmarkDD$", "1x"))...)
	}

	// Per syscall, outside any session: what every process on the machine pays.
	bare := syscall.values("BenchmarkSyscall", "bare-ns/syscall")
	untracked := syscall.values("BenchmarkSyscall", "untracked-added-ns")
	tracked := syscall.values("BenchmarkSyscall", "tracked-added-ns")
	ux := syscall.values("BenchmarkSyscall", "untracked-x")
	if len(bare) == 0 || len(untracked) == 0 || len(hookAdded) == 0 {
		figs = append(figs, notMeasured(name+": per syscall", "BenchmarkSyscall printed no results (see the log above)"))
	} else {
		u := untracked.Median()
		f := bench.Figure{Name: "eBPF: added time per syscall, process outside any session", Cost: bench.CostTime,
			Value:    fmt.Sprintf("%+.0f ns", u),
			Baseline: fmt.Sprintf("bare getppid %.0f ns", bare.Median()),
			Target:   "at most 60 ns added", Verdict: verdict(u <= 60),
			Detail: fmt.Sprintf("n=%d, each the best of 5 rounds of 300,000 getppid; added ns %s; an empty sys_enter program alone adds %s ns (the floor of any syscall hook here); a tracked process adds %s ns (min / median / max)",
				len(untracked), untracked.Spread("%.0f"), hookAdded.Spread("%.0f"), tracked.Spread("%.0f"))}
		f.SetRatios(ux)
		if u > 60 {
			f.Value += " (target not met)"
			f.Detail += fmt.Sprintf("; not met: %.0f ns of the %.0f are the empty program's floor, %.0f ns the tracer's own check", hookAdded.Median(), u, u-hookAdded.Median())
		}
		figs = append(figs, f)
	}

	rt := run("^BenchmarkProgramRunTime$", "1x")
	if ut, tr, ev := rt.values("BenchmarkProgramRunTime", "untracked-ns/run"), rt.values("BenchmarkProgramRunTime", "tracked-ns/run"),
		rt.values("BenchmarkProgramRunTime", "event-ns/run"); len(ut) > 0 && len(tr) > 0 && len(ev) > 0 {
		drops := rt.values("BenchmarkProgramRunTime", "dropped-events")
		f := bench.Figure{Name: "eBPF: BPF run time per sys_enter (kernel statistics)",
			Value: fmt.Sprintf("%.0f ns outside a session, %.0f ns tracked, %.0f ns with a ring-buffer event", ut.Median(), tr.Median(), ev.Median()),
			Ratio: ev.Median() / tr.Median(), Baseline: "tracked syscall without an event",
			Detail: fmt.Sprintf("n=%d x 200,000 calls per phase; outside %s, tracked %s, event %s ns (min / median / max); the statistics add two clock reads per run",
				len(ev), ut.Spread("%.0f"), tr.Spread("%.0f"), ev.Spread("%.0f"))}
		if len(drops) > 0 {
			f.Detail += fmt.Sprintf("; %.0f of 200,000 events dropped (the session's cap of 1,024 kept events, by design)", drops.Median())
		}
		figs = append(figs, f)
	} else {
		figs = append(figs, notMeasured(name+": BPF run time", "BenchmarkProgramRunTime printed no results (see the log above)"))
	}

	op := run("^BenchmarkOpen$", "20x")
	if v := op.values("BenchmarkOpen", "ns/op"); len(v) > 0 {
		f := bench.Figure{Name: "eBPF: Open (load, verify, attach)", Value: fmt.Sprintf("%.1f ms", v.Median()/1e6),
			Detail: fmt.Sprintf("n=%d x 20 opens; %s (min / median / max)", len(v), bench.Values{v.Min() / 1e6, v.Median() / 1e6, v.Max() / 1e6}.Spread("%.1f ms"))}
		if c := op.values("BenchmarkOpen", "close-ms"); len(c) > 0 {
			f.Detail += fmt.Sprintf("; Close %.0f ms", c.Median())
		}
		figs = append(figs, f)
	} else {
		figs = append(figs, notMeasured(name+": Open", "BenchmarkOpen printed no results (see the log above)"))
	}

	ss := run("^BenchmarkSessions$", "1x")
	full, empty := ss.values("BenchmarkSessions", "maps-MiB-1000-sessions"), ss.values("BenchmarkSessions", "maps-MiB-empty")
	if len(full) > 0 && len(empty) > 0 {
		f := bench.Figure{Name: "eBPF: kernel map memory with 1,000 sessions",
			Value: fmt.Sprintf("%.1f MiB (+%.1f MiB)", full.Median(), full.Median()-empty.Median()),
			Ratio: full.Median() / empty.Median(), Baseline: fmt.Sprintf("the tracer's maps empty, %.1f MiB", empty.Median()),
			Detail: fmt.Sprintf("n=%d; 1,000 sessions each running sh -c 'echo x'; after Forget %.1f MiB; %.0f counters per session; reading counts %.0f µs, Forget %.0f µs per session",
				len(full), ss.values("BenchmarkSessions", "maps-MiB-after-forget").Median(), ss.values("BenchmarkSessions", "counters/session").Median(),
				ss.values("BenchmarkSessions", "counts-us/session").Median(), ss.values("BenchmarkSessions", "forget-us/session").Median())}
		figs = append(figs, f)
	} else {
		figs = append(figs, notMeasured(name+": 1,000 sessions", "BenchmarkSessions printed no results (see the log above)"))
	}
	return figs
}

// ddFigures reads BenchmarkDD (bare, attached, tracked and strace -f
// ratios, dd's own timing) and adds the floor an empty sys_enter program
// sets on the same dd, measured here.
func ddFigures(runs benchRuns) []bench.Figure {
	bare := runs.values("BenchmarkDD", "bare-s")
	tracked := runs.values("BenchmarkDD", "tracked-x")
	attached := runs.values("BenchmarkDD", "attached-x")
	strace := runs.values("BenchmarkDD", "strace-x")
	if len(bare) == 0 || len(tracked) == 0 || len(strace) == 0 {
		return []bench.Figure{notMeasured("eBPF: dd bs=1", "BenchmarkDD printed no results (see the log above)")}
	}
	floor, floorErr := emptyHookFloor(3)
	t := tracked.Median()
	f := bench.Figure{Name: "eBPF: dd bs=1 count=1000000, dd tracked in a session", Cost: bench.CostTime,
		Value: fmt.Sprintf("%.2fx bare", t), Baseline: fmt.Sprintf("bare dd %.2f s (dd's own timing)", bare.Median()),
		Target: "at most 1.3x bare", Verdict: verdict(t <= 1.3),
		Detail: fmt.Sprintf("n=%d; tracked %s, dd outside any session with the tracer attached %s (min / median / max)",
			len(tracked), tracked.Spread("%.2fx"), attached.Spread("%.2fx"))}
	f.SetRatios(tracked)
	switch {
	case floorErr != nil:
		f.Detail += "; floor of an empty sys_enter program not measured: " + floorErr.Error()
	case floor != nil:
		f.Detail += fmt.Sprintf("; an empty sys_enter program alone makes the same dd %s", floor.Spread("%.2fx"))
	}
	if t > 1.3 {
		f.Value += " (target not met)"
		switch {
		case floor != nil && floor.Median() >= 1.3:
			f.Detail += fmt.Sprintf("; not met: on this VM an empty sys_enter program alone costs %.2fx, above the target before the tracer does anything", floor.Median())
		case floor != nil:
			f.Detail += fmt.Sprintf("; not met: an empty sys_enter program costs %.2fx here, the tracer's own work the rest", floor.Median())
		}
	}
	s := strace.Median()
	st := bench.Figure{Name: "eBPF: the same dd under strace -f (the baseline dal's tracer replaces)", Value: fmt.Sprintf("%.0fx bare", s),
		Baseline: fmt.Sprintf("bare dd %.2f s", bare.Median()),
		Detail: fmt.Sprintf("n=%d; %s (min / median / max), from 100,000 bytes scaled by 10; the tracked run is %.0fx cheaper than strace",
			len(strace), strace.Spread("%.0fx"), s/t)}
	st.SetRatios(strace)
	if pinned, err := stracePinned(3); err == nil {
		st.Detail += fmt.Sprintf("; with strace and dd pinned to one CPU %s (a ptrace stop that wakes an idle vCPU is what costs here, so this ratio swings with machine load)", pinned.Spread("%.0fx"))
	} else {
		st.Detail += "; pinned to one CPU not measured: " + err.Error()
	}
	return []bench.Figure{f, st}
}

// emptyHookFloor times dd bare and with an empty program on sys_enter,
// interleaved, rounds times; it returns hooked/bare per round.
func emptyHookFloor(rounds int) (bench.Values, error) {
	var ratios bench.Values
	for range rounds {
		bare, err := ddTime(ddCount)
		if err != nil {
			return nil, err
		}
		detach, err := attachEmptyHook()
		if err != nil {
			return nil, err
		}
		hooked, err := ddTime(ddCount)
		detach()
		if err != nil {
			return nil, err
		}
		ratios = append(ratios, hooked/bare)
	}
	if len(ratios) == 0 {
		return nil, errors.New("no rounds")
	}
	return ratios, nil
}

// stracePinned times dd under strace -f with both on CPU 0, against bare
// dd, rounds times: a ptrace stop that has to wake the other CPU costs far
// more on this VM than one that stays on its CPU, so strace's ratio
// depends on how idle the machine is.
func stracePinned(rounds int) (bench.Values, error) {
	if _, err := exec.LookPath("taskset"); err != nil {
		return nil, errors.New("taskset is not installed (util-linux)")
	}
	const count = 20000
	var ratios bench.Values
	for range rounds {
		bare, err := ddTime(ddCount)
		if err != nil {
			return nil, err
		}
		traced, err := ddTime(count, "taskset", "-c", "0", "strace", "-f", "-o", "/dev/null", "--")
		if err != nil {
			return nil, err
		}
		ratios = append(ratios, traced*ddCount/count/bare)
	}
	return ratios, nil
}
