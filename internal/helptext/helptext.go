// Package helptext renders the help of dal's command lines, dal-exec's and
// dald's, in one style: sections under capitalised headings, commands in
// named groups, flags under their categories, every line wrapped by one
// function (wrapWords) at the terminal's width, 80 columns when the output
// is not a terminal, never leaving a word alone on a line. It renders
// urfave/cli's App and Command values and holds no text of its own beyond
// headings; it is not a place for command behaviour.
package helptext

import (
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"unicode/utf8"

	ucli "github.com/urfave/cli/v2"
	"golang.org/x/sys/unix"
)

// DefaultWidth is the width help is wrapped at when it is not written to a
// terminal: pipes, files, tests.
const DefaultWidth = 80

// A terminal's width is clamped to [minWidth, maxWidth]: below 60 columns
// the flag table has no room for its text; above 120, prose lines grow too
// long to read.
const (
	minWidth = 60
	maxWidth = 120
)

// Width is the column help written to w wraps at: the width of the terminal
// w is (clamped to [60, 120]), or DefaultWidth when w is not a terminal.
func Width(w io.Writer) int {
	f, ok := w.(*os.File)
	if !ok {
		return DefaultWidth
	}
	ws, err := unix.IoctlGetWinsize(int(f.Fd()), unix.TIOCGWINSZ)
	if err != nil || ws.Col == 0 {
		return DefaultWidth
	}
	return min(max(int(ws.Col), minWidth), maxWidth)
}

// Group is a heading of the command list and the commands under it, by
// name, in the order shown.
type Group struct {
	Title    string // "core", shown as "CORE COMMANDS:"
	Commands []string
}

// Style is what differs between the programs: how their commands and
// flags are grouped.
type Style struct {
	// Groups orders the app's commands under headings. Commands in no
	// group come last, under COMMANDS; without groups every command is
	// there.
	Groups []Group
	// FlagCategories orders the flag categories (ucli flags' Category),
	// each shown under its name in the singular ("CHECKPOINT FLAGS");
	// categories not listed follow in the order met, and flags without a
	// category come last, under FLAGS.
	FlagCategories []string
}

// Printer is a ucli.HelpPrinter that renders in s.
func (s Style) Printer() func(w io.Writer, templ string, data any) {
	return func(w io.Writer, _ string, data any) {
		switch d := data.(type) {
		case *ucli.App:
			s.WriteApp(w, d)
		case *ucli.Command:
			s.WriteCommand(w, d.HelpName, d)
		}
	}
}

// WriteApp writes a's help: name, usage, version, description, its
// commands in s's groups, the examples its description ends with, and its
// flags.
func (s Style) WriteApp(w io.Writer, a *ucli.App) {
	h := help{width: Width(w)}
	h.section("NAME", a.Name+" - "+a.Usage)
	usage := a.Name + " [FLAGS]"
	if a.Action == nil || len(a.Commands) > 0 {
		usage = a.Name + " COMMAND [FLAGS] [ARGS...]\n" + a.Name + " help [COMMAND]"
	}
	if a.UsageText != "" {
		usage = a.UsageText
	}
	h.lines("USAGE", usage)
	h.section("VERSION", a.Version)
	desc, examples := splitExamples(a.Description)
	h.section("DESCRIPTION", desc)
	h.commands(s.Groups, a.Commands)
	h.lines("EXAMPLES", examples)
	if len(a.Commands) > 0 {
		h.b.WriteString("GLOBAL FLAGS:\n")
		h.rows([][2]string{{"--help, -h", "show help"}, {"--version, -v", "print the version"}}, -1)
		h.b.WriteString("\n")
	} else {
		h.flags(s.FlagCategories, a.Flags, true)
	}
	h.flush(w)
}

// WriteCommand writes the help of c, whose full name (program and parent
// commands) is name.
func (s Style) WriteCommand(w io.Writer, name string, c *ucli.Command) {
	h := help{width: Width(w)}
	line := name
	if c.Usage != "" {
		line += " - " + c.Usage
	}
	h.section("NAME", line)
	var usage []string
	if len(c.Subcommands) == 0 || c.Action != nil && c.ArgsUsage != "" {
		usage = append(usage, strings.TrimSpace(name+" [FLAGS] "+c.ArgsUsage))
	}
	if len(c.Subcommands) > 0 {
		usage = append(usage, name+" SUBCOMMAND [FLAGS] [ARGS...]")
	}
	h.lines("USAGE", strings.Join(usage, "\n"))
	h.section("DESCRIPTION", c.Description)
	h.commands(nil, c.Subcommands)
	h.flags(s.FlagCategories, c.Flags, false)
	h.flush(w)
}

