package netcap

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

func TestSameAuthority(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		host, target, scheme string
		want                 bool
	}{
		{"api.example.com", "api.example.com:443", "https", true},
		{"api.example.com:443", "api.example.com:443", "https", true},
		{"API.Example.COM", "api.example.com:443", "https", true},
		{"api.example.com.", "api.example.com:443", "https", true},
		{"api.example.com", "api.example.com.:443", "https", true},
		{"api.example.com", "api.example.com:80", "http", true},
		{"api.example.com", "api.example.com:8443", "https", false}, // a non-default port must be named
		{"api.example.com:8443", "api.example.com:8443", "https", true},
		{"api.example.com:444", "api.example.com:443", "https", false},
		{"api.example.com", "api.example.com:443", "http", false}, // plain HTTP's default is 80
		{"api.openai.com", "host-x.example:443", "https", false},
		{"api.openai.com:443", "host-x.example:443", "https", false},
		{"bücher.example", "xn--bcher-kva.example:443", "https", true},
		{"xn--bcher-kva.example", "BÜCHER.example:443", "https", true},
		{"[::1]:8080", "[::1]:8080", "http", true},
		{"[::1]", "[::1]:443", "https", true},
		{"[0:0::1]", "[::1]:443", "https", true},
		{"[::ffff:127.0.0.1]", "127.0.0.1:443", "https", true},
		{"127.0.0.1", "127.0.0.2:443", "https", false},
		{"api.example.com:", "api.example.com:443", "https", false},
		{"", "api.example.com:443", "https", false},
		{".", "api.example.com:443", "https", false},
		{"api.example.com", "not-a-target", "https", false},
	} {
		if got := sameAuthority(tc.host, tc.target, tc.scheme); got != tc.want {
			t.Errorf("sameAuthority(%q, %q, %q) = %v, want %v", tc.host, tc.target, tc.scheme, got, tc.want)
		}
	}
}

// TestConnectMisdirected smuggles a request for one server into a tunnel
// to another (issue 38): the proxy answers 421 and forwards nothing, the
// exchange is recorded refused with the URL of the tunnel's server, and
// a request whose Host matches the tunnel still goes through.
func TestConnectMisdirected(t *testing.T) {
	t.Parallel()
	var up seen
	ts := httptest.NewTLSServer(echo(&up))
	t.Cleanup(ts.Close)
	plain := httptest.NewServer(echo(&up))
	t.Cleanup(plain.Close)
	_, port, _ := net.SplitHostPort(ts.Listener.Addr().String())
	_, plainPort, _ := net.SplitHostPort(plain.Listener.Addr().String())
	roots := x509.NewCertPool()
	roots.AddCert(ts.Certificate())
	var (
		dmu     sync.Mutex
		dialled []string
	)
	rg := newRig(t, Config{
		UpstreamRoots: roots,
		Dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
			dmu.Lock()
			dialled = append(dialled, addr)
			dmu.Unlock()
			h, p, _ := net.SplitHostPort(addr)
			if h != "example.com" {
				return nil, fmt.Errorf("the test dials only example.com, not %s", addr)
			}
			var d net.Dialer
			return d.DialContext(ctx, network, net.JoinHostPort("127.0.0.1", p))
		},
	})
	addr := rg.explicit()

	// tunnel opens CONNECT target and sends one request with Host host,
	// over TLS (SNI the target's host) when secure.
	tunnel := func(target, host string, secure bool) (int, http.Header, string) {
		t.Helper()
		c := dial(t, addr)
		fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
		br := bufio.NewReader(c)
		if code, _ := readHead(t, br); code != 200 {
			t.Fatalf("CONNECT %s: %d", target, code)
		}
		var rw io.ReadWriter = struct {
			io.Reader
			io.Writer
		}{br, c}
		if secure {
			th, _, _ := net.SplitHostPort(target)
			tc := tls.Client(c, &tls.Config{ServerName: th, RootCAs: caPool(rg.ca)})
			if err := tc.Handshake(); err != nil {
				t.Fatal(err)
			}
			rw, br = tc, bufio.NewReader(tc)
		}
		fmt.Fprintf(rw, "GET /smuggled HTTP/1.1\r\nHost: %s\r\n\r\n", host)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header, string(body)
	}

	before := up.count()
	code, h, body := tunnel("example.com:"+port, "api.openai.com", true)
	if code != http.StatusMisdirectedRequest || h.Get("X-Dal-Proxy") != "misdirected" || !strings.Contains(body, "api.openai.com") {
		t.Errorf("https smuggle: %d %v %s, want 421 naming api.openai.com", code, h, body)
	}
	code, _, _ = tunnel("example.com:"+plainPort, "api.openai.com:"+plainPort, false)
	if code != http.StatusMisdirectedRequest {
		t.Errorf("http smuggle: %d, want 421", code)
	}
	if n := up.count(); n != before {
		t.Errorf("the upstream saw %d smuggled requests, want none", n-before)
	}
	dmu.Lock()
	nd := len(dialled)
	dmu.Unlock()
	if nd != 0 {
		t.Errorf("the proxy dialled %d times for misdirected requests", nd)
	}
	// Matching Host headers, in the other spellings a client may use.
	for _, host := range []string{"example.com:" + port, "EXAMPLE.com.:" + port} {
		if code, _, body := tunnel("example.com:"+port, host, true); code != 200 || body != "GET /smuggled " {
			t.Errorf("Host %s: %d %q, want 200", host, code, body)
		}
	}
	rg.shutdown()
	recs := rg.records()
	if len(recs) != 4 {
		t.Fatalf("%d records, want 4", len(recs))
	}
	for i, x := range recs[:2] {
		p := []string{port, plainPort}[i]
		scheme := []string{"https", "http"}[i]
		if x.Response == nil || x.Response.Status != 421 || x.Refused == "" || x.ServerAddr != "" || x.RemoteAddr != "" ||
			x.Request.URL != scheme+"://example.com:"+p+"/smuggled" || x.Dest != "example.com:"+p {
			t.Errorf("record %d: status %v refused %q server %q url %q dest %q", i, x.Response, x.Refused, x.ServerAddr, x.Request.URL, x.Dest)
		}
	}
	for _, x := range recs[2:] {
		if x.Response == nil || x.Response.Status != 200 || x.Dest != "example.com:"+port || x.RemoteAddr != "127.0.0.1:"+port ||
			x.Request.URL != "https://example.com:"+port+"/smuggled" {
			t.Errorf("record: %v dest %q remote %q url %q", x.Response, x.Dest, x.RemoteAddr, x.Request.URL)
		}
	}
	var misdirected int
	for _, e := range rg.reports() {
		if e.Kind == KindMisdirected && strings.Contains(e.Msg, "421") {
			misdirected++
		}
	}
	if misdirected != 2 {
		t.Errorf("%d misdirected reports, want 2: %v", misdirected, rg.reports())
	}
}

