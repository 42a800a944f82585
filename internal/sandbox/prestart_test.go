package sandbox

import (
	"bytes"
	"errors"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/dal-runtime/dal/internal/sysvirt"
	"golang.org/x/sys/unix"
)

// prestarted starts the init of a sandbox for cfg without its agent, as
// dal-exec run does (Prestart), with its output in out and errb.
func prestarted(t *testing.T, cfg Config, out, errb *bytes.Buffer) *Cmd {
	t.Helper()
	c, err := Prestart(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c.Stdout, c.Stderr = out, errb
	if err := c.Start(); err != nil {
		c.Close()
		t.Fatal(err)
	}
	return c
}

// TestPrestartedDirectSandbox: an init started before its agent is known,
// told later what to run (with mounts added meanwhile, and an environment
// larger than one message on the gate), gives the agent what Command's
// does: the same output, byte for byte. Nothing of the run's
// configuration shows in the init's command line.
func TestPrestartedDirectSandbox(t *testing.T) {
	t.Parallel()
	cfg, host := directConfig(t)
	script := `cat ` + cfg.RunDir + `/files/shown; echo; echo $$; hostname
head -c 8 /dev/urandom | od -An -tx1; date +%s; cat /proc/uptime
printf %s "$BIG" | wc -c; echo "$PATH"`
	big := "BIG=" + strings.Repeat("x", 3*specChunk+17)
	want := run(t, cfg, script, big)
	if want.code != 0 {
		t.Fatalf("Command's run: exit %d: %s", want.code, want.stderr)
	}
	early := cfg
	early.Mounts = nil // added after the init started, as dal-exec's are
	var out, errb bytes.Buffer
	c := prestarted(t, early, &out, &errb)
	if err := c.Begin(cfg, []string{"/bin/sh", "-c", script + `; tr '\0' ' ' < /proc/1/cmdline`}, []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/root", big}, cfg.Workspace); err != nil {
		t.Fatal(err)
	}
	if err := c.Wait(); err != nil {
		t.Fatalf("prestarted run: %v (stderr %q)", err, errb.String())
	}
	got, cmdline, _ := strings.Cut(out.String(), "/sbin:/bin\n")
	if got+"/sbin:/bin\n" != want.stdout {
		t.Errorf("the prestarted sandbox's agent saw\n%s\nCommand's saw\n%s", out.String(), want.stdout)
	}
	if !strings.Contains(want.stdout, "\n100\ndal\n") || !strings.Contains(want.stdout, "\n"+strconv.Itoa(3*specChunk+17)+"\n") {
		t.Errorf("the agent saw %q: want pid 100, host name dal and the whole of $BIG", want.stdout)
	}
	if strings.Contains(cmdline, host) || !strings.Contains(cmdline, initArg+" "+specFollows) {
		t.Errorf("the init's command line is %q: want %s %s, without the run's paths", cmdline, initArg, specFollows)
	}
}

// TestPrestartNeverBegun: a prestarted sandbox whose run is abandoned
// before its agent is named ends when waited for: its init exits, Wait
// says the agent never ran, and no agent ran.
func TestPrestartNeverBegun(t *testing.T) {
	t.Parallel()
	cfg, _ := directConfig(t)
	var out, errb bytes.Buffer
	c := prestarted(t, cfg, &out, &errb)
	err := c.Wait()
	if !errors.Is(err, errGate) {
		t.Errorf("Wait = %v, want the agent not started", err)
	}
	if c.ProcessState == nil || !c.ProcessState.Exited() {
		t.Errorf("the init was not reaped: %v", c.ProcessState)
	}
	if out.Len() != 0 || errb.Len() != 0 {
		t.Errorf("an abandoned sandbox wrote %q %q", out.String(), errb.String())
	}
	if err := c.Begin(cfg, []string{"/bin/true"}, nil, "/"); err == nil {
		t.Error("Begin after Wait succeeded")
	}
}

// TestPrestartChecks: Begin refuses what it cannot do in one sentence: a
// second Begin, a Cmd from Command, an empty argv; and an init told a
// configuration other than the one it set up with runs nothing.
func TestPrestartChecks(t *testing.T) {
	t.Parallel()
	cfg, host := directConfig(t)
	plain, err := Command(cfg, []string{"/bin/true"}, nil, host)
	if err != nil {
		t.Fatal(err)
	}
	plain.Close()
	if err := plain.Begin(cfg, []string{"/bin/true"}, nil, host); err == nil {
		t.Error("Begin on a Cmd from Command succeeded")
	}
	noVirt := cfg
	noVirt.Virtual.Clock, noVirt.Virtual.Random = false, false
	if _, err := Prestart(noVirt); err == nil {
		t.Error("Prestart without the syscall layer succeeded")
	}

	var out, errb bytes.Buffer
	c := prestarted(t, cfg, &out, &errb)
	if err := c.Begin(cfg, nil, nil, host); err == nil {
		t.Error("Begin with no command succeeded")
	}
	if err := c.Begin(cfg, []string{"/bin/true"}, nil, host); err != nil {
		t.Fatalf("Begin after a refused one: %v", err)
	}
	if err := c.Begin(cfg, []string{"/bin/true"}, nil, host); err == nil || !strings.Contains(err.Error(), "twice") {
		t.Errorf("a second Begin = %v, want it refused", err)
	}
	if err := c.Wait(); err != nil {
		t.Errorf("the run Begin started: %v", err)
	}

	other := cfg
	other.Virtual.Seed++
	c = prestarted(t, cfg, &out, &errb)
	if err := c.Begin(other, []string{"/bin/sh", "-c", "echo ran"}, nil, host); err != nil {
		t.Fatal(err)
	}
	err = c.Wait()
	var se *SetupError
	if !errors.As(err, &se) || !strings.Contains(se.Msg, "configuration changed") {
		t.Errorf("Wait = %v, want a setup error naming the changed configuration", err)
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) || strings.Contains(out.String(), "ran") {
		t.Errorf("the agent ran with a configuration the init did not set up: %q", out.String())
	}
}

// TestBeginAfterTheInitDied: Begin on a sandbox whose init is gone returns
// an error at once (not a hang), and Wait reaps the init.
func TestBeginAfterTheInitDied(t *testing.T) {
	t.Parallel()
	cfg, host := directConfig(t)
	var out, errb bytes.Buffer
	c := prestarted(t, cfg, &out, &errb)
	c.Process.Kill()
	var ws unix.Siginfo
	if err := unix.Waitid(unix.P_PID, c.Process.Pid, &ws, unix.WEXITED|unix.WNOWAIT, nil); err != nil {
		t.Fatal(err)
	}
	err := c.Begin(cfg, []string{"/bin/sh", "-c", "echo ran"}, nil, host)
	if err == nil || !strings.Contains(err.Error(), "init is gone") {
		t.Errorf("Begin = %v, want the init gone", err)
	}
	c.Wait()
	if c.ProcessState == nil || strings.Contains(out.String(), "ran") {
		t.Errorf("the init was not reaped (%v) or the agent ran (%q)", c.ProcessState, out.String())
	}
}

// TestPrestartBeforeStaging: a direct sandbox's init started before its
// staging directory exists (as dal-exec starts it, first thing) gets the
// staging files on its gate once Configure names the directory, and its
// agent runs as Command's does, the syscall layer's counts in the staging
// directory, with the seed Configure gave, not Prestart's. Begin before
// Configure, Configure twice or for a sandbox started otherwise (other
// CPUs) is refused.
func TestPrestartBeforeStaging(t *testing.T) {
	t.Parallel()
	cfg, _ := directConfig(t)
	script := `echo $$; head -c 8 /dev/urandom | od -An -tx1; date +%s`
	want := run(t, cfg, script)
	if want.code != 0 {
		t.Fatalf("Command's run: exit %d: %s", want.code, want.stderr)
	}
	// Started for a guess of the configuration: another seed, which
	// Configure corrects (dal-exec starts the sandbox before it has parsed
	// its command line).
	early := cfg
	early.Staging, early.Mounts = "", nil
	early.Virtual.Seed++
	var out, errb bytes.Buffer
	c := prestarted(t, early, &out, &errb)
	argv := []string{"/bin/sh", "-c", script}
	env := []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"}
	if err := c.Begin(cfg, argv, env, cfg.Workspace); err == nil || !strings.Contains(err.Error(), "Configure") {
		t.Errorf("Begin before Configure = %v, want it refused", err)
	}
	cfg.Staging = filepath.Join(t.TempDir(), "later")
	other := cfg
	other.CPUs = []int{0}
	if err := c.Configure(other); err == nil || !strings.Contains(err.Error(), "another kind") {
		t.Errorf("Configure for other CPUs = %v, want it refused", err)
	}
	if err := c.Configure(cfg); err != nil {
		t.Fatal(err)
	}
	if err := c.Configure(cfg); err == nil {
		t.Error("a second Configure succeeded")
	}
	if err := c.Begin(cfg, argv, env, cfg.Workspace); err != nil {
		t.Fatal(err)
	}
	if err := c.Wait(); err != nil {
		t.Fatalf("prestarted run: %v (stderr %q)", err, errb.String())
	}
	if out.String() != want.stdout {
		t.Errorf("the agent of an init started before its staging directory saw\n%s\nCommand's saw\n%s", out.String(), want.stdout)
	}
	counts, ok, err := Virtualized(cfg)
	if err != nil || !ok || counts.Served[sysvirt.Random] == 0 && counts.Served[sysvirt.Clock] == 0 {
		t.Errorf("the syscall layer's counts in the staging directory: %+v, %v, %v", counts, ok, err)
	}

	// A run abandoned before Configure: the init ends when waited for.
	c = prestarted(t, early, &out, &errb)
	if err := c.Wait(); !errors.Is(err, errGate) {
		t.Errorf("Wait before Configure = %v, want the agent not started", err)
	}
}
