package sandbox

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dal-runtime/dal/internal/sysvirt"
)

// The syscall layer's cost per call, against the same loop run natively
// and in a sandbox without the layer, measured in the same run:
//
//	go test ./internal/sandbox -run '^$' -bench 'Virt' -benchtime 2s
//
// Each variant runs a C loop of b.N calls in a fresh process; its cost
// per call is (time of the run - time of a run of 0 calls) / b.N, so
// start-up is not counted.

// loopSource is the benchmarks' C loop: loop OP N makes N calls of OP.
const loopSource = `
#define _GNU_SOURCE
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <sys/sysinfo.h>
#include <sys/times.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv) {
	long n = atol(argv[2]), acc = 0;
	struct timespec ts;
	unsigned char buf[16];
	int zero = open("/dev/zero", O_RDONLY);

	if (getenv("LOOP_SECCOMP_FLOOR")) {
		/* The floor of any seccomp filter: one instruction, allow. */
		struct sock_filter allow = BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
		struct sock_fprog prog = {1, &allow};
		if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) || syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog))
			return 3;
	}

	for (long i = 0; i < n; i++) {
		if (!strcmp(argv[1], "clock")) {
			clock_gettime(CLOCK_REALTIME, &ts);
			acc += ts.tv_nsec;
		} else if (!strcmp(argv[1], "getrandom")) {
			if (getrandom(buf, sizeof buf, 0) != sizeof buf)
				return 1;
			acc += buf[0];
		} else if (!strcmp(argv[1], "getppid")) {
			acc += syscall(SYS_getppid);
		} else if (!strcmp(argv[1], "devzero")) {
			acc += read(zero, buf, sizeof buf);
		} else if (!strcmp(argv[1], "sysinfo")) {
			struct sysinfo si;
			if (sysinfo(&si) != 0)
				return 1;
			acc += si.procs;
		} else if (!strcmp(argv[1], "times")) {
			struct tms t;
			acc += times(&t) > 0;
		} else {
			return 2;
		}
	}
	printf("%ld\n", acc);
	return 0;
}
`

// buildLoop compiles loopSource into a directory of its own.
func buildLoop(tb testing.TB) string {
	tb.Helper()
	dir := tb.TempDir()
	src, bin := filepath.Join(dir, "loop.c"), filepath.Join(dir, "loop")
	if err := os.WriteFile(src, []byte(loopSource), 0o644); err != nil {
		tb.Fatal(err)
	}
	if out, err := exec.Command("gcc", "-O2", "-o", bin, src).CombinedOutput(); err != nil {
		tb.Fatalf("gcc: %v\n%s", err, out)
	}
	return bin
}

// strictLayer is what record serves in strict mode.
var strictLayer = sysvirt.Config{Clock: true, Random: true, Seed: 1, EpochNS: 1767225600e9, MonoNS: 1e9, QuantumNS: 1000}

// loopVariant is one way to run the loop.
type loopVariant struct {
	name string
	// sandbox runs the loop in a sandbox, under virt when enabled;
	// otherwise it runs natively with env added.
	sandbox bool
	virt    sysvirt.Config
	env     []string
}

