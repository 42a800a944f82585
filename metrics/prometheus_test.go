package metrics

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// TestPrometheusScrapes runs a real Prometheus server against a real
// metrics endpoint and asks Prometheus' query API for what it scraped.
func TestPrometheusScrapes(t *testing.T) {
	t.Parallel()
	bin := prometheusTool(t, "prometheus")

	m := New(Options{GoCollector: true, ProcessCollector: true})
	m.SessionStarted()
	m.SessionStarted()
	target := serve(t, m)

	dir := t.TempDir()
	config := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(config, fmt.Appendf(nil, `global:
  scrape_interval: 1s
  scrape_timeout: 1s
scrape_configs:
  - job_name: dal
    static_configs:
      - targets: ['%s']
`, target.Addr()), 0o644); err != nil {
		t.Fatal(err)
	}
	web := freePort(t)
	var log bytes.Buffer
	cmd := exec.Command(bin,
		"--config.file="+config,
		"--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+web,
		"--log.level=warn")
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("prometheus log:\n%s", log.String())
		}
	}()

	// Prometheus scrapes at a jittered offset within its 1 s interval; poll
	// the query API until the sample is there.
	deadline := time.After(60 * time.Second)
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	var result []querySample
	for len(result) == 0 {
		select {
		case err := <-exited:
			exited <- err // for the deferred stop
			t.Fatalf("prometheus exited early: %v", err)
		case <-deadline:
			t.Fatal("prometheus did not report dal_sessions_active within 60s")
		case <-tick.C:
			result = query(t, web, "dal_sessions_active")
		}
	}
	if len(result) != 1 || result[0].Metric["job"] != "dal" || result[0].value() != 2 {
		t.Errorf("dal_sessions_active = %+v, want one sample of 2 from job dal", result)
	}
	// The same scrape carried every pre-initialised category.
	if got := query(t, web, "count(dal_syscalls_total)"); len(got) != 1 || got[0].value() != float64(len(categories)) {
		t.Errorf("count(dal_syscalls_total) = %+v, want %d", got, len(categories))
	}
}

type querySample struct {
	Metric map[string]string `json:"metric"`
	Value  [2]any            `json:"value"` // [unix time, "value"]
}

func (s querySample) value() float64 {
	str, _ := s.Value[1].(string)
	v, err := strconv.ParseFloat(str, 64)
	if err != nil {
		return -1
	}
	return v
}

// query runs an instant query; a Prometheus that is not up yet answers
// with no samples.
func query(t *testing.T, addr, promql string) []querySample {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/api/v1/query?query=" + url.QueryEscape(promql))
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	var body struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			Result []querySample `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return nil // starting up: not the API yet
	}
	if body.Status != "success" {
		t.Fatalf("query %s: %s", promql, body.Error)
	}
	return body.Data.Result
}

// freePort returns a loopback address nobody listens on right now.
func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}
