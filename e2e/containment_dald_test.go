package e2e

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dal-runtime/dal/internal/wire"
)

// TestDaldAgentReachesOnlyItsSession (issue 38): an agent under record,
// talking to dald itself with the socket and token dal-exec gave it, opens
// no session (20 tries), cannot hello as dal-exec or without its token,
// and cannot reach dald's own socket; as its session's process it works
// and sees its session only. After the run dald holds no session and the
// user's next run gets one.
func TestDaldAgentReachesOnlyItsSession(t *testing.T) {
	t.Parallel()
	probe := filepath.Join(filepath.Dir(bin.exec), "daldprobe")
	if out, err := exec.Command("go", "build", "-o", probe, "./testdata/daldprobe").CombinedOutput(); err != nil {
		t.Fatalf("build the probe: %v\n%s", err, out)
	}
	sock := filepath.Join(t.TempDir(), "dald.sock")
	d := exec.Command(bin.dald, "--socket", sock, "--metrics-addr", "", "--no-trace")
	stderr, _ := d.StderrPipe()
	if err := d.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Process.Signal(os.Interrupt); d.Wait() })
	sc := bufio.NewScanner(stderr)
	for sc.Scan() && !strings.Contains(sc.Text(), "dald listening") {
	}
	go func() {
		for sc.Scan() {
		}
	}()

	ws := t.TempDir()
	env := []string{"DAL_KEY=" + filepath.Join(t.TempDir(), "k"), "PROBE_MAIN=" + sock}
	out := filepath.Join(t.TempDir(), "bundle")
	rec := dalIn(t, ws, env, "record", "--no-apply", "--socket", sock, "--keep-env", "PROBE_MAIN", "--out", out, "--", probe)
	lines := strings.Split(strings.TrimSpace(rec.stdout), "\n")
	if rec.code != 0 || len(lines) != 6 {
		t.Fatalf("record: exit %d\nstdout %s\nstderr %s", rec.code, rec.stdout, rec.stderr)
	}
	for i, want := range []string{
		"sessions opened: 0",
		"exec hello: refused: this socket is session ",
		"shim without token: refused: token missing",
		"shim with token: ok",
		"status lists: 1 session(s) ok",
		"dald's own socket: cannot connect: ",
	} {
		if !strings.HasPrefix(lines[i], want) {
			t.Errorf("line %d: %q, want %q...", i+1, lines[i], want)
		}
	}
	c, _, err := wire.Dial(sock, wire.Request{Role: wire.RoleExec})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	st, err := c.Call(wire.Request{Op: wire.OpStatus})
	if err != nil || len(st.Sessions) != 0 {
		t.Errorf("after the run dald holds sessions %+v (%v), want none", st.Sessions, err)
	}
	entries, _ := os.ReadDir(filepath.Dir(sock))
	for _, e := range entries {
		if e.Name() != "dald.sock" {
			t.Errorf("left beside dald's socket after the run: %s", e.Name())
		}
	}
	if r := dalIn(t, ws, env, "run", "--socket", sock, "--", "true"); r.code != 0 {
		t.Errorf("the user's next run: exit %d\n%s", r.code, r.stderr)
	}
}
