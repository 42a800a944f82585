package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// sidecarProbe is what the agent prints about its sandbox's init, its
// name, and its own pid; it then waits for a line on its stdin, while the
// test reads from outside which file the init runs (the agent, without
// capabilities, may not read the link /proc/1/exe of its init, which has
// them).
const sidecarProbe = `cat /proc/1/comm; echo $$ $(date +%s); read x`

// TestSidecarInit: dal-exec starts its sandboxes' init from the
// dal-sandbox-init beside it when that is safe and of its own build, and
// from its own image otherwise (none there, another build's, a symbolic
// link, another owner's, one everyone may write): the agent sees the same.
// Run by hand, dal-sandbox-init says what it is and exits 2.
func TestSidecarInit(t *testing.T) {
	t.Parallel()
	stale := t.TempDir()
	buildStaleSidecar(t, stale)

	// Each case is a directory holding dal-exec (a hard link) and what
	// beside puts there; sidecar says whether the init runs from it.
	type sidecarCase struct {
		name    string
		beside  func(dir string)
		sidecar bool
	}
	cases := []sidecarCase{
		{"same build", func(dir string) { link(t, bin.sidecar, dir) }, true},
		{"none", func(string) {}, false},
		{"another build", func(dir string) { link(t, filepath.Join(stale, "dal-sandbox-init"), dir) }, false},
		{"symbolic link", func(dir string) {
			if err := os.Symlink(bin.sidecar, filepath.Join(dir, "dal-sandbox-init")); err != nil {
				t.Fatal(err)
			}
		}, false},
		{"writable by everyone", func(dir string) { copyMode(t, bin.sidecar, dir, 0o757) }, false},
	}
	if os.Geteuid() == 0 { // rootless, internal/sandbox's TestSidecarChecks has it
		cases = append(cases, sidecarCase{"another owner", func(dir string) {
			if err := os.Chown(copyMode(t, bin.sidecar, dir, 0o755), 65534, 65534); err != nil {
				t.Fatal(err)
			}
		}, false})
	}
	var first string
	for _, c := range cases {
		dir := t.TempDir()
		dal := link(t, bin.exec, dir)
		c.beside(dir)
		exe, rest := runProbe(t, c.name, dal)
		want := dal
		if c.sidecar {
			want = filepath.Join(dir, "dal-sandbox-init")
		}
		if exe != want {
			t.Errorf("%s: the init ran %s, want %s", c.name, exe, want)
		}
		if first == "" {
			first = rest
		}
		if rest != first || !strings.HasPrefix(rest, "exe\n100 ") {
			t.Errorf("%s: the agent saw %q, want %q (init named exe, the agent pid 100) whichever init ran", c.name, rest, first)
		}
	}

	r := runCmd(t, exec.Command(bin.sidecar))
	if r.code != 2 || !strings.Contains(r.stderr, "started by dal-exec") || strings.Count(r.stderr, "\n") != 1 {
		t.Errorf("dal-sandbox-init by hand: exit %d, %q; want exit 2 and one sentence", r.code, r.stderr)
	}
}

// runProbe runs sidecarProbe under the dal-exec at dal and returns the
// file its sandbox's init runs, read from outside, and what the agent
// printed.
func runProbe(t *testing.T, name, dal string) (exe, said string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, dal, "run", "--", "sh", "-c", sidecarProbe)
	in, err := cmd.StdinPipe() // held open: the agent waits on it
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(out)
	for range 2 {
		l, err := r.ReadString('\n')
		said += l
		if err != nil {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("%s: the agent said %q, then %v (%s)", name, said, err, stderr.String())
		}
	}
	// dal-exec's one child is the sandbox's init.
	var kids []string
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", cmd.Process.Pid))
	for _, task := range tasks {
		b, _ := os.ReadFile(task)
		kids = append(kids, strings.Fields(string(b))...)
	}
	if len(kids) == 1 {
		exe, err = os.Readlink("/proc/" + kids[0] + "/exe")
	} else {
		err = fmt.Errorf("dal-exec has children %v, want the sandbox's init alone", kids)
	}
	io.WriteString(in, "go on\n")
	in.Close()
	if werr := cmd.Wait(); werr != nil {
		t.Fatalf("%s: %v: %s", name, werr, stderr.String())
	}
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return exe, said
}

// buildStaleSidecar builds into dir a dal-sandbox-init whose sources differ
// from this build's by a comment (go build -overlay), as an old install's.
func buildStaleSidecar(t *testing.T, dir string) {
	t.Helper()
	buildStale(t, dir, "dal-sandbox-init")
}

// buildStale builds cmd/name into dir from sources that differ from this
// build's by a comment in internal/sandbox (go build -overlay).
func buildStale(t *testing.T, dir, name string) {
	t.Helper()
	doc, err := filepath.Abs("../internal/sandbox/doc.go")
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(doc)
	if err != nil {
		t.Fatal(err)
	}
	changed := filepath.Join(dir, "doc.go")
	if err := os.WriteFile(changed, append(b, "\n// Another build.\n"...), 0o644); err != nil {
		t.Fatal(err)
	}
	overlay, err := json.Marshal(map[string]any{"Replace": map[string]string{doc: changed}})
	if err != nil {
		t.Fatal(err)
	}
	ov := filepath.Join(dir, "overlay.json")
	if err := os.WriteFile(ov, overlay, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "build", "-overlay", ov, "-o", filepath.Join(dir, name), "../cmd/"+name)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build a %s of another build: %v\n%s", name, err, out)
	}
}

// link hard-links the file src into dir under its own name.
func link(t *testing.T, src, dir string) string {
	t.Helper()
	p := filepath.Join(dir, filepath.Base(src))
	if err := os.Link(src, p); err != nil {
		t.Fatal(err)
	}
	return p
}

// copyMode copies the file src into dir under its own name, with mode.
func copyMode(t *testing.T, src, dir string, mode os.FileMode) string {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, filepath.Base(src))
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
	return p
}
