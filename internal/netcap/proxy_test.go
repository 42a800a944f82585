package netcap

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dal-runtime/dal/internal/netcap/har"
)

// seen is what an upstream test server received.
type seen struct {
	mu   sync.Mutex
	reqs []seenReq
}

type seenReq struct {
	method, uri, host, sni, proto string
	header                        http.Header
	body                          []byte
}

func (s *seen) add(r *http.Request, body []byte) {
	sr := seenReq{method: r.Method, uri: r.RequestURI, host: r.Host, proto: r.Proto, header: r.Header.Clone(), body: body}
	if r.TLS != nil {
		sr.sni = r.TLS.ServerName
	}
	s.mu.Lock()
	s.reqs = append(s.reqs, sr)
	s.mu.Unlock()
}

func (s *seen) last(t *testing.T) seenReq {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.reqs) == 0 {
		t.Fatal("upstream received no request")
	}
	return s.reqs[len(s.reqs)-1]
}

// echo answers "METHOD URI BODY" and remembers every request.
func echo(s *seen) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		s.add(r, b)
		w.Header().Set("Content-Type", "text/plain")
		w.Header().Set("X-Upstream", "yes")
		fmt.Fprintf(w, "%s %s %s", r.Method, r.URL.RequestURI(), b)
	}
}

func checkTimings(t *testing.T, x *har.Exchange) {
	t.Helper()
	if x.Send < 0 || x.Wait < 0 || x.Receive < 0 {
		t.Errorf("timings send=%v wait=%v receive=%v, want all >= 0", x.Send, x.Wait, x.Receive)
	}
	if x.Started.IsZero() {
		t.Error("Started not set")
	}
}

func TestExplicitHTTP(t *testing.T) {
	t.Parallel()
	var up seen
	ts := httptest.NewServer(echo(&up))
	defer ts.Close()
	rg := newRig(t, Config{})
	addr := rg.explicit()

	c := proxyClient(addr, nil)
	c.Transport.(*http.Transport).Proxy = http.ProxyURL(&url.URL{Scheme: "http", Host: addr, User: url.UserPassword("agent", "s3cret")})
	req, _ := http.NewRequest(http.MethodPost, ts.URL+"/echo?q=1", strings.NewReader("hello"))
	req.Header.Set("Authorization", "Bearer sk-test")
	req.Header.Set("Connection", "X-Hop")
	req.Header.Set("X-Hop", "dropped")
	req.Header.Set("User-Agent", "agent/1.0")
	resp, body := do(t, c, req)
	if resp.StatusCode != 200 || string(body) != "POST /echo?q=1 hello" || resp.Header.Get("X-Upstream") != "yes" {
		t.Fatalf("through the proxy: %d %q %v", resp.StatusCode, body, resp.Header)
	}

	got := up.last(t)
	for _, h := range []string{"Proxy-Authorization", "X-Hop", "Proxy-Connection", "Connection"} {
		if v := got.header.Get(h); v != "" {
			t.Errorf("upstream received hop-by-hop header %s: %q", h, v)
		}
	}
	if got.header.Get("Authorization") != "Bearer sk-test" || got.header.Get("User-Agent") != "agent/1.0" {
		t.Errorf("upstream lost end-to-end headers: %v", got.header)
	}
	if got.host != strings.TrimPrefix(ts.URL, "http://") {
		t.Errorf("upstream Host %q, want %q", got.host, ts.URL)
	}

	x := rg.one()
	if x.Via != "proxy" || x.Seq != 0 || x.Error != "" {
		t.Errorf("record: via %q seq %d error %q", x.Via, x.Seq, x.Error)
	}
	if x.Request.Method != "POST" || x.Request.URL != ts.URL+"/echo?q=1" || string(x.Request.Body) != "hello" || x.Request.Proto != "HTTP/1.1" {
		t.Errorf("recorded request %s %s %q %s", x.Request.Method, x.Request.URL, x.Request.Body, x.Request.Proto)
	}
	if x.Request.Header.Get("Proxy-Authorization") == "" || x.Request.Header.Get("Authorization") == "" || x.Request.Header.Get("Host") == "" {
		t.Errorf("recorded request headers lack what the client sent: %v", x.Request.Header)
	}
	if x.ServerAddr != strings.TrimPrefix(ts.URL, "http://") {
		t.Errorf("ServerAddr %q", x.ServerAddr)
	}
	r := x.Response
	if r == nil || r.Status != 200 || r.StatusText != "OK" || string(r.Body) != "POST /echo?q=1 hello" || r.Streamed || r.Chunks != nil {
		t.Fatalf("recorded response %+v", r)
	}
	if r.Header.Get("X-Upstream") != "yes" {
		t.Errorf("recorded response headers %v", r.Header)
	}
	checkTimings(t, x)
}

