package e2e

import (
	"bufio"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/dal-runtime/dal/internal/promtest"
)

// startDald runs bin/dald on a private socket with metrics on a free port
// and returns the socket and the metrics URL.
func startDald(t *testing.T) (sock, metricsURL string) {
	t.Helper()
	sock = filepath.Join(t.TempDir(), "dald.sock")
	d := exec.Command(bin.dald, "--socket", sock, "--metrics-addr", "127.0.0.1:0")
	stderr, _ := d.StderrPipe()
	if err := d.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Process.Signal(os.Interrupt); d.Wait() })
	re := regexp.MustCompile(`url=(http://\S+/metrics)`)
	sc := bufio.NewScanner(stderr)
	var log strings.Builder
	for sc.Scan() {
		log.WriteString(sc.Text() + "\n")
		if strings.Contains(sc.Text(), "boundary tracing is off") {
			t.Fatalf("dald could not trace on this machine (root with BTF): %s", sc.Text())
		}
		if m := re.FindStringSubmatch(sc.Text()); m != nil {
			metricsURL = m[1]
		}
		if strings.Contains(sc.Text(), "dald listening") {
			break
		}
	}
	if metricsURL == "" {
		t.Fatalf("dald did not start its metrics endpoint:\n%s", log.String())
	}
	go io.Copy(io.Discard, stderr)
	return sock, metricsURL
}

// straceCounts runs argv under strace -f -c and returns calls per syscall.
func straceCounts(t *testing.T, dir string, env []string, argv ...string) map[string]uint64 {
	t.Helper()
	if _, err := exec.LookPath("strace"); err != nil {
		t.Fatal("strace is not installed: apt-get install strace (.ci/run does)")
	}
	out := filepath.Join(t.TempDir(), "strace.txt")
	cmd := exec.Command("strace", append([]string{"-f", "-c", "-o", out, "--"}, argv...)...)
	cmd.Dir, cmd.Env = dir, env
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("strace %v: %v\n%s", argv, err, b)
	}
	counts := map[string]uint64{}
	for _, line := range strings.Split(string(mustRead(t, out)), "\n") {
		f := strings.Fields(line)
		if len(f) < 5 || strings.HasPrefix(line, "%") || strings.HasPrefix(line, "-") || f[len(f)-1] == "total" {
			continue
		}
		if n, err := strconv.ParseUint(f[3], 10, 64); err == nil {
			counts[f[len(f)-1]] = n
		}
	}
	return counts
}

// agentEnv is the environment the recorded agent saw (env.json), so the
// strace run does the same work (allocations depend on it).
func agentEnv(t *testing.T, bundle string) []string {
	t.Helper()
	var e struct{ GuardRails, Inherited map[string]string }
	var raw struct {
		G map[string]string `json:"guard_rails"`
		I map[string]string `json:"inherited"`
	}
	if err := json.Unmarshal(mustRead(t, filepath.Join(bundle, "env.json")), &raw); err != nil {
		t.Fatal(err)
	}
	e.GuardRails, e.Inherited = raw.G, raw.I
	var env []string
	for _, m := range []map[string]string{e.Inherited, e.GuardRails} {
		for k, v := range m {
			env = append(env, k+"="+v)
		}
	}
	return env
}

type boundaryFile struct {
	Observed   bool              `json:"observed"`
	Reason     string            `json:"reason"`
	Syscalls   map[string]uint64 `json:"syscalls"`
	Coverage   *float64          `json:"coverage"`
	Categories map[string]struct {
		Touched, Captured bool
	} `json:"categories"`
	Escapes []struct{ Category, Detail string } `json:"escapes"`
}

func readBoundary(t *testing.T, bundle string) boundaryFile {
	t.Helper()
	var b boundaryFile
	if err := json.Unmarshal(mustRead(t, filepath.Join(bundle, "syscalls.json")), &b); err != nil {
		t.Fatal(err)
	}
	if !b.Observed {
		t.Fatalf("syscalls.json: not observed: %s", b.Reason)
	}
	return b
}

// vdsoCalls are served by the vDSO outside dal, and by system calls
// inside it, where the syscall layer hides the vDSO: the two workloads
// differ there, so they are left out of the comparison.
var vdsoCalls = map[string]bool{"clock_gettime": true, "gettimeofday": true, "time": true, "getrandom": true, "getcpu": true}

