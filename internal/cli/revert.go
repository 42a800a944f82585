package cli

import (
	"errors"
	"fmt"
	"time"

	"github.com/dal-runtime/dal/internal/record"
	"github.com/dal-runtime/dal/internal/replay"
	"github.com/dal-runtime/dal/internal/sandbox"
	"github.com/dal-runtime/dal/internal/termsafe"
	ucli "github.com/urfave/cli/v2"
)

// RevertCommand is `dal-exec revert`.
func RevertCommand() *ucli.Command {
	return &ucli.Command{
		Name:      "revert",
		Usage:     "restore the workspace's exact pre-run state from a bundle",
		ArgsUsage: "BUNDLE",
		Description: `Undoes a recorded run: restores every file the run modified or deleted from the bundle's
fs-pre/ and removes what it created. Refuses, naming the first path, when the workspace has
changed since the run. Nothing is written outside the workspace and no symlink in it is followed.
The bundle must be signed by a key you trust (your own, --key, the trusted-keys file, or
--trust-signer). It acts on the current directory, which must be the workspace the bundle was
recorded in, or on --workspace: the path the bundle records is compared, never written to.
Reverting twice is harmless: the second says the workspace is already at its pre-run state.

Examples:
   dal-exec revert run1
   dal-exec revert --workspace ./project run1`,
		Flags: append([]ucli.Flag{
			&ucli.StringFlag{Name: "workspace", Aliases: []string{"w"}, Usage: "the workspace to restore (default: the current directory, if the bundle was recorded there)"},
			maxApplyBytesFlag(),
			metricsTextfileFlag(),
			&ucli.StringFlag{Name: "socket", EnvVars: []string{"DAL_SOCKET"}, Usage: "a running dald to report the revert time to (default: the one at the default socket, if any)"},
		}, trustFlags()...),
		Action: func(c *ucli.Context) error {
			if c.NArg() != 1 {
				return usageError{Err: fmt.Errorf("revert takes one bundle, e.g. dal-exec revert run1")}
			}
			b, err := openTrusted(c, c.Args().First())
			if err != nil {
				return err
			}
			defer b.Close()
			if why := b.Manifest.Dal.Incomplete; len(why) > 0 {
				fmt.Fprintf(c.App.Writer, "%s is incomplete (%s): nothing of its run was applied, so there is nothing to revert\n",
					termsafe.Line(c.Args().First()), termsafe.Line(why[0]))
				return nil
			}
			var env record.RunEnv
			if err := b.ReadJSON("env.json", &env); err != nil {
				return err
			}
			changes, err := replay.Changes(b)
			if err != nil {
				return err
			}
			ws, err := replay.WorkspaceFor(c.String("workspace"), c.Args().First(), b, &env)
			if err != nil {
				return err
			}
			maxApply, err := maxApplyBytes(c)
			if err != nil {
				return err
			}
			figs, err := newFigures(c)
			if err != nil {
				return err
			}
			start := time.Now()
			n, err := sandbox.DataBytes(b.File("fs-pre"), changes, false)
			if err != nil {
				return fmt.Errorf("%s: %w", c.Args().First(), err)
			}
			if err := sandbox.CheckDataBytes(ws, n, maxApply, "the bundle's pre-run copies", "not written, and the workspace is as it was"); err != nil {
				return err
			}
			if err := sandbox.Revert(ws, b.File("fs-pre"), changes); err != nil {
				var se *sandbox.StateError
				if errors.As(err, &se) {
					if sandbox.AtPre(ws, changes) == nil {
						fmt.Fprintf(c.App.Writer, "%s is already at its pre-run state (before %s): nothing to revert\n", ws, c.Args().First())
						return nil
					}
					return fmt.Errorf("%w: the workspace changed since the run; nothing was reverted", err)
				}
				return err
			}
			took := time.Since(start)
			fmt.Fprintf(c.App.Writer, "reverted %s to its state before %s: %d changes undone in %s\n",
				ws, c.Args().First(), len(changes), took.Round(time.Microsecond))
			figs.revert(took)
			return figs.publish()
		},
	}
}
