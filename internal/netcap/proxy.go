package netcap

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log"
	"math"
	"net"
	"net/http"
	"net/netip"
	"os"
	"sync"
	"time"

	"github.com/dal-runtime/dal/internal/netcap/har"
)

// Source serves recorded responses to a replaying proxy.
type Source interface {
	// Next returns the response to serve for req, or an error when nothing
	// recorded matches it (a miss; the error says why, in one sentence).
	// It is called once per request, possibly from several goroutines at
	// once, and must not keep or modify req.
	Next(req *har.Request) (*har.Served, error)
}

// Config configures a [Proxy]. Setting Source makes it a replaying proxy;
// leaving it nil makes it a recording one.
type Config struct {
	// CA mints the certificates presented to clients for HTTPS. Required.
	CA *CA

	// Record, if set, receives every finished exchange, failed ones
	// included (Exchange.Error set), in both modes. Calls are serialised
	// and made in Seq order (the order the requests arrived), so an
	// exchange is handed over only once every earlier one has finished.
	// The Exchange holds raw, unredacted data (secrets included); Record
	// owns it, must not block for long and must not call the Proxy.
	// Streamed responses' Chunks share memory with Response.Body.
	Record func(*har.Exchange)

	// Source, if set, puts the proxy in replay mode: every request is
	// answered from Source and the proxy has no dialer at all, so nothing
	// can leave the machine. A Source error is answered with 502, header
	// "X-Dal-Replay: miss" and the JSON body
	// {"error":{"message":"dal replay: <err>","type":"dal_replay_miss"}},
	// and reported as a [KindReplayMiss] event. A *[har.RecordedFailure]
	// is not a miss: the request fails as it did when recorded (502
	// "dal record: <recorded error>"), unreported.
	Source Source

	// UpstreamRoots verifies upstream servers' certificates when
	// recording; nil means the system roots. Pass the system roots plus
	// whatever the user trusted (SSL_CERT_FILE, REQUESTS_CA_BUNDLE,
	// NODE_EXTRA_CA_CERTS). Must be nil when replaying.
	UpstreamRoots *x509.CertPool

	// Dial opens upstream connections when recording ("tcp", "host:port");
	// nil means dal's guarded dialer (30 s timeout), which connects to any
	// address except this host's own: loopback (127.0.0.0/8, ::1), the
	// unspecified address, and every address of the host's interfaces,
	// those listed at New and any the kernel takes as local when the
	// connection is made; link-local addresses (169.254.0.0/16, fe80::/10)
	// and cloud metadata ones; and machines on the networks attached to
	// the host's interfaces, unless it is in Allow or AllowNets. The
	// check is made on the resolved address the socket connects to. A
	// refused request is answered 403 with a JSON body naming
	// --allow-loopback or --allow-address, reported as a [KindRefused]
	// event, and recorded (Exchange.Refused) so that replay answers it
	// alike. A Dial set here is not guarded (tests). Must be nil when
	// replaying.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)

	// Allow lists the host's own addresses (loopback services, say
	// 127.0.0.1:11434) and other refused addresses the guarded dialer may
	// connect to. Recording only.
	Allow []netip.AddrPort

	// AllowNets lists addresses and networks the guarded dialer may
	// connect to at any port (--allow-address 169.254.169.254,
	// --allow-address 172.17.0.0/16). Recording only.
	AllowNets []netip.Prefix

	// Speed paces streamed replayed bodies: 0 serves every chunk at once,
	// 1 at the recorded offsets (Chunk.At), 2 twice as fast. Replay only.
	Speed float64

	// Report, if set, receives one [Event] for each thing that was seen
	// but not captured (non-HTTP connections, HTTP/2, refused
	// certificates, WebSocket upgrades, replay misses) and for each
	// connection the guarded dialer refused. It may be called from
	// several goroutines at once.
	Report func(Event)

	// Before, if set, is called for every request once its body has been
	// read, before the proxy forwards it (recording) or answers it from
	// the recording (replay). It may block, for example while a person
	// decides, and should return when ctx (the client's request) ends.
	// It must not keep or modify x. A non-nil *Answer is served instead
	// of the request going anywhere, and recorded (Exchange.Answered, the
	// answer as its response) so that replay serves it again. It may be
	// called from several goroutines at once.
	Before func(ctx context.Context, x *har.Exchange) *Answer

	// SniffTimeout bounds how long a new connection may take to show what
	// it speaks (its first bytes, or its TLS handshake) before it is
	// reported and closed; 0 means 10 s.
	SniffTimeout time.Duration
}

