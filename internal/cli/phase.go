package cli

import (
	"errors"
	"fmt"
	"strings"

	"github.com/dal-runtime/dal/internal/marks"
	ucli "github.com/urfave/cli/v2"
)

// PhaseCommand is `dal-exec phase`: an agent written in any language (or
// a shell script) marks the start of a phase of its work.
func PhaseCommand() *ucli.Command {
	return &ucli.Command{
		Name:      "phase",
		Usage:     "mark the start of a phase of the running agent's work (a checkpoint with --auto-checkpoint phase_start)",
		ArgsUsage: "NAME",
		Description: `Run from inside an agent under dal-exec run or record (it needs the DAL_MARKS variable
dal-exec sets). Marks that a phase of the work starts now: plan, build, test, release. When the
run was started with --auto-checkpoint phase_start (or all), dal-exec stores a checkpoint there
when the agent exits; otherwise the mark is ignored. Python and Node agents can call
dal.phase(name) instead. Prints the phase's number.

Examples:
   dal-exec phase build
   dal-exec phase --note "tests written" test`,
		Flags: []ucli.Flag{
			&ucli.StringFlag{Name: "note", Usage: "free text shown by dal-exec checkpoint list and show"},
		},
		Action: func(c *ucli.Context) error {
			if c.NArg() != 1 || strings.TrimSpace(c.Args().First()) == "" {
				return usageError{Err: errors.New("phase takes one name, e.g. dal-exec phase build")}
			}
			m, err := writeMark(marks.Input{Kind: marks.Phase, Name: c.Args().First(), Note: c.String("note")})
			if err != nil {
				return err
			}
			fmt.Fprintln(c.App.Writer, m.Seq)
			return nil
		},
	}
}
