package netcap

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Upstream connection limits, as net/http's Transport had them.
const (
	maxIdle             = 256
	maxIdlePerHost      = 64
	idleTimeout         = 90 * time.Second
	tlsHandshakeTimeout = 30 * time.Second
	// maxHeaderBytes bounds a response's headers, and its trailers.
	maxHeaderBytes = 10 << 20
	ioBufferSize   = 64 << 10
	// max1xx is how many informational responses (103 Early Hints, say)
	// may come before the final one.
	max1xx = 5
)

// upstream speaks HTTP/1.1 to the servers a recording proxy forwards to.
// It owns the connections, rather than leaving them to net/http's
// Transport, so that a chunked body can be read frame by frame off the
// wire: it dials, verifies TLS against the upstream roots (ALPN
// http/1.1 only), keeps idle connections per scheme and host, and checks
// one is still open before reusing it.
type upstream struct {
	dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// dst, if set, is the address every connection goes to whatever the
	// URL's host (a transparent destination); the URL's host still names
	// the TLS server.
	dst   string
	roots *x509.CertPool

	mu     sync.Mutex
	idle   map[string][]*upConn // by key; the most recently used last
	nidle  int
	closed bool

	// spares are connections dialled ahead, by destination (spare.go);
	// dialling marks the destinations whose spare is being dialled, by
	// goroutines spareDials counts, under spareCtx, which closeIdle
	// cancels with stopSpares.
	spares     map[string]*spareConn
	dialling   map[string]*spareDial
	spareDials sync.WaitGroup
	spareCtx   context.Context
	stopSpares context.CancelFunc
	// spareKept and spareClaimed, if set, are called (with mu held) each
	// time a spare is kept, and each time a request waits for one being
	// dialled; test hooks.
	spareKept, spareClaimed func()
}

func newUpstream(dial func(ctx context.Context, network, addr string) (net.Conn, error), dst string, roots *x509.CertPool) *upstream {
	u := &upstream{dial: dial, dst: dst, roots: roots, idle: make(map[string][]*upConn),
		spares: make(map[string]*spareConn), dialling: make(map[string]*spareDial)}
	u.spareCtx, u.stopSpares = context.WithCancel(context.Background())
	return u
}

// upConn is one upstream connection.
type upConn struct {
	conn net.Conn // what HTTP is spoken on: raw, or TLS over raw
	raw  net.Conn
	// lim sits between conn and br and bounds reads while headers or
	// trailers are read.
	lim *limitReader
	br  *bufio.Reader
	// bw writes to conn through wrote.
	bw    *bufio.Writer
	wrote *countWriter
	key   string
	// reused: the connection served an earlier exchange; spare: it was
	// dialled ahead (spare.go). Either way the server may have closed it
	// before the request reached it.
	reused    bool
	spare     bool
	idleSince time.Time
	idleTimer *time.Timer
	released  atomic.Bool // br and bw went back to their pools
}

// The buffers of upstream connections outlive them: the proxy opens an
// upstream connection per client connection, and two fresh 64 KiB
// buffers a call were most of its allocation (and their clearing a good
// part of its CPU).
var (
	readers = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, ioBufferSize) }}
	writers = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, ioBufferSize) }}
)

// close closes c and gives its buffers back; nothing may use c after.
func (c *upConn) close() {
	c.conn.Close()
	if c.released.CompareAndSwap(false, true) {
		c.br.Reset(nil)
		c.bw.Reset(nil)
		readers.Put(c.br)
		writers.Put(c.bw)
	}
}

// limitReader fails reads beyond n bytes; n < 0 means no limit.
type limitReader struct {
	r io.Reader
	n int64
}

var errHeadersTooLarge = fmt.Errorf("the response headers exceed %d MB", maxHeaderBytes>>20)

func (l *limitReader) Read(p []byte) (int, error) {
	if l.n < 0 {
		return l.r.Read(p)
	}
	if l.n == 0 {
		return 0, errHeadersTooLarge
	}
	if int64(len(p)) > l.n {
		p = p[:l.n]
	}
	n, err := l.r.Read(p)
	l.n -= int64(n)
	return n, err
}

// countWriter counts the bytes written through it.
type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// exchange is a response whose headers have been read; its body is read
// off c.br (chunked) or resp.Body (any other framing).
type exchange struct {
	u    *upstream
	c    *upConn
	resp *http.Response
	// stop stops closing c when the request's context ends; false means
	// it was closed already.
	stop func() bool
}

// finish returns the connection to the pool when reusable (the body was
// read to its end) and the response allows it; otherwise it closes it.
func (ex *exchange) finish(reusable bool) {
	if ex.stop() && reusable && !ex.resp.Close {
		ex.u.put(ex.c)
		return
	}
	ex.c.close()
}

