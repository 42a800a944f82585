package cli

import (
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/dal-runtime/dal/bundle"
	"github.com/dal-runtime/dal/internal/record"
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
changed since the run.

Examples:
   dal-exec revert run1
   dal-exec revert --workspace ./project run1`,
		Flags: []ucli.Flag{
			&ucli.StringFlag{Name: "workspace", Aliases: []string{"w"}, Usage: "the workspace to restore (default: the recorded path)"},
			metricsTextfileFlag(),
			&ucli.StringFlag{Name: "socket", EnvVars: []string{"DAL_SOCKET"}, Usage: "a running dald to report the revert time to (default: the one at the default socket, if any)"},
		},
		Action: func(c *ucli.Context) error {
			if c.NArg() != 1 {
				return usageError{fmt.Errorf("revert takes one bundle, e.g. dal-exec revert run1")}
			}
			b, err := bundle.Open(c.Args().First(), bundle.OpenOptions{})
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
