package metrics

import (
	"math"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dal-runtime/dal/internal/golden"
	"github.com/dal-runtime/dal/internal/version"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
)

// sampleBPF stands in for the eBPF loader: two programs, one attached twice.
func sampleBPF() []ProgramStats {
	return []ProgramStats{
		{Name: "sys_enter", RunCount: 1000, RunTime: 1500 * time.Microsecond},
		{Name: "sched_process_fork", RunCount: 3, RunTime: 6 * time.Microsecond},
		{Name: "sys_enter", RunCount: 24, RunTime: 500 * time.Microsecond},
	}
}

// exercise records one of everything, as a day of dald would.
func exercise(t *testing.T, m *Metrics) {
	t.Helper()
	m.SessionStarted()
	m.SessionStarted()
	m.SessionStarted()
	m.SessionEnded()
	m.ObserveReplay(1)
	m.ObserveReplay(5.0 / 7)
	m.ObserveCoverage(0.75, map[string]int{CategoryNetwork: 2, CategoryClock: 1, "ptrace": 1})
	m.ObserveRevert(3 * time.Millisecond)
	m.ObserveRevert(1200 * time.Millisecond)
	m.AddClockReads(4096)
	m.AddSyscalls(CategoryClock, 10)
	m.AddSyscalls(CategoryNetwork, 7)
	m.AddSyscalls("ioctl-ish", 2)
	m.AddRingbufDrops(1)
	for outcome, n := range map[string]uint64{OutcomeRecorded: 4, OutcomeReplayed: 3, OutcomeMiss: 1} {
		if err := m.AddNetwork(outcome, n); err != nil {
			t.Fatal(err)
		}
	}
}

func TestLint(t *testing.T) {
	t.Parallel()
	m := New(Options{GoCollector: true, ProcessCollector: true, BPFStats: sampleBPF})
	exercise(t, m)
	problems, err := testutil.GatherAndLint(m.gatherer())
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
}

// TestExposition pins what a scraper sees, byte for byte. Run with -update
// after a deliberate change and review the diff.
func TestExposition(t *testing.T) {
	t.Parallel()
	m := New(Options{BPFStats: sampleBPF})
	exercise(t, m)
	got := normalise(scrape(t, m.Handler(), ""))
	golden.Check(t, filepath.Join("testdata", "exposition.golden"), []byte(got))
}

// normalise replaces the build's version strings, which change with every
// release and toolchain, with placeholders.
func normalise(exposition string) string {
	return strings.NewReplacer(
		`goversion="`+runtime.Version()+`"`, `goversion="GOVERSION"`,
		`version="`+version.Version+`"`, `version="VERSION"`,
	).Replace(exposition)
}

func scrape(t *testing.T, h http.Handler, accept string) string {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		t.Fatalf("scrape: status %d: %s", rec.Code, rec.Body)
	}
	return rec.Body.String()
}

