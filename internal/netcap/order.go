package netcap

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Delivery order.
//
// When several of an agent's requests are outstanding, the order in which
// their responses reach it decides which of its threads, goroutines,
// promises or processes runs first, and so which of them gets the next
// clock value or random draw. Left to the network that order is latency's,
// different in every recording and again in a replay, whose answers come
// from memory. With [Proxy.SetSettle] the proxy hands the agent its
// responses one at a time, in an order that depends only on what the agent
// sent (docs/design.md §3.1):
//
//  1. Each request, once read whole, takes a turn in the round it arrived
//     in. A round ends at each delivery.
//  2. A delivery is decided only when the proxy has read everything the
//     agent sent (every client connection blocked reading with nothing
//     unread, or holding a request that has its turn; no connection left
//     in a listener's queue) and the agent's process tree has settled:
//     every thread blocked on something only the outside can end
//     (sandbox.Cmd.Settle). Then what the agent sent, and so the set of
//     turns, is the same in every run.
//  3. Of the turns waiting, the one of the earliest round whose request
//     sorts first (a hash of its method, URL and body; arrival breaks a tie
//     of identical requests) is delivered: its response is written when
//     its upstream has answered (recording) or at once (replay), and the
//     next decision waits for it to be written.
//
// Upstream requests are forwarded as they arrive, so they still overlap:
// only their delivery is ordered. A streamed response's turn ends with its
// headers: a stream the server holds open (a model still generating for a
// client that went away) must not hold every later response back, so the
// order fixes which response starts first, and the chunks of concurrent
// streams interleave as they arrive. A tree that does not settle within the
// patience (a thread computing without end) gets its response anyway: the
// order was then latency's, which is counted ([Proxy.OrderEscapes]).
// Responses are numbered (Exchange.Seq) in delivery order, so a replay
// hands identical requests their recorded answers in the order they were
// delivered.

// orderer decides the delivery order of responses.
type orderer struct {
	settle func(context.Context) error
	// owed, when set, is told which connections owe a response (by the
	// client's port and the proxy's) whenever that changes.
	owed     func([][2]uint16)
	owedMu   sync.Mutex
	lastOwed string
	patience time.Duration
	base     context.Context
	// listeners are the proxy's, whose queues must be empty.
	listeners func() []net.Listener

	mu       sync.Mutex
	conns    map[*clientConn]struct{}
	waiting  []*turn
	current  *turn
	round    int
	arrivals int
	deciding bool
	escapes  atomic.Int64
	broken   bool // settle failed: deliver as the network decides
}

// turn is one response's place in the order.
type turn struct {
	round, arrival int
	key            [32]byte
	conn           *clientConn
	ready          chan struct{}
	gone           bool
}

func newOrderer(base context.Context, settle func(context.Context) error, owed func([][2]uint16), patience time.Duration, listeners func() []net.Listener) *orderer {
	return &orderer{settle: settle, owed: owed, patience: patience, base: base, listeners: listeners, conns: map[*clientConn]struct{}{}}
}

// track and untrack follow the proxy's client connections.
func (o *orderer) track(c *clientConn) {
	o.mu.Lock()
	o.conns[c] = struct{}{}
	o.mu.Unlock()
	c.order = o
}

func (o *orderer) untrack(c *clientConn) {
	o.mu.Lock()
	delete(o.conns, c)
	o.mu.Unlock()
	o.kick()
}

// take gives a request read whole from c its turn.
func (o *orderer) take(c *clientConn, method, url string, body []byte) *turn {
	h := sha256.New()
	h.Write([]byte(method))
	h.Write([]byte{0})
	h.Write([]byte(url))
	h.Write([]byte{0})
	h.Write(body)
	t := &turn{conn: c, ready: make(chan struct{})}
	copy(t.key[:], h.Sum(nil))
	if c != nil {
		c.turns.Add(1)
	}
	o.mu.Lock()
	t.round, t.arrival = o.round, o.arrivals
	o.arrivals++
	o.waiting = append(o.waiting, t)
	o.mu.Unlock()
	o.tellOwed()
	o.kick()
	return t
}

