package cli

import (
	"errors"
	"fmt"

	"github.com/dal-runtime/dal/internal/checkpoint"
	ucli "github.com/urfave/cli/v2"
)

func checkpointTagCommand() *ucli.Command {
	return &ucli.Command{
		Name:      "tag",
		Usage:     "tag a checkpoint: retention keeps it forever",
		ArgsUsage: "ID TAG",
		Flags:     []ucli.Flag{cpStoreFlag(cpCommandNames.store)},
		Action: func(c *ucli.Context) error {
			args, err := cpArgs(c)
			if err != nil {
				return err
			}
			if len(args) != 2 {
				return usageError{Err: errors.New("tag takes a checkpoint id and a tag, e.g. dal-exec checkpoint tag latest release-1")}
			}
			if err := checkpoint.CheckTag(args[1]); err != nil {
				return usageError{Err: err}
			}
			s, err := cpOpenStore(c)
			if err != nil {
				return err
			}
			cp, err := s.Tag(args[0], args[1])
			if err != nil {
				return err
			}
			fmt.Fprintf(c.App.Writer, "tagged checkpoint %s (%s) %s: retention keeps it forever\n", cp.ID, cpName(cp.Name), cp.Tag)
			return nil
		},
	}
}

func checkpointUntagCommand() *ucli.Command {
	return &ucli.Command{
		Name:      "untag",
		Usage:     "remove a checkpoint's tag: retention treats it as any other",
		ArgsUsage: "ID",
		Flags:     []ucli.Flag{cpStoreFlag(cpCommandNames.store)},
		Action: func(c *ucli.Context) error {
			id, err := cpOneID(c, "untag")
			if err != nil {
				return err
			}
			s, err := cpOpenStore(c)
			if err != nil {
				return err
			}
			cp, err := s.Untag(id)
			if err != nil {
				return err
			}
			fmt.Fprintf(c.App.Writer, "untagged checkpoint %s (%s)\n", cp.ID, cpName(cp.Name))
			return nil
		},
	}
}
