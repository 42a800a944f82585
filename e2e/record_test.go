package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dal-runtime/dal/internal/sandbox"
)

// workspace makes a workspace for testdata/fsagent.py.
func workspace(t *testing.T) string {
	t.Helper()
	ws := t.TempDir()
	agent, _ := os.ReadFile("testdata/fsagent.py")
	for name, body := range map[string]string{"agent.py": string(agent), "input.txt": "alpha\n", "log.txt": "first\n", "obsolete.txt": "old\n"} {
		if err := os.WriteFile(filepath.Join(ws, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return ws
}

func dalIn(t *testing.T, dir string, env []string, args ...string) result {
	t.Helper()
	cmd := exec.Command(bin.exec, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	return runCmd(t, cmd)
}

// recordedIn is the workspace a bundle of the test's was recorded in,
// where its replay and revert are run from.
func recordedIn(t *testing.T, bundle string) string {
	t.Helper()
	var env struct{ Workspace string }
	if err := json.Unmarshal(mustRead(t, filepath.Join(bundle, "env.json")), &env); err != nil || env.Workspace == "" {
		t.Fatalf("%s/env.json names no workspace: %v", bundle, err)
	}
	return env.Workspace
}

func TestRecordReplayRevert(t *testing.T) {
	t.Parallel()
	ws := workspace(t)
	out := filepath.Join(t.TempDir(), "run1")
	// A home on the host's read-only tree: the sandbox's private /tmp,
	// /var/tmp and /run would swallow the agent's write to $HOME instead of
	// refusing it.
	home, err := os.MkdirTemp("/var/cache", "dal-e2e-home-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(home) })
	key := []string{"DAL_KEY=" + filepath.Join(t.TempDir(), "k"), "HOME=" + home}
	pre, _ := sandbox.TreeHash(ws)
	rec := dalIn(t, ws, key, "record", "--mode", "seeded", "--seed", "7", "--out", out, "--", "python3", "agent.py")
	if rec.code != 0 || !strings.Contains(rec.stdout, "refused /etc/dal-e2e Read-only file system") || !strings.Contains(rec.stdout, "refused "+home+"/.dal-e2e") {
		t.Fatalf("record: %d %q %q", rec.code, rec.stdout, rec.stderr)
	}
	if !strings.Contains(rec.stderr, "created a signing key") || !strings.Contains(rec.stderr, "tried to write outside the workspace (openat /etc/dal-e2e)") ||
		!strings.Contains(rec.stderr, "(openat "+home+"/.dal-e2e)") {
		t.Fatalf("record did not report the key or the denied writes: %q", rec.stderr)
	}
	// Applied, as an ordinary run would.
	if _, err := os.Stat(filepath.Join(ws, "obsolete.txt")); !os.IsNotExist(err) {
		t.Fatal("the deletion was not applied")
	}
	var env struct {
		Mode   string                      `json:"mode"`
		Denied []struct{ Op, Path string } `json:"denied_writes"`
	}
	b, _ := os.ReadFile(filepath.Join(out, "env.json"))
	if json.Unmarshal(b, &env) != nil || env.Mode != "seeded" || len(env.Denied) != 2 {
		t.Fatalf("env.json: %s", b)
	}
	var m struct {
		Config struct {
			ExecutionMode string `json:"execution_mode"`
			Seed          uint64 `json:"seed"`
		} `json:"config"`
		Inputs struct {
			UserPrompt string `json:"user_prompt"`
		} `json:"inputs"`
		Outputs struct {
			Artifacts []struct{ Path, Operation string } `json:"artifacts_created"`
		} `json:"outputs"`
	}
	b, _ = os.ReadFile(filepath.Join(out, "manifest.json"))
	if json.Unmarshal(b, &m) != nil || m.Config.ExecutionMode != "seeded" || m.Config.Seed != 7 || m.Inputs.UserPrompt != "python3 agent.py" || len(m.Outputs.Artifacts) != 3 {
		t.Fatalf("manifest: %s", b)
	}

	// Replay reproduces it exactly, from the post-run workspace.
	rep := dalIn(t, ws, key, "replay", "--json", "-", out)
	if rep.code != 0 || !strings.Contains(rep.stdout, `"fidelity": 1`) || !strings.Contains(rep.stderr, "EXACT") {
		t.Fatalf("replay: %d %q %q", rep.code, rep.stdout, rep.stderr)
	}
	after, _ := sandbox.TreeHash(ws)

	// A changed input is drift in stdout and in the files, exit 1.
	os.WriteFile(filepath.Join(ws, "input.txt"), []byte("beta\n"), 0o644)
	d := dalIn(t, ws, key, "replay", out)
	if d.code != 1 || !strings.Contains(d.stdout, "DRIFT  stdout") || !strings.Contains(d.stdout, "- input alpha") || !strings.Contains(d.stdout, "+ input beta") ||
		!strings.Contains(d.stdout, "DRIFT  fs_diff") || !strings.Contains(d.stdout, "out.txt") {
		t.Fatalf("drift: %d %q %q", d.code, d.stdout, d.stderr)
	}
	if h, _ := sandbox.TreeHash(ws); h == after {
		t.Fatal("test setup: input change not visible")
	}
	// Revert refuses a workspace changed since the run ... (input.txt is
	// not a path the run changed, so restore the run's own output instead)
	os.WriteFile(filepath.Join(ws, "input.txt"), []byte("alpha\n"), 0o644)
	os.WriteFile(filepath.Join(ws, "out.txt"), []byte("edited\n"), 0o644)
	if r := dalIn(t, ws, key, "revert", out); r.code != 2 || !strings.Contains(r.stderr, "out.txt") {
		t.Fatalf("revert of a changed workspace: %d %q", r.code, r.stderr)
	}
	// ... and restores the exact pre-run tree otherwise.
	os.Remove(filepath.Join(ws, "out.txt"))
	os.WriteFile(filepath.Join(ws, "out.txt"), mustRead(t, filepath.Join(out, "fs-diff", "files", "out.txt")), 0o644)
	if r := dalIn(t, ws, key, "revert", out); r.code != 0 {
		t.Fatalf("revert: %d %q", r.code, r.stderr)
	}
	if h, _ := sandbox.TreeHash(ws); h != pre {
		t.Fatal("revert did not restore the pre-run tree hash")
	}
	// From the pre-run state, replay is exact again.
	if r := dalIn(t, ws, key, "replay", out); r.code != 0 {
		t.Fatalf("replay from the pre-run state: %d %q %q", r.code, r.stdout, r.stderr)
	}
}

func mustRead(t *testing.T, p string) []byte {
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestTamperedBundleIsRefused(t *testing.T) {
	t.Parallel()
	ws := workspace(t)
	out := filepath.Join(t.TempDir(), "run")
	key := []string{"DAL_KEY=" + filepath.Join(t.TempDir(), "k")}
	if r := dalIn(t, ws, key, "record", "--no-apply", "--out", out, "--", "python3", "agent.py"); r.code != 0 {
		t.Fatalf("record: %q", r.stderr)
	}
	for _, rel := range []string{"logs/stdout", "clock.json", "fs-diff/files/out.txt", "manifest.json"} {
		p := filepath.Join(out, rel)
		orig := mustRead(t, p)
		flipped := append([]byte(nil), orig...)
		flipped[len(flipped)/2] ^= 1
		os.WriteFile(p, flipped, 0o644)
		for _, cmd := range []string{"verify", "replay"} {
			r := dalIn(t, ws, key, cmd, out)
			if r.code != 2 || !strings.Contains(r.stderr, rel) {
				t.Errorf("%s with %s flipped: exit %d, %q", cmd, rel, r.code, r.stderr)
			}
		}
		os.WriteFile(p, orig, 0o644)
	}
	if r := dalIn(t, ws, nil, "verify", out); r.code != 0 {
		t.Fatalf("restored bundle: %q", r.stderr)
	}
}

func TestKilledRecordLeavesNothing(t *testing.T) {
	t.Parallel()
	ws := workspace(t)
	os.WriteFile(filepath.Join(ws, "slow.py"), []byte("import time, os\nopen('made.txt','w').write('x')\nos.remove('obsolete.txt')\nprint('ready', flush=True)\ntime.sleep(30)\n"), 0o644)
	pre, _ := sandbox.TreeHash(ws)
	out := filepath.Join(t.TempDir(), "run")
	cmd := exec.Command(bin.exec, "record", "--mode", "seeded", "--out", out, "--", "python3", "slow.py")
	cmd.Dir = ws
	cmd.Env = append(os.Environ(), "DAL_KEY="+filepath.Join(t.TempDir(), "k"))
	pipe, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 6)
	pipe.Read(buf) // "ready": the agent has written
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	time.Sleep(100 * time.Millisecond) // the sandbox dies with its parent (Pdeathsig)
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Fatal("a bundle exists at --out after kill -9")
	}
	if h, _ := sandbox.TreeHash(ws); h != pre {
		t.Fatal("the workspace changed after kill -9 of record")
	}
}

func TestDiffNamesTheDifferingComponents(t *testing.T) {
	t.Parallel()
	ws := workspace(t)
	dir := t.TempDir()
	key := []string{"DAL_KEY=" + filepath.Join(dir, "k")}
	for _, seed := range []string{"7", "8"} {
		if r := dalIn(t, ws, key, "record", "--no-apply", "--seed", seed, "--out", filepath.Join(dir, seed), "--", "python3", "agent.py"); r.code != 0 {
			t.Fatalf("record: %q", r.stderr)
		}
	}
	d := dalIn(t, ws, key, "diff", filepath.Join(dir, "7"), filepath.Join(dir, "8"))
	for _, want := range []string{"same       command", "DIFFERENT  seed", "7 vs 8", "DIFFERENT  stdout", "first difference at line 1", "DIFFERENT  fs_diff", "same       clock"} {
		if !strings.Contains(d.stdout, want) {
			t.Errorf("diff output lacks %q:\n%s", want, d.stdout)
		}
	}
	if d.code != 1 {
		t.Errorf("diff of different bundles exited %d", d.code)
	}
	if s := dalIn(t, ws, key, "diff", filepath.Join(dir, "7"), filepath.Join(dir, "7")); s.code != 0 || strings.Contains(s.stdout, "DIFFERENT") {
		t.Errorf("diff of a bundle with itself: %d %s", s.code, s.stdout)
	}
}

func TestFullDiskDuringRecord(t *testing.T) {
	t.Parallel()
	small := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", small).CombinedOutput(); err != nil {
		t.Fatalf("mount a small tmpfs (root and tmpfs are required): %v %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", small).Run() })
	ws := workspace(t)
	os.WriteFile(filepath.Join(ws, "big.py"), []byte("open('big.bin','wb').write(b'x'*300000)\n"), 0o644)
	pre, _ := sandbox.TreeHash(ws)
	key := []string{"DAL_KEY=" + filepath.Join(t.TempDir(), "k")}
	r := dalIn(t, ws, key, "record", "--out", filepath.Join(small, "run"), "--", "python3", "big.py")
	if r.code != 2 || !strings.Contains(r.stderr, "no space left on device") || !strings.Contains(r.stderr, "written and signed as incomplete") ||
		strings.Count(strings.TrimSpace(r.stderr), "\n") > 1 {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
	// The file changes did not fit; the rest of the run's record did,
	// once their partial copy was removed: an incomplete bundle, and
	// nothing else, is left.
	if left, _ := os.ReadDir(small); len(left) != 1 || left[0].Name() != "run" {
		t.Fatalf("left on the full disk: %v", left)
	}
	if v := dalIn(t, ws, key, "verify", filepath.Join(small, "run")); v.code != 0 || !strings.Contains(v.stdout, "incomplete: the run's file changes") {
		t.Errorf("verify: exit %d %q %q", v.code, v.stdout, v.stderr)
	}
	if h, _ := sandbox.TreeHash(ws); h != pre {
		t.Fatal("the workspace changed")
	}
}

func TestSelfContainedReplayWithoutTheWorkspace(t *testing.T) {
	t.Parallel()
	ws := workspace(t)
	out := filepath.Join(t.TempDir(), "run")
	plain := filepath.Join(t.TempDir(), "plain")
	key := []string{"DAL_KEY=" + filepath.Join(t.TempDir(), "k")}
	if r := dalIn(t, ws, key, "record", "--no-apply", "--out", plain, "--", "python3", "agent.py"); r.code != 0 {
		t.Fatalf("record: %q", r.stderr)
	}
	if r := dalIn(t, ws, key, "record", "--self-contained", "--out", out, "--", "python3", "agent.py"); r.code != 0 {
		t.Fatalf("record: %q", r.stderr)
	}
	if err := os.RemoveAll(ws); err != nil {
		t.Fatal(err)
	}
	// Replay acts on the current directory or --workspace, here the
	// workspace's path, which no longer exists.
	if r := dalIn(t, "/", key, "replay", out); r.code != 2 || !strings.Contains(r.stderr, "not in the current directory /") || !strings.Contains(r.stderr, "--workspace") {
		t.Fatalf("replay from elsewhere without --workspace: %d %q", r.code, r.stderr)
	}
	r := dalIn(t, "/", key, "replay", "--workspace", ws, out)
	if r.code != 0 || !strings.Contains(r.stdout, "EXACT") || !strings.Contains(r.stdout, "self-contained state") {
		t.Fatalf("self-contained replay: %d %q %q", r.code, r.stdout, r.stderr)
	}
	if _, err := os.Stat(ws); !os.IsNotExist(err) {
		t.Fatal("replay left the workspace's mount point behind")
	}
	// A bundle that is not self-contained says how to proceed.
	r = dalIn(t, "/", key, "replay", "--workspace", ws, plain)
	if r.code != 2 || !strings.Contains(r.stderr, "does not exist here") || !strings.Contains(r.stderr, "--self-contained") {
		t.Fatalf("plain bundle without its workspace: %d %q", r.code, r.stderr)
	}
}

// TestAgentFilesUnderTmpStayReadable: the sandbox's private /tmp does not
// hide the agent's own script (and its directory) named on the command
// line; they are read-only inside.
func TestAgentFilesUnderTmpStayReadable(t *testing.T) {
	t.Parallel()
	scripts := t.TempDir()
	os.WriteFile(filepath.Join(scripts, "data.txt"), []byte("from beside the script\n"), 0o644)
	os.WriteFile(filepath.Join(scripts, "agent.py"), []byte(`import os
here = os.path.dirname(os.path.abspath(__file__))
print(open(os.path.join(here, "data.txt")).read().strip())
try:
    open(os.path.join(here, "new.txt"), "w")
    print("wrote beside the script")
except OSError:
    print("read-only beside the script")
`), 0o644)
	// A workspace elsewhere, and one inside the script's directory.
	for _, ws := range []string{t.TempDir(), filepath.Join(scripts, "ws")} {
		os.MkdirAll(ws, 0o755)
		out := filepath.Join(t.TempDir(), "b")
		env := []string{"DAL_KEY=" + filepath.Join(t.TempDir(), "k")}
		r := dalExec(t, env, "record", "--workspace", ws, "--out", out, "--", "python3", filepath.Join(scripts, "agent.py"))
		if r.code != 0 || r.stdout != "from beside the script\nread-only beside the script\n" {
			t.Fatalf("record in %s: exit %d, stdout %q\n%s", ws, r.code, r.stdout, r.stderr)
		}
		if r := dalExec(t, env, "replay", "--workspace", ws, out); r.code != 0 {
			t.Errorf("replay: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
	}
}

// With $HOME (where the shims are installed) and the agent's script in
// directories the sandbox makes private (/var/tmp here), both are still
// shown to the agent: its clock is virtual, the shim loaded.
func TestRecordWithHomeInAPrivateDir(t *testing.T) {
	t.Parallel()
	home, err := os.MkdirTemp("/var/tmp", "dal-e2e-home-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(home) })
	script := filepath.Join(home, "agent.py")
	os.WriteFile(script, []byte("import time\nprint(time.time())\n"), 0o644)
	env := []string{"DAL_KEY=" + filepath.Join(t.TempDir(), "k"), "HOME=" + home, "XDG_CACHE_HOME="}
	r := dalIn(t, t.TempDir(), env, "record", "--out", filepath.Join(t.TempDir(), "b"), "--", "python3", script)
	if r.code != 0 || strings.TrimSpace(r.stdout) != "1767225600.000001" || strings.Contains(r.stderr, "never loaded the dal shim") {
		t.Fatalf("record: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
}

// An agent that prints its environment repeats: dal's own variables read
// the same in every record and in replay (the socket, the token as a file,
// the clock log path, the session id), and Node and Python still reach dald
// through them (their clocks are virtual).
func TestAgentEnvironmentRepeats(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	key := []string{"DAL_KEY=" + filepath.Join(t.TempDir(), "k")}
	agent := `env | sort; node -e 'console.log(Date.now())'; python3 -c 'import time; print(time.time())'`
	var outs []string
	var bundle string
	for range 2 {
		bundle = filepath.Join(t.TempDir(), "b")
		r := dalIn(t, ws, key, "record", "--no-apply", "--out", bundle, "--", "sh", "-c", agent)
		if r.code != 0 {
			t.Fatalf("record: exit %d\n%s", r.code, r.stderr)
		}
		outs = append(outs, r.stdout)
	}
	if outs[0] != outs[1] {
		t.Errorf("two records printed different environments:\n%s\n---\n%s", outs[0], outs[1])
	}
	for _, want := range []string{"DAL_SOCKET=/run/dal/dald.sock\n", "DAL_SESSION_TOKEN_FILE=/run/dal/session-token\n",
		"AGENT_CLOCK_FILE=/run/dal/clock.json\n", "1767225600000\n", "1767225600.000001\n"} {
		if !strings.Contains(outs[0], want) {
			t.Errorf("the agent's output lacks %q:\n%s", want, outs[0])
		}
	}
	if strings.Contains(outs[0], "DAL_SESSION_TOKEN=") {
		t.Errorf("the token is in the environment:\n%s", outs[0])
	}
	if r := dalIn(t, ws, key, "replay", bundle); r.code != 0 || !strings.Contains(r.stdout, "EXACT") {
		t.Errorf("replay: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
}
