package cli

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/dal-runtime/dal/internal/iterate"
	"github.com/dal-runtime/dal/internal/marks"
	ucli "github.com/urfave/cli/v2"
)

// selectionFlags configure best-of-iterations selection on record and run.
func selectionFlags() []ucli.Flag {
	return categorize(catIterations,
		&ucli.StringFlag{Name: "use", Value: "best", EnvVars: []string{"DAL_USE"},
			Usage: "which of the agent's marked iterations becomes the output: best (highest quality, the earlier on ties), final, or an iteration number; anything but best needs --reason"},
		&ucli.StringFlag{Name: "reason", EnvVars: []string{"DAL_USE_REASON"},
			Usage: "why --use overrides the best iteration (logged in the selection report)"},
		&ucli.StringFlag{Name: "quality-weights", EnvVars: []string{"DAL_QUALITY_WEIGHTS"},
			Usage: "weights of the quality dimensions an iteration may report instead of a score, as NAME=W,... (default: validation=.30, completeness=.25, correctness=.25, readability=.10, efficiency=.10)"},
		&ucli.Float64Flag{Name: "accept-threshold", Value: 0.70, EnvVars: []string{"DAL_ACCEPT_THRESHOLD"},
			Usage: "quality an iteration needs to be accepted"},
		&ucli.Float64Flag{Name: "degradation-drop", Value: 0.05, EnvVars: []string{"DAL_DEGRADATION_DROP"},
			Usage: "a quality drop larger than this between iterations is flagged as degradation"},
	)
}

// selectionFromFlags reads selectionFlags.
func selectionFromFlags(c *ucli.Context) (iterate.Policy, error) {
	p := iterate.DefaultPolicy()
	p.Use = strings.TrimSpace(c.String("use"))
	p.Reason = c.String("reason")
	p.Threshold = c.Float64("accept-threshold")
	p.Drop = c.Float64("degradation-drop")
	if s := c.String("quality-weights"); s != "" {
		w, err := iterate.ParseWeights(s)
		if err != nil {
			return p, usageError{Err: err}
		}
		p.Weights = w
	}
	if p.Drop < 0 {
		return p, usageError{Err: fmt.Errorf("--degradation-drop %v: must be >= 0", p.Drop)}
	}
	if err := p.Check(); err != nil {
		return p, usageError{Err: err}
	}
	if p.Use != "best" {
		fmt.Fprintf(c.App.ErrWriter, "dal: selection override: --use %s (%s)\n", p.Use, p.Reason)
	}
	return p, nil
}

// IterationCommand is `dal-exec iteration`: an agent written in any
// language (or a shell loop) marks one refinement iteration.
func IterationCommand() *ucli.Command {
	return &ucli.Command{
		Name:      "iteration",
		Usage:     "mark a refinement iteration of the running agent: its quality and its artifacts",
		ArgsUsage: "[--score S | --dim NAME=V ...] [ARTIFACT...]",
		Description: `Run from inside an agent under dal-exec run or record (it needs the DAL_MARKS variable
dal-exec sets). Copies the artifacts (files, or directories: every file in them) as they are now
and records the iteration's quality. When the agent exits, dal-exec selects the best iteration
(highest score, the earlier on ties), puts its artifacts in place as the run's output, and writes
a selection report (see dal-exec record --use). Python and Node agents can call
dal.iteration(score=..., artifacts=[...]) instead. Prints the iteration's number.

Examples:
   dal-exec iteration --score 0.85 out/report.md
   dal-exec iteration --dim validation=1 --dim completeness=0.8 --dim correctness=0.9 out/
   dal-exec iteration --score 0.6 --note "first draft" draft.md`,
		Flags: []ucli.Flag{
			&ucli.StringFlag{Name: "score", Usage: "the iteration's quality, a number in [0, 1]"},
			&ucli.StringSliceFlag{Name: "dim", Usage: "a quality dimension NAME=VALUE in [0, 1] (repeatable); weighed into the score when --score is not given"},
			&ucli.StringFlag{Name: "note", Usage: "free text shown in the selection report"},
		},
		Action: func(c *ucli.Context) error {
			in := marks.Input{Kind: marks.Iteration, Note: c.String("note"), Paths: c.Args().Slice()}
			if s := c.String("score"); s != "" {
				v, err := strconv.ParseFloat(s, 64)
				if err != nil {
					return usageError{Err: fmt.Errorf("--score %q is not a number: give a number in [0, 1]", s)}
				}
				in.Score = &v
			}
			dims, err := parseDims(c.StringSlice("dim"))
			if err != nil {
				return err
			}
			in.Dimensions = dims
			m, err := writeMark(in)
			if err != nil {
				return err
			}
			fmt.Fprintln(c.App.Writer, m.Seq)
			return nil
		},
	}
}

func parseDims(kvs []string) (map[string]float64, error) {
	if len(kvs) == 0 {
		return nil, nil
	}
	out := map[string]float64{}
	for _, kv := range kvs {
		k, v, ok := strings.Cut(kv, "=")
		f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if !ok || strings.TrimSpace(k) == "" || err != nil {
			return nil, usageError{Err: fmt.Errorf("--dim %q: expected NAME=VALUE with VALUE a number in [0, 1]", kv)}
		}
		out[strings.TrimSpace(k)] = f
	}
	return out, nil
}

// writeMark writes a mark from the shell into the running agent's marks
// directory.
func writeMark(in marks.Input) (*marks.Mark, error) {
	dir := os.Getenv(marks.EnvDir)
	if dir == "" {
		return nil, usageError{Err: fmt.Errorf("%s is not set: run this from inside an agent started by dal-exec run or dal-exec record", marks.EnvDir)}
	}
	in.Workspace = os.Getenv(marks.EnvWorkspace)
	in.Runtime = "shell"
	in.PID = os.Getppid()
	in.AtNS = time.Now().UnixNano()
	return marks.Write(dir, in) // bad input is a usage error already
}
