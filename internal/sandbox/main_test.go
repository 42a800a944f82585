package sandbox

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestMain(m *testing.M) {
	Init()
	if os.Getenv("DAL_SANDBOX_TEST_PARENT") != "" {
		os.Exit(fakeDalExec())
	}
	if name := os.Getenv(agentEnv); name != "" {
		os.Exit(runTestAgent(name, os.Args[1:]))
	}
	os.Exit(m.Run())
}

// fakeDalExec stands for dal-exec in TestParentDeath: it starts a sandbox
// running a long sleep, prints the init's pid and waits.
func fakeDalExec() int {
	cfg := Config{Workspace: os.Getenv("DAL_SANDBOX_TEST_WS"), Staging: os.Getenv("DAL_SANDBOX_TEST_STAGING"), PrivateTmp: true}
	cmd, err := Command(cfg, []string{"/bin/sh", "-c", "sleep 1000 & sleep 1000"}, []string{"PATH=/usr/bin:/bin"}, cfg.Workspace)
	if err != nil {
		fmt.Println(err)
		return 2
	}
	if err := cmd.Start(); err != nil || cmd.Ready() != nil {
		fmt.Println("start failed")
		return 2
	}
	fmt.Println(cmd.Process.Pid)
	cmd.Wait()
	return 0
}

// result is what a sandboxed command did.
type result struct {
	stdout, stderr string
	code           int
}

// newConfig makes a workspace filled with files (path → content; a
// trailing "/" makes a directory) and a staging directory.
// needRoot skips a test whose set-up needs root on the host, saying why,
// when the suite runs rootless (e2e/rootless_test.go runs it so and checks
// that only these are skipped); as root, which CI is, it always runs.
func needRoot(t *testing.T, why string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: " + why)
	}
}

func newConfig(t testing.TB, files map[string]string) Config {
	t.Helper()
	ws := filepath.Join(t.TempDir(), "ws")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	writeTree(t, ws, files)
	return Config{Workspace: ws, Staging: filepath.Join(t.TempDir(), "staging"), PrivateTmp: true}
}