// TestTransparentMisdirected: TLS intercepted on a transparent
// connection with a server name; a request naming another host gets 421.
func TestTransparentMisdirected(t *testing.T) {
	t.Parallel()
	var up seen
	ts := httptest.NewTLSServer(echo(&up))
	t.Cleanup(ts.Close)
	roots := x509.NewCertPool()
	roots.AddCert(ts.Certificate())
	dst := ts.Listener.Addr().String()
	_, port, _ := net.SplitHostPort(dst)
	rg := newRig(t, Config{UpstreamRoots: roots})
	c := directedClient(rg.transparent(dst), caPool(rg.ca))
	req, _ := http.NewRequest(http.MethodGet, "https://example.com:"+port+"/t", nil)
	req.Host = "api.openai.com:" + port
	resp, _ := do(t, c, req)
	if resp.StatusCode != http.StatusMisdirectedRequest {
		t.Errorf("status %d, want 421", resp.StatusCode)
	}
	if n := up.count(); n != 0 {
		t.Errorf("the upstream saw %d requests, want none", n)
	}
	x := rg.one()
	if x.Dest != dst || x.Refused != "api.openai.com:"+port {
		t.Errorf("dest %q refused %q", x.Dest, x.Refused)
	}
}

func (s *seen) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.reqs)
}

// TestMisdirectedReplay: replay answers a misdirected request from the
// recording, taking its entry in order, so that an honest request to
// the same URL after it gets its own recorded answer, not the 421.
func TestMisdirectedReplay(t *testing.T) {
	t.Parallel()
	var up seen
	ts := httptest.NewServer(echo(&up))
	t.Cleanup(ts.Close)
	target := ts.Listener.Addr().String()
	send := func(addr string) []int {
		c := dial(t, addr)
		fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
		br := bufio.NewReader(c)
		if code, _ := readHead(t, br); code != 200 {
			t.Fatalf("CONNECT: %d", code)
		}
		var codes []int
		for _, host := range []string{"api.openai.com", target} {
			fmt.Fprintf(c, "GET /same HTTP/1.1\r\nHost: %s\r\n\r\n", host)
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			codes = append(codes, resp.StatusCode)
		}
		return codes
	}
	rec := newRig(t, Config{})
	if got := send(rec.explicit()); fmt.Sprint(got) != "[421 200]" {
		t.Fatalf("record: %v, want [421 200]", got)
	}
	rec.shutdown()
	rep := newRig(t, Config{Source: newRecordedSource(rec.records())})
	if got := send(rep.explicit()); fmt.Sprint(got) != "[421 200]" {
		t.Errorf("replay: %v, want [421 200]", got)
	}
	rep.shutdown()
	xs := rep.records()
	if len(xs) != 2 || xs[0].Refused != "api.openai.com" || xs[1].Refused != "" {
		t.Errorf("replay records: %+v", xs)
	}
	var n int
	for _, e := range rep.reports() {
		if e.Kind == KindMisdirected {
			n++
		}
	}
	if n != 1 {
		t.Errorf("replay reported %d misdirected requests, want 1", n)
	}
}
