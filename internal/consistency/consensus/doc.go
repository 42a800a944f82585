// Package consensus decides what a set of runs of the same agent agree on:
// the consensus strategies of consistency evaluation (majority, plurality,
// weighted, unanimous, threshold, best-of-N), each with a confidence, and optional
// exclusion of runs whose duration or token count is an outlier.
//
// It is pure: Decide takes per-run outcomes ([]Run) and returns a Result.
// It knows nothing about bundles, processes or reports; callers fill in Run
// from what they recorded. It never panics on bad input and never modifies
// its arguments.
//
// # What a run votes for
//
// A successful run votes for its Output: the answer or decision it produced,
// or a hash of it (of stdout, of the workspace diff, ...). Runs agree when
// their Outputs are byte-for-byte equal. A successful run must have a
// non-empty Output; callers that only care about success can put a constant
// such as "ok" there.
//
// A failed run votes for failure, whatever its Output. Failure is an outcome
// that can never be the decision, but it stays in every denominator. The
// alternatives were rejected because they flatter: dropping failed runs would
// let 3 agreeing runs out of 10 (7 failed) report a consensus with confidence
// 1, and letting a failed run's partial Output vote would let a broken answer
// win. So with 7 of 10 runs failed the verdict is VerdictFailed, and with
// 4 successes agreeing out of 10 the majority's confidence is 0.4, not 1.
// In weighted voting a failed run weighs 1, the most a successful run can
// weigh: the exit code or verifier said it failed, which is as certain as
// evidence gets, whereas a successful run weighs its quality score.
//
// Best-of-N is the exception by nature: it picks the highest-scoring
// successful run, so failed runs cannot be picked but do not stop a pick
// either (their rate belongs in the reliability score). Its verdict is
// VerdictFailed only when every run failed.
//
// # Strategies
//
//   - Majority: an output that more than half of the counted runs produced,
//     failed runs counted: 3 of 5 decide, 2 of 4 do not, nor do 3 agreeing
//     runs of 7 when 4 failed. Confidence is the leader's share of the
//     counted runs, failed ones included.
//   - Plurality: the most common output, however small its share (what
//     majority meant before issue 20). Confidence as for majority.
//   - Weighted: outputs weighted by the sum of their runs' scores; a failed
//     run weighs 1. Confidence is the winning weight over the total weight.
//     Every successful counted run needs a score.
//   - Unanimous: a decision only when every counted run succeeded with the
//     same output; confidence is then 1. Without unanimity there is no
//     decision and Confidence is the share of the leading output, so a
//     report shows how close the runs came.
//   - Threshold: a decision when the leading output's share reaches
//     Options.Threshold (default 0.67). The comparison is literal: 2 of 3
//     runs (0.667) do not reach 0.67; pass 2.0/3 for "two thirds".
//   - Best-of-N: the successful run with the highest score (the earliest
//     of runs with the same output that tie). Confidence is that run's score: how good the
//     chosen output is, not how many runs agree. Result.Margin is the gap to
//     the best run with a different output, when there is one. Every
//     successful counted run needs a score.
//
// For the voting strategies Confidence is always the support of the leading
// output (share of runs, or of weight), whether or not it became the
// decision; it is 0 when no run succeeded. The Verdict says which it was:
// VerdictDecided, VerdictNoConsensus (the strategy's bar was not met, or
// failures tie with the leading output), or VerdictFailed (failures
// outnumber, or outweigh, every output).
//
// # Ties and determinism
//
// A tie for the lead between outputs (equal counts, or weights within 1e-9
// of each other) is never a decision, under any strategy: the verdict is
// VerdictNoConsensus and Result.Tied lists the tied outputs in the order of
// their earliest run. Giving a tie to the earliest run would make the
// decision depend on scheduling, and a CI gate pass on a coin flip. For
// best-of-N the same holds for runs with different outputs that tie for the
// highest score; runs with the same output may tie (the earliest is shown).
// Runs are processed in Index order, never in slice order, so the
// same runs in any order give the same Result, bit for bit. Indices must be
// unique.
//
// # Outlier exclusion
//
// With Options.Exclude set, runs whose duration or token count is an
// outlier, by modified z-score (Iglewicz and Hoaglin, |M| > 3.5 by default)
// or by Tukey fences (1.5 IQR by default), are left out of the vote and
// reported in Result.Excluded. Only successful runs are examined and only
// successful runs can be excluded: failed runs are often much faster (they
// stop early) or much slower (they time out), and excluding them as outliers
// would quietly turn failures into a cleaner consensus. When there are too
// few successful runs for the rule (3 for modified z-scores, 4 for Tukey
// fences) nothing is excluded and Notes says so.
package consensus
