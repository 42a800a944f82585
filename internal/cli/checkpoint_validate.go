package cli

import (
	"fmt"

	ucli "github.com/urfave/cli/v2"

	"github.com/dal-runtime/dal/internal/plural"
)

func checkpointValidateCommand() *ucli.Command {
	return &ucli.Command{
		Name:      "validate",
		Usage:     "check checkpoints against their hashes (all when no id is given); exit 1 naming each damaged one",
		ArgsUsage: "[ID...]",
		Description: `Checks each manifest's checksum, each archive's SHA-256, and after decompression each
artifact's and the state's SHA-256.

Examples:
   dal-exec checkpoint validate
   dal-exec checkpoint validate latest`,
		Flags: []ucli.Flag{cpStoreFlag(cpCommandNames.store)},
		Action: func(c *ucli.Context) error {
			ids, err := cpArgs(c)
			if err != nil {
				return err
			}
			s, err := cpOpenStore(c)
			if err != nil {
				return err
			}
			rep, err := s.Check(ids...)
			if err != nil {
				return err
			}
			for _, e := range rep.Damaged {
				fmt.Fprintf(c.App.ErrWriter, "dal-exec: %s\n", e)
			}
			if len(rep.Damaged) > 0 {
				fmt.Fprintf(c.App.Writer, "%s; %s checked\n", plural.Count(len(rep.Damaged), "problem", "problems"), cpPlural(rep.Checked, "checkpoint"))
				return exitError{1}
			}
			fmt.Fprintf(c.App.Writer, "%s intact\n", cpPlural(rep.Checked, "checkpoint"))
			return nil
		},
	}
}