// runLoop runs the loop binary bin for n calls of op in variant v and
// returns its wall time and output.
func runLoop(tb testing.TB, bin, op string, n int, v loopVariant) (time.Duration, string) {
	tb.Helper()
	argv := []string{bin, op, strconv.Itoa(n)}
	var cmd *exec.Cmd
	wait := func() error { return cmd.Wait() }
	if v.sandbox {
		cfg := newConfig(tb, nil)
		cfg.Binds = []string{filepath.Dir(bin)}
		cfg.Virtual = v.virt
		c, err := Command(cfg, argv, []string{"PATH=/usr/bin:/bin"}, cfg.Workspace)
		if err != nil {
			tb.Fatal(err)
		}
		cmd, wait = c.Cmd, c.Wait
	} else {
		cmd = exec.Command(argv[0], argv[1:]...)
		cmd.Env = append([]string{"PATH=/usr/bin:/bin"}, v.env...)
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	start := time.Now()
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	err := wait()
	d := time.Since(start)
	if err != nil {
		tb.Fatalf("%s %s %d: %v\n%s", v.name, op, n, err, errb.String())
	}
	return d, out.String()
}

// perCall measures variant v: the best of three runs of n calls, less the
// best of three runs of none, per call.
func perCall(tb testing.TB, bin, op string, n int, v loopVariant) float64 {
	best := func(n int) time.Duration {
		var m time.Duration
		for i := range 3 {
			d, _ := runLoop(tb, bin, op, n, v)
			if i == 0 || d < m {
				m = d
			}
		}
		return m
	}
	return float64(max(best(n)-best(0), 0)) / float64(n)
}

// benchLoop reports op's cost per call in every variant (metric
// "<variant>-ns/call") and the layer's against the first variant
// ("x-<first>"); ns/op is the layer's cost per call.
func benchLoop(b *testing.B, op string, variants []loopVariant) {
	bin := buildLoop(b)
	// Enough calls per run that start-up noise stays under the cost
	// measured: at least 20,000.
	n := max(b.N, 20000)
	costs := map[string]float64{}
	for _, v := range variants {
		costs[v.name] = perCall(b, bin, op, n, v)
	}
	base := variants[0].name
	for _, v := range variants {
		b.ReportMetric(costs[v.name], v.name+"-ns/call")
	}
	b.ReportMetric(costs["layer"], "ns/op")
	if costs[base] > 0 {
		b.ReportMetric(costs["layer"]/costs[base], "x-"+base)
	}
}

var (
	native  = loopVariant{name: "native"}
	inBox   = loopVariant{name: "sandbox", sandbox: true}
	layered = loopVariant{name: "layer", sandbox: true, virt: strictLayer}
	// floor runs natively under a one-instruction seccomp filter that
	// allows everything: what any filter costs a call.
	floor = loopVariant{name: "filter_floor", env: []string{"LOOP_SECCOMP_FLOOR=1"}}
	// slowLayer is strict mode without dal's vDSO: every read a round
	// trip to the supervisor (the path before it).
	slowLayer = loopVariant{name: "layer_novdso", sandbox: true, virt: func() sysvirt.Config {
		c := strictLayer
		c.NoVDSO = true
		return c
	}()}
)

// BenchmarkVirtClockRead: clock_gettime(CLOCK_REALTIME) served by dal's
// vDSO in strict mode, against the supervisor's round trip, the kernel's
// vDSO (native and in a plain sandbox) and libfaketime when installed.
func BenchmarkVirtClockRead(b *testing.B) {
	variants := []loopVariant{native, inBox, layered, slowLayer}
	if lib := faketimeLibrary(); lib != "" {
		variants = append(variants, loopVariant{name: "faketime", env: []string{"LD_PRELOAD=" + lib, "FAKETIME=@2026-01-01 00:00:00"}})
	}
	benchLoop(b, "clock", variants)
}

// faketimeLibrary is libfaketime's path, or "" when it is not installed.
func faketimeLibrary() string {
	matches, _ := filepath.Glob("/usr/lib/*/faketime/libfaketime.so.1")
	if len(matches) == 0 {
		return ""
	}
	return matches[0]
}

// BenchmarkVirtGetrandom16: getrandom of 16 bytes from the process's
// stream, against the kernel's.
func BenchmarkVirtGetrandom16(b *testing.B) {
	benchLoop(b, "getrandom", []loopVariant{native, inBox, layered, slowLayer})
}

// BenchmarkVirtSysinfo: sysinfo(2) answered by the supervisor in strict
// mode, against the kernel's.
func BenchmarkVirtSysinfo(b *testing.B) {
	benchLoop(b, "sysinfo", []loopVariant{native, inBox, layered})
}

// BenchmarkVirtTimes: times(2) answered by the supervisor in strict
// mode (its CPU times read from /proc), against the kernel's.
func BenchmarkVirtTimes(b *testing.B) {
	benchLoop(b, "times", []loopVariant{native, inBox, layered})
}

// BenchmarkVirtUnhandledGetppid: a call the layer does not handle pays
// the filter only (target: at most 1.2x native), against the floor of
// any seccomp filter.
func BenchmarkVirtUnhandledGetppid(b *testing.B) {
	benchLoop(b, "getppid", []loopVariant{native, floor, inBox, layered})
}

// BenchmarkVirtUnhandledReadDevZero: read(2) of 16 bytes of /dev/zero.
func BenchmarkVirtUnhandledReadDevZero(b *testing.B) {
	benchLoop(b, "devzero", []loopVariant{native, inBox, layered})
}

// TestVirtLoopIsServed: the benchmarks' loop really is served by the
// layer: its clock reads are virtual and its getrandom bytes the seed's.
func TestVirtLoopIsServed(t *testing.T) {
	t.Parallel()
	bin := buildLoop(t)
	// 3 reads on the virtual clock: nanoseconds 1000 + 2000 + 3000.
	for _, v := range []loopVariant{layered, slowLayer} {
		if _, out := runLoop(t, bin, "clock", 3, v); strings.TrimSpace(out) != "6000" {
			t.Errorf("3 clock reads under the %s sum to %q ns, want 6000", v.name, strings.TrimSpace(out))
		}
	}
	_, a := runLoop(t, bin, "getrandom", 50, layered)
	_, b := runLoop(t, bin, "getrandom", 50, layered)
	reseeded := layered
	reseeded.virt.Seed = 2
	_, c := runLoop(t, bin, "getrandom", 50, reseeded)
	if a != b || a == c {
		t.Errorf("getrandom under the layer: seed 1 gave %q then %q, seed 2 %q", a, b, c)
	}
	if _, out := runLoop(t, bin, "getppid", 4, layered); strings.TrimSpace(out) != "4" {
		t.Errorf("getppid in the sandbox returned %q summed over 4 calls, want 4 (the init is pid 1)", out)
	}
}