// splitExamples splits a description at a last paragraph that starts with
// "Examples:", returning the text before it and the examples (unindented
// by their first line's indent).
func splitExamples(desc string) (string, string) {
	i := strings.LastIndex(desc, "\nExamples:\n")
	if i < 0 {
		return desc, ""
	}
	lines := strings.Split(desc[i+len("\nExamples:\n"):], "\n")
	indent := len(lines[0]) - len(strings.TrimLeft(lines[0], " "))
	for k, l := range lines {
		lines[k] = strings.TrimPrefix(l, strings.Repeat(" ", indent))
	}
	return strings.TrimRight(desc[:i], "\n"), strings.Join(lines, "\n")
}

// help is one help text being written at width columns.
type help struct {
	b     strings.Builder
	width int
}

func (h *help) flush(w io.Writer) {
	io.WriteString(w, strings.TrimRight(h.b.String(), "\n")+"\n")
}

// section writes a heading and its text indented by 3, then a blank line;
// nothing when text is empty. The text is read as paragraphs: unindented
// lines up to a blank or an indented line are one paragraph, reflowed;
// an indented line stays a line of its own (an example, a table row),
// wrapped only when it does not fit: a command line (starting with the
// program's name or "$ ") breaks with a shell continuation (" \") that
// keeps it runnable when pasted, between shell words, never inside quotes.
func (h *help) section(heading, text string) { h.text(heading, text, true) }

// text writes a section, its unindented lines read as paragraphs when
// prose is true, else as lines of their own.
func (h *help) text(heading, text string, prose bool) {
	if text == "" {
		return
	}
	h.b.WriteString(heading + ":\n")
	var para []string
	endPara := func() {
		if len(para) > 0 {
			h.pad(3)
			h.b.WriteString(wrap(strings.Fields(strings.Join(para, " ")), 3, 3, h.width, ""))
			para = nil
		}
	}
	for _, l := range strings.Split(text, "\n") {
		rest := strings.TrimLeft(l, " ")
		indent := len(l) - len(rest)
		switch {
		case rest == "":
			endPara()
			h.b.WriteString("\n")
		case indent == 0 && prose:
			para = append(para, rest)
			if strings.HasSuffix(rest, ":") && len(strings.Fields(rest)) == 1 {
				endPara() // a heading of its own, "Examples:"
			}
		default:
			endPara()
			h.pad(3 + indent)
			if 3+indent+utf8.RuneCountInString(rest) <= h.width {
				h.b.WriteString(rest + "\n") // as written: aligned columns stay aligned
			} else if isCommandLine(rest) {
				h.b.WriteString(wrap(shellWords(rest), 3+indent, 3+indent+4, h.width, " \\"))
			} else {
				h.b.WriteString(wrap(strings.Fields(rest), 3+indent, 3+indent+4, h.width, ""))
			}
		}
	}
	endPara()
	h.b.WriteString("\n")
}

// lines writes a heading and its lines, each a paragraph of its own
// indented by 3 (a usage line, an example), then a blank line; nothing when
// text is empty.
func (h *help) lines(heading, text string) { h.text(heading, text, false) }

// isCommandLine reports whether an indented line of a description is a
// command someone would paste into a shell.
func isCommandLine(l string) bool {
	for _, p := range []string{"dal-exec ", "dald ", "$ "} {
		if strings.HasPrefix(l, p) {
			return true
		}
	}
	return l == "dald" || l == "dal-exec"
}

func (h *help) pad(n int) { h.b.WriteString(strings.Repeat(" ", n)) }

