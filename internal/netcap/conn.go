package netcap

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"
)

// How a request reached the proxy (har.Exchange.Via).
const (
	viaProxy       = "proxy"
	viaConnect     = "connect"
	viaTransparent = "transparent"
)

// connInfo is what the proxy knows about a client connection before its
// first request: how it arrived and where it was going.
type connInfo struct {
	via    string
	scheme string // "http" or "https"; empty for viaProxy (the URL says)
	// target is the upstream "host:port": the CONNECT authority or the
	// transparent destination; empty for viaProxy.
	target string
	// urlHost is the host[:port] of recorded URLs for a transparent
	// connection; empty means the request's Host (CONNECT tunnels).
	urlHost string
	// upstreamHost is the host:port of upstream URLs (TLS server name
	// included) for tunnels and transparent connections.
	upstreamHost string
	// checkHost: a request's Host header must name upstreamHost (a
	// CONNECT tunnel, TLS with a server name on a transparent
	// connection), else it is misdirected (dest.go).
	checkHost bool
	// addr names the connection in reports.
	addr string
	// transport forwards requests when recording; nil when replaying.
	transport *upstream
	// client is the connection as accepted (nil in tests that hand the
	// server their own).
	client *clientConn
}

type connInfoKey struct{}

// sniffedConn is a client connection whose first bytes were read ahead:
// reads drain the read-ahead buffer, then the connection.
type sniffedConn struct {
	net.Conn
	r    *bufio.Reader
	info *connInfo
}

