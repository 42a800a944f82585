// Command dal-exec-full is dal-exec with the Rego engine of the policy
// gate built in. dal-exec, which starts about 3 ms sooner without the
// engine, runs a command that evaluates a policy (--policy, the replay
// of a bundle recorded with one) by executing dal-exec-full beside it
// with the same arguments. It can be run by hand as dal-exec.
package main

import (
	"os"

	"github.com/dal-runtime/dal/internal/cli"
	"github.com/dal-runtime/dal/internal/policy"
	"github.com/dal-runtime/dal/internal/policy/rego"
	"github.com/dal-runtime/dal/internal/sandbox"
)

func main() {
	sandbox.Init() // a sandbox init started from this image never returns from here
	policy.SetEngine(rego.Engine{})
	os.Exit(cli.Entry())
}
