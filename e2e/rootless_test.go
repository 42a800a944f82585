package e2e

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"

	"github.com/dal-runtime/dal/internal/sandbox"
)

// The rootless tests run dal as an unprivileged user: the suite's own user
// when it is not root, else nobody through setpriv, as a laptop or a CI
// container would. The sandbox is then built in a user namespace.

// rootlessUID is who the rootless tests run as when the suite is root.
const rootlessUID = 65534

// userDir returns a new directory the unprivileged user owns.
func userDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "dal-rootless-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if os.Geteuid() == 0 {
		if err := os.Chown(dir, rootlessUID, rootlessUID); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// asUser runs argv in dir as the unprivileged user, with a clean
// environment: HOME and TMPDIR in home, PATH, and env.
func asUser(t *testing.T, home, dir string, env []string, argv ...string) result {
	t.Helper()
	env = append([]string{"HOME=" + home, "TMPDIR=" + home, "PATH=/usr/local/bin:/usr/bin:/bin", "LANG=C.UTF-8"}, env...)
	var cmd *exec.Cmd
	if os.Geteuid() == 0 {
		args := append([]string{"--reuid", itoa(rootlessUID), "--regid", itoa(rootlessUID), "--clear-groups", "--inh-caps=-all", "env", "-i"}, env...)
		cmd = exec.Command("setpriv", append(args, argv...)...)
	} else {
		cmd = exec.Command(argv[0], argv[1:]...)
		cmd.Env = env
	}
	cmd.Dir = dir
	return runCmd(t, cmd)
}

// userCopy copies the file src into dir as the unprivileged user's, with
// mode.
func userCopy(t *testing.T, src, dir string, mode os.FileMode) string {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	return userWrite(t, filepath.Join(dir, filepath.Base(src)), b, mode)
}

// userWrite writes the new file p as the unprivileged user's.
func userWrite(t *testing.T, p string, b []byte, mode os.FileMode) string {
	t.Helper()
	if err := os.WriteFile(p, b, mode); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() == 0 {
		if err := os.Chown(p, rootlessUID, rootlessUID); err != nil {
			t.Fatal(err)
		}
	}
	return p
}

// userMkdir makes dir/name as the unprivileged user's.
func userMkdir(t *testing.T, dir, name string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.Mkdir(p, 0o755); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() == 0 {
		if err := os.Chown(p, rootlessUID, rootlessUID); err != nil {
			t.Fatal(err)
		}
	}
	return p
}

// TestRootlessSandboxSuite runs the sandbox package's tests as an
// unprivileged user: all pass, and the only ones skipped are those whose
// set-up needs root on the host (needRoot in internal/sandbox).
func TestRootlessSandboxSuite(t *testing.T) {
	t.Parallel()
	home := userDir(t)
	build := t.TempDir()
	test := filepath.Join(build, "sandbox.test")
	if out, err := exec.Command("go", "test", "-c", "-o", test, "../internal/sandbox").CombinedOutput(); err != nil {
		t.Fatalf("build the sandbox tests: %v\n%s", err, out)
	}
	test = userCopy(t, test, home, 0o755)
	pkg := userMkdir(t, home, "pkg")
	userCopy(t, "../internal/sandbox/testdata/changes.golden.json", userMkdir(t, pkg, "testdata"), 0o644)

	r := asUser(t, home, pkg, nil, test, "-test.v", "-test.count=1", "-test.timeout=10m")
	var skipped []string
	passed := 0
	sc := bufio.NewScanner(strings.NewReader(r.stdout))
	for sc.Scan() {
		l := sc.Text()
		if name, ok := strings.CutPrefix(l, "--- SKIP: "); ok {
			skipped = append(skipped, strings.Fields(name)[0])
		}
		if strings.HasPrefix(l, "--- PASS: ") {
			passed++
		}
	}
	if r.code != 0 {
		t.Fatalf("the sandbox suite failed rootless (exit %d):\n%s\n%s", r.code, failures(r.stdout), r.stderr)
	}
	sort.Strings(skipped)
	if strings.Join(skipped, " ") != "TestFileCapsStripped" || passed < 30 {
		t.Fatalf("rootless: %d passed, skipped %v; want only TestFileCapsStripped skipped", passed, skipped)
	}
}

