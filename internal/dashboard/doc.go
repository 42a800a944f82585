// Package dashboard is dal-exec dashboard: one page over every
// consistency evaluation under some directories (ADR-016's dashboard).
//
// Scan finds the evaluations: a directory holding report.json (a
// finished evaluation or merge), shard.json (a finished shard not merged
// yet) or evaluation.json (an evaluation or shard that is running, or was
// stopped). It follows no symbolic link below the directories it is
// given, does not descend into runs/ directories, and reads nothing
// larger than its limits; a file it cannot use becomes a Problem, one
// sentence, and the rest is shown. Finished reports are parsed once and
// kept while their size and modification time stay the same; a running
// evaluation's finished runs (bundles with a manifest.json) are read
// once each with consistency.PeekRun.
//
// The model groups evaluations by their framework and task labels
// (consistency --label). Within a framework × task, evaluations are
// ordered by the start of their last run, and each is compared with the
// one before by consistency.Compare: its Regressions are what
// `consistency compare` would report.
//
// Server serves the page with the model inside it, a run's `dal-exec
// show` page at /run/KEY/INDEX, an evaluation's report.html at
// /report/KEY, and /events, server-sent events carrying each evaluation
// whose data changed since the page's sequence number: the directories
// are scanned again every Options.Interval. Write writes the same page
// without the live parts, self-contained. The page (assets/) is one
// script and one stylesheet allowed by hash, nothing fetched but
// /events.
package dashboard
