// Package promtest runs a real Prometheus server (Debian's prometheus
// package) for tests: it scrapes a target every second, and the test asks
// its query API what it saw. A missing prometheus binary fails the test.
package promtest

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

// Tool returns the path of a Prometheus tool, failing the test when it is
// not installed.
func Tool(t testing.TB, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("%s is not installed: apt-get install prometheus (.ci/run does)", name)
	}
	return p
}

// Server is a running Prometheus.
type Server struct {
	t      testing.TB
	web    string
	exited chan error
}

// Start runs Prometheus scraping target ("host:port", path /metrics) as
// job "dal" every second; it is stopped when the test ends.
func Start(t testing.TB, target string) *Server {
	t.Helper()
	bin := Tool(t, "prometheus")
	dir := t.TempDir()
	config := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(config, fmt.Appendf(nil, `global:
  scrape_interval: 1s
  scrape_timeout: 1s
scrape_configs:
  - job_name: dal
    static_configs:
      - targets: ['%s']
`, target), 0o644); err != nil {
		t.Fatal(err)
	}
	s := &Server{t: t, web: FreePort(t), exited: make(chan error, 1)}
	var log bytes.Buffer
	cmd := exec.Command(bin, "--config.file="+config, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+s.web, "--log.level=warn")
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { s.exited <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-s.exited:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
		}
		if t.Failed() {
			t.Logf("prometheus log:\n%s", log.String())
		}
	})
	return s
}

// Sample is one instant-query result.
type Sample struct {
	Metric map[string]string `json:"metric"`
	Value  [2]any            `json:"value"` // [unix time, "value"]
}

// Float is the sample's value (-1 if unreadable).
func (s Sample) Float() float64 {
	str, _ := s.Value[1].(string)
	v, err := strconv.ParseFloat(str, 64)
	if err != nil {
		return -1
	}
	return v
}

// WaitFor polls the query until it returns samples (bounded: 60 s).
func (s *Server) WaitFor(promql string) []Sample {
	s.t.Helper()
	deadline := time.After(60 * time.Second)
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case err := <-s.exited:
			s.exited <- err
			s.t.Fatalf("prometheus exited early: %v", err)
		case <-deadline:
			s.t.Fatalf("prometheus did not report %s within 60 s", promql)
		case <-tick.C:
			if r := s.Query(promql); len(r) > 0 {
				return r
			}
		}
	}
}

// Query runs an instant query; a Prometheus still starting answers nothing.
func (s *Server) Query(promql string) []Sample {
	s.t.Helper()
	resp, err := http.Get("http://" + s.web + "/api/v1/query?query=" + url.QueryEscape(promql))
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	var body struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			Result []Sample `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return nil
	}
	if body.Status != "success" {
		s.t.Fatalf("query %s: %s", promql, body.Error)
	}
	return body.Data.Result
}

// FreePort returns a loopback address nobody listens on right now.
func FreePort(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}
