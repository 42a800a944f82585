package metrics

import (
	"testing"

	"github.com/dal-runtime/dal/internal/promtest"
)

// TestPrometheusScrapes runs a real Prometheus server against a real
// metrics endpoint and asks Prometheus' query API for what it scraped.
func TestPrometheusScrapes(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a Prometheus server end to end: skipped under -short (testing.Short())")
	}
	t.Parallel()
	m := New(Options{GoCollector: true, ProcessCollector: true})
	m.SessionStarted()
	m.SessionStarted()
	target := serve(t, m)
	prom := promtest.Start(t, target.Addr())

	result := prom.WaitFor("dal_sessions_active")
	if len(result) != 1 || result[0].Metric["job"] != "dal" || result[0].Float() != 2 {
		t.Errorf("dal_sessions_active = %+v, want one sample of 2 from job dal", result)
	}
	// The same scrape carried every pre-initialised category.
	if got := prom.Query("count(dal_syscalls_total)"); len(got) != 1 || got[0].Float() != float64(len(categories)) {
		t.Errorf("count(dal_syscalls_total) = %+v, want %d", got, len(categories))
	}
}
