// Command dal-exec runs AI agents deterministically: with seeded guard
// rails, virtual time and runtime shims, served by dald. It leaves the
// policy gate's Rego engine to dal-exec-full (see internal/cli's entry.go).
package main

import (
	"os"

	"github.com/dal-runtime/dal/internal/cli"
	"github.com/dal-runtime/dal/internal/sandbox"
)

func main() {
	sandbox.Init() // the re-executed sandbox init never returns from here
	os.Exit(cli.Entry())
}
