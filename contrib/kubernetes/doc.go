// Package kubernetes holds no code. Its YAML files run a sharded
// consistency evaluation on Kubernetes (an Indexed Job of shards, a merge
// Job, their volume; docs/consistency.md); the package exists so that go
// test checks them against the Kubernetes API types and dal-exec's flags.
package kubernetes