// await blocks until t is to be delivered, or ctx ends (false: t is
// withdrawn).
func (o *orderer) await(ctx context.Context, t *turn) bool {
	select {
	case <-t.ready:
		return true
	case <-ctx.Done():
		o.done(t)
		return false
	}
}

// done ends t: delivered (or withdrawn), the next may be decided.
func (o *orderer) done(t *turn) {
	o.mu.Lock()
	if t.gone {
		o.mu.Unlock()
		return
	}
	t.gone = true
	if o.current == t {
		o.current = nil
	}
	if i := slices.Index(o.waiting, t); i >= 0 {
		o.waiting = slices.Delete(o.waiting, i, i+1)
	}
	o.mu.Unlock()
	if t.conn != nil {
		t.conn.turns.Add(-1)
	}
	o.tellOwed()
	o.kick()
}

// streamPatience is how long a stream whose turn ended (with its
// headers) stays owed without a piece from upstream: past it, its client's
// waits are no longer held for it (a stream the server holds open for a
// client that went away, a model pausing), which counts as an escape.
const streamPatience = 2 * time.Second

// streamOwed keeps a streamed response's connection owed while pieces
// keep coming. Its methods do nothing on a nil receiver (no delivery
// order).
type streamOwed struct {
	o     *orderer
	c     *clientConn
	mu    sync.Mutex
	timer *time.Timer
	ended bool
}

// stream marks c's streamed response under way: owed until end, or
// until streamPatience passes without a piece.
func (o *orderer) stream(c *clientConn) *streamOwed {
	if o == nil || c == nil {
		return nil
	}
	st := &streamOwed{o: o, c: c}
	c.streaming.Add(1)
	st.timer = time.AfterFunc(streamPatience, st.stall)
	o.tellOwed()
	return st
}