// TestConnectMITM: HTTPS through CONNECT, the client trusting only the
// trust bundle (system roots + dal's CA), the upstream's certificate
// trusted only by the proxy.
func TestConnectMITM(t *testing.T) {
	t.Parallel()
	var up seen
	ts := httptest.NewUnstartedServer(echo(&up))
	ts.Config.ErrorLog = log.New(io.Discard, "", 0) // the direct attempt below fails on purpose
	ts.EnableHTTP2 = true                           // the proxy must still speak HTTP/1.1 upstream
	ts.StartTLS()
	defer ts.Close()
	upAddr := ts.Listener.Addr().String()
	_, port, _ := net.SplitHostPort(upAddr)
	upstreamRoots := x509.NewCertPool()
	upstreamRoots.AddCert(ts.Certificate())
	rg := newRig(t, Config{
		UpstreamRoots: upstreamRoots,
		Dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
			// example.com is the test server.
			if h, p, _ := net.SplitHostPort(addr); h == "example.com" {
				addr = net.JoinHostPort("127.0.0.1", p)
			}
			var d net.Dialer
			return d.DialContext(ctx, network, addr)
		},
	})
	addr := rg.explicit()

	bundle := filepath.Join(t.TempDir(), "bundle.pem")
	if err := rg.ca.WriteTrustBundle(bundle); err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(mustRead(t, bundle)) {
		t.Fatal("bundle holds no certificate")
	}
	direct := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}, Timeout: testTimeout}
	if _, err := direct.Get(ts.URL); err == nil {
		t.Fatal("the client trusts the upstream directly: the test proves nothing")
	}

	c := proxyClient(addr, roots)
	h2 := proxyClient(addr, roots)
	h2.Transport.(*http.Transport).ForceAttemptHTTP2 = true
	cases := []struct {
		name   string
		client *http.Client
		url    string
		sni    string
	}{
		{"ip", c, "https://127.0.0.1:" + port + "/ip?x=1", ""},
		{"name", c, "https://example.com:" + port + "/name", "example.com"},
		{"h2 offered", h2, "https://example.com:" + port + "/h2", "example.com"},
	}
	for _, tc := range cases {
		resp, body := get(t, tc.client, tc.url)
		u, _ := url.Parse(tc.url)
		if resp.StatusCode != 200 || string(body) != "GET "+u.RequestURI()+" " {
			t.Errorf("%s: %d %q", tc.name, resp.StatusCode, body)
		}
		if resp.Proto != "HTTP/1.1" {
			t.Errorf("%s: client spoke %s, want HTTP/1.1", tc.name, resp.Proto)
		}
		if iss := resp.TLS.PeerCertificates[0].Issuer.CommonName; iss != rg.ca.Certificate().Subject.CommonName {
			t.Errorf("%s: certificate issued by %q, want dal's CA", tc.name, iss)
		}
		if got := up.last(t); got.sni != tc.sni || got.host != u.Host || got.proto != "HTTP/1.1" {
			t.Errorf("%s: upstream saw SNI %q Host %q over %s, want %q %q over HTTP/1.1", tc.name, got.sni, got.host, got.proto, tc.sni, u.Host)
		}
	}

	recs := rg.records()
	if len(recs) != len(cases) {
		t.Fatalf("%d records, want %d", len(recs), len(cases))
	}
	for i, x := range recs {
		if x.Via != "connect" || x.Request.URL != cases[i].url || x.Response == nil || x.Response.Status != 200 || x.Seq != i {
			t.Errorf("record %d: via %q url %q seq %d resp %v", i, x.Via, x.Request.URL, x.Seq, x.Response)
		}
		if want := net.JoinHostPort(strings.Split(strings.TrimPrefix(cases[i].url, "https://"), ":")[0], port); x.ServerAddr != want {
			t.Errorf("record %d: ServerAddr %q, want %q", i, x.ServerAddr, want)
		}
		checkTimings(t, x)
	}
	if ev := rg.reports(); len(ev) != 0 {
		t.Errorf("unexpected reports: %v", ev)
	}
}

