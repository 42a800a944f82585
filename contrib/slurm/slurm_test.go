package slurm

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestScriptsParse: bash reads every script.
func TestScriptsParse(t *testing.T) {
	t.Parallel()
	for _, f := range []string{"submit.sh", "consistency-shards.sbatch", "consistency-merge.sbatch"} {
		if out, err := exec.Command("bash", "-n", f).CombinedOutput(); err != nil {
			t.Errorf("%s: %v\n%s", f, err, out)
		}
		if fi, err := os.Stat(f); err != nil || fi.Mode()&0o111 == 0 {
			t.Errorf("%s is not executable (%v)", f, err)
		}
	}
}

// fakeTools is a PATH directory holding the given shell scripts, for the
// cases a real machine here cannot be in (a Slurm without munge): the
// scripts stand in for Slurm's commands.
func fakeTools(t *testing.T, tools map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range tools {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestSubmitSaysWhatToInstall: without sbatch on PATH, or with a Slurm
// that authenticates with munge and no munge, submit.sh exits 2 with one
// sentence naming what to install, and submits nothing.
func TestSubmitSaysWhatToInstall(t *testing.T) {
	t.Parallel()
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Fatal(err)
	}
	submitted := filepath.Join(t.TempDir(), "submitted")
	cases := []struct {
		name  string
		tools map[string]string
		want  string
	}{
		{"no sbatch", map[string]string{}, "sbatch is not on PATH: install Slurm's client commands (Debian: apt-get install slurm-client)"},
		{"no munge", map[string]string{
			"sbatch":   "touch " + submitted,
			"scontrol": `echo "AuthType                = auth/munge"`,
		}, "which is not installed: install it (Debian: apt-get install munge)"},
		{"no munged", map[string]string{
			"sbatch":   "touch " + submitted,
			"scontrol": `echo "AuthType                = auth/munge"`,
			"munge":    "echo 'munge: Error: Failed to access \"/run/munge/munge.socket.2\"' >&2; exit 1",
		}, "start munged"},
	}
	for _, c := range cases {
		dir := fakeTools(t, c.tools)
		// dirname, seq, mkdir and the like come from coreutils.
		for _, tool := range []string{"dirname", "mkdir", "grep", "sed", "seq", "hostname"} {
			if p, err := exec.LookPath(tool); err == nil {
				os.Symlink(p, filepath.Join(dir, tool))
			}
		}
		cmd := exec.Command(bash, "submit.sh", "--shards", "2", "--results", t.TempDir(), "--", "--runs", "2", "--", "true")
		cmd.Env = []string{"PATH=" + dir, "HOME=" + t.TempDir()}
		out, err := cmd.CombinedOutput()
		msg := strings.TrimSpace(string(out))
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || !strings.Contains(msg, c.want) || strings.Contains(msg, "\n") {
			t.Errorf("%s: %v, said %q; want exit 2 and one line with %q", c.name, err, msg, c.want)
		}
		if _, err := os.Stat(submitted); err == nil {
			t.Errorf("%s: something was submitted", c.name)
		}
	}
}
