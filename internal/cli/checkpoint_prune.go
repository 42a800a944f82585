package cli

import (
	"errors"
	"fmt"
	"time"

	"github.com/dal-runtime/dal/internal/checkpoint"
	ucli "github.com/urfave/cli/v2"
)

func checkpointPruneCommand() *ucli.Command {
	return &ucli.Command{
		Name:  "prune",
		Usage: "apply the retention policy now (it also runs after every store)",
		Description: `Deletes the checkpoints the policy does not keep, compresses aged ones with --aged compress,
and removes what interrupted writers left behind. Runs whose manifest is damaged are left
alone (exit 1). --dry-run says what would happen.

Examples:
   dal-exec checkpoint prune --dry-run
   dal-exec checkpoint prune --keep 10 --max-age 90d --aged compress`,
		Flags: append([]ucli.Flag{
			&ucli.BoolFlag{Name: "dry-run", Aliases: []string{"n"}, Usage: "only say what would be deleted or compressed"},
			cpStoreFlag(cpCommandNames.store),
		}, cpRetentionFlags(cpCommandNames)...),
		Action: func(c *ucli.Context) error {
			if _, err := cpArgs(c); err != nil {
				return err
			}
			if c.NArg() > 0 {
				return usageError{Err: errors.New("prune takes no arguments")}
			}
			s, err := cpStoreFrom(c, cpCommandNames)
			if err != nil {
				return err
			}
			dry := c.Bool("dry-run")
			var rep *checkpoint.Report
			if dry {
				rep, err = s.Plan(s.Policy, time.Now())
			} else {
				rep, err = s.Prune(s.Policy, time.Now())
			}
			if rep == nil {
				return err
			}
			w := c.App.Writer
			del, comp := "deleted", "compressed"
			if dry {
				del, comp = "would delete", "would compress"
			}
			for _, d := range rep.Deleted {
				fmt.Fprintf(w, "%s %s (%s): %s\n", del, d.ID, cpName(d.Name), d.Reason)
			}
			for _, d := range rep.Compacted {
				fmt.Fprintf(w, "%s %s (%s): %s\n", comp, d.ID, cpName(d.Name), d.Reason)
			}
			freed := "freeing " + cpBytes(rep.Freed)
			if dry && len(rep.Compacted) > 0 {
				freed += " and what compression saves"
			}
			fmt.Fprintf(w, "%s %d, %s %d, kept %d, %s (policy: %s)\n", del, len(rep.Deleted), comp, len(rep.Compacted), rep.Kept, freed, rep.Policy)
			if err != nil {
				return err
			}
			return cpDamagedExit(c, errors.Join(rep.Skipped...))
		},
	}
}
