package cli

import (
	"github.com/dal-runtime/dal/internal/match"
	ucli "github.com/urfave/cli/v2"
)

// matchFlags are replay's matching flags (docs/validation.md).
func matchFlags() []ucli.Flag {
	return categorize(catRun,
		&ucli.StringFlag{Name: "match", Value: "exact", EnvVars: []string{"DAL_MATCH"},
			Usage: "how outputs must match: exact, semantic or structural for stdout, stderr, fs_diff, prompts and iterations, or per component, e.g. stdout=semantic,fs_diff=structural (exit code, clock and network order stay exact)"},
		&ucli.Float64Flag{Name: "threshold", Value: match.DefaultThreshold, EnvVars: []string{"DAL_MATCH_THRESHOLD"},
			Usage: "similarity in [0, 1] a semantic match needs"},
		&ucli.StringFlag{Name: "similarity-cmd", EnvVars: []string{"DAL_SIMILARITY_CMD"},
			Usage: "score semantic matches with this command instead of dal's built-in similarity: run with sh -c, given the recorded and the replayed text as two file paths, it prints a number in [0, 1]"},
	)
}

// matchFromFlags reads matchFlags; a bad value, or a --similarity-cmd
// that does not score a sample, is a usage error (exit 2) before any
// agent starts.
func matchFromFlags(c *ucli.Context) (match.Spec, error) {
	spec, err := match.Parse(c.String("match"))
	if err != nil {
		return spec, usageError{Err: err}
	}
	spec.Threshold = c.Float64("threshold")
	if err := match.CheckThreshold(spec.Threshold); err != nil {
		return spec, usageError{Err: err}
	}
	if c.IsSet("similarity-cmd") {
		if spec.Scorer, err = match.NewScorer(c.Context, c.String("similarity-cmd")); err != nil {
			return spec, usageError{Err: err}
		}
	}
	return spec, nil
}