func TestTransparent(t *testing.T) {
	t.Parallel()
	var plainSeen, tlsSeen seen
	plain := httptest.NewServer(echo(&plainSeen))
	t.Cleanup(plain.Close)
	secure := httptest.NewTLSServer(echo(&tlsSeen))
	t.Cleanup(secure.Close)
	upstreamRoots := x509.NewCertPool()
	upstreamRoots.AddCert(secure.Certificate())
	plainDst := plain.Listener.Addr().String()
	tlsDst := secure.Listener.Addr().String()
	_, tlsPort, _ := net.SplitHostPort(tlsDst)
	_, plainPort, _ := net.SplitHostPort(plainDst)

	for _, tc := range []struct {
		name, dst, url, wantURL, wantSNI string
		up                               *seen
	}{
		{"http", plainDst, "http://localhost:" + plainPort + "/p?a=b", "http://" + plainDst + "/p?a=b", "", &plainSeen},
		{"https sni", tlsDst, "https://example.com:" + tlsPort + "/s", "https://example.com:" + tlsPort + "/s", "example.com", &tlsSeen},
		{"https no sni", tlsDst, "https://127.0.0.1:" + tlsPort + "/i", "https://127.0.0.1:" + tlsPort + "/i", "", &tlsSeen},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rg := newRig(t, Config{UpstreamRoots: upstreamRoots})
			c := directedClient(rg.transparent(tc.dst), caPool(rg.ca))
			resp, body := get(t, c, tc.url)
			u, _ := url.Parse(tc.url)
			if resp.StatusCode != 200 || string(body) != "GET "+u.RequestURI()+" " {
				t.Fatalf("%d %q", resp.StatusCode, body)
			}
			x := rg.one()
			if x.Via != "transparent" || x.Request.URL != tc.wantURL || x.ServerAddr != tc.dst || x.Error != "" {
				t.Errorf("record: via %q url %q server %q error %q, want url %q", x.Via, x.Request.URL, x.ServerAddr, x.Error, tc.wantURL)
			}
			checkTimings(t, x)
			var found bool
			tc.up.mu.Lock()
			for _, r := range tc.up.reqs {
				if r.uri == u.RequestURI() {
					found = true
					if r.sni != tc.wantSNI || r.host != u.Host {
						t.Errorf("upstream saw SNI %q Host %q, want %q %q", r.sni, r.host, tc.wantSNI, u.Host)
					}
				}
			}
			tc.up.mu.Unlock()
			if !found {
				t.Error("upstream never saw the request")
			}
		})
	}
}

// TestKeepAlive: many requests share one client connection and one
// upstream connection, plain and through a tunnel.
func TestKeepAlive(t *testing.T) {
	t.Parallel()
	var up seen
	// Upstream connections that carried a request (the proxy's spare,
	// spare.go, may be open beside them).
	var upConns atomic.Int32
	var active sync.Map
	plain := httptest.NewUnstartedServer(echo(&up))
	plain.Config.ConnState = func(c net.Conn, s http.ConnState) {
		if s != http.StateActive {
			return
		}
		if _, seen := active.LoadOrStore(c, true); !seen {
			upConns.Add(1)
		}
	}
	plain.Start()
	defer plain.Close()
	secure := httptest.NewUnstartedServer(echo(&up))
	secure.Config.ConnState = plain.Config.ConnState
	secure.StartTLS()
	defer secure.Close()
	upstreamRoots := x509.NewCertPool()
	upstreamRoots.AddCert(secure.Certificate())

	rg := newRig(t, Config{UpstreamRoots: upstreamRoots})
	addr := rg.explicit()
	var clientConns atomic.Int32
	c := proxyClient(addr, caPool(rg.ca))
	c.Transport.(*http.Transport).DialContext = func(ctx context.Context, network, a string) (net.Conn, error) {
		clientConns.Add(1)
		var d net.Dialer
		return d.DialContext(ctx, network, a)
	}
	const n = 5
	var urls []string
	for _, base := range []string{plain.URL, secure.URL} {
		for i := range n {
			u := fmt.Sprintf("%s/%d", base, i)
			urls = append(urls, u)
			if resp, body := get(t, c, u); resp.StatusCode != 200 || string(body) != fmt.Sprintf("GET /%d ", i) {
				t.Fatalf("%s: %d %q", u, resp.StatusCode, body)
			}
		}
	}
	// One connection to the proxy for plain requests, one for the tunnel;
	// one upstream connection each.
	if got := clientConns.Load(); got != 2 {
		t.Errorf("client opened %d connections to the proxy, want 2 (keep-alive)", got)
	}
	if got := upConns.Load(); got != 2 {
		t.Errorf("proxy used %d upstream connections, want 2 (keep-alive)", got)
	}
	recs := rg.records()
	if len(recs) != len(urls) {
		t.Fatalf("%d records, want %d", len(recs), len(urls))
	}
	for i, x := range recs {
		if x.Seq != i || x.Request.URL != urls[i] {
			t.Errorf("record %d: seq %d url %q, want %q", i, x.Seq, x.Request.URL, urls[i])
		}
	}
}

