package cli

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden help files")

// TestHelpGolden pins what a user reads in --help.
func TestHelpGolden(t *testing.T) {
	t.Setenv("XDG_RUNTIME_DIR", "/run/user/1000")
	for _, args := range [][]string{{"--help"}, {"run", "--help"}, {"status", "--help"}} {
		var out bytes.Buffer
		if code := Main(append([]string{"dal-exec"}, args...), &out, &out); code != 0 {
			t.Fatalf("%v exited %d", args, code)
		}
		golden := filepath.Join("testdata", "help-"+strings.Join(args[:len(args)-1], "-")+".golden")
		if len(args) == 1 {
			golden = filepath.Join("testdata", "help.golden")
		}
		if *update {
			os.MkdirAll("testdata", 0o755)
			os.WriteFile(golden, out.Bytes(), 0o644)
		}
		want, err := os.ReadFile(golden)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(out.Bytes(), want) {
			t.Errorf("%v help differs from %s (go test -update to accept):\n%s", args, golden, out.String())
		}
	}
}
