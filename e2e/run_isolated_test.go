package e2e

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// runAgent is the agent of the isolated-run tests: it writes a file in its
// working directory, reads one the host made, and prints dal's paths, its
// ids and the clock, then exits 3.
const runAgent = `echo written > out.txt
cat "$1"
echo "tmpdir $TMPDIR $(mktemp)"
echo "socket $DAL_SOCKET token $(wc -c < "$DAL_SESSION_TOKEN_FILE") marks $DAL_MARKS"
echo "ids $$ $(id -u) $(hostname) $(date +%s)"
exit 3
`

// TestRunIsolatesOnTheHostsFiles: `dal-exec run` (strict) starts the agent
// in namespaces of its own on the host's files: what it writes stays, what
// the host has it reads, dal's own files are at the same paths in every
// run, and two runs print the same bytes (issue 14).
func TestRunIsolatesOnTheHostsFiles(t *testing.T) {
	t.Parallel()
	host := filepath.Join(t.TempDir(), "input.txt")
	if err := os.WriteFile(host, []byte("from the host\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var outs []string
	for i := range 2 {
		ws := filepath.Join(t.TempDir(), "ws")
		if err := os.Mkdir(ws, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(ws, "agent.sh"), []byte(runAgent), 0o644); err != nil {
			t.Fatal(err)
		}
		r := dalIn(t, ws, nil, "run", "--", "bash", "agent.sh", host)
		if r.code != 3 {
			t.Fatalf("run %d: exit %d, want the agent's 3\n%s%s", i, r.code, r.stdout, r.stderr)
		}
		if b, err := os.ReadFile(filepath.Join(ws, "out.txt")); err != nil || string(b) != "written\n" {
			t.Errorf("the agent's out.txt on the host: %q (%v)", b, err)
		}
		outs = append(outs, r.stdout)
	}
	if outs[0] != outs[1] {
		t.Errorf("two runs differ:\n%s", lineDiff(outs[0], outs[1]))
	}
	for _, want := range []string{"from the host\n", "tmpdir /tmp/.dal-run/tmp /tmp/.dal-run/tmp/tmp.",
		"socket /tmp/.dal-run/dald.sock token 65 marks /tmp/.dal-run/marks\n", "ids 100 0 dal 1767225600\n"} {
		if !strings.Contains(outs[0], want) {
			t.Errorf("the agent printed no %q in:\n%s", want, outs[0])
		}
	}
}

// TestRunIsolatesRootless: as an unprivileged user the agent keeps that
// user's ids (not root), and what it writes is the user's.
func TestRunIsolatesRootless(t *testing.T) {
	t.Parallel()
	home := userDir(t)
	input := userWrite(t, filepath.Join(home, "input.txt"), []byte("from the host\n"), 0o644)
	dal := userCopy(t, bin.exec, home, 0o755)
	userCopy(t, bin.sidecar, home, 0o755) // the init starts from it, with the user's ids
	var outs []string
	var ws string
	for i := range 2 {
		// Fresh workspaces of one path length, as in the root test.
		ws = filepath.Join(home, "ws"+itoa(i))
		if err := os.Mkdir(ws, 0o755); err != nil {
			t.Fatal(err)
		}
		if os.Geteuid() == 0 {
			if err := os.Chown(ws, rootlessUID, rootlessUID); err != nil {
				t.Fatal(err)
			}
		}
		userWrite(t, filepath.Join(ws, "agent.sh"), []byte(runAgent), 0o644)
		r := asUser(t, home, ws, nil, dal, "run", "--", "bash", "agent.sh", input)
		if r.code != 3 {
			t.Fatalf("rootless run: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
		outs = append(outs, r.stdout)
	}
	if outs[0] != outs[1] {
		t.Errorf("two rootless runs differ:\n%s", lineDiff(outs[0], outs[1]))
	}
	uid := itoa(os.Geteuid())
	if os.Geteuid() == 0 {
		uid = itoa(rootlessUID)
	}
	if want := "ids 100 " + uid + " dal 1767225600\n"; !strings.Contains(outs[0], want) {
		t.Errorf("the rootless agent printed no %q in:\n%s", want, outs[0])
	}
	fi, err := os.Stat(filepath.Join(ws, "out.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if owner := itoa(int(fi.Sys().(*syscall.Stat_t).Uid)); owner != uid {
		t.Errorf("the agent's out.txt is owned by %s, want %s", owner, uid)
	}
}

// TestRunInsideRun: a run inside a run is served by the outer run's layer
// (one seccomp supervisor per process: the kernel's rule) and says so; a
// record there is refused in one sentence.
func TestRunInsideRun(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	r := dalIn(t, ws, nil, "run", "--", bin.exec, "run", "--", "sh", "-c", "echo inner $(date +%s)")
	if r.code != 0 || r.stdout != "inner 1767225600\n" || !strings.Contains(r.stderr, "inside another dal sandbox") {
		t.Errorf("run inside run: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	r = dalIn(t, ws, nil, "run", "--", bin.exec, "record", "--out", filepath.Join(ws, "b"), "--", "true")
	if r.code != 2 || !strings.Contains(r.stderr, "cannot start inside another") {
		t.Errorf("record inside run: exit %d, stderr %q", r.code, r.stderr)
	}
	if _, err := os.Lstat(filepath.Join(ws, "b")); !os.IsNotExist(err) {
		t.Errorf("the refused record left %s/b (%v)", ws, err)
	}
}

// TestRunThatFailsBeforeItsAgent: the sandbox of a strict run starts
// before dal-exec has prepared the agent (sandbox.Prestart). When the
// preparation fails (here the runtime shims cannot be installed anywhere),
// dal-exec says why in one sentence, ends that sandbox without running the
// agent, and leaves no run directory behind.
func TestRunThatFailsBeforeItsAgent(t *testing.T) {
	t.Parallel()
	tmp := t.TempDir()
	blocked := filepath.Join(tmp, "cache-is-a-file")
	for _, f := range []string{blocked, filepath.Join(tmp, "dal-shims-"+strconv.Itoa(os.Getuid()))} {
		if err := os.WriteFile(f, nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	marker := filepath.Join(tmp, "ran")
	r := dalIn(t, t.TempDir(), []string{"TMPDIR=" + tmp, "XDG_CACHE_HOME=" + blocked}, "run", "--", "touch", marker)
	if r.code != 2 || !strings.Contains(r.stderr, "install runtime shims") {
		t.Fatalf("exit %d, want 2 naming the shims\n%s%s", r.code, r.stdout, r.stderr)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("the agent ran")
	}
	left, _ := filepath.Glob(filepath.Join(tmp, "dal-run-*"))
	if len(left) != 0 {
		t.Errorf("the failed run left %v", left)
	}
}
