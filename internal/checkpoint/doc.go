// Package checkpoint is dal's checkpoint store: it keeps the checkpoints an
// agent marked during a run (internal/marks, docs/marks.md) as compressed
// archives with a manifest and integrity hashes, applies the retention
// policy, and validates and restores them. It does not run agents and does
// not read bundles; dal-exec hands it the marks when a run ends (Ingest) and
// the `dal-exec checkpoint` commands drive the rest.
//
// # Layout
//
//	<store>/
//	  .lock                          flock(2): exclusive for writers, shared for readers
//	  <run-id>/
//	    manifest.json                the run and its checkpoints, self-checksummed
//	    0001-phase-build.tar.zst     one archive per checkpoint
//	    0002-iteration-2.tar.zst
//
// An archive is a zstd-compressed tar holding checkpoint.json (the run and
// the checkpoint's metadata, enough to rebuild a lost manifest with
// Repair), state.json (the state the agent asked to get back, compact JSON,
// "null" when none) and files/0, files/1, ... (the artifacts, in the order
// of the manifest). The manifest records the archive's SHA-256 and size, each
// artifact's path, SHA-256, size and mode, the state's SHA-256, and a
// checksum over the manifest itself, so a flipped byte anywhere is found by
// Validate and named.
//
// # Atomicity
//
// Every file is written to a temporary name in its final directory, synced
// and renamed; the manifest is written last. A crash leaves the previous
// manifest, and so every checkpoint it lists, valid; archives a crash left
// unreferenced are removed by the next Prune. Writers (Ingest, Tag, Prune,
// Repair) hold the store's lock exclusively, readers share it, so concurrent
// dal-exec processes are safe. No operation that fails deletes or replaces a
// checkpoint.
//
// # Ids
//
// A checkpoint is named "<run-id>/<seq>". Get also accepts a unique prefix of
// the run id, "<run>/latest", a bare run id (its latest checkpoint) and
// "latest" (the newest checkpoint in the store).
//
// # Retention
//
// Policy: per workspace, the Keep most recent checkpoints are kept; beyond
// them, the checkpoints of failed runs and tagged checkpoints are kept too.
// Checkpoints older than MaxAge (by the real time they were stored) are
// deleted, or with AgedCompress recompressed at zstd's best level and marked
// compacted; tagged checkpoints are never touched.
package checkpoint
