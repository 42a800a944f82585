package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// ProgramStats is what the kernel counts for one loaded eBPF program while
// BPF statistics are enabled (BPF_ENABLE_STATS or the
// kernel.bpf_stats_enabled sysctl): how often it ran and for how long.
type ProgramStats struct {
	Name     string        // program name, e.g. "sys_enter"; the program label
	RunCount uint64        // completed runs
	RunTime  time.Duration // total time spent running
}

var (
	bpfRunsDesc = prometheus.NewDesc("dal_bpf_program_runs_total",
		"Runs of each of dal's eBPF programs, as counted by the kernel while BPF statistics are enabled.",
		[]string{"program"}, nil)
	bpfRunSecondsDesc = prometheus.NewDesc("dal_bpf_program_run_seconds_total",
		"Time spent running each of dal's eBPF programs, as counted by the kernel while BPF statistics are enabled.",
		[]string{"program"}, nil)
)

// bpfCollector asks for the programs' statistics on every scrape, so the
// figures are the kernel's own counters, never a stale copy.
type bpfCollector struct {
	stats func() []ProgramStats
}

func (bpfCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- bpfRunsDesc
	ch <- bpfRunSecondsDesc
}

// Collect emits one series per program name. Programs that share a name
// (one program attached twice) are summed, since two series with the same
// labels would fail the whole scrape.
func (c bpfCollector) Collect(ch chan<- prometheus.Metric) {
	type sum struct {
		runs uint64
		time time.Duration
	}
	var order []string
	byName := map[string]*sum{}
	for _, p := range c.stats() {
		s, ok := byName[p.Name]
		if !ok {
			s = &sum{}
			byName[p.Name] = s
			order = append(order, p.Name)
		}
		s.runs += p.RunCount
		s.time += p.RunTime
	}
	for _, name := range order {
		s := byName[name]
		ch <- constCounter(bpfRunsDesc, float64(s.runs), name)
		ch <- constCounter(bpfRunSecondsDesc, s.time.Seconds(), name)
	}
}

// constCounter reports a bad program name (not UTF-8) as a scrape error
// instead of panicking in the scrape's goroutine.
func constCounter(desc *prometheus.Desc, v float64, program string) prometheus.Metric {
	m, err := prometheus.NewConstMetric(desc, prometheus.CounterValue, v, program)
	if err != nil {
		return prometheus.NewInvalidMetric(desc, err)
	}
	return m
}
