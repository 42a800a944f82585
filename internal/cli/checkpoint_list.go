package cli

import (
	"errors"
	"fmt"
	"text/tabwriter"

	"github.com/dal-runtime/dal/internal/checkpoint"
	ucli "github.com/urfave/cli/v2"
)

func checkpointListCommand() *ucli.Command {
	return &ucli.Command{
		Name:  "list",
		Usage: "list the stored checkpoints, newest first",
		Description: `Columns: the id (RUN/SEQ), name, tag, when it was stored, the archive's size and the
artifacts' count and size. Exits 1 when a run's manifest is damaged (the others are listed).

Examples:
   dal-exec checkpoint list
   dal-exec checkpoint list --workspace . --json`,
		Flags: []ucli.Flag{
			&ucli.StringFlag{Name: "run", Usage: "only this run (an id or a prefix of one)"},
			&ucli.StringFlag{Name: "workspace", Aliases: []string{"w"}, Usage: "only checkpoints of this workspace"},
			&ucli.StringFlag{Name: "tag", Usage: "only checkpoints with this tag"},
			&ucli.BoolFlag{Name: "json", Usage: "print the checkpoints as a JSON array on stdout (docs/schema/checkpoint-list.schema.json)"},
			cpStoreFlag(cpCommandNames.store),
		},
		Action: func(c *ucli.Context) error {
			if _, err := cpArgs(c); err != nil {
				return err
			}
			if c.NArg() > 0 {
				return usageError{Err: fmt.Errorf("list takes no arguments; filter with --run, --workspace or --tag")}
			}
			s, err := cpOpenStore(c)
			if err != nil {
				return err
			}
			cs, lerr := s.List(checkpoint.Filter{Run: c.String("run"), Workspace: c.String("workspace"), Tag: c.String("tag")})
			if lerr != nil && cs == nil && !errors.Is(lerr, checkpoint.ErrDamaged) {
				return lerr
			}
			w := c.App.Writer
			if c.Bool("json") {
				if cs == nil {
					cs = []checkpoint.Checkpoint{}
				}
				if err := writeJSON(w, cs); err != nil {
					return err
				}
			} else if len(cs) == 0 {
				fmt.Fprintf(w, "no checkpoints in %s\n", s.Dir)
			} else {
				tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "ID\tNAME\tTAG\tCREATED\tSIZE\tARTIFACTS")
				for _, cp := range cs {
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d (%s)\n", cp.ID, cpName(cp.Name), cpDash(cp.Tag),
						cp.Stored.Local().Format("2006-01-02 15:04:05"), cpBytes(cp.ArchiveSize), len(cp.Artifacts), cpBytes(cp.ArtifactBytes()))
				}
				tw.Flush()
			}
			return cpDamagedExit(c, lerr)
		},
	}
}
