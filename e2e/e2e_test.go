// Package e2e runs the built dal-exec and dald binaries the way a user does.
package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dal-runtime/dal/internal/wire"
	"github.com/dal-runtime/dal/vclock"
)

// bin are the binaries the tests run. dal-sandbox-init is built beside
// dal-exec, which starts its sandboxes' init from it (sidecar_test.go
// runs dal-exec without it), and so is dal-exec-full, which dal-exec hands
// the commands that evaluate a policy.
var bin struct{ exec, full, sidecar, dald, goagent, goclient string }

// binDirEnv names the directory of binaries a test that runs this test
// binary again (in namespaces of its own, say) hands down, so that the
// child does not build them again.
const binDirEnv = "DAL_E2E_BIN_DIR"

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		fmt.Println("e2e: every test skipped under -short (testing.Short()): they build dal's binaries and run them end to end (make test runs them)")
		os.Exit(0)
	}
	dir, given := os.Getenv(binDirEnv), true
	if dir == "" {
		given = false
		var err error
		if dir, err = os.MkdirTemp("", "dal-e2e-"); err != nil {
			panic(err)
		}
	}
	for _, b := range []struct {
		out       *string
		name, pkg string
	}{
		{&bin.exec, "dal-exec", "../cmd/dal-exec"}, {&bin.full, "dal-exec-full", "../cmd/dal-exec-full"}, {&bin.sidecar, "dal-sandbox-init", "../cmd/dal-sandbox-init"}, {&bin.dald, "dald", "../cmd/dald"}, {&bin.goagent, "goagent", "./testdata/goagent"},
		{&bin.goclient, "goclient", "./testdata/goclient"},
	} {
		*b.out = filepath.Join(dir, b.name)
		if given {
			continue
		}
		cmd := exec.Command("go", "build", "-o", *b.out, b.pkg)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "build %s: %v\n%s", b.pkg, err, out)
			os.Exit(1)
		}
	}
	code := m.Run()
	if !given {
		os.RemoveAll(dir)
	}
	os.Exit(code)
}

type result struct {
	code           int
	stdout, stderr string
}

// dalExec runs dal-exec with args and extra environment, with its own TMPDIR
// so a test can check that nothing is left behind.
func dalExec(t *testing.T, env []string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin.exec, args...)
	cmd.Env = append(os.Environ(), env...)
	return runCmd(t, cmd)
}

// hangGuard ends a dal-exec command that hangs. It bounds no figure: a
// 12-run consistency evaluation on a loaded 2-CPU machine (load 30) took
// more than a minute, which the guard's earlier 60 s called a failure.
const hangGuard = 5 * time.Minute

// runCmd runs cmd and returns its exit code and output; a command that
// cannot be run at all fails the test.
func runCmd(t *testing.T, cmd *exec.Cmd) result {
	t.Helper()
	var so, se bytes.Buffer
	cmd.Stdout, cmd.Stderr = &so, &se
	err := cmd.Run()
	r := result{stdout: so.String(), stderr: se.String()}
	if ee, ok := err.(*exec.ExitError); ok {
		r.code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("%v: %v", cmd.Args, err)
	}
	return r
}

func TestExitCodeIsTheAgents(t *testing.T) {
	t.Parallel()
	if r := dalExec(t, nil, "run", "--", "sh", "-c", "exit 7"); r.code != 7 {
		t.Fatalf("exit %d, want 7 (%s)", r.code, r.stderr)
	}
	r := dalExec(t, nil, "run", "--", "sh", "-c", "kill -TERM $$")
	if r.code != 128+15 || !strings.Contains(r.stderr, "killed by signal terminated") {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
}

// TestKilledInitIsNotTheAgents: when the sandbox's init is killed from
// outside (the OOM killer, a kill -9 of the wrong pid), dal-exec says so
// instead of reporting the agent killed by that signal.
func TestKilledInitIsNotTheAgents(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin.exec, "run", "--", "sh", "-c", "echo ready; read x; echo read")
	in, err := cmd.StdinPipe() // held open: the agent waits on it
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if l, _ := bufio.NewReader(out).ReadString('\n'); l != "ready\n" {
		cmd.Process.Kill()
		t.Fatalf("the agent said %q, want ready (%s)", l, stderr.String())
	}
	// dal-exec's one child is the sandbox's init.
	var kids []string
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", cmd.Process.Pid))
	for _, task := range tasks {
		b, _ := os.ReadFile(task)
		kids = append(kids, strings.Fields(string(b))...)
	}
	if len(kids) != 1 {
		cmd.Process.Kill()
		t.Fatalf("dal-exec has children %v, want the sandbox's init alone", kids)
	}
	pid, _ := strconv.Atoi(kids[0])
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	err = cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 128+9 {
		t.Errorf("dal-exec: %v, want exit code 137", err)
	}
	if s := stderr.String(); !strings.Contains(s, "the sandbox's init was killed by signal killed") || strings.Contains(s, "the agent was killed") {
		t.Errorf("dal-exec said %q, want that the sandbox's init was killed, not the agent", s)
	}
}

