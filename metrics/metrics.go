package metrics

import (
	"fmt"
	"math"
	"net/http"
	"runtime"
	"strings"
	"sync/atomic"
	"time"

	"github.com/dal-runtime/dal/internal/version"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// Nondeterminism categories (docs/design.md §8): the values of the category
// label on dal_syscalls_total and dal_boundary_escapes_total. Anything else
// is counted as CategoryOther.
const (
	CategoryClock      = "clock"
	CategoryRandom     = "random"
	CategoryNetwork    = "network"
	CategoryFilesystem = "filesystem"
	CategoryProcess    = "process"
	CategoryOther      = "other"
)

// Network request outcomes (docs/design.md §7): the values of the outcome
// label on dal_network_requests_total.
const (
	OutcomeRecorded = "recorded" // forwarded upstream and captured into the bundle
	OutcomeReplayed = "replayed" // answered from the bundle
	OutcomeMiss     = "miss"     // replay found no recorded response to answer with
	OutcomeBlocked  = "blocked"  // refused by the mode (strict, or offline replay)
)

var (
	categories = []string{CategoryClock, CategoryRandom, CategoryNetwork, CategoryFilesystem, CategoryProcess, CategoryOther}
	outcomes   = []string{OutcomeRecorded, OutcomeReplayed, OutcomeMiss, OutcomeBlocked}
)

// fidelityBuckets bands replay fidelity by severity. A replay compares a
// handful of components, so any drift lands at or below 0.99; the buckets
// below that separate "one component of many" from "most of the run".
var fidelityBuckets = []float64{0.25, 0.5, 0.75, 0.9, 0.99}

// revertBuckets cover 1 ms (an empty workspace) to 10 s (a large tree) in
// 1-2.5-5 steps.
var revertBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}

// Options choose what a Metrics exports beyond the dal_* families.
type Options struct {
	// GoCollector adds the Go runtime's go_* families (dald turns it on
	// unless --no-go-metrics).
	GoCollector bool
	// ProcessCollector adds the process_* families: CPU, memory, fds
	// (dald turns it on unless --no-process-metrics).
	ProcessCollector bool
	// BPFStats, when set, is called on every scrape for the run count and
	// run time of dal's loaded eBPF programs. It must be safe to call from
	// several goroutines and should return quickly.
	BPFStats func() []ProgramStats
	// TracerAttached, when set, is called on every scrape: whether dald's
	// eBPF programs are attached to their hooks now (dal_tracer_attached;
	// 0 when unset, as when tracing is off).
	TracerAttached func() bool
	// OpenMetrics lets Handler answer in the OpenMetrics format to scrapers
	// that ask for it. Off, it always answers in the classic text format.
	OpenMetrics bool
	// Routes, when set, adds the caller's pages to the endpoint's mux
	// (dald's Gate page).
	Routes func(*http.ServeMux)
}

// Metrics is one set of dal's metric families on a registry of its own.
// All methods are safe for concurrent use.
type Metrics struct {
	opts Options

	dal     *prometheus.Registry // dal_* families: HTTP and textfile
	runtime *prometheus.Registry // go_* and process_*: HTTP only

	fidelity      prometheus.Gauge
	fidelityHist  prometheus.Histogram
	replayExact   prometheus.Counter
	replayDrifted prometheus.Counter
	coverage      prometheus.Gauge
	escapes       *prometheus.CounterVec
	revert        prometheus.Histogram
	clockReads    prometheus.Counter
	sessionsTotal prometheus.Counter
	syscalls      *prometheus.CounterVec
	ringbufDrops  prometheus.Counter
	network       *prometheus.CounterVec

	// Children of the labelled families by label value, resolved once in
	// New so that hot paths skip the vector's label hashing.
	syscallsBy, escapesBy, networkBy map[string]prometheus.Counter

	sessionsActive atomic.Int64
}