// compareCounts checks every syscall strace counted at least min times
// against ours, within 1%, and the totals within 1%.
func compareCounts(t *testing.T, ours, strace map[string]uint64, min uint64) {
	t.Helper()
	var to, ts uint64
	for name, n := range ours {
		if !vdsoCalls[name] {
			to += n
		}
	}
	for name, n := range strace {
		if vdsoCalls[name] {
			continue
		}
		ts += n
		if n < min {
			continue
		}
		if d := math.Abs(float64(ours[name])-float64(n)) / float64(n); d > 0.01 {
			t.Errorf("%s: dal counted %d, strace %d (%.1f%% apart)", name, ours[name], n, 100*d)
		}
	}
	if d := math.Abs(float64(to)-float64(ts)) / float64(ts); d > 0.01 {
		t.Errorf("total: dal counted %d, strace %d (%.1f%% apart)", to, ts, 100*d)
	}
}

// TestBoundaryCountsMatchStrace: for dd and for a Python agent recorded
// under a running dald, syscalls.json's per-syscall counts match strace -f
// -c of the same workload within 1%; dald's /metrics passes promtool.
func TestBoundaryCountsMatchStrace(t *testing.T) {
	t.Parallel()
	sock, murl := startDald(t)
	env := []string{"DAL_KEY=" + filepath.Join(t.TempDir(), "k")}

	ws := t.TempDir()
	dd := []string{"dd", "if=/dev/zero", "of=/dev/null", "bs=1", "count=100000"}
	out := filepath.Join(t.TempDir(), "dd")
	if r := dalIn(t, ws, env, append([]string{"record", "--socket", sock, "--out", out, "--"}, dd...)...); r.code != 0 {
		t.Fatalf("record dd: %d %s", r.code, r.stderr)
	}
	b := readBoundary(t, out)
	compareCounts(t, b.Syscalls, straceCounts(t, ws, agentEnv(t, out), dd...), 20)
	if b.Syscalls["read"] < 100000 || b.Syscalls["write"] < 100000 {
		t.Errorf("dd's reads and writes: %d, %d", b.Syscalls["read"], b.Syscalls["write"])
	}

	// A Python workload: files, stat, time. -S: no site, so no dal shim,
	// the same interpreter work with and without dal.
	script := filepath.Join(ws, "work.py")
	os.WriteFile(script, []byte(`import os, time
for i in range(300):
    p = "f%d.txt" % i
    with open(p, "w") as f:
        f.write("x" * i)
    os.stat(p)
    os.unlink(p)
    time.sleep(0)
`), 0o644)
	py := []string{"python3", "-S", script}
	out = filepath.Join(t.TempDir(), "py")
	if r := dalIn(t, ws, env, append([]string{"record", "--socket", sock, "--out", out, "--"}, py...)...); r.code != 0 {
		t.Fatalf("record python: %d %s", r.code, r.stderr)
	}
	compareCounts(t, readBoundary(t, out).Syscalls, straceCounts(t, ws, agentEnv(t, out), py...), 100)

	// dald's /metrics saw the sessions and lints clean.
	resp, err := http.Get(murl)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{"dal_sessions_total 2", `dal_syscalls_total{category="filesystem"}`, "dal_boundary_coverage_ratio "} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	// A real Prometheus scrapes dald and sees the sessions.
	prom := promtest.Start(t, strings.TrimSuffix(strings.TrimPrefix(murl, "http://"), "/metrics"))
	if got := prom.WaitFor(`dal_sessions_total{job="dal"}`); got[0].Float() != 2 {
		t.Errorf("Prometheus scraped dal_sessions_total = %v, want 2", got[0].Float())
	}
	check := exec.Command(promtest.Tool(t, "promtool"), "check", "metrics")
	check.Stdin = strings.NewReader(string(body))
	if b, err := check.CombinedOutput(); err != nil || len(b) > 0 {
		t.Errorf("promtool check metrics: %v\n%s", err, b)
	}
}

