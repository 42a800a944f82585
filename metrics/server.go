package metrics

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// DefaultAddr is where dald serves /metrics unless told otherwise: loopback
// only, so exposing it to the network is a deliberate --metrics-addr.
const DefaultAddr = "127.0.0.1:9464"

// shutdownGrace bounds how long Server waits for in-flight scrapes once its
// context is done.
const shutdownGrace = 5 * time.Second

// Handler serves the exposition of every family m holds, including the Go
// and process collectors when they are on. It answers in the classic text
// format unless Options.OpenMetrics was set and the scraper asks for
// OpenMetrics.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.gatherer(), promhttp.HandlerOpts{
		EnableOpenMetrics: m.opts.OpenMetrics,
	})
}

const indexPage = `<!DOCTYPE html>
<html><head><title>dald metrics</title></head>
<body><h1>dald</h1>
<p><a href="/metrics">/metrics</a>: Prometheus exposition of dal_* (and go_*, process_*) metrics.</p>
<p><a href="/healthz">/healthz</a>: answers "ok" while dald serves.</p>
</body></html>
`

// mux routes /metrics, /healthz and a link page at /.
func (m *Metrics) mux() *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle("/metrics", m.Handler())
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, indexPage)
	})
	if m.opts.Routes != nil {
		m.opts.Routes(mux)
	}
	return mux
}

// Server is the metrics HTTP endpoint. It runs until the context given to
// Serve or ServeListener is done, then drains in-flight scrapes.
type Server struct {
	ln   net.Listener
	done chan struct{}
	err  error
}

// addrInUseError tells the user which flag to change; errors.Is still finds
// syscall.EADDRINUSE underneath.
type addrInUseError struct {
	addr string
	err  error
}

func (e *addrInUseError) Error() string {
	return fmt.Sprintf("the metrics address %s is in use: pass --metrics-addr or stop the other process", e.addr)
}
func (e *addrInUseError) Unwrap() error { return e.err }

// Serve listens on addr (host:port; port 0 picks a free one, see Addr) and
// serves m until ctx is done. The listen happens before Serve returns, so a
// bad or busy address is its error, not a later one.
func Serve(ctx context.Context, addr string, m *Metrics) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if errors.Is(err, syscall.EADDRINUSE) {
		return nil, &addrInUseError{addr: addr, err: err}
	}
	if err != nil {
		return nil, fmt.Errorf("listen for metrics on %s: %w", addr, err)
	}
	return ServeListener(ctx, ln, m), nil
}

// ServeListener serves m on ln until ctx is done. It takes ownership of ln
// (a socket-activated one, for instance) and closes it on shutdown.
func ServeListener(ctx context.Context, ln net.Listener, m *Metrics) *Server {
	s := &Server{ln: ln, done: make(chan struct{})}
	hs := &http.Server{
		Handler:           m.mux(),
		ReadHeaderTimeout: 10 * time.Second,
	}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	go func() {
		defer close(s.done)
		select {
		case err := <-served: // died on its own: the listener failed
			s.err = fmt.Errorf("serve metrics on %s: %w", ln.Addr(), err)
			return
		case <-ctx.Done():
		}
		sctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
		defer cancel()
		if err := hs.Shutdown(sctx); err != nil {
			hs.Close() // scrapes still running after the grace period are cut
		}
		<-served
	}()
	return s
}

// Addr is the address the server listens on, with the port it got.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Wait blocks until the server has stopped: after the context is done and
// in-flight scrapes have drained, or earlier if serving failed. Cancellation
// is not an error; a failure to serve is.
func (s *Server) Wait() error {
	<-s.done
	return s.err
}

// Done is closed when the server has stopped.
func (s *Server) Done() <-chan struct{} { return s.done }
