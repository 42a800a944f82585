package netcap

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dal-runtime/dal/internal/netcap/har"
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

	// The delivery order (order.go): reading counts the Reads under way,
	// turns the requests read whole that hold a turn; closed is set at
	// Close.
	order     *orderer
	reading   atomic.Int32
	turns     atomic.Int32
	closed    atomic.Bool
	streaming atomic.Int32 // streamed responses under way (order.go)
	stalled   atomic.Bool  // one of them sent nothing for streamPatience
}

func (c *clientConn) Read(p []byte) (int, error) {
	c.reading.Add(1)
	n, err := c.Conn.Read(p)
	c.reading.Add(-1)
	return n, err
}

func (c *clientConn) Close() error {
	if c.closed.CompareAndSwap(false, true) && c.order != nil {
		defer c.order.untrack(c)
	}
	return c.Conn.Close()
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

// drain is what waiting for the client to read found out.
type drain int

const (
	// drainRead: the client read every byte written to its connection
	// (it may have closed it since).
	drainRead drain = iota
	// drainLeft: it closed its connection without reading them all.
	drainLeft
	// drainBlind: it cannot be told: the client's socket cannot be
	// watched, it read nothing for drainPatience, or the proxy is
	// shutting down.
	drainBlind
)

// drained waits until the client has read every byte written to c, or
// is known to have closed its connection without reading them all. It
// gives up (drainBlind) when the client read nothing for drainPatience
// or ctx ends (the proxy shutting down: not the request's context, which
// ends when the client closes, for then it is still to be found out
// whether it read everything first).
//
// A client's close is told apart this way: its socket, while it is found
// with its tcp_info (open, or closed and still finishing: FIN_WAIT),
// counts what it received and left unread; a closed socket never takes
// more bytes (data arriving after close is answered with a reset). Once
// it is gone (or a time-wait socket without tcp_info), our end says how
// it closed: a FIN, sent only by a socket closed with nothing unread,
// that acknowledged every byte we wrote (our end in CLOSE_WAIT with an
// empty send queue) means the client had read them all; a reset (our
// end in CLOSE), or a FIN that left bytes unacknowledged, means it had
// not.
func (c *clientConn) drained(ctx context.Context) drain {
	c.once.Do(func() { c.peer = c.diag.watch(c.Conn) })
	if c.peer == nil {
		return drainBlind
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
		switch {
		case !ok:
			return drainBlind
		case st.gone:
			switch c.peer.ours() {
			case endRead:
				return drainRead
			case endUnread:
				return drainLeft
			case endUnknown:
				return drainBlind
			}
			// endOpen: the client's FIN or reset has not reached our end
			// yet (it waits in our socket's backlog): ask again.
		case st.received >= c.written.Load():
			if arrived && st.unread == 0 {
				return drainRead
			}
			if !arrived {
				arrived = true
				continue // ask again at once
			}
		}
		if st != last {
			last, progress = st, time.Now()
		} else if time.Since(progress) > drainPatience {
			return drainBlind
		}
		if ctx.Err() != nil {
			return drainBlind
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

// How our end of a connection whose client's socket is gone says the
// client closed it.
const (
	endOpen    = iota // no close seen yet
	endRead           // a FIN acknowledging every byte written
	endUnread         // a reset, or a FIN leaving bytes unacknowledged
	endUnknown        // cannot be asked
)

// peerState is what the client's socket says.
type peerState struct {
	received uint64 // bytes it has received from dal, in order
	unread   uint32 // of those, bytes the client has not read
	// gone: the socket is closed and no longer says what it received
	// (not found, or a time-wait socket).
	gone bool
}

// errClientLeft is a piece not written because the client had closed its
// connection without reading the piece before.
var errClientLeft = errors.New("the client closed its connection")

// streamWriter writes a streamed response to r piece by piece so that
// every piece is a read of its own for the client: before a piece leaves
// for the client's socket, the one before must have been read. Waiting
// then, rather than right after each write, costs nothing when the next
// piece comes later than the client reads (a model generating).
//
// It also counts the body bytes the client read: a piece counts once the
// client is seen to have read it, not when it was handed to the
// connection, for a client that reads a piece and closes may find the
// next one in its socket or not, by a race. Where the client cannot be
// watched, a piece counts once handed, and the count is not exact.
type streamWriter struct {
	rc *http.ResponseController
	// base ends when the proxy shuts down (the request's context also
	// ends when the client closes, when there is still to be found out
	// what it read).
	base context.Context
	c    *clientConn // nil: not watched

	pending     bool  // a piece left that the client may not have read
	pendingBody int64 // the body bytes in it
	read        int64 // body bytes the client read
	exact       bool  // read counts what the client read, not what it was handed
	left        bool  // the client closed its connection without reading everything
	// stream, with a delivery order, keeps the connection owed while
	// pieces keep coming (order.go).
	stream *streamOwed
}

func newStreamWriter(w http.ResponseWriter, r *http.Request, base context.Context) *streamWriter {
	s := &streamWriter{rc: http.NewResponseController(w), base: base}
	if info, ok := r.Context().Value(connInfoKey{}).(*connInfo); ok && info.client != nil {
		s.c, s.exact = info.client, true
	}
	return s
}

// headers sends the response's headers as a piece of their own.
func (s *streamWriter) headers() error {
	s.pending, s.pendingBody = true, 0
	if err := s.rc.Flush(); err != nil {
		s.left = true
		return err
	}
	return nil
}

// write writes p to w and flushes it, once the client has read what went
// before; errClientLeft when it closed its connection instead.
func (s *streamWriter) write(w io.Writer, p []byte) error {
	if s.settle(); s.left {
		return errClientLeft
	}
	_, err := w.Write(p)
	if err == nil {
		err = s.rc.Flush()
	}
	if err != nil {
		s.left = true
		return err
	}
	s.stream.touch()
	if s.c == nil {
		s.read += int64(len(p)) // handed: all that can be known
		return nil
	}
	s.pending, s.pendingBody = true, int64(len(p))
	return nil
}

// settle waits until the client has read what was sent, or closed its
// connection; call it before the response ends, so that its last chunk
// is a read of its own too, and before counting what the client read.
func (s *streamWriter) settle() {
	if !s.pending {
		return
	}
	s.pending = false
	if s.c == nil {
		return
	}
	switch s.c.drained(s.base) {
	case drainRead:
		s.read += s.pendingBody
	case drainLeft:
		s.left = true
	case drainBlind:
		// It stopped reading, or cannot be watched: stop waiting for
		// it, and count what is handed from now on.
		s.read += s.pendingBody
		s.c, s.exact = nil, false
	}
}

// consumed returns the body bytes the client read, and whether that is
// what it was seen to read (exact) rather than what it was handed.
func (s *streamWriter) consumed() (int64, bool) {
	s.settle()
	return s.read, s.exact
}

// chunksWithin is how many of chunks lie wholly within the first n bytes
// of their concatenation.
func chunksWithin(chunks []har.Chunk, n int64) int {
	var end int64
	for i, c := range chunks {
		if end += int64(len(c.Data)); end > n {
			return i
		}
	}
	return len(chunks)
}