func writeTree(t testing.TB, root string, files map[string]string) {
	t.Helper()
	for p, c := range files {
		full := filepath.Join(root, p)
		if strings.HasSuffix(p, "/") {
			if err := os.MkdirAll(full, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// command prepares a /bin/sh script in the sandbox, in the workspace.
func command(t testing.TB, cfg Config, script string, env ...string) *Cmd {
	t.Helper()
	cmd, err := Command(cfg, []string{"/bin/sh", "-c", script},
		append([]string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/root"}, env...), cfg.Workspace)
	if err != nil {
		t.Fatalf("Command: %v", err)
	}
	return cmd
}

// run runs a /bin/sh script in the sandbox and fails the test on a
// sandbox error (not on the script's own failure).
func run(t testing.TB, cfg Config, script string, env ...string) result {
	t.Helper()
	cmd := command(t, cfg, script, env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Start(); err != nil {
		t.Fatalf("start: %v", err)
	}
	err := cmd.Wait()
	r := result{stdout: out.String(), stderr: errb.String()}
	var ee interface{ ExitCode() int } // exec's or the sandbox's
	switch {
	case err == nil:
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	default:
		t.Fatalf("sandbox: %v (stderr %q)", err, r.stderr)
	}
	return r
}

func hashOf(t testing.TB, dir string) string {
	t.Helper()
	h, err := TreeHash(dir)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func TestConfinement(t *testing.T) {
	t.Parallel()
	cfg := newConfig(t, map[string]string{"in.txt": "x"})
	shared := t.TempDir() // a writable bind, under the real /tmp
	cfg.WritableBinds = []string{shared}
	shown := t.TempDir() // a bind, read-only
	writeTree(t, shown, map[string]string{"code.py": "print(1)\n"})
	cfg.Binds = []string{shown}
	cfg.Quiet = []string{"/usr/share"}
	tmpName := fmt.Sprintf("dal-sandbox-test-%d", time.Now().UnixNano())
	script := `
for p in /etc/dal-test /root/dal-test /usr/dal-test; do
	if echo x > $p 2>/dev/null; then echo "$p writable"; else echo "$p denied"; fi
done
echo x > /usr/share/dal-quiet 2>/dev/null || echo "quiet denied"
mkdir /usr/dal-test-dir 2>&1 | grep -q 'Read-only file system' && echo "mkdir read-only"
rm -f /etc/hostname 2>&1 | grep -q 'Read-only file system' && echo "rm read-only"
echo x > /tmp/` + tmpName + ` && echo "tmp ok"
echo x > /dev/null && echo "devnull ok"
head -c 4 /dev/urandom | wc -c
echo hello > "$SHARED/from-agent" && echo "bind ok"
echo 'import os' >> "$SHOWN/code.py" 2>/dev/null || echo "read-only bind denied"
set -- $(cat /proc/$$/stat)
[ "$6" = "$$" ] && echo "own session"
[ "$7" = 0 ] && echo "no terminal"
(: < /dev/tty) 2>/dev/null || echo "no /dev/tty"
echo "hostname $(uname -n)"
echo y > in.txt && echo "workspace ok"
echo "parent $PPID"
echo "procs $(ls /proc | grep -c '^[0-9]')"
grep -E '^(CapInh|CapPrm|CapEff|CapBnd|CapAmb|NoNewPrivs):' /proc/self/status
echo x > /proc/sys/kernel/domainname 2>/dev/null || echo "sysctl denied"
`
	r := run(t, cfg, script, "SHARED="+shared, "SHOWN="+shown)
	if r.code != 0 {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
	want := []string{
		"/etc/dal-test denied", "/root/dal-test denied", "/usr/dal-test denied",
		"quiet denied", "mkdir read-only", "rm read-only", "tmp ok", "devnull ok", "4", "bind ok", "workspace ok",
		"read-only bind denied", "own session", "no terminal", "no /dev/tty", "hostname " + hostname,
		"parent 1",
		"CapInh:\t0000000000000000", "CapPrm:\t0000000000000000", "CapEff:\t0000000000000000",
		"CapBnd:\t0000000000000000", "CapAmb:\t0000000000000000", "NoNewPrivs:\t1",
		"sysctl denied",
	}
	lines := strings.Split(r.stdout, "\n")
	for _, w := range want {
		found := false
		for _, l := range lines {
			found = found || l == w
		}
		if !found {
			t.Errorf("missing %q in the agent's output:\n%s", w, r.stdout)
		}
	}
	// init, sh, its subshell, ls and grep: a new pid namespace.
	for _, l := range lines {
		if n, ok := strings.CutPrefix(l, "procs "); ok {
			if c, _ := strconv.Atoi(n); c < 2 || c > 5 {
				t.Errorf("the agent sees %s processes; a fresh pid namespace has at most 5 here", n)
			}
		}
	}
	if _, err := os.Stat("/tmp/" + tmpName); err == nil {
		t.Errorf("the agent's /tmp write reached the host's /tmp")
	}
	if b, err := os.ReadFile(filepath.Join(shared, "from-agent")); err != nil || string(b) != "hello\n" {
		t.Errorf("the bound directory did not receive the agent's file: %q, %v", b, err)
	}
	if b, _ := os.ReadFile(filepath.Join(cfg.Workspace, "in.txt")); string(b) != "x" {
		t.Errorf("the real workspace changed during the run: in.txt = %q", b)
	}
	if _, err := os.Stat("/etc/dal-test"); err == nil {
		t.Errorf("the agent wrote /etc/dal-test on the host")
	}

	denied, err := Denied(cfg)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, d := range denied {
		got[d.Path] = d.Op
	}
	if b, _ := os.ReadFile(filepath.Join(shown, "code.py")); string(b) != "print(1)\n" {
		t.Errorf("the agent changed a read-only bind: code.py = %q", b)
	}
	for _, p := range []string{"/etc/dal-test", "/root/dal-test", "/usr/dal-test", "/usr/dal-test-dir", "/etc/hostname", "/proc/sys/kernel/domainname", filepath.Join(shown, "code.py")} {
		if got[p] == "" {
			t.Errorf("denied writes miss %s: %v", p, denied)
		}
	}
	for _, p := range []string{"/tmp/" + tmpName, "/dev/null", "/usr/share/dal-quiet", filepath.Join(shared, "from-agent"), filepath.Join(cfg.Workspace, "in.txt")} {
		if got[p] != "" {
			t.Errorf("denied writes list the allowed write %s (%s)", p, got[p])
		}
	}
}

func TestExitStatus(t *testing.T) {
	t.Parallel()
	cfg := newConfig(t, nil)
	for _, tc := range []struct {
		script string
		code   int
	}{
		{"exit 0", 0},
		{"exit 3", 3},
		{"kill -TERM $$", 128 + 15},
		{"kill -KILL $$", 128 + 9},
		{"sleep 100 & exit 4", 4}, // a leftover child does not hold the sandbox up
	} {
		if r := run(t, cfg, tc.script); r.code != tc.code {
			t.Errorf("%q: exit %d, want %d (stderr %q)", tc.script, r.code, tc.code, r.stderr)
		}
	}
}

func TestSignalForwarding(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		sig   syscall.Signal
		group bool // signal the init's process group, as dal-exec does
	}{
		{syscall.SIGTERM, false},
		{syscall.SIGINT, false},
		{syscall.SIGHUP, true},
		{syscall.SIGTERM, true},
	} {
		cfg := newConfig(t, nil)
		cmd := command(t, cfg, `n=0; trap 'n=$((n+1))' TERM INT HUP; echo ready; sleep 0.3 & wait; sleep 0.2; exit $((40+n))`)
		cmd.SysProcAttr.Setpgid = true
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		if err := cmd.Ready(); err != nil {
			t.Fatal(err)
		}
		if l, _ := bufio.NewReader(out).ReadString('\n'); l != "ready\n" {
			t.Fatalf("agent said %q", l)
		}
		if tc.group {
			syscall.Kill(-cmd.Process.Pid, tc.sig)
		} else {
			cmd.Process.Signal(tc.sig)
		}
		err = cmd.Wait()
		var ee *exec.ExitError
		// The trap ran exactly once: not lost, not doubled.
		if !errors.As(err, &ee) || ee.ExitCode() != 41 {
			t.Errorf("%v (group %v): %v, want exit 41", tc.sig, tc.group, err)
		}
	}
}

func TestSetupErrors(t *testing.T) {
	t.Parallel()
	good := newConfig(t, nil)
	for _, tc := range []struct {
		name    string
		cfg     func(Config) Config
		argv    []string
		dir     string
		want    string
		started bool // reported by the init, after Start
	}{
		{name: "missing workspace", cfg: func(c Config) Config { c.Workspace += "-missing"; return c },
			want: "the workspace /tmp/"},
		{name: "relative workspace", cfg: func(c Config) Config { c.Workspace = "ws"; return c },
			want: `the workspace "ws" is not an absolute path`},
		{name: "staging inside workspace", cfg: func(c Config) Config { c.Staging = filepath.Join(c.Workspace, "s"); return c },
			want: "overlaps the workspace"},
		{name: "missing bind", cfg: func(c Config) Config { c.Binds = []string{"/nonexistent-dal"}; return c },
			want: "the bind path /nonexistent-dal does not exist"},
		{name: "unknown command", argv: []string{"dal-no-such-command"}, started: true,
			want: `command "dal-no-such-command" not found in the sandbox's PATH`},
		{name: "missing working directory", dir: "/nonexistent-dal-dir", started: true,
			want: "the agent's working directory /nonexistent-dal-dir is not reachable in the sandbox"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := good
			if tc.cfg != nil {
				cfg = tc.cfg(cfg)
			}
			argv := tc.argv
			if argv == nil {
				argv = []string{"/bin/true"}
			}
			dir := tc.dir
			if dir == "" {
				dir = good.Workspace
			}
			cmd, err := Command(cfg, argv, []string{"PATH=/usr/bin:/bin"}, dir)
			if !tc.started {
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("Command: %v, want %q", err, tc.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			err = cmd.Wait()
			var se *SetupError
			if !errors.As(err, &se) || !strings.Contains(se.Msg, tc.want) || strings.Contains(se.Msg, "\n") {
				t.Fatalf("Wait: %v, want one sentence with %q", err, tc.want)
			}
		})
	}
}

func TestParentDeath(t *testing.T) {
	t.Parallel()
	cfg := newConfig(t, nil)
	parent := exec.Command("/proc/self/exe")
	parent.Env = append(os.Environ(), "DAL_SANDBOX_TEST_PARENT=1", "DAL_SANDBOX_TEST_WS="+cfg.Workspace, "DAL_SANDBOX_TEST_STAGING="+cfg.Staging)
	out, err := parent.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := parent.Start(); err != nil {
		t.Fatal(err)
	}
	line, _ := bufio.NewReader(out).ReadString('\n')
	initPid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		parent.Process.Kill()
		t.Fatalf("fake dal-exec said %q", line)
	}
	var tree []int
	for deadline := time.Now().Add(5 * time.Second); len(tree) < 3 && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		tree = append([]int{initPid}, childrenOf(initPid)...)
	}
	if len(tree) < 3 {
		t.Fatalf("the sandbox did not start its processes: %v", tree)
	}
	parent.Process.Kill()
	parent.Wait()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		alive := 0
		for _, p := range tree {
			if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p)); err == nil && !strings.Contains(string(b), ") Z ") {
				alive++
			}
		}
		if alive == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d sandboxed processes outlived their dal-exec", alive)
		}
	}
}

// childrenOf lists pid's descendants.
func childrenOf(pid int) []int {
	var out []int
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid))
	for _, f := range strings.Fields(string(b)) {
		c, _ := strconv.Atoi(f)
		out = append(out, c)
		out = append(out, childrenOf(c)...)
	}
	return out
}

func TestTerminal(t *testing.T) {
	t.Parallel()
	ptm, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer ptm.Close()
	if err := unix.IoctlSetPointerInt(int(ptm.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(int(ptm.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	pts, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	cfg := newConfig(t, nil)
	// In the terminal's foreground group the agent can read it (else
	// SIGTTIN would stop it) and /dev/tty works.
	cmd := command(t, cfg, `read l; echo "got $l" > /dev/tty; set -- $(cat /proc/$$/stat); [ "$5" = "$8" ] && echo foreground`)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = pts, pts, pts
	cmd.SysProcAttr.Setsid, cmd.SysProcAttr.Setctty, cmd.SysProcAttr.Ctty = true, true, 0
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pts.Close()
	if err := cmd.Ready(); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	done := make(chan struct{})
	go func() { out.ReadFrom(ptm); close(done) }()
	ptm.Write([]byte("hello\n"))
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	select {
	case err := <-waited:
		if err != nil {
			t.Errorf("agent: %v", err)
		}
	case <-time.After(10 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("the agent hung on its terminal; it printed %q", out.String())
	}
	<-done
	for _, w := range []string{"got hello", "foreground"} {
		if !strings.Contains(out.String(), w) {
			t.Errorf("terminal output %q lacks %q", out.String(), w)
		}
	}
}
