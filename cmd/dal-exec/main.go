// Command dal-exec runs AI agents deterministically: with seeded guard
// rails, virtual time and runtime shims, served by dald.
package main

import (
	"os"

	"github.com/dal-runtime/dal/internal/cli"
)

func main() {
	os.Exit(cli.Main(os.Args, os.Stdout, os.Stderr))
}
