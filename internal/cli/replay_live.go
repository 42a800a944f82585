package cli

import (
	"errors"

	"github.com/dal-runtime/dal/internal/record"
	"github.com/dal-runtime/dal/internal/replay"
	ucli "github.com/urfave/cli/v2"
)

// liveFlags are replay's live re-execution flags.
func liveFlags() []ucli.Flag {
	return flagList(
		categorize(catRun,
			&ucli.BoolFlag{Name: "live", Usage: "re-execute the command with the network live through the recording proxy (not served from the bundle), record the run as --out, and compare the two"}),
		categorize(catOutput,
			&ucli.StringFlag{Name: "out", Aliases: []string{"o"}, Usage: "with --live: the new bundle (a new directory, or a .tgz / .tar.zst file)"}),
		categorize(catSandbox, allowLoopbackFlag(), allowAddressFlag(), enforceStrictLLMFlag()),
	)
}

// replayLiveOrNot runs the offline replay, or with --live the live
// re-execution into --out.
func replayLiveOrNot(c *ucli.Context, o replay.Options) (*replay.Verdict, error) {
	if !c.Bool("live") {
		for _, f := range []string{"out", "allow-loopback", "allow-address", "enforce-strict-llm"} {
			if c.IsSet(f) {
				return nil, usageError{Err: errors.New("--" + f + " is for a live re-execution: add --live, e.g. dal-exec replay --live --out run1-live run1")}
			}
		}
		return replay.Replay(c.Context, o)
	}
	out := c.String("out")
	if out == "" {
		return nil, usageError{Err: errors.New("--live records a new bundle: name it with --out, e.g. dal-exec replay --live --out run1-live run1")}
	}
	if err := checkBundleName(out); err != nil {
		return nil, err
	}
	lo := replay.LiveOptions{Options: o, Out: out}
	lo.Network.AllowLoopback = c.StringSlice("allow-loopback")
	lo.Network.AllowAddress = c.StringSlice("allow-address")
	if c.Bool("enforce-strict-llm") {
		lo.Network.Before = append(lo.Network.Before, record.StrictLLMRefusal)
	}
	return replay.Live(c.Context, lo)
}
