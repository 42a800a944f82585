package cli

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"unicode/utf8"

	ucli "github.com/urfave/cli/v2"
)

// How dal-exec explains itself. `dal-exec help [COMMAND [SUBCOMMAND]]` and
// `dal-exec COMMAND --help` print the same text, rendered here rather than
// by urfave/cli's templates: wrapped at helpWidth columns, and each
// command's flags grouped under the categories of flagCategories.

// helpWidth is the column help text is wrapped at.
const helpWidth = 100

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

func init() {
	// urfave/cli prints every help, --help's and its help command's,
	// through this package variable; dal-exec is its only user in the
	// process, and it is set once, before any App runs.
	ucli.HelpPrinter = func(w io.Writer, _ string, data any) {
		switch d := data.(type) {
		case *ucli.App:
			writeAppHelp(w, d)
		case *ucli.Command:
			writeCommandHelp(w, d.HelpName, d)
		}
	}
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

func writeAppHelp(w io.Writer, a *ucli.App) {
	var b strings.Builder
	section(&b, "NAME", a.Name+" - "+a.Usage)
	section(&b, "USAGE", a.Name+" COMMAND [FLAGS] [ARGS...]\n"+a.Name+" help [COMMAND]")
	section(&b, "VERSION", a.Version)
	section(&b, "DESCRIPTION", a.Description)
	writeCommandList(&b, a.Commands)
	b.WriteString("GLOBAL FLAGS:\n")
	writeFlagRows(&b, [][2]string{{"--help, -h", "show help"}, {"--version, -v", "print the version"}})
	io.WriteString(w, strings.TrimRight(b.String(), "\n")+"\n")
}

func writeCommandHelp(w io.Writer, name string, c *ucli.Command) {
	var b strings.Builder
	line := name
	if c.Usage != "" {
		line += " - " + c.Usage
	}
	section(&b, "NAME", line)
	var usage []string
	if len(c.Subcommands) == 0 || c.Action != nil && c.ArgsUsage != "" {
		usage = append(usage, strings.TrimSpace(name+" [FLAGS] "+c.ArgsUsage))
	}
	if len(c.Subcommands) > 0 {
		usage = append(usage, name+" SUBCOMMAND [FLAGS] [ARGS...]")
	}
	section(&b, "USAGE", strings.Join(usage, "\n"))
	section(&b, "DESCRIPTION", c.Description)
	writeCommandList(&b, c.Subcommands)
	writeFlags(&b, c.Flags)
	io.WriteString(w, strings.TrimRight(b.String(), "\n")+"\n")
}

// section writes a heading and its text, indented and wrapped, then a
// blank line; nothing when text is empty. Every section ends so.
func section(b *strings.Builder, heading, text string) {
	if text == "" {
		return
	}
	b.WriteString(heading + ":\n")
	for _, l := range strings.Split(text, "\n") {
		if l == "" {
			b.WriteString("\n")
			continue
		}
		rest := strings.TrimLeft(l, " ")
		indent := 3 + len(l) - len(rest)
		b.WriteString(wrapText(rest, indent, indent))
	}
	b.WriteString("\n")
}

// writeCommandList writes the COMMANDS section.
func writeCommandList(b *strings.Builder, cmds []*ucli.Command) {
	var rows [][2]string
	for _, c := range cmds {
		if !c.Hidden {
			rows = append(rows, [2]string{strings.Join(c.Names(), ", "), c.Usage})
		}
	}
	if len(rows) == 0 {
		return
	}
	b.WriteString("COMMANDS:\n")
	writeFlagRows(b, rows)
	b.WriteString("\n")
}

// writeFlags writes a command's flags, one section per category in the
// order of flagCategories, then the uncategorized ones and --help under
// FLAGS.
func writeFlags(b *strings.Builder, flags []ucli.Flag) {
	groups := map[string][][2]string{}
	var order []string
	for _, f := range flags {
		df, ok := f.(ucli.DocGenerationFlag)
		if !ok || slices.Contains(f.Names(), "help") {
			continue
		}
		if v, ok := f.(ucli.VisibleFlag); ok && !v.IsVisible() {
			continue
		}
		cat := ""
		if cf, ok := f.(ucli.CategorizableFlag); ok {
			cat = cf.GetCategory()
		}
		if _, seen := groups[cat]; !seen && cat != "" && !slices.Contains(flagCategories, cat) {
			order = append(order, cat)
		}
		groups[cat] = append(groups[cat], flagRow(f, df))
	}
	groups[""] = append(groups[""], [2]string{"--help, -h", "show help"})
	width := 0
	for _, rows := range groups {
		width = max(width, nameWidth(rows))
	}
	for _, cat := range append(append(slices.Clone(flagCategories), order...), "") {
		rows := groups[cat]
		if len(rows) == 0 {
			continue
		}
		heading := "FLAGS"
		if cat != "" {
			heading = strings.ToUpper(strings.TrimSuffix(cat, "s")) + " FLAGS"
		}
		b.WriteString(heading + ":\n")
		writeRows(b, rows, width)
		b.WriteString("\n")
	}
}

// flagRow is a flag's names (with a placeholder for its value) and its
// usage, followed by its default and its environment variables.
func flagRow(f ucli.Flag, df ucli.DocGenerationFlag) [2]string {
	var names []string
	for _, n := range f.Names() {
		if len(n) == 1 {
			names = append(names, "-"+n)
		} else {
			names = append(names, "--"+n)
		}
	}
	name := strings.Join(names, ", ")
	if df.TakesValue() && !isSwitch(f) {
		name += " " + placeholder(f)
	}
	usage := df.GetUsage()
	if _, isBool := f.(*ucli.BoolFlag); !isBool && !strings.Contains(usage, "(default") {
		if d := df.GetDefaultText(); d != "" && d != `""` {
			usage += " (default: " + d + ")"
		}
	}
	if env := df.GetEnvVars(); len(env) > 0 {
		usage += " [$" + strings.Join(env, ", $") + "]"
	}
	return [2]string{name, usage}
}

// isSwitch reports whether a flag that is not a BoolFlag is still given
// alone, as replay's --json is.
func isSwitch(f ucli.Flag) bool {
	g, ok := f.(*ucli.GenericFlag)
	if !ok {
		return false
	}
	b, ok := g.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

// placeholder names what a flag's value is.
func placeholder(f ucli.Flag) string {
	switch f.(type) {
	case *ucli.DurationFlag:
		return "DURATION"
	case *ucli.IntFlag, *ucli.Int64Flag, *ucli.UintFlag, *ucli.Uint64Flag:
		return "N"
	case *ucli.Float64Flag:
		return "X"
	default:
		return "VALUE"
	}
}

// writeFlagRows writes rows aligned on their own widest name.
func writeFlagRows(b *strings.Builder, rows [][2]string) {
	writeRows(b, rows, nameWidth(rows))
}

// maxNameColumn caps the name column: a longer name gets its text on the
// next line instead of pushing every row's text right.
const maxNameColumn = 30

func nameWidth(rows [][2]string) int {
	w := 0
	for _, r := range rows {
		if n := utf8.RuneCountInString(r[0]); n <= maxNameColumn {
			w = max(w, n)
		}
	}
	return w
}

// writeRows writes two columns: names indented by 3, text from column
// 3+width+2, wrapped at helpWidth.
func writeRows(b *strings.Builder, rows [][2]string, width int) {
	col := 3 + width + 2
	for _, r := range rows {
		name := "   " + r[0]
		if n := utf8.RuneCountInString(name); n+2 > col {
			b.WriteString(name + "\n" + wrapText(r[1], col, col))
		} else {
			b.WriteString(name + strings.Repeat(" ", col-n) + wrapText(r[1], 0, col))
		}
	}
}

// wrapText word-wraps s at helpWidth: the first line indented by first
// spaces (0: it continues a line already started at column rest), the
// others by rest. It ends with a newline. Text that fits is kept as it is,
// spacing included (aligned examples); a word longer than a line is not
// broken.
func wrapText(s string, first, rest int) string {
	col := first
	if first == 0 {
		col = rest
	}
	if col+utf8.RuneCountInString(s) <= helpWidth {
		return strings.Repeat(" ", first) + s + "\n"
	}
	var b strings.Builder
	b.WriteString(strings.Repeat(" ", first))
	start := col
	for _, word := range strings.Fields(s) {
		n := utf8.RuneCountInString(word)
		if col > start && col+1+n > helpWidth {
			b.WriteString("\n" + strings.Repeat(" ", rest))
			col, start = rest, rest
		}
		if col > start {
			b.WriteString(" ")
			col++
		}
		b.WriteString(word)
		col += n
	}
	b.WriteString("\n")
	return b.String()
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