// Answer is dal's own answer to a request, given by [Config.Before]
// instead of forwarding it: a policy's deny, a strict-mode refusal.
type Answer struct {
	// Status is the HTTP status (403, 400, ...).
	Status int
	// By names who answered, recorded as Exchange.Answered and sent as
	// the X-Dal-Proxy header: "policy", "strict-llm".
	By string
	// Type is the JSON error's type ("dal_policy_denied").
	Type string
	// Message is the JSON error's message: one sentence for the agent.
	Message string
}

// Event is something the proxy saw and did not capture.
type Event struct {
	// Kind is one of the Kind constants.
	Kind string
	// Addr is the address the client was trying to reach: the CONNECT
	// target, the transparent destination, or, for a connection to the
	// proxy that never said where it was going, the proxy's own address.
	Addr string
	// Msg says what happened and what dal did, in one sentence.
	Msg string
}

// Event kinds.
const (
	KindNotHTTP     = "not-http"    // a connection that does not speak HTTP
	KindEmpty       = "empty"       // a transparent connection closed before sending anything
	KindSilent      = "silent"      // a connection that sent nothing within SniffTimeout
	KindHTTP2       = "http2"       // HTTP/2, by prior knowledge or ALPN h2 only
	KindTLSRefused  = "tls-refused" // the client rejected dal's certificate
	KindTLS         = "tls-failed"  // any other TLS handshake failure
	KindWebSocket   = "websocket"   // a WebSocket upgrade, answered 501
	KindNotProxied  = "not-proxied" // a request the proxy cannot place (no absolute URL, odd scheme, CONNECT in a tunnel)
	KindReplayMiss  = "replay-miss" // replay had no response for a request
	KindRefused     = "refused"     // a connection to the host's own address, not allowed: answered 403
	KindMisdirected = "misdirected" // a request whose Host is not the server its tunnel goes to: answered 421
)

// ErrClosed is returned by [Proxy.Serve] and [Proxy.ServeTransparent] after
// [Proxy.Shutdown].
var ErrClosed = errors.New("netcap: proxy shut down")

const defaultSniffTimeout = 10 * time.Second

// Proxy is a recording or replaying HTTP(S) proxy. Create it with [New],
// feed it listeners with [Proxy.Serve] and [Proxy.ServeTransparent], and
// stop it with [Proxy.Shutdown].
type Proxy struct {
	cfg          Config
	sniffTimeout time.Duration

	// transport forwards explicit-proxy and CONNECT traffic when
	// recording; nil when replaying.
	transport *upstream
	dial      func(ctx context.Context, network, addr string) (net.Conn, error)
	reach     *reach // the guarded dialer's policy; nil with Config.Dial or when replaying
	tmu       sync.Mutex
	mirrors   map[string]*upstream // per transparent destination

	seq   *sequencer
	srv   *http.Server
	queue *connQueue
	start sync.Once

	base   context.Context
	cancel context.CancelFunc

	mu        sync.Mutex
	closed    bool
	listeners map[net.Listener]struct{}
	// pending holds connections not yet handed to srv (being sniffed or
	// TLS-handshaken), so that Shutdown can close and wait for them.
	pending *tracker

	// diag finds the client's end of a connection, to wait until it has
	// read a streamed piece before the next is written.
	diag *diagSet

	// pace waits until start+at or ctx is done; a test hook.
	pace func(ctx context.Context, start time.Time, at time.Duration) error

	// order decides the delivery order of responses (order.go); nil:
	// as they come.
	order *orderer
}

