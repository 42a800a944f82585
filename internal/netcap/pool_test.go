package netcap

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"
)

// connServer is an HTTP(S) server that numbers its connections in the
// order it accepts them and answers every request with the number of the
// connection it came on; it notes which clients (X-Client) each
// connection served, and when each closes.
type connServer struct {
	srv *httptest.Server

	mu      sync.Mutex
	ids     map[net.Conn]int
	conns   []net.Conn              // by number
	clients map[int]map[string]bool // by connection
	closed  map[int]chan struct{}
	// accepted is signalled each time a connection is accepted.
	accepted chan struct{}
}

type connIDKey struct{}

func newConnServer(t *testing.T, useTLS bool) *connServer {
	s := &connServer{ids: make(map[net.Conn]int), clients: make(map[int]map[string]bool), closed: make(map[int]chan struct{}),
		accepted: make(chan struct{}, 1)}
	s.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Context().Value(connIDKey{}).(int)
		s.mu.Lock()
		if s.clients[id] == nil {
			s.clients[id] = make(map[string]bool)
		}
		s.clients[id][r.Header.Get("X-Client")] = true
		s.mu.Unlock()
		io.WriteString(w, strconv.Itoa(id))
	}))
	// ConnContext runs in the accept loop, right after each Accept: the
	// numbers follow the accept order.
	s.srv.Config.ConnContext = func(ctx context.Context, c net.Conn) context.Context {
		s.mu.Lock()
		defer s.mu.Unlock()
		id := len(s.ids)
		s.ids[c] = id
		s.conns = append(s.conns, c)
		s.closed[id] = make(chan struct{})
		select {
		case s.accepted <- struct{}{}:
		default:
		}
		return context.WithValue(ctx, connIDKey{}, id)
	}
	s.srv.Config.ConnState = func(c net.Conn, st http.ConnState) {
		if st != http.StateClosed {
			return
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		close(s.closed[s.ids[c]])
	}
	// Spares being dialled when the test ends fail their handshake.
	s.srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	if useTLS {
		s.srv.StartTLS()
	} else {
		s.srv.Start()
	}
	t.Cleanup(s.srv.Close)
	return s
}

func (s *connServer) roots() *x509.CertPool {
	pool := x509.NewCertPool()
	if s.srv.TLS != nil {
		pool.AddCert(s.srv.Certificate())
	}
	return pool
}

// conn waits until the server has accepted connection id, and returns
// it.
func (s *connServer) conn(t *testing.T, id int) net.Conn {
	t.Helper()
	for {
		s.mu.Lock()
		n := len(s.conns)
		var c net.Conn
		if id < n {
			c = s.conns[id]
		}
		s.mu.Unlock()
		if c != nil {
			return c
		}
		select {
		case <-s.accepted:
		case <-time.After(testTimeout):
			t.Fatalf("the server accepted %d connections, not connection %d", n, id)
		}
	}
}

// waitClosed waits until the server's connection id has closed.
func (s *connServer) waitClosed(t *testing.T, id int) {
	t.Helper()
	s.mu.Lock()
	ch := s.closed[id]
	s.mu.Unlock()
	select {
	case <-ch:
	case <-time.After(testTimeout):
		t.Fatalf("upstream connection %d is still open", id)
	}
}

// shared returns a connection that served more than one client.
func (s *connServer) shared() (int, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, cs := range s.clients {
		if len(cs) > 1 {
			return id, true
		}
	}
	return 0, false
}

// countingDial dials plainly and counts the connections opened and
// closed.
type countingDial struct {
	mu             sync.Mutex
	opened, closed int
}

type countedConn struct {
	net.Conn
	d    *countingDial
	once sync.Once
}

func (c *countedConn) Close() error {
	c.once.Do(func() { c.d.mu.Lock(); c.d.closed++; c.d.mu.Unlock() })
	return c.Conn.Close()
}

func (d *countingDial) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	c, err := (&net.Dialer{Timeout: testTimeout}).DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	d.opened++
	d.mu.Unlock()
	return &countedConn{Conn: c, d: d}, nil
}

func (d *countingDial) counts() (opened, closed int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.opened, d.closed
}

// connID does a GET of u with c as client name and returns the number
// of the upstream connection that served it.
func connID(t *testing.T, c *http.Client, u, name string) int {
	t.Helper()
	resp, body := get(t, c, u, "X-Client", name)
	id, err := strconv.Atoi(string(body))
	if resp.StatusCode != 200 || err != nil {
		t.Fatalf("GET %s: %d %q", u, resp.StatusCode, body)
	}
	return id
}

