package sandbox

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/dal-runtime/dal/internal/sysvirt"
	"github.com/dal-runtime/dal/seedrng"
	"golang.org/x/sys/unix"
)

// directConfig is a direct sandbox with a run directory of its own under
// a new temporary directory, showing the file shown (content "shown").
func directConfig(t *testing.T) (cfg Config, host string) {
	t.Helper()
	host = t.TempDir()
	runDir := filepath.Join(host, "run")
	if err := os.Mkdir(runDir, 0o755); err != nil {
		t.Fatal(err)
	}
	shown := filepath.Join(host, "shown")
	if err := os.WriteFile(shown, []byte("shown"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg = Config{Direct: true, Staging: filepath.Join(host, "staging"), RunDir: runDir,
		Mounts:  []Mount{{Source: shown, Target: runDir + "/files/shown", ReadOnly: true}},
		Virtual: sysvirt.Config{Seed: 7, Random: true, Clock: true, EpochNS: 1767225600e9, MonoNS: 1e12, QuantumNS: 1000}}
	return cfg, host
}

// TestDirectSandbox: the agent of a direct sandbox works on the host's
// files (what it writes there stays), sees dal's files in a tmpfs over the
// run directory (the host's directory stays empty), is pid 100 with the
// host name dal, and reads the seeded /dev/urandom and virtual clock.
func TestDirectSandbox(t *testing.T) {
	t.Parallel()
	cfg, host := directConfig(t)
	script := `echo made > ` + host + `/made; cat ` + cfg.RunDir + `/files/shown; echo; echo $$; hostname
head -c 8 /dev/urandom | od -An -tx1; date +%s; touch ` + cfg.RunDir + `/scratch && echo scratch ok
cat /proc/uptime /proc/loadavg`
	var outs []string
	for range 2 {
		os.Remove(filepath.Join(host, "made"))
		r := run(t, cfg, script)
		if r.code != 0 {
			t.Fatalf("exit %d: %s", r.code, r.stderr)
		}
		outs = append(outs, r.stdout)
	}
	if outs[0] != outs[1] {
		t.Errorf("two runs differ:\n%s\n%s", outs[0], outs[1])
	}
	lines := strings.Split(outs[0], "\n")
	if len(lines) < 6 || lines[0] != "shown" || lines[1] != "100" || lines[2] != "dal" || lines[4] != "1767225600" || lines[5] != "scratch ok" {
		t.Errorf("the agent saw %q: want the shown file, pid 100, host name dal, the virtual clock and a writable run directory", outs[0])
	}
	if !strings.HasSuffix(outs[0], "scratch ok\n1000.00 1000.00\n0.00 0.00 0.00 1/1 100\n") {
		t.Errorf("/proc/uptime and /proc/loadavg are not the virtual machine's: %q", outs[0])
	}
	if b, err := os.ReadFile(filepath.Join(host, "made")); err != nil || string(b) != "made\n" {
		t.Errorf("what the agent wrote on the host is %q (%v), want it there", b, err)
	}
	if ents, _ := os.ReadDir(cfg.RunDir); len(ents) != 0 {
		t.Errorf("the host's run directory holds %d entries after the run, want none (a tmpfs covered it)", len(ents))
	}
}

// TestDirectSandboxRefusesALinkedRunDir: a run directory that is a
// symbolic link, or under one, is refused in one sentence and nothing is
// mounted where the link points.
func TestDirectSandboxRefusesALinkedRunDir(t *testing.T) {
	t.Parallel()
	cfg, host := directConfig(t)
	target := filepath.Join(host, "elsewhere")
	if err := os.Mkdir(target, 0o755); err != nil {
		t.Fatal(err)
	}
	links := filepath.Join(host, "links")
	if err := os.Mkdir(links, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{filepath.Join(links, "run"), filepath.Join(links, "up", "run")} {
		if dir == filepath.Join(links, "run") {
			if err := os.Symlink(target, dir); err != nil {
				t.Fatal(err)
			}
		} else {
			if err := os.Symlink(host, filepath.Join(links, "up")); err != nil {
				t.Fatal(err)
			}
			dir = filepath.Join(links, "up", "elsewhere")
		}
		c := cfg
		c.RunDir = dir
		c.Mounts = []Mount{{Source: cfg.Mounts[0].Source, Target: dir + "/shown"}}
		cmd := command(t, c, "echo ran")
		var out bytes.Buffer
		cmd.Stdout = &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		err := cmd.Wait()
		var se *SetupError
		if !errors.As(err, &se) || !strings.Contains(se.Msg, "symbolic link") || out.Len() != 0 {
			t.Errorf("run directory %s: %v, output %q; want a setup error naming the symbolic link", dir, err, out.String())
		}
		if ents, _ := os.ReadDir(target); len(ents) != 0 {
			t.Errorf("something appeared where the link points: %d entries", len(ents))
		}
	}
}

// TestDirectSandboxChecks: mounts outside the run directory are refused
// before anything starts.
func TestDirectSandboxChecks(t *testing.T) {
	t.Parallel()
	cfg, host := directConfig(t)
	cfg.Mounts = []Mount{{Source: cfg.Mounts[0].Source, Target: filepath.Join(host, "outside")}}
	if _, err := Command(cfg, []string{"/bin/true"}, nil, host); err == nil || !strings.Contains(err.Error(), "not below the run directory") {
		t.Errorf("a mount outside the run directory: %v", err)
	}
}

// TestSeededDeviceServesTheStream: /dev/urandom in a direct sandbox gives
// the seed's stream byte for byte, also to reads far larger than the
// FIFO's one-page buffer (the writer refills it page by page meanwhile).
func TestSeededDeviceServesTheStream(t *testing.T) {
	t.Parallel()
	cfg, _ := directConfig(t)
	r := run(t, cfg, `head -c 8 /dev/urandom | od -An -tx1 | tr -d ' \n'; echo; dd if=/dev/urandom bs=300000 count=1 iflag=fullblock 2>/dev/null | sha256sum`)
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	want := make([]byte, 300008)
	seedrng.Derive(cfg.Virtual.Seed, "dev/urandom").Read(want)
	sum := sha256.Sum256(want[8:])
	if exp := hex.EncodeToString(want[:8]) + "\n" + hex.EncodeToString(sum[:]) + "  -\n"; r.stdout != exp {
		t.Errorf("the agent read\n%s\nfrom /dev/urandom, want the seed's stream:\n%s", r.stdout, exp)
	}
}

// TestInitThreadsDuringTheRun: after a run under the syscall layer whose
// tree started several processes, the init says it started no thread while
// the tree ran (its warm threads were enough), and the tree's pids follow
// one another from 100; threadsAfter counts only ids above the agent's.
func TestInitThreadsDuringTheRun(t *testing.T) {
	t.Parallel()
	cfg, _ := directConfig(t)
	cmd, out := runToEnd(t, cfg, `echo $$; sh -c 'echo $$'; /bin/true; sh -c 'echo $$'; head -c 4 /dev/urandom >/dev/null`)
	if out != "100\n101\n103\n" {
		t.Errorf("the tree's pids are %q, want 100, 101 and 103", out)
	}
	if _, _, ok := cmd.Ended(); !ok {
		t.Fatal("the init wrote no exit report")
	}
	if n := cmd.ThreadsDuring(); n != 0 {
		t.Errorf("the init started %d threads while the agent ran, want none", n)
	}

	dir := t.TempDir()
	for _, name := range []string{"1", "2", "57", "99", "100", "101", "250"} {
		if err := os.Mkdir(filepath.Join(dir, name), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if n := threadsAfter(dir, 100); n != 2 {
		t.Errorf("threadsAfter counts %d threads above 100 in 1 2 57 99 100 101 250, want 2", n)
	}
}

// TestManyRealWaitsTakeOneThread: an agent with more threads waiting at
// once on outstanding I/O (pipes) than the init has warm threads gets every
// wait answered as the kernel would (ready ones ready, the rest timed out)
// and the init starts no thread for them: the supervisor holds every real
// wait on one thread (sysvirt's realwait.go), where it once held a thread
// each and started threads in the agent's namespace.
func TestManyRealWaitsTakeOneThread(t *testing.T) {
	t.Parallel()
	cfg, _ := directConfig(t)
	const agent = `
import os, select, threading, time
n = 24
pipes = [os.pipe() for _ in range(n)]
got = [None] * n
def wait(i):
    p = select.poll()
    p.register(pipes[i][0], select.POLLIN)
    got[i] = len(p.poll(3000 if i % 2 == 0 else 40))
ts = [threading.Thread(target=wait, args=(i,)) for i in range(n)]
for t in ts: t.start()
time.sleep(0.05)
for i in range(0, n, 2): os.write(pipes[i][1], b"x")
for t in ts: t.join()
print(" ".join(map(str, got)))
`
	cmd, out := runToEnd(t, cfg, "exec python3 -c '"+agent+"'")
	if want := strings.Repeat("1 0 ", 12); out != want[:len(want)-1]+"\n" {
		t.Errorf("the waits returned %q, want ready (1) for the written pipes and timed out (0) for the rest", out)
	}
	if n := cmd.ThreadsDuring(); n != 0 {
		t.Errorf("the init started %d threads for 24 waits at once, want none", n)
	}
}

// TestDirectWaitBeforeInitEnds: the Wait of a direct sandbox whose agent
// left nothing running returns once the init reports (the agent's status
// as an *ExitError, output complete, the caller's pipe no longer held by
// the init), while the init's own end is reaped in the background. An
// agent that left a process running, or streams exec.Cmd copies, take the
// usual way: the init's end kills what is left, and Wait reaps it.
func TestDirectWaitBeforeInitEnds(t *testing.T) {
	t.Parallel()
	cfg, _ := directConfig(t)

	cmd := command(t, cfg, `echo out; echo err >&2; exit 3`)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	werr := cmd.Wait()
	w.Close()
	var ee *ExitError
	if !errors.As(werr, &ee) || ee.ExitCode() != 3 {
		t.Fatalf("Wait returned %v (%T), want the agent's exit status 3 as an *ExitError", werr, werr)
	}
	if !cmd.rep.Done {
		t.Errorf("the init's report %+v: want done, nothing left to do but exit", cmd.rep)
	}
	if code, sig, left, ok := ee.Code, cmd.rep.Signal, cmd.rep.Left, cmd.repOK; !ok || code != 3 || sig != 0 || left != 0 {
		t.Errorf("the report: code %d, signal %d, left %d, ok %v", code, sig, left, ok)
	}
	// The init holds none of the caller's streams: with ours closed, the
	// pipe ends once the agent's output is read, the init's end or not.
	out, err := io.ReadAll(r)
	if err != nil || string(out) != "out\nerr\n" {
		t.Errorf("the pipe held %q (%v), want the agent's output", out, err)
	}
	// Ours, not any pipe: the init also holds what the test process
	// inherited without close-on-exec (a harness's pipe).
	var st unix.Stat_t
	if err := unix.Fstat(int(r.Fd()), &st); err != nil {
		t.Fatal(err)
	}
	ours := "pipe:[" + strconv.FormatUint(st.Ino, 10) + "]"
	pid := cmd.Process.Pid
	if Exiting(pid) {
		if fds, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/fd"); err == nil {
			for _, fd := range fds {
				if l, _ := os.Readlink("/proc/" + strconv.Itoa(pid) + "/fd/" + fd.Name()); l == ours {
					t.Errorf("the ending init still holds the caller's %s on descriptor %s", l, fd.Name())
				}
			}
		}
	}

	// A process left running: the usual way.
	cmd = command(t, cfg, `sleep 30 & echo started`)
	f, err := os.Create(filepath.Join(t.TempDir(), "out"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("Wait: %v", err)
	}
	if _, left, ok := cmd.Ended(); !ok || left != 1 || cmd.rep.Done {
		t.Errorf("an agent that left sleep running: report %+v, want 1 left and not done", cmd.rep)
	}
	if cmd.ProcessState == nil {
		t.Error("Wait returned before reaping the init, which had a process to end")
	}

	// Copied streams: exec.Cmd's Wait ends their copying.
	cmd = command(t, cfg, `echo copied; exit 4`)
	var buf bytes.Buffer
	cmd.Stdout = &buf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var xe *exec.ExitError
	if err := cmd.Wait(); !errors.As(err, &xe) || xe.ExitCode() != 4 || buf.String() != "copied\n" {
		t.Errorf("with a copied stdout Wait returned %v and %q, want exec's exit status 4 and the output", err, buf.String())
	}
}

// runToEnd runs script in a sandbox of cfg, which must succeed, and
// returns the waited-for command and its output.
func runToEnd(t *testing.T, cfg Config, script string) (*Cmd, string) {
	t.Helper()
	cmd := command(t, cfg, script)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("sandbox: %v (stderr %q)", err, errb.String())
	}
	return cmd, out.String()
}
