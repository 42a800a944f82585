package cli

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/dal-runtime/dal/internal/dald"
	ucli "github.com/urfave/cli/v2"
)

// TestDocsNameRealCommandsAndFlags reads README.md, SECURITY.md,
// docs/*.md and the other READMEs the way a user copies from them: every command line in a code
// block or an inline code span that runs dal-exec or dald must name
// commands and flags the programs have. A renamed flag or a command that
// does not exist fails here, naming the file and line.
func TestDocsNameRealCommandsAndFlags(t *testing.T) {
	helpEnv(t)
	files, err := filepath.Glob(filepath.Join("..", "..", "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	root := filepath.Join("..", "..")
	files = append([]string{filepath.Join(root, "README.md"), filepath.Join(root, "SECURITY.md"),
		filepath.Join(root, "contrib", "systemd", "README.md"), filepath.Join(root, "internal", "shim", "node", "README.md"),
		filepath.Join(root, "internal", "shim", "python", "README.md")}, files...)
	app := App(nil, nil)
	daldApp := dald.App(nil, nil)
	checked := 0
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		name, _ := filepath.Rel(filepath.Join("..", ".."), f)
		for _, s := range codeOf(string(data)) {
			for _, cmd := range commandLines(s.text) {
				checked++
				if p := checkCommandLine(app, daldApp, cmd); p != "" {
					t.Errorf("%s:%d: %s: %s", name, s.line, strings.Join(cmd, " "), p)
				}
			}
		}
	}
	t.Logf("%d command lines checked", checked)
	// The README alone names over thirty command lines: finding few means
	// the parsing broke, not that the docs are right.
	if checked < 150 {
		t.Fatalf("only %d command lines found in the docs: the Markdown parsing is broken", checked)
	}
}

// TestDocsCheckerCatchesMistakes feeds the checker lines it must refuse,
// and lines it must accept.
func TestDocsCheckerCatchesMistakes(t *testing.T) {
	helpEnv(t)
	app, daldApp := App(nil, nil), dald.App(nil, nil)
	for line, wantBad := range map[string]bool{
		"dal-exec verify --jsn run1":                        true,
		"dal-exec verfy run1":                               true,
		"dal-exec checkpoint sav":                           true,
		"dal-exec checkpoint save|lst":                      true,
		"dald --metric-addr :9464":                          true,
		"dal-exec record --out b -- python3 agent.py --jsn": false, // the agent's own flag
		"dal-exec checkpoint save\\|list --json":            false,
		"dal-exec consistency merge --report eval s1 s2":    false,
		"dal-exec iteration [--score S \\| --dim K=V ...]":  false,
		"dal-exec record -w . --seed=7 -- ./agent":          false,
		"dald --metrics-addr 127.0.0.1:9464 &":              false,
		"dal-exec replay --json run1 | jq .exact":           false,
		"dal-exec help checkpoint restore":                  false,
		"dal-exec COMMAND --help":                           false,
	} {
		cmds := commandLines(line)
		if len(cmds) != 1 {
			t.Errorf("%q: found %d command lines, want 1", line, len(cmds))
			continue
		}
		if p := checkCommandLine(app, daldApp, cmds[0]); (p != "") != wantBad {
			t.Errorf("%q: checker said %q, want a problem: %v", line, p, wantBad)
		}
	}
}

// snippet is code from a Markdown file and the line it starts on.
type snippet struct {
	text string
	line int
}

var (
	inlineCode    = regexp.MustCompile("`[^`]+`")
	envAssignment = regexp.MustCompile(`^[A-Z_][A-Z0-9_]*=`)
)

// codeOf returns the code of a Markdown text: each line of its fenced
// blocks (a line ending in a backslash joined with the next), and each
// inline code span of the other lines.
func codeOf(md string) []snippet {
	var out []snippet
	inBlock := false
	var cont string
	for i, l := range strings.Split(md, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "```") {
			inBlock, cont = !inBlock, ""
			continue
		}
		if inBlock {
			if strings.HasSuffix(l, "\\") {
				cont += strings.TrimSuffix(l, "\\") + " "
				continue
			}
			out = append(out, snippet{cont + l, i + 1})
			cont = ""
			continue
		}
		for _, m := range inlineCode.FindAllString(l, -1) {
			out = append(out, snippet{strings.Trim(m, "`"), i + 1})
		}
	}
	return out
}

