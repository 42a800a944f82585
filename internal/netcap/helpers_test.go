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
	"net/textproto"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dal-runtime/dal/internal/netcap/har"
)

// testTimeout bounds every client operation in the tests: a hang fails
// instead of blocking the run.
const testTimeout = 20 * time.Second

var sharedCA = sync.OnceValues(NewCA)

func testCA(t testing.TB) *CA {
	t.Helper()
	ca, err := sharedCA()
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

// rig is a proxy under test with its records and reports.
type rig struct {
	t  testing.TB
	p  *Proxy
	ca *CA

	mu     sync.Mutex
	recs   []*har.Exchange
	events []Event
	evCh   chan Event // every event, as it is reported

	serving sync.WaitGroup
	errs    chan error
	shut    sync.Once
}

func newRig(t testing.TB, cfg Config) *rig {
	t.Helper()
	if cfg.CA == nil {
		cfg.CA = testCA(t)
	}
	if cfg.Source == nil && cfg.Dial == nil && cfg.Allow == nil {
		// The upstream servers of these tests listen on loopback, which
		// the guarded dialer refuses: a rig without Allow dials plainly.
		// The guard's own tests (reach_test.go) set Allow, even empty.
		cfg.Dial = (&net.Dialer{Timeout: testTimeout}).DialContext
	}
	r := &rig{t: t, ca: cfg.CA, errs: make(chan error, 16), evCh: make(chan Event, 64)}
	cfg.Record = func(x *har.Exchange) {
		r.mu.Lock()
		r.recs = append(r.recs, x)
		r.mu.Unlock()
	}
	cfg.Report = func(e Event) {
		r.mu.Lock()
		r.events = append(r.events, e)
		r.mu.Unlock()
		select {
		case r.evCh <- e:
		default:
		}
	}
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r.p = p
	t.Cleanup(r.shutdown)
	return r
}

func listen(t testing.TB) net.Listener {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// explicit starts an explicit proxy listener and returns its address.
func (r *rig) explicit() string {
	l := listen(r.t)
	r.run(func() error { return r.p.Serve(l) })
	return l.Addr().String()
}

// transparent starts a transparent listener for dst and returns its
// address.
func (r *rig) transparent(dst string) string {
	l := listen(r.t)
	r.run(func() error { return r.p.ServeTransparent(l, dst) })
	return l.Addr().String()
}

func (r *rig) run(serve func() error) {
	r.serving.Add(1)
	go func() {
		defer r.serving.Done()
		if err := serve(); !errors.Is(err, ErrClosed) {
			r.errs <- err
		}
	}()
}

// shutdown stops the proxy: afterwards every Record and Report call has
// been made.
func (r *rig) shutdown() {
	r.shut.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
		defer cancel()
		if err := r.p.Shutdown(ctx); err != nil {
			r.t.Errorf("Shutdown: %v", err)
		}
		r.serving.Wait()
		close(r.errs)
		for err := range r.errs {
			r.t.Errorf("Serve: %v", err)
		}
	})
}

func (r *rig) records() []*har.Exchange {
	r.shutdown()
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*har.Exchange(nil), r.recs...)
}

func (r *rig) reports() []Event {
	r.shutdown()
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Event(nil), r.events...)
}

// firstEvent waits for the first report.
func (r *rig) firstEvent() Event {
	r.t.Helper()
	select {
	case e := <-r.evCh:
		return e
	case <-time.After(testTimeout):
		r.t.Fatalf("no report within %s", testTimeout)
		return Event{}
	}
}

// one returns the only record, failing otherwise.
func (r *rig) one() *har.Exchange {
	r.t.Helper()
	recs := r.records()
	if len(recs) != 1 {
		r.t.Fatalf("got %d records, want 1", len(recs))
	}
	return recs[0]
}

// caPool trusts only the CA.
func caPool(ca *CA) *x509.CertPool {
	pool := x509.NewCertPool()
	pool.AddCert(ca.Certificate())
	return pool
}

// proxyClient uses the explicit proxy at addr and trusts roots.
func proxyClient(addr string, roots *x509.CertPool) *http.Client {
	return &http.Client{
		Transport: &http.Transport{
			Proxy:              http.ProxyURL(&url.URL{Scheme: "http", Host: addr}),
			TLSClientConfig:    &tls.Config{RootCAs: roots},
			DisableCompression: true,
		},
		Timeout: testTimeout,
	}
}

// directedClient connects every request to addr, whatever its URL (a
// client of a transparent listener), and trusts roots.
func directedClient(addr string, roots *x509.CertPool) *http.Client {
	return &http.Client{
		Transport: &http.Transport{
			DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, network, addr)
			},
			TLSClientConfig:    &tls.Config{RootCAs: roots},
			DisableCompression: true,
		},
		Timeout: testTimeout,
	}
}

