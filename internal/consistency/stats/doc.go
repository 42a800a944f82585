// Package stats holds the descriptive and inferential statistics behind
// consistency evaluation: summaries of per-run durations, tokens and scores,
// confidence intervals, outlier rules, the Shapiro-Wilk normality test and the
// reliability score.
//
// It is pure Go on the standard library, takes plain []float64, never panics
// on bad input (empty, NaN or infinite values come back as errors) and does
// not modify its arguments. It knows nothing about bundles or runs: callers
// extract the numbers.
//
// Conventions, stated once:
//   - Standard deviations are sample standard deviations (divisor n-1).
//   - Quantiles use linear interpolation between order statistics, Hyndman
//     and Fan (1996) definition 7, the default of R's quantile() and of NumPy.
//   - Confidence levels are fractions in (0, 1), e.g. 0.95.
//
// With a handful of runs (n around 5) Tukey fences, z-scores and
// Shapiro-Wilk say little; callers should always report n and the intervals
// alongside any verdict.
package stats
