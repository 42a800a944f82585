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

	// Per syscall: with dald's tracer open and no traced session (what
	// every process on the machine pays between sessions) against no dald
	// at all; inside a session against an empty program on the same hook.
	bare := syscall.values("BenchmarkSyscall", "bare-ns/syscall")
	idle := syscall.values("BenchmarkSyscall", "idle-added-ns")
	idleX := syscall.values("BenchmarkSyscall", "idle-x")
	outside := syscall.values("BenchmarkSyscall", "outside-added-ns")
	tracked := syscall.values("BenchmarkSyscall", "tracked-added-ns")
	trackedVsHook := syscall.values("BenchmarkSyscall", "tracked-vs-hook-x")
	if len(bare) == 0 || len(idle) == 0 || len(hookAdded) == 0 || len(trackedVsHook) == 0 {
		figs = append(figs, notMeasured(name+": per syscall", "BenchmarkSyscall printed no results (see the log above)"))
	} else {
		u := idle.Median()
		f := bench.Figure{Name: "eBPF: per syscall, dald running with no traced session", Cost: bench.CostTime,
			Value:    fmt.Sprintf("%.2fx no dald (%+.0f ns)", idleX.Median(), u),
			Baseline: fmt.Sprintf("no dald, getppid %.0f ns", bare.Median()),
			Target:   "nothing measurable (at most 5 ns added)", Verdict: verdict(u <= 5),
			Detail: fmt.Sprintf("n=%d, each the best of 5 rounds of 300,000 getppid; the tracer open, its programs detached until a session is traced: added ns %s, %s no dald; for comparison an empty sys_enter program adds %s ns, and while another process's session is traced this process (outside it) pays %s ns (min / median / max)",
				len(idle), idle.Spread("%.0f"), idleX.Spread("%.3fx"), hookAdded.Spread("%.0f"), outside.Spread("%.0f"))}
		f.SetRatios(idleX)
		figs = append(figs, f)
		g := bench.Figure{Name: "eBPF: per syscall inside a session, against an empty program on the same hook", Cost: bench.CostTime,
			Value:    fmt.Sprintf("%.2fx the empty hook", trackedVsHook.Median()),
			Baseline: fmt.Sprintf("an empty sys_enter program, getppid %.0f ns", bare.Median()+hookAdded.Median()),
			Target:   "at most 1.15x", Verdict: verdict(trackedVsHook.Median() <= 1.15),
			Detail: fmt.Sprintf("n=%d, each the best of 5 rounds of 300,000 getppid counted in a session; tracked/empty hook %s; added over bare: tracked %s ns, empty hook %s ns (min / median / max)",
				len(trackedVsHook), trackedVsHook.Spread("%.3fx"), tracked.Spread("%.0f"), hookAdded.Spread("%.0f"))}
		g.SetRatios(trackedVsHook)
		figs = append(figs, g)
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
		f := bench.Figure{Name: "eBPF: Open (load, verify, attach once to check)", Value: fmt.Sprintf("%.1f ms", v.Median()/1e6),
			Detail: fmt.Sprintf("n=%d x 20 opens; %s (min / median / max)", len(v), bench.Values{v.Min() / 1e6, v.Median() / 1e6, v.Max() / 1e6}.Spread("%.1f ms"))}
		if c := op.values("BenchmarkOpen", "close-ms"); len(c) > 0 {
			f.Detail += fmt.Sprintf("; Close %.0f ms", c.Median())
		}
		figs = append(figs, f)
	} else {
		figs = append(figs, notMeasured(name+": Open", "BenchmarkOpen printed no results (see the log above)"))
	}

	at := run("^BenchmarkAttach$", "20x")
	if a, d := at.values("BenchmarkAttach", "track-attaching-us"), at.values("BenchmarkAttach", "forget-detaching-us"); len(a) > 0 && len(d) > 0 {
		f := bench.Figure{Name: "eBPF: attaching on demand, the first traced session's start and the last one's end",
			Value:    fmt.Sprintf("+%.1f ms at the first Track, %.2f ms at the last Forget", (a.Median()-at.values("BenchmarkAttach", "track-attached-us").Median())/1000, d.Median()/1000),
			Baseline: "Track and Forget while another session keeps the programs attached",
			Detail: fmt.Sprintf("n=%d x 20 pairs of sessions; Track that attaches %s µs, Track while attached %s µs; Forget that detaches %s µs, Forget while attached %s µs (min / median / max)",
				len(a), a.Spread("%.0f"), at.values("BenchmarkAttach", "track-attached-us").Spread("%.0f"), d.Spread("%.0f"), at.values("BenchmarkAttach", "forget-attached-us").Spread("%.0f"))}
		figs = append(figs, f)
	} else {
		figs = append(figs, notMeasured(name+": attach on demand", "BenchmarkAttach printed no results (see the log above)"))
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

// ddFigures reads BenchmarkDD: bare, an empty sys_enter program, the
// tracer open with no session, dd tracked, strace -f; dd's own timing.
func ddFigures(runs benchRuns) []bench.Figure {
	bare := runs.values("BenchmarkDD", "bare-s")
	hook := runs.values("BenchmarkDD", "empty-hook-x")
	idle := runs.values("BenchmarkDD", "idle-x")
	tracked := runs.values("BenchmarkDD", "tracked-x")
	vsHook := runs.values("BenchmarkDD", "tracked-vs-hook-x")
	overHook := runs.values("BenchmarkDD", "tracked-over-hook-ns/syscall")
	strace := runs.values("BenchmarkDD", "strace-x")
	if len(bare) == 0 || len(tracked) == 0 || len(vsHook) == 0 || len(strace) == 0 {
		return []bench.Figure{notMeasured("eBPF: dd bs=1", "BenchmarkDD printed no results (see the log above)")}
	}
	v := vsHook.Median()
	f := bench.Figure{Name: "eBPF: dd bs=1 count=1000000 tracked in a session, against an empty program on the same hook", Cost: bench.CostTime,
		Value:    fmt.Sprintf("%.2fx the empty hook", v),
		Baseline: fmt.Sprintf("dd with an empty sys_enter program, %.2fx bare dd %.2f s (dd's own timing)", hook.Median(), bare.Median()),
		Target:   "at most 1.15x", Verdict: verdict(v <= 1.15),
		Detail: fmt.Sprintf("n=%d, each round interleaved; tracked/empty hook %s, %s ns per syscall over the hook; against bare dd: tracked %s, empty hook %s, the tracer open with no session %s (min / median / max)",
			len(vsHook), vsHook.Spread("%.3fx"), overHook.Spread("%+.1f"), tracked.Spread("%.2fx"), hook.Spread("%.2fx"), idle.Spread("%.3fx"))}
	f.SetRatios(vsHook)
	t := tracked.Median()
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
