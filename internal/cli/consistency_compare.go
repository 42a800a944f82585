package cli

import (
	"fmt"
	"slices"
	"strings"

	"github.com/dal-runtime/dal/internal/consistency"
	ucli "github.com/urfave/cli/v2"
)

// ConsistencyCompareCommand is `dal-exec consistency compare`.
func ConsistencyCompareCommand() *ucli.Command {
	return &ucli.Command{
		Name:      "compare",
		Usage:     "compare two evaluations of an agent and fail on a significant regression",
		ArgsUsage: "BASE NEW",
		Description: `BASE and NEW are report directories (or their report.json) of two evaluations, e.g. of the
agent before and after a change. Compares the success rates (two-sided two-proportion z-test),
the reliability scores, and the mean duration and token count per run (Welch's t-test), and
prints the table; --report DIR also writes DIR/comparison.json and comparison.md.

A regression is a significant change for the worse (p < --alpha): a lower success rate, a
longer duration, more tokens. Exits 1 when a measure named by --fail-on regressed (default: the
success rate only, as durations depend on the machine), 0 otherwise, 2 on errors.

Examples:
   dal-exec consistency compare eval-main eval-branch
   dal-exec consistency compare --fail-on success,tokens --report cmp eval-main eval-branch
   dal-exec consistency compare --json eval-main eval-branch | jq .regressions`,
		Flags: []ucli.Flag{
			&ucli.Float64Flag{Name: "alpha", Value: 0.05, EnvVars: []string{"DAL_ALPHA"},
				Usage: "significance level of the tests, in (0, 1)"},
			&ucli.StringFlag{Name: "fail-on", Value: "success", EnvVars: []string{"DAL_FAIL_ON"},
				Usage: "regressions that make compare exit 1, comma-separated: success, duration, tokens"},
			&ucli.StringFlag{Name: "report", Aliases: []string{"r"}, EnvVars: []string{"DAL_COMPARE_REPORT"},
				Usage: "directory to write comparison.json and comparison.md into"},
			jsonFlag("the comparison (comparison.json)"),
		},
		Action: func(c *ucli.Context) error {
			if c.NArg() != 2 {
				return usageError{Err: fmt.Errorf("compare takes two report directories, BASE and NEW; got %d arguments", c.NArg())}
			}
			gate := map[string]string{"success": "success_rate", "success-rate": "success_rate", "duration": "duration", "tokens": "tokens"}
			var failOn []string
			for _, f := range strings.Split(c.String("fail-on"), ",") {
				name, ok := gate[strings.TrimSpace(strings.ToLower(f))]
				if !ok {
					return usageError{Err: fmt.Errorf("--fail-on %q: use success, duration or tokens, comma-separated", f)}
				}
				failOn = append(failOn, name)
			}
			baseName, newName := c.Args().Get(0), c.Args().Get(1)
			base, err := consistency.ReadReport(baseName)
			if err != nil {
				return usageError{Err: err}
			}
			next, err := consistency.ReadReport(newName)
			if err != nil {
				return usageError{Err: err}
			}
			cmp, err := consistency.Compare(baseName, base, newName, next, c.Float64("alpha"))
			if err != nil {
				return usageError{Err: err}
			}
			if c.Bool("json") {
				fmt.Fprint(c.App.ErrWriter, cmp.Markdown())
				data, err := cmp.JSON()
				if err != nil {
					return err
				}
				if _, err := c.App.Writer.Write(data); err != nil {
					return err
				}
			} else {
				fmt.Fprint(c.App.Writer, cmp.Markdown())
			}
			if dir := c.String("report"); dir != "" {
				if err := cmp.Write(dir); err != nil {
					return err
				}
			}
			for _, r := range cmp.Regressions {
				if slices.Contains(failOn, r) {
					return exitError{1}
				}
			}
			return nil
		},
	}
}