// SetSettle makes the proxy deliver responses one at a time, in an order
// that depends only on what the client sent (order.go): each when settle,
// which waits until the client's process tree has settled, returns. A
// tree that has not settled after patience gets its response anyway, an
// escape ([Proxy.OrderEscapes]). owed, when not nil, is told which
// connections owe a response (the client's port and the proxy's) whenever
// that changes. Call it before Serve.
func (p *Proxy) SetSettle(settle func(context.Context) error, owed func([][2]uint16), patience time.Duration) {
	p.order = newOrderer(p.base, settle, owed, patience, func() []net.Listener {
		p.mu.Lock()
		defer p.mu.Unlock()
		ls := make([]net.Listener, 0, len(p.listeners))
		for l := range p.listeners {
			ls = append(ls, l)
		}
		return ls
	})
}

// OrderEscapes is how many responses were delivered before the client's
// tree settled (SetSettle's patience ran out): their order was latency's.
func (p *Proxy) OrderEscapes() int64 {
	if p.order == nil {
		return 0
	}
	return p.order.escapes.Load()
}

// New returns a proxy configured by cfg. It starts nothing.
func New(cfg Config) (*Proxy, error) {
	if cfg.CA == nil {
		return nil, errors.New("netcap: Config.CA is required")
	}
	if cfg.Speed < 0 || math.IsNaN(cfg.Speed) || math.IsInf(cfg.Speed, 0) {
		return nil, fmt.Errorf("netcap: replay speed %v: want 0 (no waiting) or a positive factor", cfg.Speed)
	}
	if cfg.Source != nil && (cfg.Dial != nil || cfg.UpstreamRoots != nil || cfg.Allow != nil || cfg.AllowNets != nil) {
		return nil, errors.New("netcap: Config.Dial, Config.UpstreamRoots, Config.Allow and Config.AllowNets are for recording; a replaying proxy (Config.Source set) never dials")
	}
	if cfg.SniffTimeout < 0 {
		return nil, fmt.Errorf("netcap: sniff timeout %v is negative", cfg.SniffTimeout)
	}
	p := &Proxy{
		cfg:          cfg,
		sniffTimeout: cfg.SniffTimeout,
		mirrors:      make(map[string]*upstream),
		seq:          newSequencer(cfg.Record),
		queue:        newConnQueue(),
		listeners:    make(map[net.Listener]struct{}),
		pending:      newTracker(),
		diag:         newDiagSet(),
		pace:         sleepUntil,
	}
	if p.sniffTimeout == 0 {
		p.sniffTimeout = defaultSniffTimeout
	}
	p.base, p.cancel = context.WithCancel(context.Background())
	if cfg.Source == nil {
		p.dial = cfg.Dial
		if p.dial == nil {
			r, err := newReach(cfg.Allow, cfg.AllowNets)
			if err != nil {
				return nil, fmt.Errorf("netcap: %w", err)
			}
			p.reach = r
			d := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second, Control: r.control}
			p.dial = d.DialContext
		}
		p.transport = newUpstream(p.dial, "", cfg.UpstreamRoots)
	}
	// HTTP/1 only, on both sides.
	var http1 http.Protocols
	http1.SetHTTP1(true)
	p.srv = &http.Server{
		Protocols:   &http1,
		Handler:     http.HandlerFunc(p.handle),
		BaseContext: func(net.Listener) context.Context { return p.base },
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			ctx = context.WithValue(ctx, clientConnKey{}, clientTag(c))
			if sc, ok := c.(*sniffedConn); ok {
				return context.WithValue(ctx, connInfoKey{}, sc.info)
			}
			return ctx
		},
		ConnState: func(c net.Conn, st http.ConnState) {
			if st == http.StateClosed || st == http.StateHijacked {
				p.releaseClient(clientTag(c))
			}
		},
		ErrorLog: log.New(io.Discard, "", 0),
	}
	return p, nil
}

