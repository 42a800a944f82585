// Command dal-exec runs AI agents deterministically: with seeded guard
// rails, virtual time and runtime shims, served by dald.
package main

import (
	"os"

	"github.com/dal-runtime/dal/internal/cli"
	"github.com/dal-runtime/dal/internal/sandbox"
)

func main() {
	sandbox.Init() // the re-executed sandbox init never returns from here
	os.Exit(cli.Main(os.Args, os.Stdout, os.Stderr))
}
