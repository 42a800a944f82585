package netcap

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dal-runtime/dal/internal/golden"
)

// TestReports: what the proxy does not capture, it reports once, in one
// sentence, and closes or answers without hanging. The messages are
// golden (testdata/reports.golden), addresses replaced by <proxy> and
// <dst>.
func TestReports(t *testing.T) {
	t.Parallel()
	type env struct {
		t      *testing.T
		rg     *rig
		proxy  string // explicit listener
		mirror string // transparent listener for dst
		dst    string
	}
	handshake := func(c net.Conn, cfg *tls.Config) error {
		tc := tls.Client(c, cfg)
		tc.SetDeadline(time.Now().Add(testTimeout))
		return tc.Handshake()
	}
	trusted := func(e *env, name string, protos ...string) *tls.Config {
		return &tls.Config{ServerName: name, RootCAs: caPool(e.rg.ca), NextProtos: protos}
	}
	untrusted := &tls.Config{ServerName: "api.example.com", RootCAs: x509.NewCertPool()}
	connectTo := func(e *env, target string) net.Conn {
		c := dial(e.t, e.proxy)
		fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
		br := bufio.NewReader(c)
		if code, _ := readHead(e.t, br); code != 200 {
			e.t.Fatalf("CONNECT answered %d", code)
		}
		if br.Buffered() > 0 {
			e.t.Fatal("bytes after the CONNECT response")
		}
		return c
	}
	rawExchange := func(e *env, addr, req string) int {
		c := dial(e.t, addr)
		io.WriteString(c, req)
		code, h := readHead(e.t, bufio.NewReader(c))
		if h.Get("X-Dal-Proxy") != "refused" {
			e.t.Errorf("refusal lacks X-Dal-Proxy: %v", h)
		}
		return code
	}

	cases := []struct {
		name  string
		kind  string
		sniff time.Duration
		run   func(e *env)
	}{
		{"http2 prior knowledge", KindHTTP2, 0, func(e *env) {
			c := dial(e.t, e.mirror)
			io.WriteString(c, "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
			waitClosed(e.t, c)
		}},
		{"raw tcp to a mirror", KindNotHTTP, 0, func(e *env) {
			c := dial(e.t, e.mirror)
			io.WriteString(c, "*1\r\n$4\r\nPING\r\n")
			waitClosed(e.t, c)
		}},
		{"raw tcp to the proxy", KindNotHTTP, 0, func(e *env) {
			c := dial(e.t, e.proxy)
			io.WriteString(c, "\x00\x01binary")
			waitClosed(e.t, c)
		}},
		{"raw tcp in a tunnel", KindNotHTTP, 0, func(e *env) {
			c := connectTo(e, e.dst)
			io.WriteString(c, "SSH-2.0-OpenSSH_9.6\r\n")
			waitClosed(e.t, c)
		}},
		{"certificate refused on a mirror", KindTLSRefused, 0, func(e *env) {
			c := dial(e.t, e.mirror)
			if err := handshake(c, untrusted); err == nil {
				e.t.Error("the client accepted an untrusted certificate")
			}
		}},
		{"certificate refused in a tunnel", KindTLSRefused, 0, func(e *env) {
			c := connectTo(e, "api.example.com:443")
			if err := handshake(c, untrusted); err == nil {
				e.t.Error("the client accepted an untrusted certificate")
			}
		}},
		{"client hangs up in its ClientHello", KindTLS, 0, func(e *env) {
			c := dial(e.t, e.mirror)
			c.Write([]byte{0x16, 0x03, 0x01, 0x00, 0xff, 0x01}) // a record header and one byte of 255
			c.(*net.TCPConn).CloseWrite()
			waitClosed(e.t, c)
		}},
		{"client hangs up in the handshake", KindTLS, 0, func(e *env) {
			c := dial(e.t, e.mirror)
			// A ClientHello, then the client goes away.
			tc := tls.Client(&closeAfterWrite{Conn: c}, untrusted)
			tc.Handshake()
			waitClosed(e.t, c)
		}},
		{"ALPN h2 only", KindHTTP2, 0, func(e *env) {
			c := dial(e.t, e.mirror)
			if err := handshake(c, trusted(e, "api.example.com", "h2")); err == nil {
				e.t.Error("the handshake succeeded with h2 only")
			}
		}},
		{"HTTP/2 inside TLS without ALPN", KindHTTP2, 0, func(e *env) {
			c := dial(e.t, e.mirror)
			tc := tls.Client(c, trusted(e, "api.example.com"))
			io.WriteString(tc, "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
			waitClosed(e.t, tc)
		}},
		{"TLS carrying no HTTP", KindNotHTTP, 0, func(e *env) {
			c := dial(e.t, e.mirror)
			tc := tls.Client(c, trusted(e, "db.internal"))
			io.WriteString(tc, "\x00\x00\x00\x08\x04\xd2\x16\x2f") // a Postgres SSL request
			waitClosed(e.t, tc)
		}},
		{"TLS to the proxy itself", KindNotProxied, 0, func(e *env) {
			c := dial(e.t, e.proxy)
			handshake(c, untrusted)
			waitClosed(e.t, c)
		}},
		{"WebSocket", KindWebSocket, 0, func(e *env) {
			code := rawExchange(e, e.proxy, "GET http://"+e.dst+"/ws HTTP/1.1\r\nHost: "+e.dst+"\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"+
				"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n")
			if code != 501 {
				e.t.Errorf("WebSocket upgrade answered %d, want 501", code)
			}
		}},
		{"origin-form to the proxy", KindNotProxied, 0, func(e *env) {
			if code := rawExchange(e, e.proxy, "GET /v1/models HTTP/1.1\r\nHost: "+e.proxy+"\r\n\r\n"); code != 400 {
				e.t.Errorf("origin-form request answered %d, want 400", code)
			}
		}},
		{"CONNECT in a tunnel", KindNotProxied, 0, func(e *env) {
			c := connectTo(e, e.dst)
			io.WriteString(c, "CONNECT "+e.dst+" HTTP/1.1\r\nHost: "+e.dst+"\r\n\r\n")
			if code, _ := readHead(e.t, bufio.NewReader(c)); code != 405 {
				e.t.Errorf("nested CONNECT answered %d, want 405", code)
			}
		}},
		{"silent client", KindSilent, 100 * time.Millisecond, func(e *env) {
			waitClosed(e.t, dial(e.t, e.mirror))
		}},
		{"connect and leave", KindEmpty, 0, func(e *env) {
			dial(e.t, e.mirror).Close()
		}},
	}

	var mu sync.Mutex
	got := make(map[string]string)
	t.Run("cases", func(t *testing.T) {
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				tw := newTripwire(t)
				rg := newRig(t, Config{SniffTimeout: tc.sniff})
				e := &env{t: t, rg: rg, proxy: rg.explicit(), dst: tw.addr()}
				e.mirror = rg.transparent(e.dst)
				tc.run(e)
				first := rg.firstEvent()
				ev := rg.reports()
				if len(ev) != 1 {
					t.Fatalf("%d reports, want 1: %v", len(ev), ev)
				}
				if first.Kind != tc.kind {
					t.Errorf("kind %q, want %q (%s)", first.Kind, tc.kind, first.Msg)
				}
				if first.Addr != e.dst && first.Addr != e.proxy && first.Addr != "api.example.com:443" {
					t.Errorf("event address %q", first.Addr)
				}
				if n := tw.accepted.Load(); n != 0 {
					t.Errorf("the proxy connected to the destination %d times", n)
				}
				if recs := rg.records(); len(recs) != 0 {
					t.Errorf("%d records for a connection that was not captured", len(recs))
				}
				msg := strings.NewReplacer(e.proxy, "<proxy>", e.dst, "<dst>").Replace(first.Msg)
				if strings.Contains(msg, ". ") || strings.Contains(msg, "\n") || strings.HasSuffix(msg, ".") {
					t.Errorf("message is not one sentence: %q", msg)
				}
				mu.Lock()
				got[tc.name] = first.Kind + "\t" + msg
				mu.Unlock()
			})
		}
	})
	var b strings.Builder
	for _, tc := range cases {
		fmt.Fprintf(&b, "%s\t%s\n", tc.name, got[tc.name])
	}
	golden.Check(t, filepath.Join("testdata", "reports.golden"), []byte(b.String()))
}

// closeAfterWrite closes the connection after the first write: a client
// that sends its ClientHello and leaves.
type closeAfterWrite struct{ net.Conn }

func (c *closeAfterWrite) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.Conn.Close()
	return n, err
}
