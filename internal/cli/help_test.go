package cli

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dal-runtime/dal/internal/golden"
	"github.com/dal-runtime/dal/internal/helptext"
	ucli "github.com/urfave/cli/v2"
)

// helpEnv pins what help text takes from the environment: the default
// socket and the trusted-keys path.
func helpEnv(t *testing.T) {
	t.Setenv("XDG_RUNTIME_DIR", "/run/user/1000")
	t.Setenv("HOME", "/home/user")
	t.Setenv("XDG_CONFIG_HOME", "")
}

// commandPaths lists every command and subcommand of dal-exec, as the
// arguments that name it ({"checkpoint", "save"}), and the app itself as
// nil.
func commandPaths() [][]string {
	paths := [][]string{nil}
	var walk func(prefix []string, cmds []*ucli.Command)
	walk = func(prefix []string, cmds []*ucli.Command) {
		for _, c := range cmds {
			p := append(append([]string(nil), prefix...), c.Name)
			paths = append(paths, p)
			walk(p, c.Subcommands)
		}
	}
	walk(nil, App(nil, nil).Commands)
	return paths
}

// TestHelpGolden pins what a user reads in the help of every command, and
// checks that `dal-exec help CMD` and `dal-exec CMD --help` print the same
// text, within helpWidth columns, on stdout, exiting 0. Not parallel:
// t.Setenv.
func TestHelpGolden(t *testing.T) {
	helpEnv(t)
	for _, path := range commandPaths() {
		name := strings.Join(append([]string{"help"}, path...), "-")
		t.Run(name, func(t *testing.T) {
			var viaHelp, viaFlag, stderr bytes.Buffer
			if code := Main(append([]string{"dal-exec", "help"}, path...), &viaHelp, &stderr); code != 0 || stderr.Len() > 0 {
				t.Fatalf("dal-exec help %v exited %d: %s", path, code, stderr.String())
			}
			if code := Main(append(append([]string{"dal-exec"}, path...), "--help"), &viaFlag, &stderr); code != 0 || stderr.Len() > 0 {
				t.Fatalf("dal-exec %v --help exited %d: %s", path, code, stderr.String())
			}
			if viaHelp.String() != viaFlag.String() {
				t.Errorf("dal-exec help %v and --help differ:\n%s", path, golden.Diff(viaHelp.String(), viaFlag.String()))
			}
			checkWrapped(t, viaHelp.String())
			file := "help.golden"
			if len(path) > 0 {
				file = "help-" + strings.Join(path, "-") + ".golden"
			}
			golden.Check(t, filepath.Join("testdata", file), viaHelp.Bytes())
		})
	}
}

// checkWrapped fails t for a line of help wider than the width help is
// wrapped at when not written to a terminal, and for a word alone on a
// line.
func checkWrapped(t *testing.T, text string) {
	t.Helper()
	for _, p := range helptext.Problems(text, helptext.DefaultWidth) {
		t.Error(p)
	}
}

// TestHelpCategories checks that record's flags are grouped in the issue's
// categories, in their order.
func TestHelpCategories(t *testing.T) {
	helpEnv(t)
	var out bytes.Buffer
	if code := Main([]string{"dal-exec", "help", "record"}, &out, &out); code != 0 {
		t.Fatalf("exit %d: %s", code, out.String())
	}
	at := -1
	for _, h := range []string{"RUN FLAGS:", "SANDBOX AND NETWORK FLAGS:", "ITERATION FLAGS:", "CHECKPOINT FLAGS:", "OUTPUT FLAGS:", "FLAGS:\n   --help"} {
		i := strings.Index(out.String(), "\n"+h)
		if i < 0 || i < at {
			t.Fatalf("record's help lacks %q, or has it out of order:\n%s", h, out.String())
		}
		at = i
	}
}
