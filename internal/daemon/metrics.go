package daemon

import "time"

// Metrics is what a Server keeps up to date, and what dal-exec measures
// for --metrics-textfile: package metrics' registry. An interface, so that
// dal-exec, which embeds a Server, does not link Prometheus (its packages
// cost every start about a millisecond); dal-exec-full and dald do.
type Metrics interface {
	SessionStarted()
	SessionEnded()
	AddClockReads(n uint64)
	AddSyscalls(category string, n uint64)
	ObserveReplay(fidelity float64)
	ObserveCoverage(ratio float64, escapes map[string]int)
	ObserveRevert(d time.Duration)
	AddNetwork(outcome string, n uint64) error
	// WriteTextfile writes every metric to path in the node_exporter
	// textfile format.
	WriteTextfile(path string) error
}
