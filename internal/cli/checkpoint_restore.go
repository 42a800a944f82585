package cli

import (
	"errors"
	"fmt"
	"strings"

	"github.com/dal-runtime/dal/internal/atomicfile"
	"github.com/dal-runtime/dal/internal/checkpoint"
	ucli "github.com/urfave/cli/v2"
)

func checkpointRestoreCommand() *ucli.Command {
	return &ucli.Command{
		Name:      "restore",
		Usage:     "restore a checkpoint's artifacts (all, or the PATHs named) and print its state",
		ArgsUsage: "ID [PATH...]",
		Description: `Writes the checkpoint's artifacts at their paths into the run's workspace, or --to DIR,
after checking every hash; each file is replaced atomically and files not in the checkpoint
are left alone. Nothing is written when the checkpoint is damaged or a path would leave the
destination. The state goes to stdout (or --state-out FILE); what was restored goes to stderr.

Examples:
   dal-exec checkpoint restore latest
   dal-exec checkpoint restore 20260301-120000-1a2b3c4d/2 --to /tmp/check --state-out state.json
   dal-exec checkpoint restore latest out/report.md`,
		Flags: []ucli.Flag{
			&ucli.StringFlag{Name: "to", Usage: "restore into this directory instead of the run's workspace"},
			&ucli.StringFlag{Name: "state-out", Usage: "write the state JSON to this file instead of stdout"},
			cpStoreFlag(cpCommandNames.store),
		},
		Action: func(c *ucli.Context) error {
			args, err := cpArgs(c)
			if err != nil {
				return err
			}
			if len(args) == 0 {
				return usageError{Err: errors.New("restore needs a checkpoint id, e.g. dal-exec checkpoint restore latest")}
			}
			s, err := cpOpenStore(c)
			if err != nil {
				return err
			}
			res, err := s.Restore(args[0], c.String("to"), checkpoint.RestoreOptions{Paths: args[1:]})
			if err != nil {
				return err
			}
			cp := res.Checkpoint
			var paths []string
			for _, a := range res.Artifacts {
				paths = append(paths, a.Path)
			}
			if len(paths) > 10 {
				paths = append(paths[:10], fmt.Sprintf("and %d more", len(res.Artifacts)-10))
			}
			list := ""
			if len(paths) > 0 {
				list = ": " + strings.Join(paths, ", ")
			}
			fmt.Fprintf(c.App.ErrWriter, "restored %s of checkpoint %s (%s) into %s%s\n",
				cpPlural(len(res.Artifacts), "artifact"), cp.ID, cpName(cp.Name), res.Dir, list)
			if out := c.String("state-out"); out != "" { // null when there is no state: still JSON for a resuming agent
				if err := atomicfile.WriteFile(out, append(res.State, '\n'), 0o644); err != nil {
					return fmt.Errorf("writing the state to %s: %w; the artifacts were restored", out, err)
				}
				fmt.Fprintf(c.App.ErrWriter, "state written to %s\n", out)
				return nil
			}
			if len(res.State) > 0 && string(res.State) != "null" { // no state prints nothing
				fmt.Fprintf(c.App.Writer, "%s\n", res.State)
			}
			return nil
		},
	}
}
