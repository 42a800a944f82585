// Command dal-exec runs AI agents deterministically: with seeded guard
// rails, virtual time and runtime shims, served by dald.
package main

import (
	"os"
	"runtime/debug"

	"github.com/dal-runtime/dal/internal/cli"
	"github.com/dal-runtime/dal/internal/sandbox"
)

func main() {
	sandbox.Init() // the re-executed sandbox init never returns from here
	// dal-exec lives as long as its agent with a heap of a few MB: the
	// collection its start-up allocations would set off (about 1.5 ms of
	// CPU, while the agent's sandbox starts beside it) is not worth it.
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(400)
	}
	os.Exit(cli.Main(os.Args, os.Stdout, os.Stderr))
}
