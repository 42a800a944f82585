package netcap

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dal-runtime/dal/internal/netcap/har"
	"github.com/dal-runtime/dal/internal/netcap/prompts"
)

// The benchmarks compare a client talking to a loopback server directly
// with the same client going through a recording proxy, in the same
// process: read them as ratios (make bench, or go test -bench . -run ^$).

// benchRig is a recording proxy that keeps nothing.
func benchRig(b *testing.B) *rig {
	rg := newRig(b, Config{})
	rg.p.seq.record = nil // keep nothing
	return rg
}

// latency runs b.N small keep-alive GETs and reports p50 and p99.
func latency(b *testing.B, c *http.Client, url string) {
	b.Helper()
	d := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		resp, err := c.Get(url)
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		d = append(d, time.Since(t0))
	}
	b.StopTimer()
	reportPercentiles(b, d)
}

func reportPercentiles(b *testing.B, d []time.Duration) {
	slices.Sort(d)
	pct := func(p float64) float64 { return float64(d[int(p*float64(len(d)-1))].Microseconds()) }
	b.ReportMetric(pct(0.50), "p50-µs")
	b.ReportMetric(pct(0.99), "p99-µs")
}

func smallServer(b *testing.B) *httptest.Server {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"x","object":"model"}`)
	}))
	b.Cleanup(ts.Close)
	return ts
}

func BenchmarkLatencyDirect(b *testing.B) {
	ts := smallServer(b)
	latency(b, &http.Client{Transport: &http.Transport{}}, ts.URL+"/v1/models")
}

func BenchmarkLatencyProxy(b *testing.B) {
	ts := smallServer(b)
	rg := benchRig(b)
	latency(b, proxyClient(rg.explicit(), nil), ts.URL+"/v1/models")
}

func BenchmarkLatencyTransparent(b *testing.B) {
	ts := smallServer(b)
	rg := benchRig(b)
	latency(b, directedClient(rg.transparent(ts.Listener.Addr().String()), nil), ts.URL+"/v1/models")
}

// BenchmarkFirstSSEChunk measures the time from sending a streaming
// request to reading its first event.
func BenchmarkFirstSSEChunk(b *testing.B) {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for i := range 3 {
			io.WriteString(w, sseEvent(i))
			w.(http.Flusher).Flush()
		}
	}))
	b.Cleanup(ts.Close)
	run := func(b *testing.B, c *http.Client) {
		d := make([]time.Duration, 0, b.N)
		b.ResetTimer()
		for range b.N {
			t0 := time.Now()
			resp, err := c.Get(ts.URL + "/v1/chat/completions")
			if err != nil {
				b.Fatal(err)
			}
			br := bufio.NewReader(resp.Body)
			if _, err := br.ReadString('\n'); err != nil {
				b.Fatal(err)
			}
			d = append(d, time.Since(t0))
			io.Copy(io.Discard, br)
			resp.Body.Close()
		}
		b.StopTimer()
		reportPercentiles(b, d)
	}
	b.Run("direct", func(b *testing.B) { run(b, &http.Client{Transport: &http.Transport{}}) })
	b.Run("proxy", func(b *testing.B) { run(b, proxyClient(benchRig(b).explicit(), nil)) })
}

// BenchmarkThroughput100MB downloads a 100 MB body, with a
// Content-Length ("sized") and chunked.
func BenchmarkThroughput100MB(b *testing.B) {
	const size = 100 << 20
	payload := make([]byte, size)
	rand.NewChaCha8([32]byte{}).Read(payload)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/sized" {
			w.Header().Set("Content-Length", fmt.Sprint(size))
		}
		w.Write(payload)
	}))
	b.Cleanup(ts.Close)
	run := func(b *testing.B, c *http.Client, path string) {
		b.SetBytes(size)
		buf := make([]byte, 256<<10)
		b.ResetTimer()
		for range b.N {
			resp, err := c.Get(ts.URL + path)
			if err != nil {
				b.Fatal(err)
			}
			n, err := io.CopyBuffer(io.Discard, resp.Body, buf)
			resp.Body.Close()
			if err != nil || n != size {
				b.Fatalf("%d bytes, %v", n, err)
			}
		}
	}
	for _, path := range []string{"/sized", "/chunked"} {
		b.Run("direct"+path, func(b *testing.B) { run(b, &http.Client{Transport: &http.Transport{DisableCompression: true}}, path) })
		b.Run("proxy"+path, func(b *testing.B) { run(b, proxyClient(benchRig(b).explicit(), nil), path) })
	}
}

// BenchmarkRecordLLMCalls is the per-call cost of recording an agent's
// LLM calls: an op is three calls on fresh connections, as urllib makes
// them (two plain, one streamed with eight events), against a loopback
// server, directly and through a transparent recording proxy whose
// Record does what dal-exec record does with each exchange (the HAR
// entry, redacted, and the prompt). The difference of the two, per call,
// is what recording adds.
func BenchmarkRecordLLMCalls(b *testing.B) {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if !bytes.Contains(body, []byte(`"stream":true`)) {
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"id":"c1","object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"hello there"},"finish_reason":"stop"}],"usage":{"prompt_tokens":5,"completion_tokens":2,"total_tokens":7}}`)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		for i := range 8 {
			io.WriteString(w, sseEvent(i))
			w.(http.Flusher).Flush()
		}
		io.WriteString(w, "data: [DONE]\n\n")
	}))
	b.Cleanup(ts.Close)
	call := func(b *testing.B, c *http.Client, stream bool) {
		body := `{"model":"m","messages":[{"role":"user","content":"hi"}],"temperature":0}`
		if stream {
			body = `{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true}`
		}
		req, _ := http.NewRequest(http.MethodPost, ts.URL+"/v1/chat/completions", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer sk-bench-0123456789")
		resp, err := c.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		buf := make([]byte, 32<<10)
		for {
			if _, err := resp.Body.Read(buf); err != nil {
				break
			}
		}
		resp.Body.Close()
	}
	run := func(b *testing.B, c *http.Client, after func()) {
		var plain, stream time.Duration
		b.ResetTimer()
		for range b.N {
			t0 := time.Now()
			call(b, c, false)
			call(b, c, false)
			t1 := time.Now()
			call(b, c, true)
			plain += t1.Sub(t0)
			stream += time.Since(t1)
		}
		after()
		b.StopTimer()
		b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(3*b.N), "µs/call")
		b.ReportMetric(float64(plain.Microseconds())/float64(2*b.N), "µs/plain")
		b.ReportMetric(float64(stream.Microseconds())/float64(b.N), "µs/stream")
	}
	fresh := func(c *http.Client) *http.Client {
		c.Transport.(*http.Transport).DisableKeepAlives = true
		return c
	}
	b.Run("direct", func(b *testing.B) { run(b, fresh(&http.Client{Transport: &http.Transport{}}), func() {}) })
	b.Run("record", func(b *testing.B) {
		// As dal-exec record: exchanges are kept as they finish, and
		// turned into HAR entries and prompts once the agent is done
		// (counted in the time).
		var xs []*har.Exchange
		rg := newRig(b, Config{})
		rg.p.seq.record = func(x *har.Exchange) { xs = append(xs, x) }
		run(b, fresh(directedClient(rg.transparent(ts.Listener.Addr().String()), nil)), func() {
			rg.p.seq.wait()
			for _, x := range xs {
				e, err := har.FromExchange(x, nil)
				if err != nil {
					b.Fatal(err)
				}
				prompts.Extract(&e)
			}
		})
	})
}