// TestUpstreamFollowsClientConnections: requests of one client connection
// reuse one upstream connection; another client connection gets another;
// no upstream connection ever serves two client connections. Besides
// those the proxy opens at most one connection per destination ahead of
// need (its spare, spare.go), which serves no request until a client
// connection takes it. When a client connection closes, its upstream
// connection closes too; at shutdown, so does the spare.
func TestUpstreamFollowsClientConnections(t *testing.T) {
	t.Parallel()
	for _, useTLS := range []bool{false, true} {
		t.Run(map[bool]string{false: "http", true: "https"}[useTLS], func(t *testing.T) {
			t.Parallel()
			srv := newConnServer(t, useTLS)
			var d countingDial
			r := newRig(t, Config{Dial: d.dial, UpstreamRoots: srv.roots()})
			addr := r.explicit()
			a := proxyClient(addr, caPool(r.ca))
			idA := connID(t, a, srv.srv.URL+"/a", "a")
			for range 2 {
				if id := connID(t, a, srv.srv.URL+"/a", "a"); id != idA {
					t.Fatalf("one client connection's requests went on upstream connections %d and %d, want one", idA, id)
				}
			}
			b := proxyClient(addr, caPool(r.ca))
			if id := connID(t, b, srv.srv.URL+"/b", "b"); id == idA {
				t.Fatalf("a second client connection shares upstream connection %d", id)
			}
			if id, ok := srv.shared(); ok {
				t.Fatalf("upstream connection %d served two client connections", id)
			}
			if opened, _ := d.counts(); opened > 3 {
				t.Errorf("the proxy opened %d upstream connections for 2 client connections, want at most 3 (one spare)", opened)
			}
			a.CloseIdleConnections()
			srv.waitClosed(t, idA)
			b.CloseIdleConnections()
			r.shutdown()
			if opened, closed := d.counts(); closed != opened {
				t.Errorf("after shutdown %d of the %d upstream connections are still open", opened-closed, opened)
			}
		})
	}
}

// TestSpareUpstreamConn: a client that opens a connection per request
// gets, from its second request on, the connection the proxy dialled
// ahead (HTTP, and HTTPS with TLS 1.3's session tickets arriving after
// the handshake), each used by that client connection only; a spare the
// server closed is not used, and the request still succeeds.
func TestSpareUpstreamConn(t *testing.T) {
	t.Parallel()
	for _, useTLS := range []bool{false, true} {
		t.Run(map[bool]string{false: "http", true: "https"}[useTLS], func(t *testing.T) {
			t.Parallel()
			srv := newConnServer(t, useTLS)
			r := newRig(t, Config{UpstreamRoots: srv.roots()})
			kept := make(chan struct{}, 8)
			r.p.transport.spareKept = func() { kept <- struct{}{} }
			waitKept := func() {
				t.Helper()
				select {
				case <-kept:
				case <-time.After(testTimeout):
					t.Fatal("the proxy kept no spare upstream connection")
				}
			}
			c := proxyClient(r.explicit(), caPool(r.ca))
			c.Transport.(*http.Transport).DisableKeepAlives = true
			if useTLS {
				c.Transport.(*http.Transport).TLSClientConfig.MinVersion = tls.VersionTLS13
			}
			if id := connID(t, c, srv.srv.URL+"/", "c0"); id != 0 {
				t.Fatalf("the first request went on upstream connection %d, want 0", id)
			}
			for i := 1; i <= 3; i++ {
				waitKept()
				// The spare is the last connection the server accepted.
				if id := connID(t, c, srv.srv.URL+"/", fmt.Sprintf("c%d", i)); id != i {
					t.Fatalf("request %d went on upstream connection %d, want %d (the spare)", i, id, i)
				}
			}
			waitKept()
			// The server closes the spare (number 4): the next request
			// goes elsewhere, and succeeds.
			srv.conn(t, 4).Close()
			srv.waitClosed(t, 4)
			if id := connID(t, c, srv.srv.URL+"/", "c4"); id == 4 {
				t.Fatal("a request went on a spare the server had closed")
			}
			if id, ok := srv.shared(); ok {
				t.Fatalf("upstream connection %d served two client connections", id)
			}
		})
	}
}

// TestSpareUpstreamConnBeingDialled: a request that comes while the spare
// is still being dialled waits for that dial and uses the spare, rather
// than dialling one more connection.
func TestSpareUpstreamConnBeingDialled(t *testing.T) {
	t.Parallel()
	srv := newConnServer(t, false)
	started, release := make(chan struct{}, 1), make(chan struct{})
	var mu sync.Mutex
	dials := 0
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		mu.Lock()
		dials++
		n := dials
		mu.Unlock()
		if n == 2 { // the first spare: held until the request waits for it
			started <- struct{}{}
			select {
			case <-release:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		return (&net.Dialer{Timeout: testTimeout}).DialContext(ctx, network, addr)
	}
	r := newRig(t, Config{Dial: dial})
	claimed := make(chan struct{}, 1)
	r.p.transport.spareClaimed = func() { claimed <- struct{}{} }
	c := proxyClient(r.explicit(), nil)
	c.Transport.(*http.Transport).DisableKeepAlives = true
	if id := connID(t, c, srv.srv.URL+"/", "c0"); id != 0 {
		t.Fatalf("the first request went on upstream connection %d, want 0", id)
	}
	select {
	case <-started:
	case <-time.After(testTimeout):
		t.Fatal("the proxy dialled no spare")
	}
	// Not connID: t.Fatal belongs to the test's goroutine.
	got := make(chan string, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodGet, srv.srv.URL+"/", nil)
		req.Header.Set("X-Client", "c1")
		resp, err := c.Do(req)
		if err != nil {
			got <- err.Error()
			return
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		got <- string(body)
	}()
	select {
	case <-claimed:
	case <-time.After(testTimeout):
		t.Fatal("the second request did not wait for the spare being dialled")
	}
	close(release)
	if id := <-got; id != "1" {
		t.Fatalf("the second request got %q, want 1 (the number of the spare's upstream connection)", id)
	}
	mu.Lock()
	defer mu.Unlock()
	if dials > 3 {
		t.Errorf("%d dials for 2 requests, want at most 3 (the first, the spare it waited for, the next spare)", dials)
	}
}
