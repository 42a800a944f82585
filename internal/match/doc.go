// Package match decides whether two outputs of a run match under one of the
// execution-snapshot schema's matching strategies (docs/validation.md):
//
//   - exact: byte for byte.
//   - semantic: a similarity in [0, 1] at or above a threshold (0.95 by
//     default). The built-in similarity is deterministic and offline
//     (Similarity); --similarity-cmd plugs in the user's own scorer
//     (Scorer).
//   - structural: the same structure with scalar values free: JSON (and
//     YAML by file name) by keys, types and array lengths, other text line
//     by line with numbers and quoted strings masked (Structure).
//
// A Spec says which strategy each component of a replay uses (--match
// stdout=semantic,fs_diff=structural); components that only make sense
// compared exactly (exit code, clock, network order) refuse the others.
// The package reads nothing of dal's: it compares bytes it is given.
// Statuses are the schema's match_status values.
package match