// retryable is an error before any of the response arrived: on a reused
// connection, the server may have closed it while it was idle.
type retryable struct {
	err error
	// unwritten: not a byte of the request got out, so any request can
	// be sent again; otherwise only an idempotent one.
	unwritten bool
}

func (e *retryable) Error() string { return e.err.Error() }

// roundTrip sends req (whose body is body) and reads the response's
// headers. sent is when the request was written (zero if it never was).
// The caller reads the body and calls ex.finish.
func (u *upstream) roundTrip(ctx context.Context, req *http.Request, body []byte) (ex *exchange, sent time.Time, err error) {
	key, addr, serverName := u.target(req.URL)
	// Upstream connections follow the client's: one client connection's
	// requests share upstream connections only among themselves, so the
	// server sees the connection pattern it would see without dal (a client
	// that opens a connection per request gets fresh, quick-ACKed ones;
	// pooled ones made servers that write without TCP_NODELAY wait for
	// 40 ms delayed ACKs). A spare (spare.go) is fresh too, and once
	// taken belongs to one client connection.
	clientKey := key
	if tag, ok := ctx.Value(clientConnKey{}).(string); ok {
		clientKey += "#" + tag
	}
	useSpare := true
	for {
		c, err := u.get(ctx, key, clientKey, addr, serverName, req.URL.Scheme == "https", useSpare)
		if err != nil {
			return nil, sent, err
		}
		ex, sent, err = u.try(ctx, c, req, body)
		if err == nil {
			return ex, sent, nil
		}
		c.close()
		var re *retryable
		if !errors.As(err, &re) {
			return nil, sent, err
		}
		if !(c.reused || c.spare) || (!re.unwritten && !idempotent(req)) {
			return nil, sent, re.err
		}
		// Once: a server that closes every connection at once would
		// otherwise be tried spare after spare.
		useSpare = useSpare && !c.spare
	}
}

// target is where req's URL goes: the pool key, the address dialled and
// the TLS server name.
func (u *upstream) target(uu *url.URL) (key, addr, serverName string) {
	hostport := withPort(uu.Host, uu.Scheme)
	addr = hostport
	if u.dst != "" {
		addr = u.dst
	}
	return uu.Scheme + "://" + hostport, addr, uu.Hostname()
}

// try makes one attempt at req on c.
func (u *upstream) try(ctx context.Context, c *upConn, req *http.Request, body []byte) (*exchange, time.Time, error) {
	// Closed under TLS without close_notify, as a client that goes away
	// does: a server that saw close_notify could end the response
	// cleanly before the read fails, and a stream cut by the client would
	// be recorded as complete.
	stop := context.AfterFunc(ctx, func() { c.raw.Close() })
	fail := func(err error) error {
		stop()
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return err
	}
	req.Body = nil
	if len(body) > 0 {
		req.Body = io.NopCloser(bytes.NewReader(body))
	}
	c.wrote.n = 0
	err := req.Write(c.bw)
	if err == nil {
		err = c.bw.Flush()
	}
	sent := time.Now()
	if err != nil {
		werr := &retryable{err: fmt.Errorf("sending the request: %w", err), unwritten: c.wrote.n == 0}
		if c.wrote.n > 0 && ctx.Err() == nil {
			// A server that answers before reading the whole request
			// (413, say) and hangs up: its answer stands.
			if resp, err := readResponse(c, req); err == nil {
				resp.Close = true
				return &exchange{u: u, c: c, resp: resp, stop: stop}, sent, nil
			}
		}
		return nil, sent, fail(werr)
	}
	if _, err := c.br.Peek(1); err != nil {
		if errors.Is(err, io.EOF) {
			err = errors.New("the server closed the connection without a response")
		}
		return nil, sent, fail(&retryable{err: err})
	}
	resp, err := readResponse(c, req)
	if err != nil {
		return nil, sent, fail(err)
	}
	return &exchange{u: u, c: c, resp: resp, stop: stop}, sent, nil
}

// readResponse reads the final response's headers off c, skipping
// informational ones.
func readResponse(c *upConn, req *http.Request) (*http.Response, error) {
	c.lim.n = maxHeaderBytes
	defer func() { c.lim.n = -1 }()
	for n := 0; ; n++ {
		resp, err := http.ReadResponse(c.br, req)
		switch {
		case err != nil:
			return nil, fmt.Errorf("reading the response: %w", err)
		case resp.StatusCode >= 200:
			return resp, nil
		case resp.StatusCode == http.StatusSwitchingProtocols:
			return nil, errors.New("the server switched protocols (101), which dal does not relay")
		case n == max1xx:
			return nil, fmt.Errorf("the server sent more than %d informational (1xx) responses", max1xx)
		}
	}
}

// idempotent reports whether req may be sent twice (net/http's rule).
func idempotent(req *http.Request) bool {
	switch req.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace:
		return true
	}
	_, k1 := req.Header["Idempotency-Key"]
	_, k2 := req.Header["X-Idempotency-Key"]
	return k1 || k2
}

