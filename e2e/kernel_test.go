package e2e

import (
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestAKernelWithoutAFeatureIsNamed runs dal-exec where a system call the
// sandbox needs answers ENOSYS, as on an older kernel (a seccomp filter
// around dal-exec refuses it): run and record stop before anything starts
// with one sentence naming what is missing and what works without it, and
// `run --mode default`, which needs none of it, still runs.
func TestAKernelWithoutAFeatureIsNamed(t *testing.T) {
	t.Parallel()
	refuse := filepath.Join(t.TempDir(), "refuse")
	if out, err := exec.Command("gcc", "-O2", "-o", refuse, "testdata/nokernel/refuse.c").CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, out)
	}
	for _, c := range []struct {
		nr   int
		want string
		args []string
	}{
		{unix.SYS_PIDFD_GETFD, "this kernel lacks pidfd_getfd (Linux 5.6 or later", []string{"run", "--", "true"}},
		{unix.SYS_PIDFD_OPEN, "this kernel lacks pidfd_open (Linux 5.3 or later", []string{"run", "--seed", "3", "--", "true"}},
		{unix.SYS_SECCOMP, "this kernel lacks seccomp user notification (Linux 5.0 or later", []string{"record", "--no-apply", "--out", filepath.Join(t.TempDir(), "b"), "--", "true"}},
	} {
		cmd := exec.Command(refuse, append([]string{strconv.Itoa(c.nr), bin.exec}, c.args...)...)
		cmd.Dir = t.TempDir()
		cmd.Env = append(cmd.Environ(), "DAL_KEY="+filepath.Join(t.TempDir(), "key"))
		r := runCmd(t, cmd)
		var errs []string // record first notes the signing key it made
		for _, l := range strings.Split(strings.TrimSpace(r.stderr), "\n") {
			if !strings.HasPrefix(l, "dal: created a signing key") {
				errs = append(errs, l)
			}
		}
		if r.code == 0 || !strings.Contains(r.stderr, c.want) || !strings.Contains(r.stderr, "dal-exec run --mode default") || len(errs) != 1 {
			t.Errorf("%v with syscall %d refused: exit %d, stderr:\n%s\nwant one line with %q", c.args, c.nr, r.code, r.stderr, c.want)
		}
	}
	cmd := exec.Command(refuse, strconv.Itoa(unix.SYS_PIDFD_GETFD), bin.exec, "run", "--mode", "default", "--", "echo", "ran")
	cmd.Dir = t.TempDir()
	if r := runCmd(t, cmd); r.code != 0 || r.stdout != "ran\n" {
		t.Errorf("run --mode default without pidfd_getfd: exit %d, %q %q", r.code, r.stdout, r.stderr)
	}
}