// New builds a Metrics with every dal_* family registered and every known
// label value present at zero, so dashboards and alerts see each series
// before its first event.
func New(opts Options) *Metrics {
	m := &Metrics{
		opts:    opts,
		dal:     prometheus.NewPedanticRegistry(),
		runtime: prometheus.NewRegistry(),
	}

	buildInfo := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "dal_build_info",
		Help:        "Always 1; its labels name the dal release and the Go toolchain that built it.",
		ConstLabels: prometheus.Labels{"version": version.Version, "goversion": runtime.Version()},
	})
	buildInfo.Set(1)

	m.fidelity = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "dal_replay_fidelity_ratio",
		Help: "Replay fidelity of the last replay: matching components over compared components, 1 when exact. NaN until the first replay.",
	})
	m.fidelity.Set(math.NaN())
	// The gauge holds only the last replay, so replays between two scrapes
	// never reach it, and the exact/drifted counters say how often replays
	// drift but not how far. The histogram keeps every replay's fidelity:
	// rate() over its buckets answers "how many replays lost more than a
	// quarter of their components", for seven extra series.
	m.fidelityHist = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "dal_replay_fidelity",
		Help:    "Replay fidelity of every replay (matching over compared components), observed when the replay's verdict is known.",
		Buckets: fidelityBuckets,
	})
	m.replayExact = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "dal_replays_exact_total",
		Help: "Replays that reproduced every compared component (fidelity 1).",
	})
	m.replayDrifted = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "dal_replays_drifted_total",
		Help: "Replays in which at least one compared component diverged (fidelity below 1).",
	})

	m.coverage = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "dal_boundary_coverage_ratio",
		Help: "Boundary coverage of the last finished session: touched nondeterminism categories that were captured, over those touched. NaN until the first session is measured.",
	})
	m.coverage.Set(math.NaN())
	m.escapes = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "dal_boundary_escapes_total",
		Help: "Uncaptured nondeterminism crossings, counted when a session's coverage is measured, by category (" + strings.Join(categories, ", ") + ").",
	}, []string{"category"})

	m.revert = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "dal_revert_duration_seconds",
		Help:    "Wall time to restore a workspace to its pre-run state from a bundle, observed when the revert finishes.",
		Buckets: revertBuckets,
	})

	m.clockReads = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "dal_clock_reads_total",
		Help: "Virtual clock reads served to agent runtime shims (including vDSO reads no syscall tracer sees).",
	})

	sessionsActive := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "dal_sessions_active",
		Help: "Sessions currently open on this dald (or the one dal-exec embeds).",
	}, func() float64 { return float64(m.sessionsActive.Load()) })
	m.sessionsTotal = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "dal_sessions_total",
		Help: "Sessions opened since this dald (or the one dal-exec embeds) started.",
	})

	tracerAttached := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "dal_tracer_attached",
		Help: "1 while dald's eBPF programs are attached to their hooks (at least one traced session is open), else 0: between traced sessions they cost processes nothing.",
	}, func() float64 {
		if opts.TracerAttached != nil && opts.TracerAttached() {
			return 1
		}
		return 0
	})

	m.syscalls = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "dal_syscalls_total",
		Help: "Syscalls of traced session process trees seen by eBPF, by nondeterminism category (" + strings.Join(categories, ", ") + ").",
	}, []string{"category"})
	m.ringbufDrops = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "dal_ringbuf_drops_total",
		Help: "eBPF ring buffer events lost because the buffer was full; boundary coverage is understated while this rises.",
	})

	m.network = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "dal_network_requests_total",
		Help: "Agent network requests by outcome: recorded upstream, replayed from a bundle, miss (no recorded response), blocked by the mode.",
	}, []string{"outcome"})

	m.dal.MustRegister(buildInfo,
		m.fidelity, m.fidelityHist, m.replayExact, m.replayDrifted,
		m.coverage, m.escapes, m.revert, m.clockReads,
		sessionsActive, m.sessionsTotal, tracerAttached,
		m.syscalls, m.ringbufDrops, m.network)
	m.syscallsBy, m.escapesBy, m.networkBy = map[string]prometheus.Counter{}, map[string]prometheus.Counter{}, map[string]prometheus.Counter{}
	for _, c := range categories {
		m.escapesBy[c] = m.escapes.WithLabelValues(c)
		m.syscallsBy[c] = m.syscalls.WithLabelValues(c)
	}
	for _, o := range outcomes {
		m.networkBy[o] = m.network.WithLabelValues(o)
	}
	if opts.BPFStats != nil {
		m.dal.MustRegister(bpfCollector{stats: opts.BPFStats})
	}

	if opts.GoCollector {
		m.runtime.MustRegister(collectors.NewGoCollector())
	}
	if opts.ProcessCollector {
		m.runtime.MustRegister(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	return m
}

// Gatherer returns the dal_* families alone, without the Go and process
// collectors: what WriteTextfile writes and the reference page documents.
func (m *Metrics) Gatherer() prometheus.Gatherer { return m.dal }

// gatherer returns everything Handler serves.
func (m *Metrics) gatherer() prometheus.Gatherer { return prometheus.Gatherers{m.dal, m.runtime} }

// ObserveReplay records one finished replay's fidelity (docs/design.md §9).
// 1 counts as exact, anything lower as drifted. Values outside [0, 1] are
// clamped; NaN (nothing was compared) counts as a drifted replay of
// fidelity 0.
func (m *Metrics) ObserveReplay(fidelity float64) {
	switch {
	case math.IsNaN(fidelity) || fidelity < 0:
		fidelity = 0
	case fidelity > 1:
		fidelity = 1
	}
	m.fidelity.Set(fidelity)
	m.fidelityHist.Observe(fidelity)
	if fidelity == 1 {
		m.replayExact.Inc()
	} else {
		m.replayDrifted.Inc()
	}
}

// SessionStarted counts a session that opened. Pair it with SessionEnded.
func (m *Metrics) SessionStarted() {
	m.sessionsActive.Add(1)
	m.sessionsTotal.Inc()
}

// SessionEnded counts a session that closed. An unpaired call leaves
// dal_sessions_active at zero rather than below it.
func (m *Metrics) SessionEnded() {
	for {
		n := m.sessionsActive.Load()
		if n <= 0 || m.sessionsActive.CompareAndSwap(n, n-1) {
			return
		}
	}
}

// ObserveCoverage records a finished session's boundary coverage
// (docs/design.md §8) and its escapes, counted per category; unknown categories count as
// CategoryOther and negative counts are ignored. The ratio is clamped to
// [0, 1]; NaN (nothing was touched, so there was nothing to cover) leaves the
// gauge as it was.
func (m *Metrics) ObserveCoverage(ratio float64, escapes map[string]int) {
	if !math.IsNaN(ratio) {
		m.coverage.Set(min(max(ratio, 0), 1))
	}
	for category, n := range escapes {
		if n > 0 {
			byCategory(m.escapesBy, category).Add(float64(n))
		}
	}
}

// ObserveRevert records how long one workspace revert took. Negative
// durations count as zero.
func (m *Metrics) ObserveRevert(d time.Duration) {
	m.revert.Observe(max(d, 0).Seconds())
}

// AddClockReads counts virtual clock reads served to shims.
func (m *Metrics) AddClockReads(n uint64) { m.clockReads.Add(float64(n)) }

// AddSyscalls counts traced syscalls in a nondeterminism category; an
// unknown category counts as CategoryOther.
func (m *Metrics) AddSyscalls(category string, n uint64) {
	byCategory(m.syscallsBy, category).Add(float64(n))
}

// AddRingbufDrops counts eBPF ring buffer events the kernel could not
// deliver.
func (m *Metrics) AddRingbufDrops(n uint64) { m.ringbufDrops.Add(float64(n)) }

// AddNetwork counts agent network requests with one of the Outcome*
// values. Any other outcome is refused, so that a typo cannot open a new
// series.
func (m *Metrics) AddNetwork(outcome string, n uint64) error {
	if c, ok := m.networkBy[outcome]; ok {
		c.Add(float64(n))
		return nil
	}
	return fmt.Errorf("metrics: unknown network outcome %q (want one of %s)", outcome, strings.Join(outcomes, ", "))
}

// byCategory picks a category's counter, CategoryOther's for unknown ones.
func byCategory(counters map[string]prometheus.Counter, category string) prometheus.Counter {
	if c, ok := counters[category]; ok {
		return c
	}
	return counters[CategoryOther]
}
