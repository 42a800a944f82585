// Package metrics is dal's Prometheus instrumentation (docs/design.md §10):
// the dal_* metric families, the /metrics HTTP endpoint dald serves, and the
// node_exporter textfile one-shot dal-exec runs write instead.
//
// Every family lives on a registry of its own, never on the process-wide
// default one, so importing this package registers nothing by itself and two
// Metrics (an embedded dald next to a test) never collide. Callers record
// what happened through methods named for the domain (ObserveReplay,
// SessionStarted, AddSyscalls, ...); they never touch Prometheus types.
//
// The package measures nothing itself: the numbers come from the replay
// verifier, the boundary tracer, the revert path and the daemon. Its
// reference page, docs/metrics.md, is generated from the registry with
//
//	go run ./metrics/internal/gendoc
//
// (or go generate ./metrics) and a test fails when the page is stale.
package metrics

//go:generate go run ./internal/gendoc -out ../docs/metrics.md