// TestGzipIdentical: content-encoded bodies reach the client and the
// record exactly as the upstream sent them.
func TestGzipIdentical(t *testing.T) {
	t.Parallel()
	var zipped bytes.Buffer
	zw := gzip.NewWriter(&zipped)
	for i := range 2000 {
		fmt.Fprintf(zw, "line %d of a compressible body\n", i)
	}
	zw.Close()
	payload := zipped.Bytes()
	var gotAE atomic.Value
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotAE.Store(r.Header.Get("Accept-Encoding"))
		w.Header().Set("Content-Encoding", "gzip")
		w.Header().Set("Content-Type", "text/plain")
		if r.URL.Path == "/chunked" {
			w.Write(payload[:len(payload)/2])
			w.(http.Flusher).Flush()
			w.Write(payload[len(payload)/2:])
			return
		}
		w.Header().Set("Content-Length", fmt.Sprint(len(payload)))
		w.Write(payload)
	}))
	defer ts.Close()
	rg := newRig(t, Config{})
	c := proxyClient(rg.explicit(), nil)
	c.Timeout = 5 * time.Minute // 200 MB under the race detector on two CPUs
	for _, path := range []string{"/sized", "/chunked"} {
		resp, body := get(t, c, ts.URL+path, "Accept-Encoding", "gzip, br")
		if !bytes.Equal(body, payload) || resp.Header.Get("Content-Encoding") != "gzip" {
			t.Errorf("%s: client got %d bytes (encoding %q), want the %d gzip bytes", path, len(body), resp.Header.Get("Content-Encoding"), len(payload))
		}
		if ae := gotAE.Load(); ae != "gzip, br" {
			t.Errorf("%s: upstream got Accept-Encoding %q, want the client's", path, ae)
		}
	}
	recs := rg.records()
	if len(recs) != 2 {
		t.Fatalf("%d records", len(recs))
	}
	for _, x := range recs {
		if !bytes.Equal(x.Response.Body, payload) {
			t.Errorf("%s: recorded %d bytes, want the %d gzip bytes", x.Request.URL, len(x.Response.Body), len(payload))
		}
	}
	if !recs[1].Response.Streamed || len(recs[1].Response.Chunks) == 0 {
		t.Error("chunked response not recorded as streamed")
	}
	// Replayed from network.har, the client gets the same bytes and
	// headers: Content-Encoding and Content-Length as the server sent them.
	ts.Close()
	for i, path := range []string{"/sized", "/chunked"} {
		rp, _ := replayRig(t, recs[i])
		resp, body := get(t, proxyClient(rp.explicit(), nil), ts.URL+path, "Accept-Encoding", "gzip, br")
		wantCL := fmt.Sprint(len(payload))
		if path == "/chunked" {
			wantCL = ""
		}
		if !bytes.Equal(body, payload) || resp.Header.Get("Content-Encoding") != "gzip" || resp.Header.Get("Content-Length") != wantCL {
			t.Errorf("replay %s: client got %d bytes (Content-Encoding %q, Content-Length %q), want the %d gzip bytes (gzip, %q)",
				path, len(body), resp.Header.Get("Content-Encoding"), resp.Header.Get("Content-Length"), len(payload), wantCL)
		}
	}
}

