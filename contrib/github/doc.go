// Package github holds no code. consistency.yml is a GitHub Actions
// workflow that runs a sharded consistency evaluation as a matrix and
// merges it (docs/consistency.md); the package exists so that go test
// checks the workflow's shards, merge and dal-exec flags.
package github