// commandLines finds the dal-exec and dald command lines in code: from the
// program's name (alone, or as a path ending in it) at the start of a
// command, to the end of the command (a |, ;, && or # outside brackets, a
// closing parenthesis). Markdown's \| is a |.
func commandLines(code string) [][]string {
	code = strings.ReplaceAll(code, "\\|", "|")
	var out [][]string
	var cur []string
	depth := 0
	atStart := true
	for _, tok := range shellFields(code) {
		if cur != nil {
			end := depth == 0 && (tok == "|" || tok == ";" || tok == "&&" || tok == "||" || strings.HasPrefix(tok, "#"))
			if end || strings.HasPrefix(tok, ")") || depth == 0 && strings.HasPrefix(tok, "(") {
				out, cur, atStart = append(out, cur), nil, true
				continue
			}
			depth += strings.Count(tok, "[") - strings.Count(tok, "]")
			cur = append(cur, tok)
			continue
		}
		base := tok[strings.LastIndex(tok, "/")+1:]
		if (base == "dal-exec" || base == "dald") && atStart {
			cur, depth = []string{base}, 0
			continue
		}
		// A program starts after a shell operator, a prompt, sudo, an
		// environment assignment or an opening parenthesis.
		atStart = slices.Contains([]string{"$", "|", ";", "&&", "||", "&", "sudo", "time", "exec"}, tok) ||
			strings.HasSuffix(tok, "(") || envAssignment.MatchString(tok)
	}
	if cur != nil {
		out = append(out, cur)
	}
	return out
}

// shellFields splits code at spaces outside single and double quotes.
func shellFields(code string) []string {
	var out []string
	var cur strings.Builder
	var quote rune
	for _, r := range code {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			}
		case r == '\'' || r == '"':
			quote = r
		case r == ' ' || r == '\t':
			if cur.Len() > 0 {
				out = append(out, cur.String())
				cur.Reset()
			}
			continue
		}
		cur.WriteRune(r)
	}
	if cur.Len() > 0 {
		out = append(out, cur.String())
	}
	return out
}

// checkCommandLine returns what is wrong with a command line, or "".
func checkCommandLine(app, daldApp *ucli.App, cmd []string) string {
	flags := []ucli.Flag{ucli.HelpFlag, ucli.VersionFlag}
	var cmds []*ucli.Command
	var cur *ucli.Command
	path := cmd[0]
	if cmd[0] == "dald" {
		flags = append(flags, daldApp.Flags...)
	} else {
		cmds = app.Commands
	}
	for _, tok := range cmd[1:] {
		if tok == "--" {
			break // the agent's command follows
		}
		if strings.ContainsAny(tok[:1], "'\"") {
			continue // a quoted argument
		}
		tok = strings.Trim(tok, "[]().,")
		if strings.HasPrefix(tok, "-") && len(tok) > 1 {
			name := strings.TrimLeft(tok, "-")
			name, _, _ = strings.Cut(name, "=")
			if name == "" || strings.HasPrefix(tok, "-") && !strings.HasPrefix(tok, "--") && len(name) != 1 {
				continue // -1, -rf and the like: values, not flags
			}
			if !hasFlag(flags, name) {
				return path + " has no flag " + tok
			}
			continue
		}
		if len(cmds) == 0 || tok == "" || strings.ToUpper(tok) == tok || strings.ContainsAny(tok, "<>…") || tok == "..." {
			continue // an argument, or a placeholder (COMMAND, ID, <name>)
		}
		// A word where a command of cmds may stand: one of them (or each
		// of alternatives a|b), else an argument when the command takes
		// arguments.
		var next *ucli.Command
		for _, alt := range strings.Split(tok, "|") {
			c := findCommand(cmds, alt)
			if c == nil {
				if cur != nil && cur.ArgsUsage != "" {
					next = nil
					break
				}
				return path + " has no command " + alt
			}
			next = c
		}
		if next == nil {
			cmds = nil // arguments from here on
			continue
		}
		if next.Name == "help" {
			return "" // help's arguments are command names, checked by its own test
		}
		cur, cmds, path = next, next.Subcommands, path+" "+next.Name
		flags = append(slices.Clone(next.Flags), ucli.HelpFlag)
	}
	return ""
}

func hasFlag(flags []ucli.Flag, name string) bool {
	for _, f := range flags {
		if slices.Contains(f.Names(), name) {
			return true
		}
	}
	return false
}