// touch says a piece went out: owed again, for another streamPatience.
func (st *streamOwed) touch() {
	if st == nil {
		return
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.ended {
		return
	}
	st.timer.Reset(streamPatience)
	if st.c.stalled.CompareAndSwap(true, false) {
		go st.o.tellOwed()
	}
}

func (st *streamOwed) stall() {
	st.mu.Lock()
	ended := st.ended
	st.mu.Unlock()
	if ended || !st.c.stalled.CompareAndSwap(false, true) {
		return
	}
	st.o.escapes.Add(1)
	st.o.tellOwed()
}

// end says the stream is over.
func (st *streamOwed) end() {
	if st == nil {
		return
	}
	st.mu.Lock()
	if st.ended {
		st.mu.Unlock()
		return
	}
	st.ended = true
	st.timer.Stop()
	st.mu.Unlock()
	st.c.stalled.Store(false)
	st.c.streaming.Add(-1)
	st.o.tellOwed()
}

// tellOwed tells owed the connections that hold a turn: a response is
// owed to each (the syscall layer then does not let the client's waits
// on them expire on latency).
func (o *orderer) tellOwed() {
	if o.owed == nil {
		return
	}
	o.owedMu.Lock()
	defer o.owedMu.Unlock()
	o.mu.Lock()
	var pairs [][2]uint16
	for c := range o.conns {
		if c.turns.Load() > 0 || (c.streaming.Load() > 0 && !c.stalled.Load()) {
			if p, ok := ports(c.Conn); ok {
				pairs = append(pairs, p)
			}
		}
	}
	o.mu.Unlock()
	slices.SortFunc(pairs, func(a, b [2]uint16) int {
		if a[0] != b[0] {
			return int(a[0]) - int(b[0])
		}
		return int(a[1]) - int(b[1])
	})
	key := fmt.Sprint(pairs)
	if key == o.lastOwed {
		return
	}
	o.lastOwed = key
	o.owed(pairs)
}

// ports is a client connection's ports: the client's (remote) and the
// proxy's (local).
func ports(c net.Conn) ([2]uint16, bool) {
	r, ok1 := c.RemoteAddr().(*net.TCPAddr)
	l, ok2 := c.LocalAddr().(*net.TCPAddr)
	if !ok1 || !ok2 {
		return [2]uint16{}, false
	}
	return [2]uint16{uint16(r.Port), uint16(l.Port)}, true
}

// kick starts a decision when none runs, nothing is being delivered and
// a turn waits.
func (o *orderer) kick() {
	o.mu.Lock()
	start := !o.deciding && o.current == nil && len(o.waiting) > 0
	if start {
		o.deciding = true
	}
	o.mu.Unlock()
	if start {
		go o.decide()
	}
}

// decide waits until the proxy has read all the agent sent and the tree
// has settled, then picks the next turn.
func (o *orderer) decide() {
	settled := o.waitSettled()
	o.mu.Lock()
	o.deciding = false
	if o.current != nil || len(o.waiting) == 0 {
		o.mu.Unlock()
		o.kick()
		return
	}
	i := 0
	for j, t := range o.waiting {
		if before(t, o.waiting[i]) {
			i = j
		}
	}
	t := o.waiting[i]
	o.waiting = slices.Delete(o.waiting, i, i+1)
	o.current = t
	o.round++
	o.mu.Unlock()
	if !settled {
		o.escapes.Add(1)
	}
	close(t.ready)
}

func before(a, b *turn) bool {
	if a.round != b.round {
		return a.round < b.round
	}
	if c := bytes.Compare(a.key[:], b.key[:]); c != 0 {
		return c < 0
	}
	return a.arrival < b.arrival
}

// waitSettled waits until the proxy has read what the agent sent and the
// tree has settled, with the connections still read, within the
// patience; false when it ran out (or settling cannot be asked).
func (o *orderer) waitSettled() bool {
	ctx, cancel := context.WithTimeout(o.base, o.patience)
	defer cancel()
	for {
		if !o.readAll(ctx) {
			return false
		}
		if o.broken {
			return true
		}
		if err := o.settle(ctx); err != nil {
			if ctx.Err() == nil {
				o.broken = true // the sandbox cannot tell: as the network decides
				return true
			}
			return false
		}
		if o.allRead() {
			return true
		}
	}
}

// readAll waits until allRead, backing off from a few µs to 1 ms.
func (o *orderer) readAll(ctx context.Context) bool {
	wait := 10 * time.Microsecond
	for !o.allRead() {
		select {
		case <-ctx.Done():
			return false
		case <-time.After(wait):
		}
		wait = min(2*wait, time.Millisecond)
	}
	return true
}

// allRead reports whether every client connection is blocked reading with
// nothing unread, or holds a request with a turn, and no listener has a
// connection queued.
func (o *orderer) allRead() bool {
	for _, l := range o.listeners() {
		if queued(l) {
			return false
		}
	}
	o.mu.Lock()
	conns := make([]*clientConn, 0, len(o.conns))
	for c := range o.conns {
		conns = append(conns, c)
	}
	o.mu.Unlock()
	for _, c := range conns {
		if c.turns.Load() > 0 || c.closed.Load() {
			continue
		}
		if c.reading.Load() == 0 || unread(c.Conn) {
			return false
		}
	}
	return true
}

// unread reports whether c's socket holds bytes not read yet (true when
// it cannot be asked: then nothing is decided on it).
func unread(c net.Conn) bool {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return false
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	n, ierr := 0, error(nil)
	if err := raw.Control(func(fd uintptr) { n, ierr = unix.IoctlGetInt(int(fd), unix.SIOCINQ) }); err != nil || ierr != nil {
		return false
	}
	return n > 0
}

// queued reports whether listener l has connections waiting to be
// accepted (a listening TCP socket's tcpi_unacked is its accept queue).
func queued(l net.Listener) bool {
	sc, ok := l.(syscall.Conn)
	if !ok {
		return false
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	var info *unix.TCPInfo
	if err := raw.Control(func(fd uintptr) { info, _ = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO) }); err != nil || info == nil {
		return false
	}
	return info.Unacked > 0
}