// TestExitedChildIsNotLeftRunning: a shell that execs dal-exec record hands it
// the children it had, here the writer of a process substitution, which
// has exited by the agent's end; dal-exec reaps it and does not report it
// as a process the agent left running. The agent reads the substitution
// through the descriptor the shell passed.
func TestExitedChildIsNotLeftRunning(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// Whether the writer is still unreaped when the agent ends is up to
	// the scheduler (one run in two or three here): six runs.
	for range 6 {
		cmd := exec.CommandContext(ctx, "bash", "-c", `exec "$0" record --no-apply --out "$1" -- cat <(echo substituted)`, bin.exec, filepath.Join(t.TempDir(), "b"))
		cmd.Dir = t.TempDir()
		r := runCmd(t, cmd)
		if r.code != 0 || r.stdout != "substituted\n" || strings.Contains(r.stderr, "leaving") {
			t.Fatalf("exit %d, stdout %q, stderr %q: want the substitution read and nothing reported left running", r.code, r.stdout, r.stderr)
		}
	}
}

// TestInheritedChildIsNotTheAgents: a child dal-exec started with (the
// writer of a process substitution, still running when the agent ends)
// is not the agent's: dal-exec neither kills it nor reports it left.
func TestInheritedChildIsNotTheAgents(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", `exec "$0" record --no-apply --out "$1" -- head -1 <(echo $BASHPID; exec sleep 60 2>/dev/null)`, bin.exec, filepath.Join(t.TempDir(), "b"))
	cmd.Dir = t.TempDir()
	r := runCmd(t, cmd)
	pid, err := strconv.Atoi(strings.TrimSpace(r.stdout))
	if r.code != 0 || err != nil {
		t.Fatalf("exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	syscall.Kill(pid, syscall.SIGKILL)
	if err != nil || strings.Contains(string(b), ") Z ") {
		t.Errorf("the substitution's writer (pid %d) did not outlive dal-exec: %q %v", pid, b, err)
	}
	if strings.Contains(r.stderr, "leaving") {
		t.Errorf("dal-exec counted its caller's process as the agent's: %q", r.stderr)
	}
}

// TestRunFlagsReachTheEarlySandbox: dal-exec starts a run's sandbox before
// it parses its command line (runner.Speculate), and tells the init the
// syscall layer's configuration later: the seed given as --seed N,
// --seed=N or DAL_SEED gives the same bytes, another seed other ones, and
// --epoch sets the clock. A command line that fails to parse after the
// sandbox started ends it and says why.
func TestRunFlagsReachTheEarlySandbox(t *testing.T) {
	t.Parallel()
	probe := []string{"--", "sh", "-c", "head -c 8 /dev/urandom | od -An -tx1; date +%s"}
	run := func(env []string, flags ...string) string {
		t.Helper()
		r := dalExec(t, env, append(append([]string{"run"}, flags...), probe...)...)
		if r.code != 0 {
			t.Fatalf("run %v: exit %d: %s", flags, r.code, r.stderr)
		}
		return r.stdout
	}
	five := run(nil, "--seed", "5")
	if again := run(nil, "--seed=5"); again != five {
		t.Errorf("--seed=5 printed %q, --seed 5 %q", again, five)
	}
	if env := run([]string{"DAL_SEED=5"}); env != five {
		t.Errorf("DAL_SEED=5 printed %q, --seed 5 %q", env, five)
	}
	six := run(nil, "--seed", "6", "--mode", "strict")
	a, b := strings.Split(five, "\n"), strings.Split(six, "\n")
	if len(a) < 2 || len(b) < 2 || a[0] == b[0] || a[1] != b[1] {
		t.Errorf("seeds 5 and 6 printed %q and %q: want other random bytes at the same time", five, six)
	}
	if later := run(nil, "--epoch", "2030-01-02T00:00:00Z"); !strings.HasSuffix(later, "\n1893542400\n") {
		t.Errorf("--epoch 2030-01-02 printed %q, want the clock at 1893542400", later)
	}
	r := dalExec(t, nil, "run", "--seed", "nope", "--", "true")
	if r.code != 2 || !strings.Contains(r.stderr, "seed") {
		t.Errorf("--seed nope: exit %d, stderr %q; want a usage error about the seed", r.code, r.stderr)
	}
}

func envOf(out string) map[string]string {
	m := map[string]string{}
	for _, l := range strings.Split(out, "\n") {
		if k, v, ok := strings.Cut(l, "="); ok {
			m[k] = v
		}
	}
	return m
}

func TestEnvironmentIsScrubbedWithGuardRails(t *testing.T) {
	t.Parallel()
	r := dalExec(t, []string{"FOO_TOKEN=secret", "BAR=1", "KEEP_A=a", "KEEP_B=b"},
		"run", "--seed", "42", "--keep-env", "BAR", "--keep-env", "KEEP_*", "--", "env")
	env := envOf(r.stdout)
	if _, ok := env["FOO_TOKEN"]; ok {
		t.Error("FOO_TOKEN leaked into the agent's environment")
	}
	for k, want := range map[string]string{
		"BAR": "1", "KEEP_A": "a", "KEEP_B": "b",
		"AGENT_DETERMINISTIC": "1", "AGENT_EXECUTION_MODE": "strict", "AGENT_SEED": "42",
		"GOMAXPROCS": "1", "PYTHONHASHSEED": "42", "UV_THREADPOOL_SIZE": "1",
		"JAVA_TOOL_OPTIONS": "-XX:ActiveProcessorCount=1", "OMP_NUM_THREADS": "1",
		"TZ": "UTC", "LC_ALL": "C.UTF-8", "SOURCE_DATE_EPOCH": "1767225600", "DAL_STREAM": "0",
	} {
		if env[k] != want {
			t.Errorf("%s=%q, want %q", k, env[k], want)
		}
	}
	for _, k := range []string{"AGENT_CLOCK_FILE", "DAL_SOCKET", "DAL_SESSION", "PYTHONPATH", "NODE_OPTIONS"} {
		if env[k] == "" {
			t.Errorf("%s is not set", k)
		}
	}
	// Flags read DAL_* variables.
	r = dalExec(t, []string{"DAL_MODE=seeded", "DAL_SEED=9", "DAL_KEEP_ENV=BAR", "BAR=2"}, "run", "--", "env")
	env = envOf(r.stdout)
	if env["AGENT_EXECUTION_MODE"] != "seeded" || env["AGENT_SEED"] != "9" || env["BAR"] != "2" {
		t.Errorf("DAL_* variables ignored: mode %q seed %q BAR %q", env["AGENT_EXECUTION_MODE"], env["AGENT_SEED"], env["BAR"])
	}
}

// TestPinnedToOneCPUByDefault: the agent and what it starts run on one
// CPU; in a strict run's sandbox, whose init pins the agent, the init (the
// syscall layer's supervisor) keeps dal-exec's CPUs.
func TestPinnedToOneCPUByDefault(t *testing.T) {
	t.Parallel()
	grep := []string{"--", "grep", "Cpus_allowed_list", "/proc/self/status"}
	r := dalExec(t, nil, append([]string{"run"}, grep...)...)
	if f := strings.Fields(r.stdout); len(f) != 2 || strings.ContainsAny(f[1], ",-") {
		t.Fatalf("default pinning: %q", r.stdout)
	}
	self, _ := os.ReadFile("/proc/self/status")
	r = dalExec(t, nil, "run", "--", "sh", "-c", "sh -c 'grep Cpus_allowed_list /proc/self/status'; grep Cpus_allowed_list /proc/1/status")
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) != 2 || strings.ContainsAny(strings.Fields(lines[0])[1], ",-") || !strings.Contains(string(self), lines[1]) {
		t.Errorf("the agent's child and the sandbox's init have %q: want one CPU, and dal-exec's CPUs", r.stdout)
	}
	r = dalExec(t, nil, append([]string{"run", "--cpus", "all"}, grep...)...)
	if !strings.Contains(string(self), strings.TrimSpace(r.stdout)) {
		t.Fatalf("--cpus all: agent has %q", r.stdout)
	}
}

func TestTimeoutKillsTheWholeTree(t *testing.T) {
	t.Parallel()
	marker := fmt.Sprintf("%d.%d", time.Now().UnixNano()%1000, os.Getpid())
	// A child in the group, a grandchild that escapes with setsid, and the
	// agent itself, all busy (a sleep would take no real time in strict
	// mode).
	loop := "while :; do :; done"
	script := fmt.Sprintf("sh -c '%s' spin1%s & setsid sh -c '%s' spin2%s & sh -c '%s' spin3%s", loop, marker, loop, marker, loop, marker)
	r := dalExec(t, nil, "run", "--timeout", "300ms", "--", "sh", "-c", script)
	if r.code != 124 || !strings.Contains(r.stderr, "--timeout 300ms reached") {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
	if out, _ := exec.Command("pgrep", "-f", "spin[123]"+marker).Output(); len(out) > 0 {
		t.Fatalf("processes survived the timeout: %s", out)
	}
}

func TestLeftoverProcessesAreKilled(t *testing.T) {
	t.Parallel()
	marker := fmt.Sprintf("7%d", os.Getpid())
	r := dalExec(t, nil, "run", "--", "sh", "-c", "setsid sh -c 'while :; do :; done' spin"+marker+" & echo started")
	if r.code != 0 || !strings.Contains(r.stderr, "leaving 1 process running; it was killed") {
		t.Fatalf("exit %d stderr %q", r.code, r.stderr)
	}
	if out, _ := exec.Command("pgrep", "-f", "spin"+marker).Output(); len(out) > 0 {
		t.Fatalf("orphan survived: %s", out)
	}
}

func TestBadInputIsOneSentenceAndExit2(t *testing.T) {
	t.Parallel()
	other := fakeOtherVersionDald(t)
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"unknown mode", []string{"run", "--mode", "fast", "--", "true"}, "unknown mode \"fast\": use strict, seeded, logged or default"},
		{"bad seed", []string{"run", "--seed", "seven", "--", "true"}, "seed \"seven\" is not an integer"},
		{"negative seed", []string{"run", "--seed", "-3", "--", "true"}, "is not an integer in [0, 2^64)"},
		{"bad epoch", []string{"run", "--epoch", "yesterday", "--", "true"}, "is not an RFC 3339 time"},
		{"bad cpus", []string{"run", "--cpus", "3-1", "--", "true"}, "cpu list \"3-1\""},
		{"no command", []string{"run"}, "no command given"},
		{"missing command", []string{"run", "--", "no-such-agent-binary"}, "command \"no-such-agent-binary\" not found"},
		{"no daemon", []string{"run", "--socket", "/nonexistent/dald.sock", "--", "true"}, "no dald answers at /nonexistent/dald.sock"},
		{"other version", []string{"run", "--socket", other, "--", "true"}, "speaks protocol 99 (release 9.9.9), this build speaks 1"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tmp := t.TempDir()
			r := dalExec(t, []string{"TMPDIR=" + tmp}, tc.args...)
			lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
			if r.code != 2 || len(lines) != 1 || !strings.Contains(r.stderr, tc.want) {
				t.Fatalf("exit %d, stderr %q; want exit 2 and one line containing %q", r.code, r.stderr, tc.want)
			}
			if left, _ := os.ReadDir(tmp); len(left) > 0 && !(len(left) == 1 && strings.HasPrefix(left[0].Name(), "dal-shims")) {
				t.Fatalf("left behind in TMPDIR: %v", left)
			}
		})
	}
}

