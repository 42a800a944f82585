package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dal-runtime/dal/internal/version"
)

// TestMakeInstall runs the README's install step, make install, into a
// temporary DESTDIR with PREFIX=/usr (building into a temporary directory,
// not the shared bin/), runs what it installed, and uninstalls it.
func TestMakeInstall(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and installs the four binaries with make (over a minute): skipped under -short (testing.Short())")
	}
	t.Parallel()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	dest, build := t.TempDir(), t.TempDir()
	runMake := func(target string) {
		t.Helper()
		cmd := exec.Command("make", "-C", root, "--no-print-directory", target, "DESTDIR="+dest, "PREFIX=/usr", "BIN="+build)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("make %s: %v\n%s", target, err, out)
		}
	}
	runMake("install")
	for _, name := range []string{"dal-exec", "dal-exec-full", "dald"} {
		path := filepath.Join(dest, "usr", "bin", name)
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatalf("make install did not install %s: %v", name, err)
		}
		if fi.Mode().Perm() != 0o755 {
			t.Errorf("%s has mode %v, want 0755", path, fi.Mode().Perm())
		}
		out, err := exec.Command(path, "--version").CombinedOutput()
		if err != nil {
			t.Fatalf("%s --version: %v\n%s", path, err, out)
		}
		if want := strings.TrimSuffix(name, "-full") + " version " + version.Version; strings.TrimSpace(string(out)) != want {
			t.Errorf("%s --version printed %q, want %q", path, out, want)
		}
	}
	// The sandbox's init: dal-exec starts it from beside itself; by hand
	// it says what it is.
	sidecar := filepath.Join(dest, "usr", "bin", "dal-sandbox-init")
	if fi, err := os.Stat(sidecar); err != nil || fi.Mode().Perm() != 0o755 {
		t.Fatalf("make install did not install dal-sandbox-init with mode 0755: %v", err)
	}
	out, err := exec.Command(sidecar).CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || !strings.Contains(string(out), "started by dal-exec") {
		t.Errorf("dal-sandbox-init run by hand: %v, %q; want exit 2 and a sentence saying dal-exec starts it", err, out)
	}
	if exe, err := sandboxInit(filepath.Join(dest, "usr", "bin", "dal-exec")); err != nil || exe != sidecar {
		t.Errorf("the installed dal-exec's sandbox init is %q (%v), want %s", exe, err, sidecar)
	}
	// A command that evaluates a policy: dal-exec hands it to the
	// dal-exec-full beside it, whose engine compiles the policy (run then
	// refuses --policy, which only record can gate).
	pol := filepath.Join(t.TempDir(), "p.rego")
	if err := os.WriteFile(pol, []byte("package dal\n\ndecision := {\"action\": \"deny\"} if input.kind == \"exec\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err = exec.Command(filepath.Join(dest, "usr", "bin", "dal-exec"), "run", "--policy", pol, "--", "true").CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || !strings.Contains(string(out), "has no proxy or sandbox for --policy") {
		t.Errorf("the installed dal-exec run --policy: %v, %q; want exit 2 and the sentence of a compiled policy run refuses", err, out)
	}
	entries, err := os.ReadDir(filepath.Join(dest, "usr", "bin"))
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 4 {
		t.Errorf("make install put %d files in PREFIX/bin, want dal-exec, dal-exec-full, dal-sandbox-init and dald only", len(entries))
	}
	runMake("uninstall")
	if entries, _ := os.ReadDir(filepath.Join(dest, "usr", "bin")); len(entries) != 0 {
		t.Errorf("make uninstall left %d files in PREFIX/bin", len(entries))
	}
}

// sandboxInit runs an agent under dal, which waits on its stdin, and reads
// from outside which program the sandbox's init, dal's one child, runs:
// the agent cannot read /proc/1/exe, its init having more capabilities.
func sandboxInit(dal string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, dal, "run", "--", "sh", "-c", "echo ready; read x")
	in, err := cmd.StdinPipe()
	if err != nil {
		return "", err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return "", err
	}
	if err := cmd.Start(); err != nil {
		return "", err
	}
	defer cmd.Wait()
	defer in.Close()
	if l, err := bufio.NewReader(out).ReadString('\n'); l != "ready\n" {
		cmd.Process.Kill()
		return "", fmt.Errorf("the agent said %q (%v)", l, err)
	}
	var kids []string
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", cmd.Process.Pid))
	for _, task := range tasks {
		b, _ := os.ReadFile(task)
		kids = append(kids, strings.Fields(string(b))...)
	}
	if len(kids) != 1 {
		return "", fmt.Errorf("dal-exec has children %v, want the sandbox's init alone", kids)
	}
	return os.Readlink("/proc/" + kids[0] + "/exe")
}
