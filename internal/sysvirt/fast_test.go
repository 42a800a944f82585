package sysvirt

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// These tests run programs under the tracer alone (no sandbox, no seccomp
// filter): what they read comes from dal's vDSO or from the kernel.

// testCfg is strict mode's clock with round numbers.
var testCfg = Config{Clock: true, Random: true, Seed: 1, EpochNS: 1767225600e9, MonoNS: 1e9, QuantumNS: 1000}

// traced runs argv under a supervisor for cfg, traced from a locked
// thread as the sandbox's init does, and returns its output and counts.
func traced(t *testing.T, cfg Config, argv ...string) (string, Counts) {
	t.Helper()
	out, err := os.CreateTemp(t.TempDir(), "out")
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	s := New(cfg, -1)
	done := make(chan int)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Stdout, cmd.Stderr = out, out
		cmd.SysProcAttr = &syscall.SysProcAttr{Ptrace: true}
		if err := cmd.Start(); err != nil {
			t.Error(err)
			done <- -1
			return
		}
		done <- s.Trace(cmd.Process.Pid)
	}()
	code := <-done
	b, err := os.ReadFile(out.Name())
	if err != nil {
		t.Fatal(err)
	}
	if code != 0 {
		t.Fatalf("%s exited %d:\n%s", argv[0], code, b)
	}
	return string(b), s.Counts()
}

func buildC(t *testing.T, src string, static bool) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), strings.TrimSuffix(filepath.Base(src), ".c"))
	args := []string{"-O2", "-o", bin, src}
	if static {
		args = append(args, "-static")
	}
	if out, err := exec.Command("gcc", args...).CombinedOutput(); err != nil {
		t.Fatalf("gcc %v: %v\n%s", args, err, out)
	}
	return bin
}

// TestVDSOServesCAndStaticC: glibc, dynamic and -static, reads every clock
// from dal's vDSO, one quantum per read, in the order the program reads;
// a forked child starts at its parent's base with reads of its own; a new
// image goes on from its process's clock; CPU-time clocks stay real.
func TestVDSOServesCAndStaticC(t *testing.T) {
	for _, static := range []bool{false, true} {
		bin := buildC(t, "testdata/clocks.c", static)
		got, counts := traced(t, testCfg, bin)
		e, m := strconv.FormatInt(testCfg.EpochNS/1e9, 10), int64(1e9)
		want := strings.Join([]string{
			"first realtime " + strconv.FormatInt(testCfg.EpochNS+1000, 10),
			"first monotonic " + strconv.FormatInt(m+2000, 10),
			"first gettimeofday " + e + ".000003",
			"first time " + e,
			"first cputime_real 1",
			"child realtime " + strconv.FormatInt(testCfg.EpochNS+1000, 10),
			"parent realtime " + strconv.FormatInt(testCfg.EpochNS+5000, 10),
			// The new image's clock goes on from the reads counted at
			// the fork (4): the read after it is not seen before the
			// exec (doc.go, Limits).
			"again realtime " + strconv.FormatInt(testCfg.EpochNS+5000, 10),
			"again monotonic " + strconv.FormatInt(m+6000, 10),
			"again gettimeofday " + e + ".000007",
			"again time " + e,
			"again cputime_real 1",
		}, "\n") + "\n"
		if got != want {
			t.Errorf("static=%v: got\n%s\nwant\n%s", static, got, want)
		}
		// Reads counted at exits: the child's 1, the new image's 4.
		if n := counts.Served[Clock]; n < 9 {
			t.Errorf("static=%v: %d clock reads counted as served, want at least 9 (%+v)", static, n, counts)
		}
		if counts.Unpatched != 0 || len(counts.Escapes) != 0 {
			t.Errorf("static=%v: counts %+v", static, counts)
		}
	}
}

// TestVDSOSlowPathIsTheOldOne: with NoVDSO the kernel's vDSO is hidden and
// nothing serves the reads here (no filter): they are real.
func TestVDSOSlowPathIsTheOldOne(t *testing.T) {
	cfg := testCfg
	cfg.NoVDSO = true
	bin := buildC(t, "testdata/clocks.c", false)
	got, _ := traced(t, cfg, bin)
	if strings.Contains(got, strconv.FormatInt(testCfg.EpochNS/1e9, 10)) {
		t.Errorf("with NoVDSO and no filter the clock is still virtual:\n%s", got)
	}
}

// TestVDSOServesGo: the Go runtime (CGO_ENABLED=0), which parses the vDSO
// itself and wants its LINUX_2.6 version, reads dal's clock: wall time at
// the epoch, 1,000 reads taking about 1 ms of virtual time.
func TestVDSOServesGo(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "goclock")
	cmd := exec.Command("go", "build", "-o", bin, "./testdata/goclock")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	got, counts := traced(t, testCfg, bin)
	if want := strconv.FormatInt(testCfg.EpochNS/1e9, 10) + " true true\n"; got != want {
		t.Errorf("goclock printed %q, want %q", got, want)
	}
	if n := counts.Served[Clock]; n < 1000 {
		t.Errorf("%d clock reads counted as served, want at least the loop's 1,000", n)
	}
}