// fakeOtherVersionDald answers hello the way a dald of protocol 99 would.
// It stands in for a release that does not exist yet.
func fakeOtherVersionDald(t *testing.T) string {
	path := filepath.Join(t.TempDir(), "other.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			body, err := wire.ReadFrame(c, wire.DefaultMaxFrame)
			if err == nil {
				req, _ := wire.DecodeRequest(body)
				rep, _ := wire.Encode(&wire.Reply{ID: req.ID, Proto: 99, Version: "9.9.9", Err: "this dald speaks protocol 99"})
				wire.WriteFrame(c, rep, wire.DefaultMaxFrame)
			}
			c.Close()
		}
	}()
	return path
}

func TestGoAgentIsReproducible(t *testing.T) {
	t.Parallel()
	a := dalExec(t, nil, "run", "--seed", "7", "--", bin.goagent, "rand")
	b := dalExec(t, nil, "run", "--seed", "7", "--", bin.goagent, "rand")
	c := dalExec(t, nil, "run", "--seed", "8", "--", bin.goagent, "rand")
	if a.stdout == "" || a.stdout != b.stdout || a.stdout == c.stdout {
		t.Fatalf("seed 7: %q and %q; seed 8: %q", a.stdout, b.stdout, c.stdout)
	}
	r := dalExec(t, nil, "run", "--", bin.goagent, "spawn")
	if r.stdout != "parent 0\nchild 0.1\nchild 0.2\n" {
		t.Fatalf("spawn naming: %q %s", r.stdout, r.stderr)
	}
}