func (c *sniffedConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// connQueue is the listener the HTTP server accepts sniffed connections
// from.
type connQueue struct {
	ch   chan net.Conn
	done chan struct{}
	once sync.Once
}

func newConnQueue() *connQueue {
	return &connQueue{ch: make(chan net.Conn), done: make(chan struct{})}
}

func (q *connQueue) Accept() (net.Conn, error) {
	select {
	case c := <-q.ch:
		return c, nil
	case <-q.done:
		return nil, net.ErrClosed
	}
}

func (q *connQueue) Close() error {
	q.once.Do(func() { close(q.done) })
	return nil
}

func (q *connQueue) Addr() net.Addr { return queueAddr{} }

type queueAddr struct{}

func (queueAddr) Network() string { return "netcap" }
func (queueAddr) String() string  { return "netcap" }

// handOver passes sc to the HTTP server; raw is sc's underlying
// connection as registered with p.pending.
func (p *Proxy) handOver(raw net.Conn, sc *sniffedConn) {
	p.pending.remove(raw)
	select {
	case p.queue.ch <- sc:
	case <-p.queue.done:
		sc.Close()
	}
}

// drop closes a connection that will not be handed over.
func (p *Proxy) drop(raw net.Conn) {
	raw.Close()
	p.pending.remove(raw)
}

// What a connection's first bytes show.
type proto int

const (
	protoHTTP1 proto = iota
	protoTLS
	protoHTTP2
	protoOther
	protoSilent // nothing within the sniff timeout
	protoEmpty  // closed without a byte
)

// methods are the request methods recognised when sniffing; a
// connection starting with anything else is not taken for HTTP/1.
var methods = []string{
	"GET ", "POST ", "PUT ", "HEAD ", "DELETE ", "OPTIONS ", "PATCH ", "TRACE ", "CONNECT ",
	"QUERY ", "PROPFIND ", "PROPPATCH ", "MKCOL ", "COPY ", "MOVE ", "LOCK ", "UNLOCK ", "REPORT ", "SEARCH ",
}

const h2Preface = "PRI * HTTP/2.0"

// sniff reads ahead (through br, reading c) just enough of a new
// connection to tell what it speaks, waiting at most timeout.
func sniff(c net.Conn, br *bufio.Reader, timeout time.Duration) proto {
	c.SetReadDeadline(time.Now().Add(timeout))
	defer c.SetReadDeadline(time.Time{})
	for n := 1; ; n++ {
		b, err := br.Peek(n)
		if len(b) < n {
			switch {
			case len(b) > 0:
				return protoOther
			case isTimeout(err):
				return protoSilent
			default:
				return protoEmpty
			}
		}
		if b[0] == 0x16 { // TLS handshake record
			return protoTLS
		}
		s := string(b)
		prefix := false
		for _, m := range methods {
			if strings.HasPrefix(m, s) {
				if len(s) == len(m) {
					return protoHTTP1
				}
				prefix = true
			}
		}
		if strings.HasPrefix(h2Preface, s) {
			if len(s) == len(h2Preface) {
				return protoHTTP2
			}
			prefix = true
		}
		if !prefix {
			return protoOther
		}
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, os.ErrDeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())
}

// handleProxyConn sniffs a connection to the explicit proxy.
func (p *Proxy) handleProxyConn(c net.Conn) {
	addr := c.LocalAddr().String()
	br := bufio.NewReader(c)
	switch k := sniff(c, br, p.sniffTimeout); k {
	case protoHTTP1:
		p.handOver(c, &sniffedConn{Conn: c, r: br, info: &connInfo{via: viaProxy, addr: addr, transport: p.transport, client: clientOf(c)}})
		return
	case protoTLS:
		p.reportConn(KindNotProxied, addr, fmt.Sprintf("a client spoke TLS to the proxy at %s itself (an https:// proxy URL?); dal's proxy speaks plain HTTP, so set HTTPS_PROXY=http://%s: not captured, closed", addr, addr))
	case protoEmpty:
		// A client that connects and leaves (a pool warming up, a port
		// check) has nothing to capture.
	default:
		p.reportSniff(k, addr, "the proxy at "+addr)
	}
	p.drop(c)
}

// handleTransparentConn sniffs a connection a client opened to dst.
func (p *Proxy) handleTransparentConn(c net.Conn, dst string, t *upstream) {
	br := bufio.NewReader(c)
	k := sniff(c, br, p.sniffTimeout)
	switch k {
	case protoHTTP1:
		p.handOver(c, &sniffedConn{Conn: c, r: br, info: &connInfo{
			via: viaTransparent, scheme: "http", target: dst, urlHost: dst, upstreamHost: dst, addr: dst, transport: t,
			client: clientOf(c),
		}})
		return
	case protoTLS:
		host, port, _ := net.SplitHostPort(dst)
		sc, sni, ok := p.intercept(c, br, host, dst)
		if !ok {
			return
		}
		name := host
		if sni != "" {
			name = sni
		}
		sc.info = &connInfo{
			via: viaTransparent, scheme: "https", target: dst, checkHost: sni != "",
			urlHost: hostPortURL(name, port, "443"), upstreamHost: net.JoinHostPort(name, port),
			addr: dst, transport: t, client: clientOf(c),
		}
		p.handOver(c, sc)
		return
	case protoEmpty:
		p.reportConn(KindEmpty, dst, fmt.Sprintf("a client connected to %s and closed the connection without sending anything: nothing to capture", dst))
	default:
		p.reportSniff(k, dst, dst)
	}
	p.drop(c)
}

// tunnel serves a CONNECT to target on the hijacked connection raw, whose
// first bytes (already read by the HTTP server) are pre.
// written is called once the answer to the CONNECT is written.
func (p *Proxy) tunnel(raw net.Conn, pre []byte, target string, t *upstream, written func()) {
	_, err := io.WriteString(raw, "HTTP/1.1 200 Connection established\r\n\r\n")
	written()
	if err != nil {
		p.drop(raw)
		return
	}
	var rd io.Reader = raw
	if len(pre) > 0 {
		rd = io.MultiReader(strings.NewReader(string(pre)), raw)
	}
	br := bufio.NewReader(rd)
	host, _, _ := net.SplitHostPort(target)
	switch k := sniff(raw, br, p.sniffTimeout); k {
	case protoHTTP1:
		p.handOver(raw, &sniffedConn{Conn: raw, r: br, info: &connInfo{
			via: viaConnect, scheme: "http", target: target, upstreamHost: target, checkHost: true, addr: target, transport: t,
			client: clientOf(raw),
		}})
		return
	case protoTLS:
		sc, _, ok := p.intercept(raw, br, host, target)
		if !ok {
			return
		}
		sc.info = &connInfo{via: viaConnect, scheme: "https", target: target, upstreamHost: target, checkHost: true, addr: target, transport: t, client: clientOf(raw)}
		p.handOver(raw, sc)
		return
	case protoEmpty:
	default:
		p.reportSniff(k, target, target)
	}
	p.drop(raw)
}

// intercept terminates the client's TLS on raw (read through br) with a
// certificate for its SNI name, or for fallback when it sends none, then
// sniffs the decrypted stream. On success it returns the decrypted
// connection and the SNI name; otherwise it has reported, closed raw and
// returns false.
func (p *Proxy) intercept(raw net.Conn, br *bufio.Reader, fallback, addr string) (*sniffedConn, string, bool) {
	var mu sync.Mutex
	name, sni := fallback, ""
	cfg := &tls.Config{
		MinVersion: tls.VersionTLS12,
		// http/1.1 only: clients that would prefer h2 fall back.
		NextProtos: []string{"http/1.1"},
	}
	// Called first thing after the ClientHello, before ALPN is settled:
	// failures after it can name the host.
	cfg.GetConfigForClient = func(h *tls.ClientHelloInfo) (*tls.Config, error) {
		mu.Lock()
		if h.ServerName != "" {
			name, sni = h.ServerName, h.ServerName
		}
		mu.Unlock()
		return nil, nil
	}
	certSent := false
	cfg.GetCertificate = func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
		mu.Lock()
		n := name
		certSent = true
		mu.Unlock()
		return p.cfg.CA.Leaf(n)
	}
	tc := tls.Server(&sniffedConn{Conn: raw, r: br}, cfg)
	ctx, cancel := context.WithTimeout(p.base, p.sniffTimeout)
	err := tc.HandshakeContext(ctx)
	cancel()
	mu.Lock()
	n, sent := name, certSent
	mu.Unlock()
	if err != nil {
		kind, msg := tlsFailure(err, n, sent, p.sniffTimeout)
		p.reportConn(kind, addr, msg)
		p.drop(raw)
		return nil, "", false
	}
	tbr := bufio.NewReader(tc)
	switch k := sniff(tc, tbr, p.sniffTimeout); k {
	case protoHTTP1:
		return &sniffedConn{Conn: tc, r: tbr}, sni, true
	case protoEmpty:
	case protoHTTP2:
		p.reportConn(KindHTTP2, addr, fmt.Sprintf("a client spoke HTTP/2 inside TLS to %s without negotiating it: not supported, the connection was closed", n))
	case protoSilent:
		p.reportConn(KindSilent, addr, fmt.Sprintf("a client opened a TLS connection to %s and sent nothing within %s: not captured, closed", n, p.sniffTimeout))
	default:
		p.reportConn(KindNotHTTP, addr, fmt.Sprintf("a client opened a TLS connection to %s that carries something other than HTTP: not captured, closed", n))
	}
	tc.Close()
	p.pending.remove(raw)
	return nil, "", false
}

