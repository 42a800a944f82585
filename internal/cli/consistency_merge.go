package cli

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/dal-runtime/dal/internal/consistency"
	"github.com/dal-runtime/dal/internal/plural"
	ucli "github.com/urfave/cli/v2"
)

// ConsistencyMergeCommand is `dal-exec consistency merge`.
func ConsistencyMergeCommand() *ucli.Command {
	return &ucli.Command{
		Name:      "merge",
		Usage:     "join the shards of an evaluation (--shard K/N) into the report one machine would have written",
		ArgsUsage: "--report OUT DIR...",
		Description: `Reads DIR/shard.json of every shard and checks it against DIR/shard.sig (signed with the
key of the shard's runs), checks that they are all the shards of one evaluation (command, mode,
seeds, strategy, answer source, verify and score commands, dal version; each shard once, none
missing), opens every run's bundle (signature and files) and checks it against its shard's
record (the seed of its run index, command, mode, exit code, duration, tokens, stdout, answer).
No symbolic link inside a shard directory is followed. Then it links OUT/runs/NNN to the bundles
(symbolic links; --copy hard-links or copies them so that OUT stands alone) and writes
OUT/report.json, report.md and report.html, byte for byte what one machine's evaluation of the
same runs writes. Anything wrong refuses the merge with one sentence naming the shard and run,
and writes nothing.

The results of --verify, --score and --answer commands come from the shards (they are not run
again). A shard must be signed by a key you trust, as a bundle you replay: your own key (DAL_KEY),
--key (repeatable), the trusted-keys file, or --trust-signer FINGERPRINT for this merge only; an
unsigned shard or one signed by another key is refused.

Exits 0 when the runs reach a consensus, 1 when they do not, 2 when the merge is refused.

Examples:
   dal-exec consistency merge --report eval shard1 shard2 shard3
   dal-exec consistency merge --key ci.key.pub --report eval results/shard-*
   dal-exec consistency merge --trust-signer SHA256:... --report eval results/shard-*`,
		Flags: append(trustFlags(),
			&ucli.StringFlag{Name: "report", Aliases: []string{"r"}, Required: true, EnvVars: []string{"DAL_REPORT"},
				Usage: "directory for the merged evaluation (must not exist or be empty)"},
			&ucli.BoolFlag{Name: "copy", EnvVars: []string{"DAL_MERGE_COPY"},
				Usage: "hard-link (or copy) the bundles into OUT/runs instead of linking to the shards' (OUT then stands alone)"},
			jsonFlag("the merged report (report.json)"),
		),
		Action: func(c *ucli.Context) error {
			if c.NArg() == 0 {
				return usageError{Err: fmt.Errorf("no shard directories given: name the --report directories of the shards, e.g. merge --report eval shard1 shard2")}
			}
			trust, err := trustFromFlags(c)
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(c.Context, os.Interrupt, syscall.SIGTERM)
			defer stop()
			out := c.String("report")
			rep, err := consistency.Merge(ctx, c.Args().Slice(), out, consistency.MergeOptions{Trust: trust, Copy: c.Bool("copy")})
			if err != nil {
				return err
			}
			w := c.App.Writer
			if c.Bool("json") {
				w = c.App.ErrWriter
				data, err := rep.JSON()
				if err != nil {
					return err
				}
				if _, err := c.App.Writer.Write(data); err != nil {
					return err
				}
			}
			fmt.Fprintf(w, "merged %s from %s\n", plural.Count(rep.Runs, "run", "runs"), plural.Count(c.NArg(), "shard", "shards"))
			fmt.Fprint(w, rep.Summary())
			fmt.Fprintf(w, "report: %s, %s, %s\n", out+"/report.json", out+"/report.md", out+"/report.html")
			if code := rep.ExitCode(); code != 0 {
				return exitError{code}
			}
			return nil
		},
	}
}
