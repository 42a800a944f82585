package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestFullHandOver: dal-exec has no Rego engine and no Prometheus registry
// (their packages cost every start about 4 ms); a command that evaluates a
// policy or writes --metrics-textfile runs in the dal-exec-full beside it,
// when that one is safe and of its own build, and otherwise stops with one
// sentence saying what to install. Nothing of the hand-over reaches the
// agent.
func TestFullHandOver(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "version", "-m", bin.exec).CombinedOutput()
	if err != nil {
		t.Fatalf("go version -m: %v\n%s", err, out)
	}
	for _, m := range []string{"open-policy-agent", "prometheus", "protobuf"} {
		if strings.Contains(string(out), m) {
			t.Errorf("dal-exec links %s, which it leaves to dal-exec-full to start sooner:\n%s", m, out)
		}
	}
	stale := t.TempDir()
	buildStale(t, stale, "dal-exec-full")
	pol := examplePolicy(t, "deny-git-push.rego")

	const compiled = "has no proxy or sandbox for --policy" // run's refusal, after compiling the policy
	for _, c := range []struct {
		name   string
		beside func(dir string)
		want   string
	}{
		{"same build", func(dir string) { link(t, bin.full, dir) }, compiled},
		{"none", func(string) {}, "which dal-exec leaves to dal-exec-full, installed beside it: open "},
		{"another build", func(dir string) { link(t, filepath.Join(stale, "dal-exec-full"), dir) }, "dal-exec-full beside dal-exec is of another build: reinstall both"},
		{"a copy of dal-exec", func(dir string) {
			if err := os.Link(bin.exec, filepath.Join(dir, "dal-exec-full")); err != nil {
				t.Fatal(err)
			}
		}, "dal-exec-full beside dal-exec has no Rego engine or Prometheus registry"},
		{"symbolic link", func(dir string) {
			if err := os.Symlink(bin.full, filepath.Join(dir, "dal-exec-full")); err != nil {
				t.Fatal(err)
			}
		}, "is a symbolic link or under one"},
		{"writable by everyone", func(dir string) { copyMode(t, bin.full, dir, 0o757) }, "is writable by everyone"},
	} {
		dir := t.TempDir()
		dal := link(t, bin.exec, dir)
		link(t, bin.sidecar, dir)
		c.beside(dir)
		r := runCmd(t, exec.Command(dal, "run", "--policy", pol, "--", "true"))
		if r.code != 2 || !strings.Contains(r.stderr, c.want) || strings.Count(r.stderr, "\n") != 1 {
			t.Errorf("%s: exit %d, %q; want exit 2 and one line with %q", c.name, r.code, r.stderr, c.want)
		}
		if c.want == compiled {
			continue
		}
		// --metrics-textfile is handed over the same way.
		prom := filepath.Join(dir, "dal.prom")
		r = runCmd(t, exec.Command(dal, "run", "--metrics-textfile", prom, "--", "true"))
		if _, err := os.Stat(prom); r.code != 2 || !strings.Contains(r.stderr, c.want) || err == nil {
			t.Errorf("%s: run --metrics-textfile: exit %d, %q (textfile: %v); want exit 2, %q and no file", c.name, r.code, r.stderr, err, c.want)
		}
	}

	// The textfile, written by dal-exec-full for dal-exec.
	prom := filepath.Join(t.TempDir(), "dal.prom")
	if r := dalExec(t, nil, "run", "--metrics-textfile", prom, "--", "true"); r.code != 0 {
		t.Fatalf("run --metrics-textfile: exit %d: %s", r.code, r.stderr)
	}
	if b := string(mustRead(t, prom)); !strings.Contains(b, "# TYPE dal_sessions_total counter") || !strings.Contains(b, "dal_sessions_total 1") {
		t.Errorf("the textfile has no count of the run's session:\n%s", b)
	}

	// Through the hand-over, record and replay with a policy; the agent's
	// environment has no trace of it.
	dir := t.TempDir()
	ws := filepath.Join(dir, "ws")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	b := filepath.Join(dir, "b")
	r := dalExec(t, []string{"DAL_KEY=" + filepath.Join(dir, "k")}, "record", "--policy", pol, "--workspace", ws, "--out", b, "--",
		"sh", "-c", `echo "${DAL_EXEC_BUILD-unset}"`)
	if r.code != 0 || r.stdout != "unset\n" {
		t.Fatalf("record --policy: exit %d, stdout %q (want unset), stderr %s", r.code, r.stdout, r.stderr)
	}
	if a := readAudit(t, b); a.OPAVersion == "" || len(a.Decisions) == 0 {
		t.Errorf("policy.json names no OPA version or decision: %+v", a)
	}
	r = dalExec(t, []string{"DAL_KEY=" + filepath.Join(dir, "k")}, "replay", "--workspace", ws, b)
	if r.code != 0 || !strings.Contains(r.stdout, "ok     policy") {
		t.Errorf("replay of a bundle with a policy: exit %d, %s%s", r.code, r.stdout, r.stderr)
	}
}