func TestObservations(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		record func(m *Metrics)
		value  func(t *testing.T, m *Metrics) float64
		want   float64
	}{
		{"exact replay", func(m *Metrics) { m.ObserveReplay(1) }, value(func(m *Metrics) prometheus.Collector { return m.replayExact }), 1},
		{"exact is not drifted", func(m *Metrics) { m.ObserveReplay(1) }, value(func(m *Metrics) prometheus.Collector { return m.replayDrifted }), 0},
		{"drifted replay", func(m *Metrics) { m.ObserveReplay(0.999) }, value(func(m *Metrics) prometheus.Collector { return m.replayDrifted }), 1},
		{"fidelity of last replay", func(m *Metrics) { m.ObserveReplay(1); m.ObserveReplay(0.5) }, value(func(m *Metrics) prometheus.Collector { return m.fidelity }), 0.5},
		{"fidelity above 1 clamps to exact", func(m *Metrics) { m.ObserveReplay(1.5) }, value(func(m *Metrics) prometheus.Collector { return m.replayExact }), 1},
		{"NaN fidelity counts as drifted", func(m *Metrics) { m.ObserveReplay(math.NaN()) }, value(func(m *Metrics) prometheus.Collector { return m.replayDrifted }), 1},
		{"NaN fidelity is 0", func(m *Metrics) { m.ObserveReplay(math.NaN()) }, value(func(m *Metrics) prometheus.Collector { return m.fidelity }), 0},
		{"coverage", func(m *Metrics) { m.ObserveCoverage(0.6, nil) }, value(func(m *Metrics) prometheus.Collector { return m.coverage }), 0.6},
		{"NaN coverage keeps the last", func(m *Metrics) { m.ObserveCoverage(0.6, nil); m.ObserveCoverage(math.NaN(), nil) }, value(func(m *Metrics) prometheus.Collector { return m.coverage }), 0.6},
		{"negative coverage clamps", func(m *Metrics) { m.ObserveCoverage(-1, nil) }, value(func(m *Metrics) prometheus.Collector { return m.coverage }), 0},
		{"escapes add up", func(m *Metrics) {
			m.ObserveCoverage(0.5, map[string]int{CategoryRandom: 2})
			m.ObserveCoverage(0.5, map[string]int{CategoryRandom: 3})
		}, value(func(m *Metrics) prometheus.Collector { return m.escapes.WithLabelValues(CategoryRandom) }), 5},
		{"unknown escape category is other", func(m *Metrics) { m.ObserveCoverage(0.5, map[string]int{"ptrace": 2}) }, value(func(m *Metrics) prometheus.Collector { return m.escapes.WithLabelValues(CategoryOther) }), 2},
		{"negative escapes ignored", func(m *Metrics) { m.ObserveCoverage(0.5, map[string]int{CategoryClock: -4}) }, value(func(m *Metrics) prometheus.Collector { return m.escapes.WithLabelValues(CategoryClock) }), 0},
		{"sessions active", func(m *Metrics) { m.SessionStarted(); m.SessionStarted(); m.SessionEnded() }, gaugeValue("dal_sessions_active"), 1},
		{"sessions total", func(m *Metrics) { m.SessionStarted(); m.SessionStarted(); m.SessionEnded() }, value(func(m *Metrics) prometheus.Collector { return m.sessionsTotal }), 2},
		{"unpaired end stays at 0", func(m *Metrics) { m.SessionEnded(); m.SessionStarted() }, gaugeValue("dal_sessions_active"), 1},
		{"clock reads", func(m *Metrics) { m.AddClockReads(3); m.AddClockReads(4) }, value(func(m *Metrics) prometheus.Collector { return m.clockReads }), 7},
		{"syscalls", func(m *Metrics) { m.AddSyscalls(CategoryFilesystem, 9) }, value(func(m *Metrics) prometheus.Collector { return m.syscalls.WithLabelValues(CategoryFilesystem) }), 9},
		{"unknown syscall category is other", func(m *Metrics) { m.AddSyscalls("", 9) }, value(func(m *Metrics) prometheus.Collector { return m.syscalls.WithLabelValues(CategoryOther) }), 9},
		{"ringbuf drops", func(m *Metrics) { m.AddRingbufDrops(2) }, value(func(m *Metrics) prometheus.Collector { return m.ringbufDrops }), 2},
		{"network", func(m *Metrics) { _ = m.AddNetwork(OutcomeBlocked, 2) }, value(func(m *Metrics) prometheus.Collector { return m.network.WithLabelValues(OutcomeBlocked) }), 2},
		{"revert in seconds", func(m *Metrics) { m.ObserveRevert(250 * time.Millisecond) }, histogramSum("dal_revert_duration_seconds"), 0.25},
		{"negative revert is 0", func(m *Metrics) { m.ObserveRevert(-time.Second) }, histogramSum("dal_revert_duration_seconds"), 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m := New(Options{})
			tt.record(m)
			if got := tt.value(t, m); got != tt.want {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

// value reads a plain metric; gaugeValue and histogramSum read a family
// back from the registry, for the values that have no Collector field.
func value(c func(m *Metrics) prometheus.Collector) func(*testing.T, *Metrics) float64 {
	return func(_ *testing.T, m *Metrics) float64 { return testutil.ToFloat64(c(m)) }
}

func gaugeValue(name string) func(*testing.T, *Metrics) float64 {
	return func(t *testing.T, m *Metrics) float64 { return family(t, m, name).GetGauge().GetValue() }
}

func histogramSum(name string) func(*testing.T, *Metrics) float64 {
	return func(t *testing.T, m *Metrics) float64 { return family(t, m, name).GetHistogram().GetSampleSum() }
}

// family returns the only series of the named family.
func family(t *testing.T, m *Metrics, name string) *dto.Metric {
	t.Helper()
	families, err := m.dal.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range families {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0]
		}
	}
	t.Fatalf("no single-series family %s", name)
	return nil
}

func TestAddNetworkRefusesUnknownOutcome(t *testing.T) {
	t.Parallel()
	m := New(Options{})
	err := m.AddNetwork("cached", 1)
	if err == nil || !strings.Contains(err.Error(), `unknown network outcome "cached"`) {
		t.Fatalf("got %v, want an unknown-outcome error", err)
	}
	if n := testutil.CollectAndCount(m.network); n != len(outcomes) {
		t.Errorf("dal_network_requests_total has %d series after a refused outcome, want %d", n, len(outcomes))
	}
}

// TestPreinitialised checks that every labelled family shows each known
// label value before anything happened, and the ratios read NaN, not a
// misleading 0.
func TestPreinitialised(t *testing.T) {
	t.Parallel()
	m := New(Options{})
	for name, want := range map[string]int{
		"dal_syscalls_total":          len(categories),
		"dal_boundary_escapes_total":  len(categories),
		"dal_network_requests_total":  len(outcomes),
		"dal_sessions_active":         1,
		"dal_replays_exact_total":     1,
		"dal_revert_duration_seconds": 1,
	} {
		if n, err := testutil.GatherAndCount(m.Gatherer(), name); err != nil || n != want {
			t.Errorf("%s: %d series (err %v), want %d", name, n, err, want)
		}
	}
	for _, g := range []prometheus.Gauge{m.fidelity, m.coverage} {
		if v := testutil.ToFloat64(g); !math.IsNaN(v) {
			t.Errorf("%s starts at %v, want NaN", g.Desc(), v)
		}
	}
}

// TestCustomRegistry checks that nothing lands on the process-wide default
// registry and that two Metrics live side by side.
func TestCustomRegistry(t *testing.T) {
	t.Parallel()
	a, b := New(Options{GoCollector: true, ProcessCollector: true}), New(Options{GoCollector: true, ProcessCollector: true})
	a.SessionStarted()
	if got := testutil.ToFloat64(b.sessionsTotal); got != 0 {
		t.Errorf("a session on one Metrics shows on another: %v", got)
	}
	families, err := prometheus.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range families {
		if strings.HasPrefix(mf.GetName(), "dal_") {
			t.Errorf("%s is on the default registry", mf.GetName())
		}
	}
}

func TestCollectorsSwitch(t *testing.T) {
	t.Parallel()
	tests := []struct {
		opts        Options
		goFamilies  bool
		procFamiles bool
	}{
		{Options{}, false, false},
		{Options{GoCollector: true}, true, false},
		{Options{ProcessCollector: true}, false, true},
		{Options{GoCollector: true, ProcessCollector: true}, true, true},
	}
	for _, tt := range tests {
		body := scrape(t, New(tt.opts).Handler(), "")
		if got := strings.Contains(body, "\ngo_goroutines "); got != tt.goFamilies {
			t.Errorf("%+v: go_goroutines served = %v, want %v", tt.opts, got, tt.goFamilies)
		}
		if got := strings.Contains(body, "\nprocess_open_fds "); got != tt.procFamiles {
			t.Errorf("%+v: process_open_fds served = %v, want %v", tt.opts, got, tt.procFamiles)
		}
	}
}

func TestBPFStats(t *testing.T) {
	t.Parallel()
	m := New(Options{BPFStats: sampleBPF})
	want := `
# HELP dal_bpf_program_runs_total Runs of each of dal's eBPF programs, as counted by the kernel while BPF statistics are enabled.
# TYPE dal_bpf_program_runs_total counter
dal_bpf_program_runs_total{program="sched_process_fork"} 3
dal_bpf_program_runs_total{program="sys_enter"} 1024
# HELP dal_bpf_program_run_seconds_total Time spent running each of dal's eBPF programs, as counted by the kernel while BPF statistics are enabled.
# TYPE dal_bpf_program_run_seconds_total counter
dal_bpf_program_run_seconds_total{program="sched_process_fork"} 6e-06
dal_bpf_program_run_seconds_total{program="sys_enter"} 0.002
`
	if err := testutil.GatherAndCompare(m.Gatherer(), strings.NewReader(want),
		"dal_bpf_program_runs_total", "dal_bpf_program_run_seconds_total"); err != nil {
		t.Error(err)
	}
}

// TestTracerAttached checks that dal_tracer_attached follows the tracer's
// state at every scrape, and reads 0 without a tracer.
func TestTracerAttached(t *testing.T) {
	t.Parallel()
	var attached atomic.Bool
	m := New(Options{TracerAttached: attached.Load})
	const head = `
# HELP dal_tracer_attached 1 while dald's eBPF programs are attached to their hooks (at least one traced session is open), else 0: between traced sessions they cost processes nothing.
# TYPE dal_tracer_attached gauge
`
	for _, on := range []bool{false, true, false} {
		attached.Store(on)
		want := head + "dal_tracer_attached 0\n"
		if on {
			want = head + "dal_tracer_attached 1\n"
		}
		if err := testutil.GatherAndCompare(m.Gatherer(), strings.NewReader(want), "dal_tracer_attached"); err != nil {
			t.Errorf("attached %v: %v", on, err)
		}
	}
	if err := testutil.GatherAndCompare(New(Options{}).Gatherer(), strings.NewReader(head+"dal_tracer_attached 0\n"), "dal_tracer_attached"); err != nil {
		t.Errorf("without a tracer: %v", err)
	}
}

// TestBPFStatsBadName checks that a program name that is not UTF-8 fails
// the scrape with an error instead of panicking dald.
func TestBPFStatsBadName(t *testing.T) {
	t.Parallel()
	m := New(Options{BPFStats: func() []ProgramStats { return []ProgramStats{{Name: "\xff"}} }})
	if _, err := m.Gatherer().Gather(); err == nil {
		t.Error("gathering a non-UTF-8 program name succeeded, want an error")
	}
}

// TestConcurrent hammers every method from many goroutines (run with -race)
// and checks that no update was lost.
func TestConcurrent(t *testing.T) {
	t.Parallel()
	m := New(Options{BPFStats: sampleBPF})
	const workers, rounds = 8, 500
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for range rounds {
				m.SessionStarted()
				m.ObserveReplay(1)
				m.ObserveCoverage(1, map[string]int{CategoryProcess: 1})
				m.ObserveRevert(time.Millisecond)
				m.AddClockReads(1)
				m.AddSyscalls(CategoryRandom, 1)
				m.AddRingbufDrops(1)
				_ = m.AddNetwork(OutcomeReplayed, 1)
				m.SessionEnded()
			}
		})
		wg.Go(func() {
			for range rounds / 10 {
				if _, err := m.gatherer().Gather(); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	const n = workers * rounds
	for _, c := range []struct {
		name string
		got  float64
		want float64
	}{
		{"sessions total", testutil.ToFloat64(m.sessionsTotal), n},
		{"sessions active", float64(m.sessionsActive.Load()), 0},
		{"exact", testutil.ToFloat64(m.replayExact), n},
		{"escapes", testutil.ToFloat64(m.escapes.WithLabelValues(CategoryProcess)), n},
		{"clock reads", testutil.ToFloat64(m.clockReads), n},
		{"syscalls", testutil.ToFloat64(m.syscalls.WithLabelValues(CategoryRandom)), n},
		{"drops", testutil.ToFloat64(m.ringbufDrops), n},
		{"network", testutil.ToFloat64(m.network.WithLabelValues(OutcomeReplayed)), n},
	} {
		if c.got != c.want {
			t.Errorf("%s: got %v, want %v", c.name, c.got, c.want)
		}
	}
}