func TestSeededTicksAreRecordedAndServedBack(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	clock := filepath.Join(dir, "clock.json")
	rec := dalExec(t, nil, "run", "--mode", "seeded", "--clock-out", clock, "--", bin.goagent, "clock", "3")
	f, err := vclock.ReadFile(clock)
	if err != nil || rec.code != 0 {
		t.Fatalf("clock log: %v (%s)", err, rec.stderr)
	}
	if len(f.Streams) != 1 || len(f.Streams[0].Ticks.Values) != 3 || f.Streams[0].Ticks.Kinds != "rrr" || !f.Streams[0].Reported {
		t.Fatalf("recorded %+v", f.Streams)
	}
	if first := time.Unix(0, f.Streams[0].Ticks.Values[0]); time.Since(first) > time.Minute || time.Since(first) < 0 {
		t.Fatalf("seeded mode logged %v, not the real time", first)
	}
	// Served back: the same output, though real time has moved on.
	rep := dalExec(t, nil, "run", "--mode", "seeded", "--replay-clock", clock, "--", bin.goagent, "clock", "3")
	if rep.stdout != rec.stdout || rep.stderr != "" {
		t.Fatalf("replay printed %q (stderr %q), recording %q", rep.stdout, rep.stderr, rec.stdout)
	}
	// Reading past the end is drift, reported, and the run stays deterministic.
	over := dalExec(t, nil, "run", "--mode", "seeded", "--replay-clock", clock, "--", bin.goagent, "clock", "5")
	if !strings.HasPrefix(over.stdout, rec.stdout) || !strings.Contains(over.stderr, "dal: drift in stream 0 (clock): clock read 4 is past the 3 recorded ticks") {
		t.Fatalf("over-read: stdout %q stderr %q", over.stdout, over.stderr)
	}
	var raw map[string]any
	b, _ := os.ReadFile(clock)
	if json.Unmarshal(b, &raw) != nil || raw["version"] != float64(1) {
		t.Fatalf("clock.json is not versioned JSON: %s", b)
	}
}

