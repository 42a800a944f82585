package metrics

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"
)

// serve starts m on a free loopback port and stops it when the test ends,
// checking that it stopped cleanly.
func serve(t *testing.T, m *Metrics) *Server {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	s, err := Serve(ctx, "127.0.0.1:0", m)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		if err := s.Wait(); err != nil {
			t.Errorf("Wait after cancel = %v, want nil", err)
		}
	})
	return s
}

func get(t *testing.T, url, accept string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(body)
}

func TestServeRoutes(t *testing.T) {
	t.Parallel()
	m := New(Options{})
	m.SessionStarted()
	s := serve(t, m)
	tests := []struct {
		path   string
		status int
		body   string
	}{
		{"/metrics", http.StatusOK, "\ndal_sessions_active 1\n"},
		{"/healthz", http.StatusOK, "ok\n"},
		{"/", http.StatusOK, `<a href="/metrics">`},
		{"/nope", http.StatusNotFound, ""},
	}
	for _, tt := range tests {
		resp, body := get(t, "http://"+s.Addr()+tt.path, "")
		if resp.StatusCode != tt.status || !strings.Contains(body, tt.body) {
			t.Errorf("GET %s: %d %q, want %d containing %q", tt.path, resp.StatusCode, body, tt.status, tt.body)
		}
	}
}

func TestServeStopsWithContext(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	s, err := Serve(ctx, "127.0.0.1:0", New(Options{}))
	if err != nil {
		t.Fatal(err)
	}
	addr := s.Addr()
	if resp, _ := get(t, "http://"+addr+"/healthz", ""); resp.StatusCode != http.StatusOK {
		t.Fatalf("healthz before cancel: %d", resp.StatusCode)
	}
	cancel()
	if err := s.Wait(); err != nil {
		t.Fatalf("Wait = %v, want nil: cancellation is not an error", err)
	}
	select {
	case <-s.Done():
	default:
		t.Error("Done is not closed after Wait returned")
	}
	// The listener itself is closed (dialling the port could reach another
	// test's server that has since been given the same port).
	if tl, ok := s.ln.(*net.TCPListener); ok {
		tl.SetDeadline(time.Now()) // an open listener fails at once instead of blocking
	}
	if _, err := s.ln.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Errorf("%s: the listener still accepts after shutdown (%v)", addr, err)
	}
}

func TestServeAddressInUse(t *testing.T) {
	t.Parallel()
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	addr := busy.Addr().String()
	_, err = Serve(context.Background(), addr, New(Options{}))
	want := "the metrics address " + addr + " is in use: pass --metrics-addr or stop the other process"
	if err == nil || err.Error() != want {
		t.Fatalf("Serve on a busy address = %v, want %q", err, want)
	}
	if !errors.Is(err, syscall.EADDRINUSE) {
		t.Errorf("errors.Is(%v, EADDRINUSE) is false", err)
	}
}

func TestServeBadAddress(t *testing.T) {
	t.Parallel()
	_, err := Serve(context.Background(), "localhost", New(Options{}))
	if err == nil || !strings.HasPrefix(err.Error(), "listen for metrics on localhost: ") {
		t.Fatalf("Serve(localhost) = %v, want a listen error naming the address", err)
	}
}

// TestOpenMetricsNegotiation checks that the classic text format is the
// default even for a scraper that prefers OpenMetrics, and that the option
// lets it through.
func TestOpenMetricsNegotiation(t *testing.T) {
	t.Parallel()
	const accept = "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5"
	tests := []struct {
		openMetrics bool
		contentType string
		eof         bool
	}{
		{false, "text/plain; version=0.0.4", false},
		{true, "application/openmetrics-text; version=1.0.0", true},
	}
	for _, tt := range tests {
		s := serve(t, New(Options{OpenMetrics: tt.openMetrics}))
		resp, body := get(t, "http://"+s.Addr()+"/metrics", accept)
		if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, tt.contentType) {
			t.Errorf("OpenMetrics %v: Content-Type %q, want %q", tt.openMetrics, ct, tt.contentType)
		}
		if got := strings.HasSuffix(body, "# EOF\n"); got != tt.eof {
			t.Errorf("OpenMetrics %v: body ends in # EOF = %v, want %v", tt.openMetrics, got, tt.eof)
		}
	}
}

func TestServeListener(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := ServeListener(ctx, ln, New(Options{}))
	if s.Addr() != ln.Addr().String() {
		t.Errorf("Addr = %s, want the listener's %s", s.Addr(), ln.Addr())
	}
	if resp, _ := get(t, "http://"+s.Addr()+"/healthz", ""); resp.StatusCode != http.StatusOK {
		t.Errorf("healthz on a given listener: %d", resp.StatusCode)
	}
	cancel()
	if err := s.Wait(); err != nil {
		t.Fatal(err)
	}
	if _, err := ln.Accept(); err == nil {
		t.Error("the listener is still open after shutdown; ServeListener owns it")
	}
}