// TestEscapesLowerCoverage: in logged mode (real randomness, no syscall
// layer) an agent that reads /dev/urandom directly and connects around the
// proxy shows both as escapes, coverage below 1. In strict mode the same
// read is served the seed's bytes: no random escape, and the bytes repeat.
func TestEscapesLowerCoverage(t *testing.T) {
	t.Parallel()
	sock, _ := startDald(t)
	ws := t.TempDir()
	out := filepath.Join(t.TempDir(), "b")
	script := `import socket
open("/dev/urandom", "rb").read(16)
try:
    socket.create_connection(("192.0.2.20", 443), timeout=2)
except OSError:
    pass
print("done")
`
	key := "DAL_KEY=" + filepath.Join(t.TempDir(), "k")
	r := dalIn(t, ws, []string{key}, "record", "--mode", "logged", "--socket", sock, "--out", out, "--", "python3", "-c", script)
	if r.code != 0 {
		t.Fatalf("record: %d %s", r.code, r.stderr)
	}
	b := readBoundary(t, out)
	cats := map[string]bool{}
	for _, e := range b.Escapes {
		cats[e.Category] = true
	}
	if !cats["random"] || !cats["network"] || b.Coverage == nil || *b.Coverage >= 1 {
		t.Fatalf("escapes %+v, coverage %v", b.Escapes, b.Coverage)
	}
	if !strings.Contains(r.stderr, "escape (random)") || !strings.Contains(r.stderr, "/dev/urandom") {
		t.Errorf("record did not report the escapes: %s", r.stderr)
	}

	strict := `print(open("/dev/urandom", "rb").read(16).hex())`
	var first string
	for i := range 2 {
		out := filepath.Join(t.TempDir(), "strict")
		r := dalIn(t, t.TempDir(), []string{key}, "record", "--socket", sock, "--out", out, "--", "python3", "-c", strict)
		if r.code != 0 {
			t.Fatalf("strict record: %d %s", r.code, r.stderr)
		}
		for _, e := range readBoundary(t, out).Escapes {
			if e.Category == "random" {
				t.Errorf("strict: /dev/urandom listed as an escape: %+v", e)
			}
		}
		if i == 0 {
			first = r.stdout
		} else if r.stdout != first || len(strings.TrimSpace(first)) != 32 {
			t.Errorf("strict /dev/urandom bytes: %q then %q, want the same 16 bytes", first, r.stdout)
		}
	}
}

// TestUnprivilegedDald: without the privileges to load eBPF, dald says once
// why boundary tracing is off and everything else works; a recording then
// says its syscalls were not observed instead of presenting counts.
func TestUnprivilegedDald(t *testing.T) {
	t.Parallel()
	dir, err := os.MkdirTemp("/var/tmp", "dal-unpriv-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o777)
	sock := filepath.Join(dir, "dald.sock")
	// A copy nobody may execute (the build directory is root's alone).
	dald := filepath.Join(dir, "dald")
	if err := os.WriteFile(dald, mustRead(t, bin.dald), 0o755); err != nil {
		t.Fatal(err)
	}
	d := exec.Command(dald, "--socket", sock, "--metrics-addr", "127.0.0.1:0")
	d.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	stderr, _ := d.StderrPipe()
	if err := d.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Process.Signal(os.Interrupt); d.Wait() })
	sc := bufio.NewScanner(stderr)
	var log strings.Builder
	off := 0
	for sc.Scan() {
		log.WriteString(sc.Text() + "\n")
		if strings.Contains(sc.Text(), "boundary tracing is off:") {
			off++
		}
		if strings.Contains(sc.Text(), "dald listening") {
			break
		}
	}
	go io.Copy(io.Discard, stderr)
	if off != 1 {
		t.Fatalf("dald as nobody should say once that tracing is off:\n%s", log.String())
	}
	if st := dalExec(t, nil, "status", "--socket", sock); !strings.Contains(st.stdout, "boundary tracing off: loading eBPF programs needs root") {
		t.Errorf("status of an unprivileged dald: %q", st.stdout)
	}
	r := dalExec(t, nil, "run", "--socket", sock, "--", "python3", "-c", "import time; print(time.time())")
	if r.code != 0 || strings.TrimSpace(r.stdout) != "1767225600.000001" {
		t.Fatalf("run through an unprivileged dald: %d %q %q", r.code, r.stdout, r.stderr)
	}
	out := filepath.Join(t.TempDir(), "b")
	rec := dalIn(t, t.TempDir(), []string{"DAL_KEY=" + filepath.Join(t.TempDir(), "k")}, "record", "--socket", sock, "--out", out, "--", "true")
	if rec.code != 0 || !strings.Contains(rec.stderr, "boundary coverage not measured") {
		t.Fatalf("record: %d %q", rec.code, rec.stderr)
	}
	var b boundaryFile
	json.Unmarshal(mustRead(t, filepath.Join(out, "syscalls.json")), &b)
	if b.Observed || b.Reason == "" || b.Syscalls != nil || b.Coverage != nil {
		t.Errorf("syscalls.json without tracing: %+v", b)
	}
}
