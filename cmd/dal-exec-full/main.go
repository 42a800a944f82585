// Command dal-exec-full is dal-exec with the policy gate's Rego engine and
// the Prometheus registry of --metrics-textfile built in. dal-exec, which
// starts about 4 ms sooner without them, runs a command that needs one
// (--policy, the replay of a bundle recorded with one, --metrics-textfile)
// by executing dal-exec-full beside it with the same arguments. It can be
// run by hand as dal-exec.
package main

import (
	"os"

	"github.com/dal-runtime/dal/internal/cli"
	"github.com/dal-runtime/dal/internal/daemon"
	"github.com/dal-runtime/dal/internal/policy"
	"github.com/dal-runtime/dal/internal/policy/rego"
	"github.com/dal-runtime/dal/internal/sandbox"
	"github.com/dal-runtime/dal/metrics"
)

func main() {
	sandbox.Init() // a sandbox init started from this image never returns from here
	policy.SetEngine(rego.Engine{})
	cli.SetTextfileMetrics(func(path string) (daemon.Metrics, error) {
		if err := metrics.CheckTextfilePath(path); err != nil {
			return nil, err
		}
		return metrics.New(metrics.Options{}), nil
	})
	os.Exit(cli.Entry())
}
