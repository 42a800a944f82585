package cli

import (
	"errors"
	"fmt"

	ucli "github.com/urfave/cli/v2"
)

func checkpointRepairCommand() *ucli.Command {
	return &ucli.Command{
		Name:      "repair",
		Usage:     "rebuild a run's damaged or missing manifest from its archives",
		ArgsUsage: "RUN",
		Description: `Every archive carries its checkpoint's metadata. repair checks each archive's content,
rebuilds the manifest from the intact ones and keeps the damaged manifest beside it. Archives
that cannot be recovered are left in place and named (exit 1).

Example:
   dal-exec checkpoint repair 20260301-120000-1a2b3c4d`,
		Flags: []ucli.Flag{cpStoreFlag(cpCommandNames.store)},
		Action: func(c *ucli.Context) error {
			run, err := cpOneID(c, "repair")
			if err != nil {
				return err
			}
			s, err := cpOpenStore(c)
			if err != nil {
				return err
			}
			rep, err := s.Repair(run)
			if err != nil {
				return err
			}
			fmt.Fprintf(c.App.Writer, "rebuilt the manifest of run %s: %s recovered", rep.Run, cpPlural(len(rep.Recovered), "checkpoint"))
			if rep.Backup != "" {
				fmt.Fprintf(c.App.Writer, "; the damaged manifest is kept as %s", rep.Backup)
			}
			fmt.Fprintln(c.App.Writer)
			return cpDamagedExit(c, errors.Join(rep.Lost...))
		},
	}
}