func TestExternalDald(t *testing.T) {
	t.Parallel()
	sock := filepath.Join(t.TempDir(), "dald.sock")
	// A stale socket from a crashed daemon is replaced.
	ln, _ := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
	ln.SetUnlinkOnClose(false)
	ln.Close()
	d := exec.Command(bin.dald, "--socket", sock, "--metrics-addr", "127.0.0.1:0")
	var dlog bytes.Buffer
	d.Stderr = &dlog
	if err := d.Start(); err != nil {
		t.Fatal(err)
	}
	// Never leave a daemon (and its eBPF programs) behind a failed test.
	t.Cleanup(func() { d.Process.Kill() })
	waitFor(t, func() bool {
		c, err := net.Dial("unix", sock)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	// A second daemon refuses a live socket.
	if out, err := exec.Command(bin.dald, "--socket", sock).CombinedOutput(); err == nil || !strings.Contains(string(out), "already listening") {
		t.Fatalf("second dald: %v %s", err, out)
	}
	r := dalExec(t, nil, "run", "--socket", sock, "--seed", "7", "--", bin.goagent, "rand")
	e := dalExec(t, nil, "run", "--seed", "7", "--", bin.goagent, "rand")
	if r.code != 0 || r.stdout != e.stdout {
		t.Fatalf("external dald run %q (%s), embedded %q", r.stdout, r.stderr, e.stdout)
	}
	st := dalExec(t, nil, "status", "--socket", sock)
	if st.code != 0 || !strings.Contains(st.stdout, "(protocol 1)") || !strings.Contains(st.stdout, "0 open sessions") ||
		!strings.Contains(st.stdout, "boundary tracing on (eBPF)") {
		t.Fatalf("status: %d %q %q", st.code, st.stdout, st.stderr)
	}
	d.Process.Signal(syscall.SIGTERM)
	if err := d.Wait(); err != nil {
		t.Fatalf("dald exit after SIGTERM: %v\n%s", err, dlog.String())
	}
	if _, err := os.Stat(sock); !os.IsNotExist(err) {
		t.Fatal("dald left its socket behind")
	}
}

func TestDaldUnwritableSocket(t *testing.T) {
	t.Parallel()
	out, err := exec.Command(bin.dald, "--socket", "/proc/1/dald.sock").CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || !strings.Contains(string(out), "pick a --socket path") {
		t.Fatalf("%v: %s", err, out)
	}
}

func waitFor(t *testing.T, ok func() bool) {
	t.Helper()
	for range 500 {
		if ok() {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("condition not met in 5 s")
}

func TestStrictReplayComparesTheTimerSchedule(t *testing.T) {
	t.Parallel()
	clock := filepath.Join(t.TempDir(), "clock.json")
	rec := dalExec(t, nil, "run", "--clock-out", clock, "--", "python3", "testdata/timers.py", "4")
	if rec.stdout != "['b', 'c', 'a', 'd'] 1767225603.000002\n" {
		t.Fatalf("recording printed %q (%s)", rec.stdout, rec.stderr)
	}
	f, err := vclock.ReadFile(clock)
	if err != nil || len(f.Streams) != 1 || len(f.Streams[0].Timers) < 4 {
		t.Fatalf("clock log %+v %v", f, err)
	}
	same := dalExec(t, nil, "run", "--replay-clock", clock, "--", "python3", "testdata/timers.py", "4")
	if same.stdout != rec.stdout || same.stderr != "" {
		t.Fatalf("same agent: %q %q", same.stdout, same.stderr)
	}
	other := dalExec(t, nil, "run", "--replay-clock", clock, "--", "python3", "testdata/timers.py", "3")
	if !strings.Contains(other.stderr, "dal: drift in stream 0 (timers): timer firing 4 was") {
		t.Fatalf("changed schedule not reported: %q", other.stderr)
	}
}

func TestAnUnshimmedInterpreterIsReported(t *testing.T) {
	t.Parallel()
	r := dalExec(t, nil, "run", "--", "python3", "-I", "-c", "pass")
	if r.code != 0 || !strings.Contains(r.stderr, "python3 never loaded the dal shim") {
		t.Fatalf("%d %q", r.code, r.stderr)
	}
	if r := dalExec(t, nil, "run", "--", "python3", "-c", "pass"); strings.Contains(r.stderr, "never loaded") {
		t.Fatalf("false alarm: %q", r.stderr)
	}
}
