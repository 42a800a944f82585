package cli

import (
	"fmt"
	"io"

	"github.com/dal-runtime/dal/internal/helptext"
	ucli "github.com/urfave/cli/v2"
)

// How dal-exec explains itself. `dal-exec help [COMMAND [SUBCOMMAND]]` and
// `dal-exec COMMAND --help` print the same text, rendered by
// internal/helptext (as dald's is): commands in the groups of
// commandGroups, each command's flags under the categories of
// flagCategories.

// commandGroups are the headings of the top-level command list, in order,
// and the commands under each. A command in no group is listed last, under
// OTHER COMMANDS; a name that is not a command is skipped.
var commandGroups = []helptext.Group{
	{Title: "core", Commands: []string{"run", "record", "replay", "revert"}},
	{Title: "evaluation", Commands: []string{"consistency", "iteration", "phase", "checkpoint"}},
	{Title: "inspection", Commands: []string{"verify", "diff", "show", "dashboard", "status"}},
	{Title: "administration", Commands: []string{"recover", "keygen", "approve", "deny", "help"}},
}

// flagCategories are the flag groups, in the order help shows them, each
// under its name in the singular ("CHECKPOINT FLAGS"); flags without a
// category come last, under FLAGS.
var flagCategories = []string{catRun, catSandbox, catIterations, catCheckpoints, catOutput, catTrust}

const (
	catRun         = "run"
	catSandbox     = "sandbox and network"
	catIterations  = "iterations"
	catCheckpoints = "checkpoints"
	catOutput      = "output"
	catTrust       = "trust"
)

var helpStyle = helptext.Style{Groups: commandGroups, FlagCategories: flagCategories}

func init() {
	// urfave/cli prints every help, --help's and its help command's,
	// through this package variable; dal-exec is its only user in the
	// process, and it is set once, before any App runs.
	ucli.HelpPrinter = helpStyle.Printer()
}

func writeAppHelp(w io.Writer, a *ucli.App) { helpStyle.WriteApp(w, a) }

func writeCommandHelp(w io.Writer, name string, c *ucli.Command) {
	helpStyle.WriteCommand(w, name, c)
}

// HelpCommand is `dal-exec help`.
func HelpCommand() *ucli.Command {
	return &ucli.Command{
		Name:      "help",
		Usage:     "show this help, or a command's: the same text as COMMAND --help",
		ArgsUsage: "[COMMAND [SUBCOMMAND]]",
		Description: `Examples:
   dal-exec help
   dal-exec help record
   dal-exec help checkpoint restore`,
		Action: func(c *ucli.Context) error {
			if c.NArg() == 0 {
				writeAppHelp(c.App.Writer, c.App)
				return nil
			}
			name, cmds := c.App.Name, c.App.Commands
			var cmd *ucli.Command
			for _, arg := range c.Args().Slice() {
				next := findCommand(cmds, arg)
				if next == nil {
					if cmd != nil && len(cmds) == 0 {
						p := commandPath(name)
						return usageError{Err: fmt.Errorf("%s has no subcommands, so there is no help for %q: see dal-exec help %s", p, arg, p)}
					}
					return unknownCommand(name, arg, cmds)
				}
				name += " " + next.Name
				cmd, cmds = next, next.Subcommands
			}
			if cmd.Name == "help" && name == c.App.Name+" help" {
				writeAppHelp(c.App.Writer, c.App) // as help --help does: the help of help is dal-exec's
				return nil
			}
			writeCommandHelp(c.App.Writer, name, cmd)
			return nil
		},
	}
}

// findCommand is the command of cmds named or aliased name, or nil.
func findCommand(cmds []*ucli.Command, name string) *ucli.Command {
	for _, c := range cmds {
		if c.HasName(name) {
			return c
		}
	}
	return nil
}

// categorize puts flags in the help category cat and returns them.
func categorize(cat string, flags ...ucli.Flag) []ucli.Flag {
	for _, f := range flags {
		switch f := f.(type) {
		case *ucli.StringFlag:
			f.Category = cat
		case *ucli.StringSliceFlag:
			f.Category = cat
		case *ucli.BoolFlag:
			f.Category = cat
		case *ucli.IntFlag:
			f.Category = cat
		case *ucli.Float64Flag:
			f.Category = cat
		case *ucli.DurationFlag:
			f.Category = cat
		case *ucli.GenericFlag:
			f.Category = cat
		default:
			panic(fmt.Sprintf("categorize: flag type %T", f)) // a programming error, caught by the help tests
		}
	}
	return flags
}

// flagList concatenates flag lists.
func flagList(lists ...[]ucli.Flag) []ucli.Flag {
	var all []ucli.Flag
	for _, l := range lists {
		all = append(all, l...)
	}
	return all
}