// reportSniff reports a connection whose first bytes are not HTTP/1 or
// TLS; where names it in the message.
func (p *Proxy) reportSniff(k proto, addr, where string) {
	switch k {
	case protoHTTP2:
		p.reportConn(KindHTTP2, addr, fmt.Sprintf("a client spoke HTTP/2 without TLS (prior knowledge) to %s, which is not supported: the connection was closed", where))
	case protoSilent:
		p.reportConn(KindSilent, addr, fmt.Sprintf("a client connected to %s and sent nothing within %s (a protocol where the server speaks first?): not captured, closed", where, p.sniffTimeout))
	default:
		p.reportConn(KindNotHTTP, addr, fmt.Sprintf("a client opened a raw TCP connection to %s that is not HTTP: not captured, closed", where))
	}
}

// tlsFailure turns a failed handshake with a client into an event.
// certSent: dal's certificate had been sent when it failed. A hang-up
// without an alert is not blamed on the certificate: clients also hang up
// when they give up, are killed, or only probe the port.
func tlsFailure(err error, name string, certSent bool, timeout time.Duration) (kind, msg string) {
	s := err.Error()
	switch {
	case strings.Contains(s, "remote error") && strings.Contains(s, "certificate"):
		return KindTLSRefused, fmt.Sprintf("the client refused dal's certificate for %s (it pins certificates or does not trust SSL_CERT_FILE): not captured", name)
	case strings.Contains(s, "unsupported application protocols"):
		return KindHTTP2, fmt.Sprintf("the client offered only HTTP/2 (ALPN h2) for %s and dal captures HTTP/1.1 only: the connection was closed", name)
	case hungUp(err) && !certSent:
		return KindTLS, fmt.Sprintf("the client closed the connection during the TLS handshake for %s, before dal's certificate was sent: not captured", name)
	case hungUp(err):
		return KindTLS, fmt.Sprintf("the client closed the connection during the TLS handshake for %s, after dal's certificate was sent, without a TLS alert: not captured (if it was meant to be, check that the client trusts SSL_CERT_FILE)", name)
	case isTimeout(err) || errors.Is(err, context.DeadlineExceeded):
		return KindTLS, fmt.Sprintf("the client did not complete a TLS handshake for %s within %s: not captured, closed", name, timeout)
	default:
		return KindTLS, fmt.Sprintf("the TLS handshake with the client for %s failed (%v): not captured, closed", name, err)
	}
}

// hungUp reports whether a handshake failed because the client closed or
// reset the connection.
func hungUp(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// hostPortURL is host:port as it appears in a URL: IPv6 in brackets, the
// scheme's default port left out.
func hostPortURL(host, port, defaultPort string) string {
	if port == defaultPort {
		if strings.Contains(host, ":") {
			return "[" + host + "]"
		}
		return host
	}
	return net.JoinHostPort(host, port)
}

// reportConn reports what became of a connection before it reached HTTP,
// unless the proxy is shutting down (then it was dal that closed it).
func (p *Proxy) reportConn(kind, addr, msg string) {
	if !p.isClosed() {
		p.report(kind, addr, msg)
	}
}
