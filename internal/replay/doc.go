// Package replay re-runs a trace bundle and judges it: the orchestration
// behind dal-exec replay (offline, Replay; live, Live) and dal-exec diff
// (Diff). A replay rebuilds the recorded workspace state, runs the
// recorded command in the sandbox package record builds for a recording,
// serves the recorded clock and network, and compares every component of
// docs/design.md §9 into a Verdict. Replay is a sequence of named steps
// (replay.go): open, prepare the workspace, sandbox, run, capture,
// compare, settle, store the outcome.
package replay
