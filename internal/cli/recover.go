package cli

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/dal-runtime/dal/internal/sandbox"
	"github.com/dal-runtime/dal/internal/termsafe"
	ucli "github.com/urfave/cli/v2"
)

// RecoverCommand is `dal-exec recover`.
func RecoverCommand() *ucli.Command {
	return &ucli.Command{
		Name:      "recover",
		Usage:     "finish or roll back an apply or revert that was interrupted (kill -9, full disk)",
		ArgsUsage: "[--workspace DIR]",
		Description: `Applying a run's changes and reverting them are journaled beside the workspace. When one was
interrupted, the next record, replay or revert in that workspace recovers first; this command
does it on its own and says what it found: nothing to recover, an operation that had not yet
changed anything or had finished, or one it completed or rolled back.

Examples:
   dal-exec recover
   dal-exec recover --workspace ./project`,
		Flags: []ucli.Flag{
			&ucli.StringFlag{Name: "workspace", Aliases: []string{"w"}, Usage: "the workspace (default: the current directory)"},
		},
		Action: func(c *ucli.Context) error {
			if c.NArg() != 0 {
				return usageError{Err: fmt.Errorf("recover takes no arguments; name the workspace with --workspace DIR")}
			}
			ws := c.String("workspace")
			if ws == "" {
				wd, err := os.Getwd()
				if err != nil {
					return err
				}
				ws = wd
			}
			ws, err := filepath.Abs(ws)
			if err != nil {
				return err
			}
			rec, err := sandbox.Recover(ws)
			if err != nil {
				return err
			}
			what := rec.Outcome
			if rec.Op != "" {
				what = rec.Op + ": " + what
			}
			fmt.Fprintf(c.App.Writer, "%s: %s\n", termsafe.Line(ws), what)
			return nil
		},
	}
}