// commands writes the command list: commands under their groups'
// headings, then any in no group under COMMANDS.
func (h *help) commands(groups []Group, cmds []*ucli.Command) {
	var visible []*ucli.Command
	for _, c := range cmds {
		if !c.Hidden {
			visible = append(visible, c)
		}
	}
	if len(visible) == 0 {
		return
	}
	type block struct {
		heading string
		rows    [][2]string
	}
	var blocks []block
	placed := map[string]bool{}
	for _, g := range groups {
		bl := block{heading: strings.ToUpper(g.Title) + " COMMANDS"}
		for _, name := range g.Commands {
			for _, c := range visible {
				if c.Name == name && !placed[name] {
					placed[name] = true
					bl.rows = append(bl.rows, commandRow(c))
				}
			}
		}
		if len(bl.rows) > 0 {
			blocks = append(blocks, bl)
		}
	}
	other := block{heading: "COMMANDS"}
	if len(blocks) > 0 {
		other.heading = "OTHER COMMANDS"
	}
	for _, c := range visible {
		if !placed[c.Name] {
			other.rows = append(other.rows, commandRow(c))
		}
	}
	if len(other.rows) > 0 {
		blocks = append(blocks, other)
	}
	var all [][2]string
	for _, bl := range blocks {
		all = append(all, bl.rows...)
	}
	width := nameWidth(all) // one column for every group: the list reads as one table
	for _, bl := range blocks {
		h.b.WriteString(bl.heading + ":\n")
		h.rows(bl.rows, width)
		h.b.WriteString("\n")
	}
}

func commandRow(c *ucli.Command) [2]string {
	return [2]string{strings.Join(c.Names(), ", "), c.Usage}
}

