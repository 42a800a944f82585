// Package consistency runs an agent several times, each run recorded as a
// bundle, and reports how consistent the runs were: the consensus of their
// outputs (its subpackage consensus), the spread of their durations, token
// counts and scores (its subpackage stats), a reliability score, and one row
// per run. Both subpackages exist for this package (bench also takes its
// medians from stats, so that dal has one definition of a median).
//
// It does not start agents itself: Options.Record records one run into a
// bundle directory (dal-exec consistency passes internal/record), so the
// evaluation logic is tested without a sandbox.
//
// # Seeds
//
// Run i (1-based) of an evaluation with base seed S runs with seed
//
//	seedrng.Derive(S, "consistency/run/<i>").Uint64()
//
// the first 8 bytes of a named dal stream: the same base seed gives the same
// per-run seeds on every machine and in every language of dal, and the runs'
// seeds are unrelated to each other and to S itself (S+i would make run 1 of
// base 7 the same session as run 0 of base 8). Explicit seeds are used as
// given.
//
// # Layout and resuming
//
// Run i is recorded at DIR/runs/NNN (NNN = i, three digits or more). A bundle
// is published only when complete, so a run whose directory holds a
// manifest.json is finished: a second evaluation into the same DIR keeps it
// and records only the missing runs. A kept bundle must have been recorded
// with the seed and command this evaluation would use; otherwise the
// evaluation stops rather than mix two experiments. DIR/evaluation.json
// (Progress) is written when an evaluation starts, and again with why it
// stopped if it ends without its report, for dashboards. DIR/report.json,
// DIR/report.md and DIR/report.html are rewritten at the end of every
// evaluation.
//
// # What a run is
//
// A run succeeded when its agent exited 0 or, with a verify command, when
// that command exits 0, and its answer can be read. Its answer, what runs
// vote on (AnswerSource), is its standard output (logs/stdout), a file it
// wrote (from the bundle's fs-diff), or what an answer command prints; a
// JSON path may pick a value out of any of them. Surrounding white space is
// removed; runs agree when the SHA-256 of their answers is equal. A run
// whose answer cannot be read failed, with a warning that says why. Duration and tokens come from the
// bundle's manifest (metrics.duration_ms, tokens_input + tokens_output). A
// score command prints a number in [0, 1]; anything else leaves the run
// without a score and adds a warning naming the run.
//
// # Shards
//
// With Options.Shard K/N an evaluation records runs K, K+N, ... only (seeds
// depend on the run index alone) and writes DIR/shard.json (ShardFile)
// instead of a report. Merge checks that the shards belong to one
// evaluation and every run's bundle against its shard, and writes the
// report one machine would have written for the same runs, byte for byte:
// nothing in a report depends on where or when it was written (report.html
// shows the last run's start, not the time of writing).
//
// # Report
//
// report.json (schema_version 2; docs/consistency.md) never holds NaN or infinities: a statistic
// the runs cannot support (a standard deviation of one run, a coefficient of
// variation of a zero mean) is null. report.html is one self-contained page
// (inline CSS and SVG, no script, nothing fetched) with the verdict, the
// reliability score and plots of the runs: duration, tokens and score per
// run over the mean and its interval, the success rate in its Wilson
// interval, and a histogram of durations.
package consistency