// failures keeps what a failing `go test -v` run said beyond its progress
// lines: the failing tests, their logs and any panic, whatever their place
// in the output.
func failures(out string) string {
	var keep []string
	for l := range strings.Lines(out) {
		t := strings.TrimSpace(l)
		if t == "" || strings.HasPrefix(t, "=== ") || strings.HasPrefix(t, "--- PASS: ") || strings.HasPrefix(t, "--- SKIP: ") {
			continue
		}
		keep = append(keep, strings.TrimRight(l, "\n"))
	}
	return strings.Join(keep, "\n")
}

// TestRootlessRecordReplayRevert: an unprivileged user records an agent
// that writes files and calls an LLM on this host, replays it exactly with
// the server gone, reverts it, and runs a consistency evaluation; the
// eBPF tracer's absence is said in one line, and every file dal leaves is
// the user's.
func TestRootlessRecordReplayRevert(t *testing.T) {
	t.Parallel()
	home := userDir(t)
	dal := userCopy(t, bin.exec, home, 0o755)
	ws := userMkdir(t, home, "ws")
	// It prints every read of a streamed response: the proxy must see its
	// socket (sock_diag in the sandbox's namespace) to keep them apart.
	agent := userCopy(t, "testdata/clients/urllib_agent.py", ws, 0o644)
	userCopy(t, "testdata/clients/apis.py", ws, 0o644) // the module it imports
	userWrite(t, filepath.Join(ws, "input.txt"), []byte("alpha\n"), 0o644)
	srv := startLLMServer(t, false)
	env := []string{"DAL_KEY=" + filepath.Join(home, "key"), "OPENAI_API_KEY=" + apiKey, "LLM_BASE=" + srv.base(), "PROMPT=hello"}
	keep := []string{"--keep-env", "OPENAI_API_KEY", "--keep-env", "LLM_BASE", "--keep-env", "PROMPT"}
	pre, err := sandbox.TreeHash(ws)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(home, "run1")
	args := append(append([]string{dal, "record", "--allow-loopback", "127.0.0.1:" + itoa(srv.port), "--out", out}, keep...),
		"--", "sh", "-c", "python3 "+filepath.Base(agent)+" && date +%s > when.txt && rm input.txt")
	rec := asUser(t, home, ws, env, args...)
	if rec.code != 0 || !strings.Contains(rec.stdout, "plain: ") {
		t.Fatalf("rootless record: exit %d\n%s\n%s", rec.code, rec.stdout, rec.stderr)
	}
	if n := strings.Count(rec.stdout, "read: "); n < 8 {
		t.Errorf("the streamed response reached the agent in %d reads, not one per piece:\n%s\n%s", n, rec.stdout, rec.stderr)
	}
	if !strings.Contains(rec.stderr, "boundary coverage not measured: loading eBPF programs needs root") {
		t.Errorf("record did not say why boundary coverage is missing:\n%s", rec.stderr)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "when.txt")); strings.TrimSpace(string(b)) != "1767225600" {
		t.Errorf("the agent's clock was not virtual rootless: when.txt %q", b)
	}
	owned := func(dir string) {
		t.Helper()
		want := uint32(os.Geteuid())
		if want == 0 {
			want = rootlessUID
		}
		filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
			if err == nil && fi.Sys().(*syscall.Stat_t).Uid != want {
				t.Errorf("%s belongs to uid %d, not to the user", p, fi.Sys().(*syscall.Stat_t).Uid)
			}
			return nil
		})
	}
	owned(ws)
	owned(out)

	srv.stop()
	rep := asUser(t, home, ws, env, dal, "replay", out)
	if rep.code != 0 || !strings.Contains(rep.stdout, "EXACT") {
		t.Fatalf("rootless replay: exit %d\n%s\n%s", rep.code, rep.stdout, rep.stderr)
	}
	rev := asUser(t, home, ws, env, dal, "revert", out)
	if rev.code != 0 {
		t.Fatalf("rootless revert: exit %d\n%s\n%s", rev.code, rev.stdout, rev.stderr)
	}
	if post, _ := sandbox.TreeHash(ws); post != pre {
		t.Fatalf("revert did not restore the workspace")
	}

	report := filepath.Join(home, "report")
	con := asUser(t, home, ws, env, dal, "consistency", "--runs", "2", "--report", report, "--", "python3", "-c", "print(42)")
	if con.code != 0 || !strings.Contains(con.stdout, "success rate: 1.000 (2/2)") {
		t.Fatalf("rootless consistency: exit %d\n%s\n%s", con.code, con.stdout, con.stderr)
	}
	owned(report)
}

func tail(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
