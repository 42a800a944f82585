package netcap

import (
	"context"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// Read boundaries.
//
// A client reads whatever has reached its socket: two pieces written
// before it read the first arrive as one read. To give a client one read
// per recorded piece, in recording and in replay alike, a streamed
// response is written piece by piece (its headers first), and after each
// piece the proxy waits until the client has read everything written to
// its connection so far: the client's socket has received as many bytes
// as dal wrote and holds none unread. The client's socket is found with
// sock_diag in the network namespace of the connection (the client is on
// the same host: loopback, inside the agent's namespace). It costs no
// sleeping when the client reads at once, and at most drainPatience when
// it does not read at all; after such a wait the rest of the response is
// written without waiting. Where the client's socket cannot be seen
// (another host, a kernel without sock_diag, no privilege to enter the
// namespace), pieces are written without waiting, as before.

// drainPatience is how long the client may go without reading anything
// before the proxy stops waiting for it for the rest of the response.
const drainPatience = 2 * time.Second

// spinChecks is how many times the client's socket is looked at, giving
// way in between, before the proxy sleeps: a few µs each.
const spinChecks = 20

// clientConn is an accepted client connection: it counts the bytes
// written to it, so that the proxy can tell when the client has read
// them all.
type clientConn struct {
	net.Conn
	written atomic.Uint64
	diag    *diagSet

	once sync.Once
	peer *peerSocket // nil: the client's socket cannot be watched
}

func (c *clientConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.written.Add(uint64(n))
	return n, err
}

// clientOf finds the clientConn under c (sniffed, hijacked).
func clientOf(c net.Conn) *clientConn {
	for {
		switch v := c.(type) {
		case *clientConn:
			return v
		case *sniffedConn:
			c = v.Conn
		default:
			return nil
		}
	}
}

// drained waits until the client has read every byte written to c, the
// connection is gone, or ctx ends. It returns false when the client read
// nothing for drainPatience: the caller stops waiting for it.
func (c *clientConn) drained(ctx context.Context) bool {
	c.once.Do(func() { c.peer = c.diag.watch(c.Conn) })
	if c.peer == nil {
		return true
	}
	var (
		last     peerState
		progress = time.Now()
		pause    time.Duration
		// arrived: every byte written is known to have reached the
		// client's socket before the next answer is asked for. Only then
		// is an answer's unread count to be believed: the kernel reads
		// it (rcv_nxt - copied_seq, unlocked) before it locks the socket
		// for tcp_info's bytes_received, so bytes that reach the socket
		// in between (a delivery deferred to softirq, or held in the
		// backlog while the client is inside a socket call) are counted
		// as received but not as unread, and the client would get them
		// together with the next piece. It is known when the client's
		// socket acknowledged them all (our send queue is empty: one
		// ioctl, the usual case on loopback), or when an earlier answer
		// showed them received.
		arrived = c.peer.acked()
	)
	for i := 0; ; i++ {
		st, ok := c.peer.state()
		if !ok {
			return true
		}
		if st.received >= c.written.Load() {
			if arrived && st.unread == 0 {
				return true
			}
			if !arrived {
				arrived = true
				continue // ask again at once
			}
		}
		if st != last {
			last, progress = st, time.Now()
		} else if time.Since(progress) > drainPatience {
			return false
		}
		if ctx.Err() != nil {
			return true
		}
		// The client is usually about to read: give way to other
		// goroutines and threads a few times, then sleep on this thread
		// (a Go timer would cost the netpoller's millisecond), 10 µs
		// doubling to 500 µs.
		if i < spinChecks {
			yield()
			continue
		}
		pause = min(max(2*pause, 10*time.Microsecond), 500*time.Microsecond)
		nap(pause)
	}
}

// peerState is what the client's socket says.
type peerState struct {
	received uint64 // bytes it has received from dal, in order
	unread   uint32 // of those, bytes the client has not read
}

// streamWriter writes a streamed response to r piece by piece so that
// every piece is a read of its own for the client: before a piece leaves
// for the client's socket, the one before must have been read. Waiting
// then, rather than right after each write, costs nothing when the next
// piece comes later than the client reads (a model generating).
type streamWriter struct {
	rc      *http.ResponseController
	ctx     context.Context
	c       *clientConn
	pending bool // a piece left that the client may not have read
}

func newStreamWriter(w http.ResponseWriter, r *http.Request) *streamWriter {
	s := &streamWriter{rc: http.NewResponseController(w), ctx: r.Context()}
	if info, ok := r.Context().Value(connInfoKey{}).(*connInfo); ok {
		s.c = info.client
	}
	return s
}

// flush sends what was written since the last flush, once the client has
// read what went before.
func (s *streamWriter) flush() error {
	s.settle()
	s.pending = true
	return s.rc.Flush()
}

// settle waits until the client has read what was sent; call it before
// the response ends, so that its last chunk is a read of its own too.
func (s *streamWriter) settle() {
	if s.pending && s.c != nil && !s.c.drained(s.ctx) {
		s.c = nil // it stopped reading: stop waiting for it
	}
	s.pending = false
}
