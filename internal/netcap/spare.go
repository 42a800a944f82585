package netcap

import (
	"context"
	"crypto/tls"
	"time"
)

// A spare is an upstream connection dialled (and, for HTTPS, handshaken)
// ahead of need, one per destination: a client that opens a connection
// per request (urllib, requests without a session) otherwise waits for a
// dial on every call. The next client connection that needs a new
// upstream connection to that destination takes the spare, the proxy
// dials the next one in the background, and the spare belongs from then
// on to that client connection alone, as a connection dialled for it
// would: upstream connections are never shared between client
// connections (see roundTrip). The server sees one connection more than
// the client opened, opened earlier and idle until the client's request
// comes; it is a fresh connection when used, as one dialled for the
// request is.
//
// A request that finds the spare still being dialled waits for that dial
// rather than starting its own, which could only finish later (one
// request per dial: others dial themselves).
//
// A destination gets a spare only after a connection to it succeeded, so
// a refused or failing destination is not dialled in the background. A
// spare is checked before use: a plain one with a non-blocking peek (a
// server that closed it left EOF), an HTTPS one by stopping the read
// that has been taking the server's post-handshake messages (TLS 1.3
// session tickets) since the handshake; a spare that ended meanwhile is
// closed and a fresh connection dialled. One that has not been taken for
// idleTimeout is closed, and the proxy's shutdown closes it.

// spareConn is a spare with, for HTTPS, the read watching it.
type spareConn struct {
	c     *upConn
	timer *time.Timer
	// watched is closed when the watching read returns; alive is then
	// false if it returned anything but the deadline set by usable (nil
	// for plain connections).
	watched chan struct{}
	alive   bool
}

// watch reads from c's TLS connection until usable stops it or the
// connection is closed (expired, or the proxy shutting down): the
// server's post-handshake messages are taken in the meantime, and
// anything else (data, an alert, EOF) marks the spare dead. It runs on a
// goroutine of its own, one per kept HTTPS spare.
func (s *spareConn) watch(tc *tls.Conn) {
	defer close(s.watched)
	var b [1]byte
	n, err := tc.Read(b[:])
	s.alive = n == 0 && isTimeout(err)
}

// usable stops the watch (HTTPS) and reports whether s is still open and
// silent. It is called once, by the spare's taker.
func (s *spareConn) usable() bool {
	if s.watched == nil {
		return s.c.br.Buffered() == 0 && peekAlive(s.c.raw)
	}
	s.c.conn.SetReadDeadline(time.Unix(1, 0))
	<-s.watched
	s.c.conn.SetReadDeadline(time.Time{})
	return s.alive
}

// spareDial is a spare being dialled.
type spareDial struct {
	done chan struct{} // closed when the dial has ended
	// claimed: a request waits for it, and gets c (nil if the dial
	// failed) rather than it being kept.
	claimed bool
	c       *upConn
}

// takeSpare returns the spare for key as a new connection of the client
// connection whose key is clientKey: the one kept if it is still open,
// else the one being dialled, once dialled, if no other request waits
// for it; nil when there is none (or ctx ended).
func (u *upstream) takeSpare(ctx context.Context, key, clientKey string) *upConn {
	u.mu.Lock()
	s := u.spares[key]
	delete(u.spares, key)
	d := u.dialling[key]
	if s == nil && d != nil && !d.claimed {
		d.claimed = true
		if u.spareClaimed != nil {
			u.spareClaimed()
		}
	} else {
		d = nil
	}
	u.mu.Unlock()
	var c *upConn
	switch {
	case s != nil:
		s.timer.Stop()
		if !s.usable() {
			s.c.close()
			return nil
		}
		c = s.c
	case d != nil:
		select {
		case <-d.done:
		case <-ctx.Done():
			go func() {
				<-d.done
				if d.c != nil {
					d.c.close()
				}
			}()
			return nil
		}
		if c = d.c; c == nil {
			return nil
		}
	default:
		return nil
	}
	c.key = clientKey
	c.spare = true
	return c
}

// prepareSpare starts dialling a spare for key, unless one is kept or
// being dialled, or the upstream is closed.
func (u *upstream) prepareSpare(key, addr, serverName string, useTLS bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.closed || u.spares[key] != nil || u.dialling[key] != nil {
		return
	}
	d := &spareDial{done: make(chan struct{})}
	u.dialling[key] = d
	u.spareDials.Add(1)
	go u.dialSpare(key, addr, serverName, useTLS, d)
}

// dialSpare dials d, a spare for key, and hands it to the request that
// claimed it or keeps it; a failure is dropped (the request dials, and
// reports, itself).
func (u *upstream) dialSpare(key, addr, serverName string, useTLS bool, d *spareDial) {
	defer u.spareDials.Done()
	defer close(d.done)
	c, err := u.connect(u.spareCtx, key, addr, serverName, useTLS)
	u.mu.Lock()
	defer u.mu.Unlock()
	delete(u.dialling, key)
	if err != nil {
		return
	}
	if u.closed || u.spares[key] != nil {
		c.close()
		return
	}
	if d.claimed {
		d.c = c
		return
	}
	s := &spareConn{c: c}
	if tc, ok := c.conn.(*tls.Conn); ok {
		s.watched = make(chan struct{})
		go s.watch(tc)
	}
	s.timer = time.AfterFunc(idleTimeout, func() { u.expireSpare(key, s) })
	u.spares[key] = s
	if u.spareKept != nil {
		u.spareKept()
	}
}

// expireSpare closes s if it is still key's spare.
func (u *upstream) expireSpare(key string, s *spareConn) {
	u.mu.Lock()
	if u.spares[key] != s {
		u.mu.Unlock()
		return
	}
	delete(u.spares, key)
	u.mu.Unlock()
	s.c.close()
}

// closeSpares closes the spares and stops the dials under way; called
// with u.mu held, once u.closed is set.
func (u *upstream) closeSpares() {
	u.stopSpares()
	for key, s := range u.spares {
		s.timer.Stop()
		s.c.close()
		delete(u.spares, key)
	}
}
