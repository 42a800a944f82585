// Package slurm holds no code: contrib/slurm runs a dal consistency
// evaluation on a Slurm cluster (submit.sh, a job array of shards and a
// merge job after it); the package exists so that go test checks the
// scripts. The end-to-end test on a real one-machine cluster is
// e2e.TestSlurmShardsMerge.
package slurm