// flags writes flags, one section per category in the order of cats, then
// the uncategorized ones and --help (and --version, for an app) under
// FLAGS.
func (h *help) flags(cats []string, flags []ucli.Flag, app bool) {
	groups := map[string][][2]string{}
	var order []string
	for _, f := range flags {
		df, ok := f.(ucli.DocGenerationFlag)
		if !ok || slices.Contains(f.Names(), "help") || slices.Contains(f.Names(), "version") {
			continue
		}
		if v, ok := f.(ucli.VisibleFlag); ok && !v.IsVisible() {
			continue
		}
		cat := ""
		if cf, ok := f.(ucli.CategorizableFlag); ok {
			cat = cf.GetCategory()
		}
		if _, seen := groups[cat]; !seen && cat != "" && !slices.Contains(cats, cat) {
			order = append(order, cat)
		}
		groups[cat] = append(groups[cat], flagRow(f, df))
	}
	groups[""] = append(groups[""], [2]string{"--help, -h", "show help"})
	if app {
		groups[""] = append(groups[""], [2]string{"--version, -v", "print the version"})
	}
	var all [][2]string
	for _, rows := range groups {
		all = append(all, rows...)
	}
	width := nameWidth(all)
	for _, cat := range append(append(slices.Clone(cats), order...), "") {
		rows := groups[cat]
		if len(rows) == 0 {
			continue
		}
		heading := "FLAGS"
		if cat != "" {
			heading = strings.ToUpper(strings.TrimSuffix(cat, "s")) + " FLAGS"
		}
		h.b.WriteString(heading + ":\n")
		h.rows(rows, width)
		h.b.WriteString("\n")
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

// rows writes two columns: names indented by 3, text from column
// 3+width+2 (width -1: the rows' own widest name). A row whose text would
// leave a word alone on a line in that column (long paths and defaults in a
// narrow terminal) has its text under its name instead, from column 7.
func (h *help) rows(rows [][2]string, width int) {
	if width < 0 {
		width = nameWidth(rows)
	}
	col := 3 + width + 2
	for _, r := range rows {
		name := "   " + r[0]
		words := strings.Fields(r[1])
		text, alone := wrapWords(words, col, col, h.width, "")
		switch n := utf8.RuneCountInString(name); {
		case alone:
			text, _ = wrapWords(words, under, under, h.width, "")
			h.b.WriteString(name + "\n")
			h.pad(under)
		case n+2 > col:
			h.b.WriteString(name + "\n")
			h.pad(col)
		default:
			h.b.WriteString(name + strings.Repeat(" ", col-n))
		}
		h.b.WriteString(text)
	}
}

// under is the column a row's text starts at when it goes under its name.
const under = 7

// wrap is wrapWords' text.
func wrap(words []string, col, indent, width int, cont string) string {
	text, _ := wrapWords(words, col, indent, width, cont)
	return text
}

// wrapWords is the one function help text is wrapped by. It lays words out
// from column col (the caller has written what precedes it), one space
// apart, breaking before a word that would pass width and indenting the
// following lines by indent; cont ends every line but the last (" \" for a
// shell command) and counts in its width. It never leaves a word alone on
// the last line when the line before can give it one of its own: the
// previous line's last word moves down, and so on up while that leaves a
// line with one word. A word longer than a line is not broken. The result
// ends with a newline; alone reports a word left alone on a line that
// continues another all the same (the words were too long to pair).
func wrapWords(words []string, col, indent, width int, cont string) (text string, alone bool) {
	if len(words) == 0 {
		return "\n", false
	}
	contW := utf8.RuneCountInString(cont)
	lines, starts := [][]string{nil}, []int{col}
	at := col
	for _, w := range words {
		n := utf8.RuneCountInString(w)
		last := len(lines) - 1
		if len(lines[last]) > 0 {
			if at+1+n+contW > width {
				lines, starts = append(lines, nil), append(starts, indent)
				at, last = indent, last+1
			} else {
				at++
			}
		}
		lines[last] = append(lines[last], w)
		at += n
	}
	// A line's length from its start column, and whether it fits (the last
	// line has no continuation mark).
	fits := func(i int, ws []string) bool {
		n := starts[i] + utf8.RuneCountInString(strings.Join(ws, " "))
		if i < len(lines)-1 {
			n += contW
		}
		return n <= width
	}
	for i := len(lines) - 1; i > 0 && len(lines[i]) == 1; i-- {
		prev := lines[i-1]
		if len(prev) < 2 {
			break
		}
		moved := append([]string{prev[len(prev)-1]}, lines[i]...)
		if !fits(i, moved) {
			break
		}
		lines[i-1], lines[i] = prev[:len(prev)-1], moved
	}
	var b strings.Builder
	for i, l := range lines {
		if i > 0 {
			b.WriteString(strings.Repeat(" ", indent))
		}
		b.WriteString(strings.Join(l, " "))
		if i < len(lines)-1 {
			b.WriteString(cont)
		}
		b.WriteString("\n")
		alone = alone || i > 0 && len(l) == 1
	}
	return b.String(), alone
}

// shellWords splits a command line at the spaces a shell splits it at:
// not inside single or double quotes.
func shellWords(s string) []string {
	var words []string
	var cur strings.Builder
	var quote rune
	for _, r := range s {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			}
		case r == '\'' || r == '"':
			quote = r
		case r == ' ':
			if cur.Len() > 0 {
				words = append(words, cur.String())
				cur.Reset()
			}
			continue
		}
		cur.WriteRune(r)
	}
	if cur.Len() > 0 {
		words = append(words, cur.String())
	}
	return words
}

// Problems lists what is wrong with help text as it is meant to be written
// at width columns, for the programs' tests: a line wider than width, and a
// word alone on a line that continues the one before (a heading such as
// "Examples:", a flag's name, a command under its comment may stand alone
// by design).
func Problems(text string, width int) []string {
	var out []string
	lines := strings.Split(text, "\n")
	for i, l := range lines {
		if n := utf8.RuneCountInString(l); n > width {
			out = append(out, fmt.Sprintf("line %d is %d columns wide, more than %d: %q", i+1, n, width, l))
		}
		f := strings.Fields(l)
		if len(f) != 1 || i == 0 || strings.HasSuffix(f[0], ":") || strings.HasPrefix(f[0], "-") {
			continue
		}
		indent := len(l) - len(strings.TrimLeft(l, " "))
		prev := lines[i-1]
		prevIndent := len(prev) - len(strings.TrimLeft(prev, " "))
		// A continuation: the line before is text (not blank, not a
		// heading) indented as much or less.
		p := strings.TrimSpace(prev)
		if p != "" && !strings.HasSuffix(p, ":") && !strings.HasPrefix(p, "#") && prevIndent <= indent {
			out = append(out, fmt.Sprintf("line %d holds one word alone, %q, after %q", i+1, f[0], prev))
		}
	}
	return out
}