// clientConnKey carries a client connection's tag in request contexts.
type clientConnKey struct{}

// clientTag names a client connection for the upstream pools.
func clientTag(c net.Conn) string { return fmt.Sprintf("%p", c) }

// releaseClient closes the upstream connections kept for a closed client
// connection.
func (p *Proxy) releaseClient(tag string) {
	if p.transport == nil {
		return
	}
	p.transport.release(tag)
	p.tmu.Lock()
	ms := make([]*upstream, 0, len(p.mirrors))
	for _, t := range p.mirrors {
		ms = append(ms, t)
	}
	p.tmu.Unlock()
	for _, t := range ms {
		t.release(tag)
	}
}

// mirror returns the upstream for transparent destination dst: every
// connection goes to dst whatever the URL's host.
func (p *Proxy) mirror(dst string) *upstream {
	if p.transport == nil {
		return nil
	}
	p.tmu.Lock()
	defer p.tmu.Unlock()
	t, ok := p.mirrors[dst]
	if !ok {
		t = newUpstream(p.dial, dst, p.cfg.UpstreamRoots)
		p.mirrors[dst] = t
	}
	return t
}

// Serve accepts connections on l as an explicit forward proxy, for clients
// that honour HTTP_PROXY/HTTPS_PROXY: absolute-form requests
// ("GET http://host/path") and CONNECT tunnels, inside which TLS is
// intercepted with a certificate from the CA and plain HTTP is handled as
// is. It blocks until l fails or [Proxy.Shutdown] is called (then it
// returns [ErrClosed]); it closes l when it returns. Serve may be called
// for several listeners.
func (p *Proxy) Serve(l net.Listener) error {
	return p.serve(l, p.handleProxyConn)
}

// AdoptDiagSocket hands the proxy a NETLINK_SOCK_DIAG socket made in the
// network namespace its clients live in, which it may not be able to
// enter itself (an unprivileged dal-exec and a sandbox in a user
// namespace): with it, streamed pieces wait for the client to read (see
// drain.go). The proxy keeps a duplicate; the caller still owns f.
func (p *Proxy) AdoptDiagSocket(f *os.File) error { return p.diag.adopt(f) }

// ServeTransparent accepts on l connections that clients opened to dst
// ("127.0.0.1:11434"), typically a listener dal created at dst inside the
// agent's network namespace. Each connection's first bytes decide: TLS is
// intercepted (certificate for the SNI name, or for dst's IP without SNI)
// and then handled as HTTP; HTTP/1.x is handled with URLs
// http://dst/...; anything else is reported and closed. When recording,
// requests are forwarded to dst itself. Like Serve, it blocks until l
// fails or the proxy shuts down, and closes l.
func (p *Proxy) ServeTransparent(l net.Listener, dst string) error {
	if _, _, err := net.SplitHostPort(dst); err != nil {
		l.Close()
		return fmt.Errorf("netcap: transparent destination %q: want host:port: %w", dst, err)
	}
	t := p.mirror(dst)
	return p.serve(l, func(c net.Conn) { p.handleTransparentConn(c, dst, t) })
}

func (p *Proxy) serve(l net.Listener, handle func(net.Conn)) error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		l.Close()
		return ErrClosed
	}
	p.listeners[l] = struct{}{}
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		delete(p.listeners, l)
		p.mu.Unlock()
		l.Close()
	}()
	p.start.Do(func() { go p.srv.Serve(p.queue) })

	var backoff time.Duration
	for {
		c, err := l.Accept()
		if err != nil {
			if p.isClosed() {
				return ErrClosed
			}
			var te interface{ Temporary() bool }
			if errors.As(err, &te) && te.Temporary() {
				backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
				time.Sleep(backoff)
				continue
			}
			return fmt.Errorf("netcap: accept on %s: %w", l.Addr(), err)
		}
		backoff = 0
		cc := &clientConn{Conn: c, diag: p.diag}
		if p.order != nil {
			p.order.track(cc)
		}
		c = cc
		if !p.pending.add(c) {
			c.Close()
			continue
		}
		go handle(c)
	}
}

