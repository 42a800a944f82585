package dald

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dal-runtime/dal/internal/golden"
	"github.com/dal-runtime/dal/internal/helptext"
)

// TestHelpGolden pins dald's help, printed by --help, -h and help alike, in
// dal-exec's style (internal/helptext), within 80 columns and with no word
// alone on a line. Not parallel: t.Setenv.
func TestHelpGolden(t *testing.T) {
	t.Setenv("XDG_RUNTIME_DIR", "/run/user/1000") // the default socket, shown as --socket's default
	var first string
	for _, args := range [][]string{{"--help"}, {"-h"}, {"help"}} {
		var stdout, stderr bytes.Buffer
		if code := Main(append([]string{"dald"}, args...), &stdout, &stderr); code != 0 || stderr.Len() > 0 {
			t.Fatalf("dald %v exited %d: %s", args, code, stderr.String())
		}
		if first == "" {
			first = stdout.String()
		} else if stdout.String() != first {
			t.Errorf("dald %v prints another help than dald --help:\n%s", args, golden.Diff(first, stdout.String()))
		}
	}
	for _, p := range helptext.Problems(first, helptext.DefaultWidth) {
		t.Error(p)
	}
	for _, bad := range []string{"GLOBAL OPTIONS", "http://--"} {
		if strings.Contains(first, bad) {
			t.Errorf("dald's help still says %q", bad)
		}
	}
	golden.Check(t, filepath.Join("testdata", "help.golden"), []byte(first))
}

// TestArgumentsAreRefused checks that dald given an argument it does not
// take exits 2 with one sentence, instead of serving as if it had none.
func TestArgumentsAreRefused(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := Main([]string{"dald", "start"}, &stdout, &stderr)
	if code != 2 || !strings.Contains(stderr.String(), `dald takes flags, not arguments ("start" is one): see dald --help`) {
		t.Fatalf("dald start: exit %d, stderr %q", code, stderr.String())
	}
}
