package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestMistakes checks what a mistyped command line gets: exit 2, nothing
// on stdout (never the help), and one line on stderr that names the
// mistake and the fix.
func TestMistakes(t *testing.T) {
	helpEnv(t)
	for _, c := range []struct {
		args []string
		env  []string // NAME=VALUE
		want string
	}{
		{args: []string{"recrod"}, want: `dal-exec: there is no command "recrod": did you mean record?`},
		{args: []string{"xyzzy"}, want: `dal-exec: there is no command "xyzzy": dal-exec help lists them`},
		{args: []string{"help", "recrod"}, want: `dal-exec: there is no command "recrod": did you mean record?`},
		{args: []string{"checkpoint", "sav"}, want: `dal-exec: checkpoint has no subcommand "sav": did you mean save?`},
		{args: []string{"help", "checkpoint", "restor"}, want: `dal-exec: checkpoint has no subcommand "restor": did you mean restore?`},
		{args: []string{"help", "run", "fast"}, want: `dal-exec: run has no subcommands, so there is no help for "fast": see dal-exec help run`},
		{args: []string{"run", "--tiemout", "5s", "--", "true"}, want: "dal-exec: run has no flag --tiemout: did you mean --timeout?"},
		{args: []string{"run", "--time", "5s", "--", "true"}, want: "dal-exec: run has no flag --time: did you mean --timeout?"},
		{args: []string{"run", "--frobnicate", "--", "true"}, want: "dal-exec: run has no flag --frobnicate: dal-exec help run lists its flags"},
		{args: []string{"--vresion"}, want: "dal-exec: dal-exec has no flag --vresion: did you mean --version?"},
		{args: []string{"run", "--timeout", "5", "--", "true"}, want: "dal-exec: --timeout 5 has no unit: use a unit, e.g. 5s or 2m"},
		{args: []string{"run", "--timeout", "soon", "--", "true"}, want: `dal-exec: --timeout "soon" is not a duration: use a number and a unit, e.g. 5s, 2m or 1h30m`},
		{args: []string{"run", "--", "true"}, env: []string{"DAL_TIMEOUT=5"}, want: "dal-exec: DAL_TIMEOUT=5 has no unit: use a unit, e.g. 5s or 2m"},
		{args: []string{"replay", "--replay-speed", "fast", "run1"}, want: `dal-exec: --replay-speed "fast" is not a number: give one like 0.5`},
		{args: []string{"checkpoint", "prune", "--keep", "many"}, want: `dal-exec: --keep "many" is not a whole number: give one like 3`},
		{args: []string{"keygen", "--force=maybe"}, want: "dal-exec: --force=maybe is neither true nor false: give the flag alone, or =true or =false"},
		{args: []string{"run", "--seed"}, want: "dal-exec: --seed needs a value: see dal-exec help run"},
		{args: []string{"record", "--", "true"}, want: "dal-exec: record needs --out: see the examples in dal-exec help record"},
		{args: []string{"record", "--out", "x.zip", "--", "true"}, want: "dal-exec: --out x.zip: dal does not write .zip archives; name a directory, or a .tgz, .tar.gz or .tar.zst archive"},
		{args: []string{"record", "--out", "runs/x.tar.xz/", "--", "true"}, want: "dal-exec: --out runs/x.tar.xz/: dal does not write .tar.xz archives; name a directory, or a .tgz, .tar.gz or .tar.zst archive"},
		{args: []string{"record", "--out", "my run"}, want: "dal-exec: no command given: put it after --, e.g. dal-exec record --out 'my run' -- python3 agent.py"},
		{args: []string{"replay", "--json", "a", "b", "c"}, want: "dal-exec: replay takes one bundle (--json is a switch now: write --json-out FILE to save the JSON), e.g. dal-exec replay --json run1"},
		{args: []string{"replay", "--json-out", "v.json", "--json=w.json", "run1"}, want: "dal-exec: --json w.json and --json-out v.json both name a file: keep --json-out"},
	} {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			for _, e := range c.env {
				k, v, _ := strings.Cut(e, "=")
				t.Setenv(k, v)
			}
			var stdout, stderr bytes.Buffer
			code := Main(append([]string{"dal-exec"}, c.args...), &stdout, &stderr)
			if code != 2 {
				t.Errorf("exit %d, want 2", code)
			}
			if stdout.Len() > 0 {
				t.Errorf("stdout is not empty:\n%s", stdout.String())
			}
			if got := strings.TrimSuffix(stderr.String(), "\n"); got != c.want {
				t.Errorf("stderr\n got: %s\nwant: %s", got, c.want)
			}
		})
	}
}