// get does a GET with c and returns the response with its body read.
func get(t testing.TB, c *http.Client, u string, hdr ...string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	return do(t, c, req)
}

func do(t testing.TB, c *http.Client, req *http.Request) (*http.Response, []byte) {
	t.Helper()
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}

// dial opens a raw connection that fails rather than hangs.
func dial(t testing.TB, addr string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, testTimeout)
	if err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(testTimeout))
	t.Cleanup(func() { c.Close() })
	return c
}

// readHead reads a response's status line and headers off br.
func readHead(t testing.TB, br *bufio.Reader) (int, textproto.MIMEHeader) {
	t.Helper()
	tp := textproto.NewReader(br)
	line, err := tp.ReadLine()
	if err != nil {
		t.Fatalf("read status line: %v", err)
	}
	f := strings.Fields(line)
	if len(f) < 2 {
		t.Fatalf("status line %q", line)
	}
	code, err := strconv.Atoi(f[1])
	if err != nil {
		t.Fatalf("status line %q", line)
	}
	h, err := tp.ReadMIMEHeader()
	if err != nil {
		t.Fatalf("read headers: %v", err)
	}
	return code, h
}

// readFrame reads one chunked-encoding frame and returns its data; the
// last (empty) frame returns io.EOF.
func readFrame(br *bufio.Reader) ([]byte, error) {
	line, err := br.ReadString('\n')
	if err != nil {
		return nil, err
	}
	size, err := strconv.ParseInt(strings.TrimSpace(strings.SplitN(line, ";", 2)[0]), 16, 64)
	if err != nil {
		return nil, fmt.Errorf("chunk size line %q: %w", line, err)
	}
	data := make([]byte, size+2)
	if _, err := io.ReadFull(br, data); err != nil {
		return nil, err
	}
	if !bytes.HasSuffix(data, []byte("\r\n")) {
		return nil, fmt.Errorf("chunk of %d bytes not followed by CRLF", size)
	}
	if size == 0 {
		return nil, io.EOF
	}
	return data[:size], nil
}

// waitClosed reads c until the peer closes it; a deadline ends the wait
// (and the test) instead of a hang.
func waitClosed(t testing.TB, c net.Conn) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(testTimeout))
	_, err := io.Copy(io.Discard, c)
	if isTimeout(err) {
		t.Fatalf("the proxy did not close the connection within %s", testTimeout)
	}
}

// tripwire is a listener that must never receive a connection.
type tripwire struct {
	l        net.Listener
	accepted atomic.Int32
}

func newTripwire(t testing.TB) *tripwire {
	tw := &tripwire{l: listen(t)}
	go func() {
		for {
			c, err := tw.l.Accept()
			if err != nil {
				return
			}
			tw.accepted.Add(1)
			c.Close()
		}
	}()
	t.Cleanup(func() { tw.l.Close() })
	return tw
}

func (tw *tripwire) addr() string { return tw.l.Addr().String() }

// fixedSource serves the same response to every request.
type fixedSource struct {
	served har.Served
	mu     sync.Mutex
	asked  []string
}

func (s *fixedSource) Next(req *har.Request) (*har.Served, error) {
	s.mu.Lock()
	s.asked = append(s.asked, req.Method+" "+req.URL)
	s.mu.Unlock()
	sv := s.served
	sv.Header = s.served.Header.Clone()
	return &sv, nil
}

// recordedSource replays recorded exchanges: method, URL and body must
// match, identical requests are served first in, first out.
type recordedSource struct {
	mu   sync.Mutex
	xs   []*har.Exchange
	used []bool
}

func newRecordedSource(xs []*har.Exchange) *recordedSource {
	return &recordedSource{xs: xs, used: make([]bool, len(xs))}
}

func (s *recordedSource) Next(req *har.Request) (*har.Served, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, x := range s.xs {
		if s.used[i] || x.Response == nil || x.Request.Method != req.Method || x.Request.URL != req.URL || !bytes.Equal(x.Request.Body, req.Body) {
			continue
		}
		s.used[i] = true
		chunks := x.Response.Chunks
		if !x.Response.Streamed {
			chunks = []har.Chunk{{Data: x.Response.Body}}
		}
		return &har.Served{
			Status: x.Response.Status, StatusText: x.Response.StatusText,
			Header: x.Response.Header.Clone(), Chunks: chunks, Streamed: x.Response.Streamed,
			Entry: i, Seq: x.Seq,
		}, nil
	}
	return nil, fmt.Errorf("no recorded request matches %s %s", req.Method, req.URL)
}
