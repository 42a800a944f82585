package cli

import (
	"fmt"
	"regexp"
	"strings"
	"sync"

	ucli "github.com/urfave/cli/v2"
)

// Mistakes in the command line. Each becomes a usageError of one sentence
// that says what is wrong and what to do — an unknown command or flag with
// the nearest real one, a duration without a unit with an example — and
// never the whole help, which urfave/cli prints by default.

// guard makes every command of cmds (and their subcommands) report
// mistakes as usage errors: unknown flags, bad values, missing required
// flags and unknown subcommands. It takes over urfave/cli's Required
// check, which prints the whole help.
func guard(cmds []*ucli.Command) {
	for _, c := range cmds {
		c.OnUsageError = onUsageError
		c.HideHelpCommand = true // `dal-exec help CMD`; and `run -- help` runs help
		var required []string
		for _, f := range c.Flags {
			if rf, ok := f.(ucli.RequiredFlag); ok && rf.IsRequired() {
				required = append(required, f.Names()[0])
				unrequire(f)
			}
		}
		if len(required) > 0 {
			before := c.Before
			c.Before = func(ctx *ucli.Context) error {
				for _, name := range required {
					if !ctx.IsSet(name) {
						return usageError{Err: fmt.Errorf("%s needs --%s: see the examples in dal-exec help %s", commandPath(ctx.Command.HelpName), name, commandPath(ctx.Command.HelpName))}
					}
				}
				if before != nil {
					return before(ctx)
				}
				return nil
			}
		}
		if len(c.Subcommands) > 0 && c.Action == nil {
			c.Action = subcommandAction
		}
		guard(c.Subcommands)
	}
}

// unrequire clears a flag's Required, for the flag types dal uses.
func unrequire(f ucli.Flag) {
	switch f := f.(type) {
	case *ucli.StringFlag:
		f.Required = false
	case *ucli.StringSliceFlag:
		f.Required = false
	case *ucli.IntFlag:
		f.Required = false
	case *ucli.Float64Flag:
		f.Required = false
	case *ucli.BoolFlag:
		f.Required = false
	case *ucli.DurationFlag:
		f.Required = false
	}
}

// commandPath is a help name without the program: "checkpoint save".
func commandPath(helpName string) string {
	_, rest, _ := strings.Cut(helpName, " ")
	return rest
}

// appAction runs when dal-exec is given no command, or one it does not
// have.
func appAction(c *ucli.Context) error {
	if c.NArg() == 0 {
		writeAppHelp(c.App.Writer, c.App)
		return nil
	}
	return unknownCommand(c.App.Name, c.Args().First(), c.App.Commands)
}

// subcommandAction runs when a command group (checkpoint) is given no
// subcommand, or one it does not have.
func subcommandAction(c *ucli.Context) error {
	if c.NArg() == 0 {
		writeCommandHelp(c.App.Writer, c.Command.HelpName, c.Command)
		return nil
	}
	return unknownCommand(c.Command.HelpName, c.Args().First(), c.Command.Subcommands)
}

// unknownCommand is the usage error for a command parent does not have.
func unknownCommand(parent, name string, cmds []*ucli.Command) error {
	var names []string
	for _, c := range cmds {
		if !c.Hidden {
			names = append(names, c.Names()...)
		}
	}
	what, list := fmt.Sprintf("there is no command %q", name), "dal-exec help"
	if p := commandPath(parent); p != "" {
		what, list = fmt.Sprintf("%s has no subcommand %q", p, name), list+" "+p
	}
	if s := suggest(name, names); s != "" {
		return usageError{Err: fmt.Errorf("%s: did you mean %s?", what, s)}
	}
	return usageError{Err: fmt.Errorf("%s: %s lists them", what, list)}
}

// The messages of Go's flag package and urfave/cli that onUsageError
// rewrites, compiled on first use (not at every dal-exec start).
var usageRE = sync.OnceValue(func() (r struct{ undefined, badValue, needsValue, badSyntax, badEnv *regexp.Regexp }) {
	r.undefined = regexp.MustCompile(`^flag provided but not defined: -+(.*)$`)
	r.badValue = regexp.MustCompile(`^invalid (?:boolean )?value "(.*)" for (?:flag )?-+([^:]*): (.*)$`)
	r.needsValue = regexp.MustCompile(`^flag needs an argument: -+(.*)$`)
	r.badSyntax = regexp.MustCompile(`^bad flag syntax: (.*)$`)
	r.badEnv = regexp.MustCompile(`^could not parse "(.*)" as .* from (?:env var|environment variable) "([^"]*)" for flag ([^:]*): (.*)$`)
	return r
})

