package cli

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dal-runtime/dal/internal/golden"
)

// TestHelpGolden pins what a user reads in --help.
func TestHelpGolden(t *testing.T) {
	t.Setenv("XDG_RUNTIME_DIR", "/run/user/1000")
	for _, args := range [][]string{{"--help"}, {"run", "--help"}, {"status", "--help"}} {
		var out bytes.Buffer
		if code := Main(append([]string{"dal-exec"}, args...), &out, &out); code != 0 {
			t.Fatalf("%v exited %d", args, code)
		}
		path := filepath.Join("testdata", "help-"+strings.Join(args[:len(args)-1], "-")+".golden")
		if len(args) == 1 {
			path = filepath.Join("testdata", "help.golden")
		}
		golden.Check(t, path, out.Bytes())
	}
}