// TestHTTPSemantics drives the proxy with raw bytes: request framing,
// Expect: 100-continue, HEAD, 204 and 304, all on one kept-alive
// connection.
func TestHTTPSemantics(t *testing.T) {
	t.Parallel()
	var up seen
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		up.add(r, b)
		switch r.URL.Path {
		case "/204":
			w.WriteHeader(http.StatusNoContent)
		case "/304":
			w.WriteHeader(http.StatusNotModified)
		case "/head":
			w.Header().Set("Content-Length", "11")
			w.Header().Set("Content-Type", "text/plain")
			if r.Method != http.MethodHead {
				io.WriteString(w, "hello world")
			}
		default:
			w.Header().Set("Content-Type", "text/plain")
			w.Write(b)
		}
	}))
	defer ts.Close()
	host := strings.TrimPrefix(ts.URL, "http://")
	rg := newRig(t, Config{})
	conn := dial(t, rg.explicit())
	br := bufio.NewReader(conn)
	send := func(s string) {
		t.Helper()
		if _, err := io.WriteString(conn, s); err != nil {
			t.Fatal(err)
		}
	}
	read := func(method string) (*http.Response, []byte) {
		t.Helper()
		resp, err := http.ReadResponse(br, &http.Request{Method: method})
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp, b
	}

	send("POST " + ts.URL + "/chunked HTTP/1.1\r\nHost: " + host + "\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n")
	if _, b := read("POST"); string(b) != "hello world" {
		t.Errorf("chunked upload echoed %q", b)
	}

	send("PUT " + ts.URL + "/expect HTTP/1.1\r\nHost: " + host + "\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n")
	if line, err := br.ReadString('\n'); err != nil || !strings.HasPrefix(line, "HTTP/1.1 100") {
		t.Fatalf("after Expect: 100-continue got %q, %v", line, err)
	}
	if _, err := br.ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	send("12345")
	if _, b := read("PUT"); string(b) != "12345" {
		t.Errorf("Expect: 100-continue upload echoed %q", b)
	}

	send("HEAD " + ts.URL + "/head HTTP/1.1\r\nHost: " + host + "\r\n\r\n")
	if resp, b := read("HEAD"); resp.ContentLength != 11 || len(b) != 0 {
		t.Errorf("HEAD: length %d, %d body bytes", resp.ContentLength, len(b))
	}
	for _, code := range []string{"204", "304"} {
		send("GET " + ts.URL + "/" + code + " HTTP/1.1\r\nHost: " + host + "\r\n\r\n")
		if resp, b := read("GET"); fmt.Sprint(resp.StatusCode) != code || len(b) != 0 {
			t.Errorf("%s: got %d with %d body bytes", code, resp.StatusCode, len(b))
		}
	}
	send("GET " + ts.URL + "/last HTTP/1.1\r\nHost: " + host + "\r\nConnection: close\r\n\r\n")
	if resp, _ := read("GET"); resp.StatusCode != 200 {
		t.Errorf("last request on the connection: %d", resp.StatusCode)
	}

	recs := rg.records()
	wantBodies := []string{"hello world", "12345", "", "", "", ""}
	if len(recs) != len(wantBodies) {
		t.Fatalf("%d records, want %d", len(recs), len(wantBodies))
	}
	for i, x := range recs {
		if string(x.Request.Body) != wantBodies[i] || x.Error != "" {
			t.Errorf("record %d (%s %s): body %q error %q", i, x.Request.Method, x.Request.URL, x.Request.Body, x.Error)
		}
	}
	if te := recs[0].Request.Header.Get("Transfer-Encoding"); te != "chunked" {
		t.Errorf("recorded chunked request lost its Transfer-Encoding (%q)", te)
	}
	if recs[1].Request.Header.Get("Expect") != "100-continue" {
		t.Error("recorded request lost its Expect header")
	}
	up.mu.Lock()
	defer up.mu.Unlock()
	for _, r := range up.reqs {
		if r.header.Get("Expect") != "" {
			t.Errorf("Expect forwarded upstream for %s", r.uri)
		}
	}
}

func TestUpstreamUnreachable(t *testing.T) {
	t.Parallel()
	l := listen(t)
	dead := l.Addr().String()
	l.Close()
	rg := newRig(t, Config{})
	resp, body := get(t, proxyClient(rg.explicit(), nil), "http://"+dead+"/v1/models")
	var e struct {
		Error struct{ Message, Type string }
	}
	if err := json.Unmarshal(body, &e); err != nil || resp.StatusCode != 502 || e.Error.Type != "dal_upstream_error" ||
		!strings.HasPrefix(e.Error.Message, "dal record: ") || resp.Header.Get("X-Dal-Record") != "error" {
		t.Errorf("unreachable upstream: %d %s %v", resp.StatusCode, body, resp.Header)
	}
	x := rg.one()
	if x.Response != nil || !strings.Contains(x.Error, "connection refused") {
		t.Errorf("record: response %v error %q, want a failed exchange", x.Response, x.Error)
	}
	checkTimings(t, x)
}

