package cli

import (
	"fmt"
	"strings"

	"github.com/dal-runtime/dal/bundle"
	"github.com/dal-runtime/dal/internal/replay"
	"github.com/dal-runtime/dal/internal/termsafe"
	ucli "github.com/urfave/cli/v2"
)

// DiffCommand is `dal-exec diff`.
func DiffCommand() *ucli.Command {
	return &ucli.Command{
		Name:      "diff",
		Usage:     "compare two bundles component by component (exit 0 same, 1 different)",
		ArgsUsage: "BUNDLE_A BUNDLE_B",
		Description: `Verifies both bundles, then compares how they were run (command, mode, seed, epoch) and
what they did (exit code, stdout, stderr, file changes, clock streams). For each component that
differs it shows the first difference, from A to B, with control characters escaped. Both
bundles must be signed by a key you trust (your own, --key, the trusted-keys file).

Examples:
   dal-exec diff run-seed7 run-seed8
   dal-exec diff monday.tar.zst tuesday.tar.zst
   dal-exec diff --json run-seed7 run-seed8 | jq '.components[] | select(.same | not) | .name'`,
		Flags: append([]ucli.Flag{jsonFlag("the comparison")}, trustFlags()...),
		Action: func(c *ucli.Context) error {
			if c.NArg() != 2 {
				return usageError{Err: fmt.Errorf("diff takes two bundles, e.g. dal-exec diff run1 run2")}
			}
			t, err := trustFromFlags(c)
			if err != nil {
				return err
			}
			cs, err := replay.Diff(c.Args().Get(0), c.Args().Get(1), bundle.OpenOptions{Trust: t})
			if err != nil {
				return err
			}
			w := c.App.Writer
			if c.Bool("json") {
				w = c.App.ErrWriter
				if err := writeJSON(c.App.Writer, newDiffJSON(c.Args().Get(0), c.Args().Get(1), cs)); err != nil {
					return err
				}
			}
			same := true
			for _, x := range cs {
				if x.Match {
					fmt.Fprintf(w, "  same       %s\n", x.Name)
					continue
				}
				same = false
				fmt.Fprintf(w, "  DIFFERENT  %s\n", x.Name)
				for _, l := range strings.Split(x.First, "\n") {
					fmt.Fprintf(w, "             %s\n", termsafe.Line(l))
				}
			}
			if !same {
				return exitError{1}
			}
			return nil
		},
	}
}
