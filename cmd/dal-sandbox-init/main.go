// Command dal-sandbox-init is the init of dal-exec's sandboxes, installed
// beside dal-exec, which starts it in place of its own, larger image so
// that a sandbox starts sooner (see internal/sandbox's image.go). It is
// not run by hand.
package main

import (
	"fmt"
	"os"

	"github.com/dal-runtime/dal/internal/sandbox"
)

func main() {
	sandbox.Init() // started by dal-exec, it never returns from here
	fmt.Fprintln(os.Stderr, "dal-sandbox-init is started by dal-exec (run, record, replay) as its sandbox's init, not by hand: run dal-exec instead.")
	os.Exit(2)
}