// TestReplayJSONDeprecated checks that the old --json FILE still names
// the file, with a one-line notice, and that --json alone is a switch:
// the bundle that follows it is the bundle, not a file name. The bundle
// does not exist, so replay stops at opening it: the arguments were read.
func TestReplayJSONDeprecated(t *testing.T) {
	helpEnv(t)
	dir := t.TempDir()
	missing := filepath.Join(dir, "no-such-bundle")
	for _, c := range []struct {
		args   []string
		notice bool
	}{
		{[]string{"replay", "--json", filepath.Join(dir, "v.json"), missing}, true},
		{[]string{"replay", "--json", "-", missing}, true},
		{[]string{"replay", "--json=" + filepath.Join(dir, "v.json"), missing}, true},
		{[]string{"replay", "--json", missing}, false},
		{[]string{"replay", "--json-out", filepath.Join(dir, "v.json"), missing}, false},
	} {
		var stdout, stderr bytes.Buffer
		code := Main(append([]string{"dal-exec"}, c.args...), &stdout, &stderr)
		lines := strings.Split(strings.TrimSuffix(stderr.String(), "\n"), "\n")
		if code != 2 || stdout.Len() > 0 || !strings.Contains(lines[len(lines)-1], "no-such-bundle") {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 2 on opening the missing bundle", c.args, code, stdout.String(), stderr.String())
		}
		const notice = "dal: --json FILE is deprecated: write --json-out FILE for a file, --json alone for stdout"
		if got := lines[0] == notice; got != c.notice || len(lines) != map[bool]int{true: 2, false: 1}[c.notice] {
			t.Errorf("%v: stderr %q; want the deprecation notice: %v", c.args, stderr.String(), c.notice)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "v.json")); err == nil {
		t.Error("a replay that failed wrote its JSON")
	}
}

func TestCheckBundleName(t *testing.T) {
	t.Parallel()
	for name, ok := range map[string]bool{
		"run1": true, "runs/run1/": true, "run1.tgz": true, "run1.tar.gz": true, "run1.tar.zst": true,
		"run.2": true, "run-2026.11": true, "runs/v1.2": true, "bundle.net": true, "dir/x.json/": true, "X.TGZ": true,
		"x.zip": false, "x.tar": false, "x.tar.xz": false, "x.gz": false, "x.7z": false, "X.ZIP": false,
	} {
		if err := checkBundleName(name); (err == nil) != ok {
			t.Errorf("checkBundleName(%q) = %v, want accepted: %v", name, err, ok)
		}
	}
}

// TestReplayClockMode runs an agent for real: a clock log recorded in
// seeded mode is served back without --mode (the log's mode is taken), and
// refused with a sentence under --mode strict, which would ignore it. Not
// parallel: t.Setenv.
func TestReplayClockMode(t *testing.T) {
	helpEnv(t)
	dir := t.TempDir()
	t.Setenv("XDG_STATE_HOME", dir)
	t.Chdir(dir)
	clock := filepath.Join(dir, "clock.json")
	agent := []string{"--", "python3", "-c", "import time; print(repr(time.time()))"}
	run := func(args ...string) (int, string, string) {
		var stdout, stderr bytes.Buffer
		code := Main(append(append([]string{"dal-exec", "run"}, args...), agent...), &stdout, &stderr)
		return code, stdout.String(), stderr.String()
	}
	code, recorded, stderr := run("--mode", "seeded", "--clock-out", clock)
	if code != 0 {
		t.Fatalf("recording exited %d: %s", code, stderr)
	}
	if code, replayed, stderr := run("--replay-clock", clock); code != 0 || replayed != recorded {
		t.Errorf("replay without --mode: exit %d, printed %q, want %q (%s)", code, replayed, recorded, stderr)
	}
	code, stdout, stderr := run("--mode", "strict", "--replay-clock", clock)
	want := "dal-exec: " + clock + " was recorded in seeded mode, which --mode strict would ignore: use --mode seeded, or leave --mode out\n"
	if code != 2 || stdout != "" || stderr != want {
		t.Errorf("--mode strict: exit %d, stdout %q, stderr %q; want 2 and %q", code, stdout, stderr, want)
	}
}