func (p *Proxy) isClosed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.closed
}

// Shutdown stops accepting, closes connections that have not started an
// exchange, waits for the exchanges in flight to finish (so that every
// Record call has been made), and closes idle connections on both sides.
// When ctx ends first, the remaining exchanges are cancelled (they are
// still recorded, as failed) and ctx's error is returned.
func (p *Proxy) Shutdown(ctx context.Context) error {
	p.mu.Lock()
	p.closed = true
	for l := range p.listeners {
		l.Close()
	}
	p.mu.Unlock()

	p.pending.closeAll()
	p.pending.wait()
	err := p.srv.Shutdown(ctx)
	if err != nil {
		p.cancel()
		p.srv.Close()
	}
	// CONNECT tunnels hijacked while srv was shutting down.
	p.pending.closeAll()
	p.pending.wait()
	p.seq.wait()
	p.cancel()

	if p.transport != nil {
		p.transport.closeIdle()
	}
	if p.reach != nil {
		p.reach.close()
	}
	p.diag.close()
	p.tmu.Lock()
	for _, t := range p.mirrors {
		t.closeIdle()
	}
	p.tmu.Unlock()
	return err
}

func (p *Proxy) report(kind, addr, msg string) {
	if p.cfg.Report != nil {
		p.cfg.Report(Event{Kind: kind, Addr: addr, Msg: msg})
	}
}

func (p *Proxy) replaying() bool { return p.cfg.Source != nil }

// sleepUntil waits until start+at, or until ctx is done.
func sleepUntil(ctx context.Context, start time.Time, at time.Duration) error {
	d := time.Until(start.Add(at))
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// tracker holds connections accepted but not yet handed over to the HTTP
// server.
type tracker struct {
	mu     sync.Mutex
	cond   *sync.Cond
	closed bool
	conns  map[net.Conn]struct{}
}

func newTracker() *tracker {
	t := &tracker{conns: make(map[net.Conn]struct{})}
	t.cond = sync.NewCond(&t.mu)
	return t
}

// add registers c; false means the proxy is shutting down and the caller
// must close c.
func (t *tracker) add(c net.Conn) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return false
	}
	t.conns[c] = struct{}{}
	return true
}

func (t *tracker) remove(c net.Conn) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.conns, c)
	if len(t.conns) == 0 {
		t.cond.Broadcast()
	}
}

func (t *tracker) closeAll() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.closed = true
	for c := range t.conns {
		c.Close()
	}
}

func (t *tracker) wait() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for len(t.conns) > 0 {
		t.cond.Wait()
	}
}

// sequencer numbers exchanges as their requests arrive and hands finished
// ones to Record in that order.
type sequencer struct {
	mu     sync.Mutex
	cond   *sync.Cond
	next   int // next Seq to assign
	emit   int // next Seq to hand over
	done   map[int]*har.Exchange
	record func(*har.Exchange)
}

func newSequencer(record func(*har.Exchange)) *sequencer {
	s := &sequencer{done: make(map[int]*har.Exchange), record: record}
	s.cond = sync.NewCond(&s.mu)
	return s
}

func (s *sequencer) assign() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := s.next
	s.next++
	return n
}

// finish hands x, and every finished exchange after it, to Record.
func (s *sequencer) finish(x *har.Exchange) {
	x.Send, x.Wait, x.Receive = max(x.Send, 0), max(x.Wait, 0), max(x.Receive, 0)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.done[x.Seq] = x
	for {
		y, ok := s.done[s.emit]
		if !ok {
			break
		}
		delete(s.done, s.emit)
		s.emit++
		if s.record != nil {
			s.record(y)
		}
	}
	if s.emit == s.next {
		s.cond.Broadcast()
	}
}

// wait returns once every assigned exchange has been handed over.
func (s *sequencer) wait() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for s.emit < s.next {
		s.cond.Wait()
	}
}
