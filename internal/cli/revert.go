package cli

import (
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/dal-runtime/dal/internal/record"
	"github.com/dal-runtime/dal/internal/replay"
	"github.com/dal-runtime/dal/internal/sandbox"
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
--trust-signer); its recorded workspace path is used only when you recorded it on this machine,
otherwise pass --workspace.

Examples:
   dal-exec revert run1
   dal-exec revert --workspace ./project run1`,
		Flags: append([]ucli.Flag{
			&ucli.StringFlag{Name: "workspace", Aliases: []string{"w"}, Usage: "the workspace to restore (default: the recorded path, for a bundle you recorded on this machine)"},
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
			var env record.RunEnv
			if err := b.ReadJSON("env.json", &env); err != nil {
				return err
			}
			changes, err := sandbox.ReadChanges(b.File("fs-diff/changes.json"))
			if err != nil {
				return err
			}
			ws := c.String("workspace")
			if ws == "" {
				if why := replay.Foreign(b, &env); why != "" {
					return usageError{Err: fmt.Errorf("%s was %s, so its workspace path is not taken from it: pass --workspace DIR", c.Args().First(), why)}
				}
				ws = env.Workspace
			}
			if ws, err = filepath.Abs(ws); err != nil {
				return err
			}
			figs, err := newFigures(c)
			if err != nil {
				return err
			}
			start := time.Now()
			if err := sandbox.Revert(ws, b.File("fs-pre"), changes); err != nil {
				var se *sandbox.StateError
				if errors.As(err, &se) {
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
