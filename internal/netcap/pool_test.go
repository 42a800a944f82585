package netcap

import (
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

// TestUpstreamFollowsClientConnections: requests of one client connection
// reuse one upstream connection; another client connection gets its own;
// when a client connection closes, its upstream connection closes too. The
// server sees the connection pattern it would see without dal.
func TestUpstreamFollowsClientConnections(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	opened := 0
	closedCh := make(chan struct{}, 8)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok")) }))
	srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		mu.Lock()
		defer mu.Unlock()
		switch st {
		case http.StateNew:
			opened++
		case http.StateClosed:
			closedCh <- struct{}{}
		}
	}
	srv.Start()
	defer srv.Close()
	counts := func() int { mu.Lock(); defer mu.Unlock(); return opened }

	r := newRig(t, Config{})
	addr := r.explicit()
	a := proxyClient(addr, nil)
	for range 3 {
		get(t, a, srv.URL+"/a")
	}
	if o := counts(); o != 1 {
		t.Fatalf("3 requests on one client connection opened %d upstream connections, want 1", o)
	}
	b := proxyClient(addr, nil)
	get(t, b, srv.URL+"/b")
	if o := counts(); o != 2 {
		t.Fatalf("a second client connection shares an upstream connection: %d opened, want 2", o)
	}
	a.CloseIdleConnections()
	select {
	case <-closedCh:
	case <-time.After(testTimeout):
		t.Fatal("the upstream connection outlived its client connection")
	}
	b.CloseIdleConnections()
}