// onUsageError turns urfave/cli's parse errors into one sentence.
func onUsageError(c *ucli.Context, err error, _ bool) error {
	cmd := c.Command
	name := cmd.HelpName
	if name == "" {
		name = c.App.Name
	}
	p := commandPath(name)
	list, owner := "dal-exec help", "dal-exec"
	if p != "" {
		list, owner = list+" "+p, p
	}
	msg := err.Error()
	re := usageRE()
	if m := re.undefined.FindStringSubmatch(msg); m != nil {
		var names []string
		for _, f := range cmd.Flags {
			for _, n := range f.Names() {
				names = append(names, flagName(n))
			}
		}
		if s := suggest(flagName(m[1]), names); s != "" {
			return usageError{Err: fmt.Errorf("%s has no flag %s: did you mean %s?", owner, flagName(m[1]), s)}
		}
		return usageError{Err: fmt.Errorf("%s has no flag %s: %s lists its flags", owner, flagName(m[1]), list)}
	}
	if m := re.badValue.FindStringSubmatch(msg); m != nil {
		return usageError{Err: badValue(flagName(m[2]), " ", m[1], lookupFlag(cmd.Flags, m[2]), m[3])}
	}
	if m := re.badEnv.FindStringSubmatch(msg); m != nil {
		return usageError{Err: badValue(m[2], "=", m[1], lookupFlag(cmd.Flags, m[3]), m[4])}
	}
	if m := re.needsValue.FindStringSubmatch(msg); m != nil {
		return usageError{Err: fmt.Errorf("%s needs a value: see %s", flagName(m[1]), list)}
	}
	if m := re.badSyntax.FindStringSubmatch(msg); m != nil {
		return usageError{Err: fmt.Errorf("%s is not a flag: write --name or --name=VALUE", m[1])}
	}
	return usageError{Err: fmt.Errorf("%s: %w (%s lists the flags)", owner, err, list)}
}

// badValue is the sentence for a value a flag cannot take, given as
// what+sep+value: "--timeout 5", or "DAL_TIMEOUT=5" from the environment.
func badValue(what, sep, value string, f ucli.Flag, why string) error {
	quoted := what + sep + fmt.Sprintf("%q", value)
	switch f.(type) {
	case *ucli.DurationFlag:
		if isNumber(value) {
			return fmt.Errorf("%s%s%s has no unit: use a unit, e.g. 5s or 2m", what, sep, value)
		}
		return fmt.Errorf("%s is not a duration: use a number and a unit, e.g. 5s, 2m or 1h30m", quoted)
	case *ucli.IntFlag, *ucli.Int64Flag, *ucli.UintFlag, *ucli.Uint64Flag:
		return fmt.Errorf("%s is not a whole number: give one like 3", quoted)
	case *ucli.Float64Flag:
		return fmt.Errorf("%s is not a number: give one like 0.5", quoted)
	case *ucli.BoolFlag:
		return fmt.Errorf("%s=%s is neither true nor false: give the flag alone, or =true or =false", what, value)
	}
	return fmt.Errorf("%s: %s", quoted, why)
}

func isNumber(s string) bool {
	var f float64
	_, err := fmt.Sscanf(s, "%g", &f)
	return err == nil && !strings.ContainsFunc(s, func(r rune) bool { return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' })
}

// flagName is how a flag is written: -n for one letter, --name otherwise.
func flagName(n string) string {
	n = strings.TrimLeft(n, "-")
	if len(n) == 1 {
		return "-" + n
	}
	return "--" + n
}

func lookupFlag(flags []ucli.Flag, name string) ucli.Flag {
	for _, f := range flags {
		for _, n := range f.Names() {
			if n == strings.TrimLeft(name, "-") {
				return f
			}
		}
	}
	return nil
}

// suggest is the candidate the user most likely meant by typed: the
// nearest within two edits (a transposition counts as one), else the only
// one that starts with it; "" when nothing is near.
func suggest(typed string, candidates []string) string {
	best, bestD := "", 3
	for _, c := range candidates {
		if d := editDistance(typed, c); d < bestD && d < len(strings.TrimLeft(c, "-")) {
			best, bestD = c, d
		}
	}
	if best != "" {
		return best
	}
	var prefixed []string
	if len(strings.TrimLeft(typed, "-")) >= 3 {
		for _, c := range candidates {
			if strings.HasPrefix(c, typed) {
				prefixed = append(prefixed, c)
			}
		}
	}
	if len(prefixed) == 1 {
		return prefixed[0]
	}
	return ""
}

// editDistance is the optimal string alignment distance between a and b:
// insertions, deletions, substitutions and transpositions of neighbours.
func editDistance(a, b string) int {
	x, y := []rune(a), []rune(b)
	d := make([][]int, len(x)+1)
	for i := range d {
		d[i] = make([]int, len(y)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(x); i++ {
		for j := 1; j <= len(y); j++ {
			cost := 1
			if x[i-1] == y[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && x[i-1] == y[j-2] && x[i-2] == y[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(x)][len(y)]
}
