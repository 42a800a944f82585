package cli

import (
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/dal-runtime/dal/internal/atomicfile"
	"github.com/dal-runtime/dal/internal/dashboard"
	"github.com/dal-runtime/dal/internal/termsafe"
	"github.com/dal-runtime/dal/internal/version"
	ucli "github.com/urfave/cli/v2"
)

// DashboardCommand is `dal-exec dashboard`.
func DashboardCommand() *ucli.Command {
	return &ucli.Command{
		Name:      "dashboard",
		Usage:     "serve a live dashboard over every consistency evaluation under some directories",
		ArgsUsage: "DIR...",
		Description: `Finds every evaluation under the directories (their report.json, a shard's shard.json, and
the evaluation.json of one that is running) and shows, per framework × task (the evaluations'
--label framework=... and --label task=...), the latest success rate with its interval, the
reliability and its label, and the consensus; violin plots of the runs' duration, tokens and
scores per framework; each measure's trend across evaluations over time, with a regression marked
where dal-exec consistency compare would report one against the evaluation before; the frameworks
side by side on one task; and from a cell its evaluations, from an evaluation its runs, from a
run its dal-exec show page.

Served (the default), the page updates itself: the directories are scanned again every
--interval, and the runs of an evaluation (or of its shards) appear as they finish. --out FILE
writes the page once instead, one self-contained file (no network, nothing fetched).

A report that cannot be used (cut short, modified, written by another tool) is listed at the
top of the page with one sentence saying what is wrong, and left out. No symbolic link inside
the directories is followed. The server answers on --listen only (127.0.0.1 by default) and
only to requests that name that address. See docs/consistency.md.

Examples:
   dal-exec dashboard evals
   dal-exec dashboard --listen 127.0.0.1:0 evals nightly
   dal-exec dashboard --out dashboard.html evals`,
		Flags: append(trustFlags(),
			&ucli.StringFlag{Name: "listen", Value: "127.0.0.1:8460", EnvVars: []string{"DAL_DASHBOARD_LISTEN"},
				Usage: "address to serve the dashboard on (port 0: any free port)"},
			&ucli.StringFlag{Name: "out", Aliases: []string{"o"}, EnvVars: []string{"DAL_DASHBOARD_OUT"},
				Usage: "write the dashboard to this HTML file once, self-contained, instead of serving it"},
			&ucli.Float64Flag{Name: "alpha", Value: 0.05, EnvVars: []string{"DAL_ALPHA"},
				Usage: "significance level of the regression tests between evaluations, as consistency compare --alpha"},
			&ucli.DurationFlag{Name: "interval", Value: dashboardInterval, EnvVars: []string{"DAL_DASHBOARD_INTERVAL"},
				Usage: "how often the served dashboard scans the directories again"},
		),
		Action: func(c *ucli.Context) error {
			roots := c.Args().Slice()
			if err := dashboard.CheckRoots(roots); err != nil {
				return usageError{Err: err}
			}
			if a := c.Float64("alpha"); !(a > 0 && a < 1) {
				return usageError{Err: fmt.Errorf("alpha %v must be in (0, 1), e.g. 0.05", a)}
			}
			if c.Duration("interval") <= 0 {
				return usageError{Err: fmt.Errorf("interval %s must be positive, e.g. 1s", c.Duration("interval"))}
			}
			o := dashboard.Options{Roots: roots, Alpha: c.Float64("alpha"), Interval: c.Duration("interval"), GeneratedBy: "dal " + version.Version}
			if out := c.String("out"); out != "" {
				if err := checkShowOut(out); err != nil {
					return err
				}
				dir, err := filepath.Abs(filepath.Dir(out))
				if err != nil {
					return err
				}
				m := dashboard.Build(o, dir)
				if err := atomicfile.Write(out, 0o644, func(w io.Writer) error { return dashboard.Write(w, m) }); err != nil {
					return fmt.Errorf("write %s: %w", out, err)
				}
				for _, p := range m.Problems {
					fmt.Fprintf(c.App.ErrWriter, "dal: skipped %s: it %s\n", termsafe.Line(p.Path), termsafe.Line(p.Problem))
				}
				fmt.Fprintf(c.App.ErrWriter, "dal: wrote %s (%d evaluations)\n", termsafe.Line(out), len(m.Evaluations))
				return nil
			}
			t, err := trustFromFlags(c)
			if err != nil {
				return err
			}
			o.Trust = t
			ctx, stop := signal.NotifyContext(c.Context, os.Interrupt, syscall.SIGTERM)
			defer stop()
			s := dashboard.NewServer(o)
			return s.ListenAndServe(ctx, c.String("listen"), func(url string) {
				fmt.Fprintf(c.App.ErrWriter, "dal: dashboard at %s (Ctrl-C to stop)\n", url)
			})
		},
	}
}

// dashboardInterval is how often a served dashboard looks for changes.
const dashboardInterval = 1e9