// get returns an idle connection of the client connection (clientKey)
// that is still open, else the spare for the destination (key) if
// useSpare, else a new one; a new or spare one has the next spare
// dialled.
func (u *upstream) get(ctx context.Context, key, clientKey, addr, serverName string, useTLS, useSpare bool) (*upConn, error) {
	for {
		c := u.takeIdle(clientKey)
		if c == nil {
			break
		}
		if c.br.Buffered() == 0 && peekAlive(c.raw) {
			c.reused = true
			return c, nil
		}
		c.close()
	}
	var c *upConn
	if useSpare {
		c = u.takeSpare(ctx, key, clientKey)
	}
	if c == nil {
		var err error
		if c, err = u.connect(ctx, clientKey, addr, serverName, useTLS); err != nil {
			return nil, err
		}
	}
	u.prepareSpare(key, addr, serverName, useTLS)
	return c, nil
}

func (u *upstream) connect(ctx context.Context, key, addr, serverName string, useTLS bool) (*upConn, error) {
	raw, err := u.dial(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	if raw == nil {
		return nil, fmt.Errorf("dial %s: the dialer returned no connection", addr)
	}
	conn := raw
	if useTLS {
		tc := tls.Client(raw, &tls.Config{ServerName: serverName, RootCAs: u.roots, NextProtos: []string{"http/1.1"}})
		hctx, cancel := context.WithTimeout(ctx, tlsHandshakeTimeout)
		err := tc.HandshakeContext(hctx)
		cancel()
		if err != nil {
			raw.Close()
			if ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
				err = fmt.Errorf("TLS handshake with %s: no answer within %s", addr, tlsHandshakeTimeout)
			}
			return nil, err
		}
		conn = tc
	}
	lim := &limitReader{r: conn, n: -1}
	wrote := &countWriter{w: conn}
	br := readers.Get().(*bufio.Reader)
	br.Reset(lim)
	bw := writers.Get().(*bufio.Writer)
	bw.Reset(wrote)
	return &upConn{conn: conn, raw: raw, lim: lim, key: key, br: br, bw: bw, wrote: wrote}, nil
}

// takeIdle removes and returns the most recently used idle connection
// for key, or nil.
func (u *upstream) takeIdle(key string) *upConn {
	u.mu.Lock()
	defer u.mu.Unlock()
	cs := u.idle[key]
	if len(cs) == 0 {
		return nil
	}
	c := cs[len(cs)-1]
	cs[len(cs)-1] = nil
	if len(cs) == 1 {
		delete(u.idle, key)
	} else {
		u.idle[key] = cs[:len(cs)-1]
	}
	u.nidle--
	return c
}

// put keeps c for reuse, or closes it when the pool is full or closed,
// or the server sent bytes nobody asked for.
func (u *upstream) put(c *upConn) {
	if c.br.Buffered() > 0 {
		c.close()
		return
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.closed || u.nidle >= maxIdle || len(u.idle[c.key]) >= maxIdlePerHost {
		c.close()
		return
	}
	u.idle[c.key] = append(u.idle[c.key], c)
	u.nidle++
	c.idleSince = time.Now()
	if c.idleTimer == nil {
		c.idleTimer = time.AfterFunc(idleTimeout, func() { u.expire(c) })
	} else {
		c.idleTimer.Reset(idleTimeout)
	}
}

// expire closes c if it has been idle for idleTimeout.
func (u *upstream) expire(c *upConn) {
	u.mu.Lock()
	defer u.mu.Unlock()
	cs := u.idle[c.key]
	for i, ic := range cs {
		if ic != c {
			continue
		}
		if time.Since(c.idleSince) < idleTimeout {
			return // taken and put back since the timer was set
		}
		u.idle[c.key] = append(cs[:i], cs[i+1:]...)
		if len(u.idle[c.key]) == 0 {
			delete(u.idle, c.key)
		}
		u.nidle--
		c.close()
		return
	}
}

// release closes the idle connections kept for the client connection tag
// (it closed).
func (u *upstream) release(tag string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	for key, cs := range u.idle {
		if !strings.HasSuffix(key, "#"+tag) {
			continue
		}
		for _, c := range cs {
			c.idleTimer.Stop()
			c.close()
		}
		u.nidle -= len(cs)
		delete(u.idle, key)
	}
}

// closeIdle closes every idle connection and spare, and returns once no
// spare is being dialled; connections finishing later are closed rather
// than kept.
func (u *upstream) closeIdle() {
	u.mu.Lock()
	u.closed = true
	for key, cs := range u.idle {
		for _, c := range cs {
			c.idleTimer.Stop()
			c.close()
		}
		delete(u.idle, key)
	}
	u.nidle = 0
	u.closeSpares()
	u.mu.Unlock()
	u.spareDials.Wait()
}