// BenchmarkRecordRemoteHTTPS: plain calls to an HTTPS server whose TLS
// handshake takes 5 ms to answer (standing in for a remote API's round
// trip), from a client that opens a connection per request through the
// explicit proxy (CONNECT, then TLS to dal's certificate), with 10 ms
// between calls (the agent's own work; not timed). Without the spare
// upstream connection (spare.go) every call waits for a handshake
// upstream; with it, the handshake is made ahead.
func BenchmarkRecordRemoteHTTPS(b *testing.B) {
	const handshake = 5 * time.Millisecond
	ts := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"c1","object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"hello there"},"finish_reason":"stop"}]}`)
	}))
	ts.Config.ErrorLog = log.New(io.Discard, "", 0)
	ts.TLS = &tls.Config{GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
		time.Sleep(handshake)
		return nil, nil
	}}
	ts.StartTLS()
	b.Cleanup(ts.Close)
	roots := x509.NewCertPool()
	roots.AddCert(ts.Certificate())
	rg := newRig(b, Config{UpstreamRoots: roots})
	rg.p.seq.record = nil
	c := proxyClient(rg.explicit(), caPool(rg.ca))
	c.Transport.(*http.Transport).DisableKeepAlives = true
	body := `{"model":"m","messages":[{"role":"user","content":"hi"}],"temperature":0}`
	for b.Loop() {
		b.StopTimer()
		time.Sleep(10 * time.Millisecond)
		b.StartTimer()
		resp, err := c.Post(ts.URL+"/v1/chat/completions", "application/json", strings.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N), "µs/call")
	b.ReportMetric(0, "ns/op")
}