// TestRecordOrder: Record sees exchanges in the order their requests
// arrived, not the order they finished.
func TestRecordOrder(t *testing.T) {
	t.Parallel()
	slowArrived := make(chan struct{})
	release := make(chan struct{})
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			close(slowArrived)
			<-release
		}
		io.WriteString(w, r.URL.Path)
	}))
	defer ts.Close()
	rg := newRig(t, Config{})
	c := proxyClient(rg.explicit(), nil)
	slowDone := make(chan []byte)
	go func() {
		resp, err := c.Get(ts.URL + "/slow")
		if err != nil {
			slowDone <- nil
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		slowDone <- b
	}()
	<-slowArrived
	if _, b := get(t, c, ts.URL+"/fast"); string(b) != "/fast" {
		t.Fatalf("fast: %q", b)
	}
	rg.mu.Lock()
	early := len(rg.recs)
	rg.mu.Unlock()
	if early != 0 {
		t.Errorf("Record called %d times before the first exchange finished", early)
	}
	close(release)
	if b := <-slowDone; string(b) != "/slow" {
		t.Fatalf("slow: %q", b)
	}
	recs := rg.records()
	if len(recs) != 2 || recs[0].Request.URL != ts.URL+"/slow" || recs[0].Seq != 0 || recs[1].Seq != 1 {
		t.Fatalf("records out of order: %v", recs)
	}
}

// TestLargeBody relays 100 MB (sized and chunked) intact to the client
// and into the record.
func TestLargeBody(t *testing.T) {
	t.Parallel()
	const size = 100 << 20
	want := streamHash(size)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/sized" {
			w.Header().Set("Content-Length", fmt.Sprint(size))
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		io.CopyN(w, rand.NewChaCha8([32]byte{}), size)
	}))
	defer ts.Close()
	rg := newRig(t, Config{})
	c := proxyClient(rg.explicit(), nil)
	c.Timeout = 5 * time.Minute // 200 MB under the race detector on two CPUs
	for _, path := range []string{"/sized", "/chunked"} {
		resp, err := c.Get(ts.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		h := sha256.New()
		n, err := io.Copy(h, resp.Body)
		resp.Body.Close()
		if err != nil || n != size || !bytes.Equal(h.Sum(nil), want) {
			t.Errorf("%s: client got %d bytes (%v), hash match %v", path, n, err, bytes.Equal(h.Sum(nil), want))
		}
	}
	for _, x := range rg.records() {
		sum := sha256.Sum256(x.Response.Body)
		if !bytes.Equal(sum[:], want) {
			t.Errorf("%s: recorded body (%d bytes) differs", x.Request.URL, len(x.Response.Body))
		}
		if x.Response.Streamed {
			var n int
			for _, c := range x.Response.Chunks {
				n += len(c.Data)
			}
			if n != size {
				t.Errorf("%s: chunks hold %d bytes, want %d", x.Request.URL, n, size)
			}
		}
	}
}

// streamHash is the SHA-256 of the first n bytes of the zero-seeded
// ChaCha8 stream.
func streamHash(n int64) []byte {
	h := sha256.New()
	io.CopyN(h, rand.NewChaCha8([32]byte{}), n)
	return h.Sum(nil)
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestShutdownWaits: Shutdown returns only after the exchange in flight
// has finished and been recorded.
func TestShutdownWaits(t *testing.T) {
	t.Parallel()
	arrived := make(chan struct{})
	release := make(chan struct{})
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(arrived)
		<-release
		io.WriteString(w, "late")
	}))
	defer ts.Close()
	rg := newRig(t, Config{})
	c := proxyClient(rg.explicit(), nil)
	done := make(chan string, 1)
	go func() {
		resp, err := c.Get(ts.URL)
		if err != nil {
			done <- err.Error()
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		done <- string(b)
	}()
	<-arrived
	shut := make(chan error, 1)
	go func() { shut <- rg.p.Shutdown(context.Background()) }()
	select {
	case err := <-shut:
		t.Fatalf("Shutdown returned (%v) with an exchange in flight", err)
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	if err := <-shut; err != nil {
		t.Fatal(err)
	}
	if got := <-done; got != "late" {
		t.Errorf("client got %q", got)
	}
	rg.mu.Lock()
	n := len(rg.recs)
	rg.mu.Unlock()
	if n != 1 {
		t.Errorf("%d records after Shutdown, want 1", n)
	}
}
