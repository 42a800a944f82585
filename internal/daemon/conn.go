package daemon

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"time"

	"github.com/dal-runtime/dal/internal/version"
	"github.com/dal-runtime/dal/internal/wire"
	"github.com/dal-runtime/dal/vclock"
	"golang.org/x/sys/unix"
)

// conn is one client connection. Its goroutine owns every field; the
// session a shim joined may close c.c from another goroutine when it ends.
type conn struct {
	srv   *Server
	c     *net.UnixConn
	r     *bufio.Reader
	peer  *unix.Ucred
	hello bool
	role  string
	// shim connections: the session and stream granted at hello, which
	// authorize every later op on the connection
	sess   *session
	stream *stream
	// exec connections own the session they opened
	owned *session
	// bound is the session whose own socket the connection arrived on: it
	// may only be one of that session's processes (sessionsock.go)
	bound *session
	// refuse is the answer to the first request of a connection that
	// arrived while dald was full (serveRefusal)
	refuse error
	// deadline is whether a read deadline is set (the connection holds no
	// open session)
	deadline bool
}

// errClose marks an error after which the connection is dropped.
type errClose struct{ error }

func (c *conn) serve() {
	defer c.srv.wg.Done()
	defer c.srv.dropConn(c)
	defer c.c.Close()
	defer c.bye()
	w := bufio.NewWriter(c.c)
	for {
		c.armIdle()
		limit := c.srv.opts.MaxFrame
		if !c.hello {
			limit = min(limit, handshakeFrame)
		}
		body, err := wire.ReadFrame(c.r, limit)
		if err != nil {
			switch {
			case errors.Is(err, wire.ErrFrameSize):
				c.reply(w, wire.Reply{Err: err.Error() + ": the connection is closed"})
			case errors.Is(err, os.ErrDeadlineExceeded):
				// ID 0: about the connection, not a request.
				c.reply(w, wire.Reply{Err: fmt.Sprintf("dald closed this connection after %s without a request while it held no open session (dald --idle-timeout)", c.srv.lim.IdleTimeout)})
				c.srv.opts.Log.Debug("idle connection closed", "role", c.role, "uid", credUID(c.peer))
			case !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed):
				c.srv.opts.Log.Debug("read", "err", err)
			}
			return
		}
		req, err := wire.DecodeRequest(body)
		if err != nil {
			c.reply(w, wire.Reply{ID: req.ID, Err: err.Error() + ": frames must be msgpack maps with an op; the connection is closed"})
			return
		}
		rep, err := c.handle(req)
		rep.ID = req.ID
		if err != nil {
			rep.OK, rep.Err = false, err.Error()
		} else {
			rep.OK = true
		}
		if werr := c.reply(w, rep); werr != nil {
			return
		}
		var ec errClose
		if errors.As(err, &ec) {
			return
		}
	}
}

// armIdle sets a read deadline while the connection holds no open session
// and clears it once it does. A shim's session closes its connection when
// it ends, so no connection outlives both.
func (c *conn) armIdle() {
	holds := c.owned != nil || c.sess != nil
	switch {
	case !holds:
		c.c.SetReadDeadline(time.Now().Add(c.srv.lim.IdleTimeout))
		c.deadline = true
	case c.deadline:
		c.c.SetReadDeadline(time.Time{})
		c.deadline = false
	}
}

func (c *conn) reply(w *bufio.Writer, rep wire.Reply) error {
	body, err := wire.Encode(&rep)
	if err == nil {
		err = wire.WriteFrame(w, body, c.srv.opts.MaxFrame)
	}
	if err == nil {
		err = w.Flush()
	}
	return err
}

// bye marks a shim's stream as no longer live.
func (c *conn) bye() {
	if c.stream != nil {
		c.sess.mu.Lock()
		c.stream.live = false
		delete(c.sess.conns, c)
		c.sess.mu.Unlock()
	}
}

func (c *conn) handle(req wire.Request) (wire.Reply, error) {
	if !c.hello {
		if req.Op != wire.OpHello {
			return wire.Reply{}, errClose{fmt.Errorf("the first request must be hello, got %q", req.Op)}
		}
		return c.handleHello(req)
	}
	switch req.Op {
	case wire.OpHello:
		return wire.Reply{}, errors.New("hello was already said on this connection")
	case wire.OpStatus:
		return c.srv.status(c.peer, c.bound), nil
	}
	switch c.role {
	case wire.RoleShim:
		return c.handleShim(req)
	case wire.RoleExec:
		return c.handleExec(req)
	}
	return wire.Reply{}, fmt.Errorf("op %q is not available to role %q", req.Op, c.role)
}

func (c *conn) handleHello(req wire.Request) (wire.Reply, error) {
	rep := wire.Reply{Proto: wire.Proto, Version: version.Version}
	if req.Proto != wire.Proto {
		return rep, errClose{fmt.Errorf("this dald speaks protocol %d (release %s), the client speaks %d: use dal-exec and dald from the same release", wire.Proto, version.Version, req.Proto)}
	}
	if b := c.bound; b != nil && (req.Role != wire.RoleShim || req.Session != b.id) {
		return rep, errClose{fmt.Errorf("this socket is session %s's, for its processes only (role shim, session %s); dal-exec and other sessions use dald's own socket", b.id, b.id)}
	}
	switch req.Role {
	case wire.RoleExec, wire.RoleCtl:
	case wire.RoleShim:
		ss, err := c.srv.session(req.Session)
		if err != nil {
			return rep, errClose{err}
		}
		if !ss.tokenMatches(req.Token) {
			c.srv.opts.Log.Warn("refused hello: wrong session token", "session", ss.id, "uid", credUID(c.peer), "pid", credPID(c.peer))
			what := "is wrong"
			if req.Token == "" {
				what = "is missing"
			}
			return rep, errClose{fmt.Errorf("hello for session %s: the session token %s: a process joins a session only with the %s dal-exec gave the agent", ss.id, what, wire.EnvToken)}
		}
		if ss.figures {
			return rep, errClose{fmt.Errorf("session %s only reports figures: no process may join it", ss.id)}
		}
		name, err := ss.claim(c, req.Stream, req.PID, req.Runtime)
		if err != nil {
			return rep, errClose{err}
		}
		ss.mu.Lock()
		c.stream = ss.streams[name]
		ss.mu.Unlock()
		c.sess = ss
		rep.Stream, rep.Mode, rep.Seed, rep.Replay, rep.Batch = name, ss.mode, ss.seed, ss.replay, DefaultBatch
		rep.EpochNS, rep.MonoNS, rep.QuantumNS = ss.cfg.EpochNS, ss.cfg.MonoNS, ss.cfg.QuantumNS
	default:
		return rep, errClose{fmt.Errorf("unknown role %q: expected shim, exec or ctl", req.Role)}
	}
	c.hello, c.role = true, req.Role
	return rep, nil
}

// own checks that a shim request names its own session and stream. The
// connection is the credential: it proved the session's token at hello.
func (c *conn) own(req wire.Request) error {
	if req.Session != c.sess.id {
		return fmt.Errorf("request names session %q, this connection belongs to %q", req.Session, c.sess.id)
	}
	if req.Stream != "" && req.Stream != c.stream.name {
		return fmt.Errorf("request names stream %q, this connection owns %q", req.Stream, c.stream.name)
	}
	return nil
}

func (c *conn) handleShim(req wire.Request) (wire.Reply, error) {
	if err := c.own(req); err != nil {
		return wire.Reply{}, err
	}
	ss, st := c.sess, c.stream
	if req.Op == wire.OpSpawn {
		child, err := ss.spawn(st.name)
		return wire.Reply{Child: child}, err
	}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	switch req.Op {
	case wire.OpTicksPut:
		if len(req.Kinds) != len(req.Values) {
			return wire.Reply{}, fmt.Errorf("tick batch has %d kinds for %d values", len(req.Kinds), len(req.Values))
		}
		if err := ss.addTicksLocked(st.name, len(req.Values)); err != nil {
			return wire.Reply{}, err
		}
		if err := st.log.Append(req.Kinds, req.Values); err != nil {
			ss.ticks -= len(req.Values)
			return wire.Reply{}, err
		}
		return wire.Reply{}, nil
	case wire.OpTicksFetch:
		if st.recorded == nil {
			return wire.Reply{End: true}, nil
		}
		k, v, end := st.recorded.Page(req.From, clampPage(req.Max))
		return wire.Reply{Kinds: k, Values: v, End: end}, nil
	case wire.OpDrawsPut:
		return wire.Reply{}, ss.addDrawsLocked(st.name, &st.draws, req.Label, req.Data)
	case wire.OpDrawsFetch:
		data := st.served[req.Label]
		from := min(max(req.From, 0), len(data))
		to := min(from+clampPage(req.Max), len(data))
		return wire.Reply{Data: data[from:to], End: to == len(data)}, nil
	case wire.OpReport:
		return wire.Reply{}, ss.setReportLocked(st, req)
	case wire.OpDrift:
		return wire.Reply{}, ss.addDriftLocked(wire.Drift{Stream: st.name, What: req.What, Detail: req.Detail})
	case wire.OpScheduleFetch:
		return wire.Reply{Timers: st.schedule}, nil
	}
	return wire.Reply{}, fmt.Errorf("unknown op %q", req.Op)
}

func clampPage(n int) int {
	if n <= 0 || n > maxPage {
		return maxPage
	}
	return n
}

func (c *conn) handleExec(req wire.Request) (wire.Reply, error) {
	if req.Op == wire.OpSessionOpen {
		if c.owned != nil {
			return wire.Reply{}, errors.New("this connection already has a session open")
		}
		switch req.Mode {
		case "strict", "seeded", "logged", "default":
		case "":
			if !req.Figures {
				return wire.Reply{}, errors.New("session.open needs a mode: strict, seeded, logged or default")
			}
		default:
			return wire.Reply{}, fmt.Errorf("unknown mode %q: use strict, seeded, logged or default", req.Mode)
		}
		ss, err := c.srv.newSession(req, c.peer)
		if err != nil {
			return wire.Reply{}, err
		}
		c.owned = ss
		rep := wire.Reply{Session: ss.id, Token: string(ss.token)}
		if ss.sock != nil {
			rep.Socket = ss.sock.path
		}
		return rep, nil
	}
	ss := c.owned
	if ss == nil || req.Session != ss.id {
		return wire.Reply{}, fmt.Errorf("session %q is not owned by this connection: only the connection that opened a session may use %s on it", req.Session, req.Op)
	}
	switch req.Op {
	case wire.OpObserve:
		return wire.Reply{}, c.srv.observe(ss, req)
	case wire.OpSessionLoad:
		if err := vclock.ValidStream(req.Stream); err != nil {
			return wire.Reply{}, err
		}
		if len(req.Stream) > maxStreamName {
			return wire.Reply{}, fmt.Errorf("stream name of %d bytes: stream names are at most %d bytes", len(req.Stream), maxStreamName)
		}
		if len(req.Kinds) != len(req.Values) {
			return wire.Reply{}, fmt.Errorf("tick batch has %d kinds for %d values", len(req.Kinds), len(req.Values))
		}
		ss.mu.Lock()
		defer ss.mu.Unlock()
		if err := ss.addTicksLocked(req.Stream, len(req.Values)+len(req.Timers)); err != nil {
			return wire.Reply{}, err
		}
		st := ss.streamLocked(req.Stream)
		if st.recorded == nil {
			st.recorded = &vclock.Log{}
		}
		if req.Label != "" {
			if err := ss.addDrawsLocked(req.Stream, &st.served, req.Label, req.Data); err != nil {
				ss.ticks -= len(req.Values) + len(req.Timers)
				return wire.Reply{}, err
			}
		}
		if err := st.recorded.Append(req.Kinds, req.Values); err != nil {
			ss.ticks -= len(req.Values) + len(req.Timers)
			return wire.Reply{}, err
		}
		if len(req.Timers) > 0 {
			st.schedule = append(st.schedule, req.Timers...)
		}
		return wire.Reply{}, nil
	case wire.OpSessionDump:
		streams, drift := ss.dump()
		return wire.Reply{Streams: streams, Drift: drift}, nil
	case wire.OpSessionTicks:
		ss.mu.Lock()
		defer ss.mu.Unlock()
		st := ss.streams[req.Stream]
		if st == nil {
			return wire.Reply{End: true}, nil
		}
		k, v, end := st.log.Page(req.From, clampPage(req.Max))
		return wire.Reply{Kinds: slices.Clone(k), Values: slices.Clone(v), End: end}, nil
	case wire.OpSessionDraws:
		ss.mu.Lock()
		defer ss.mu.Unlock()
		var data []byte
		if st := ss.streams[req.Stream]; st != nil {
			data = st.draws[req.Label]
		}
		from := min(max(req.From, 0), len(data))
		to := min(from+clampPage(req.Max), len(data))
		return wire.Reply{Data: slices.Clone(data[from:to]), End: to == len(data)}, nil
	case wire.OpSessionClose:
		c.srv.mu.Lock()
		c.srv.endSessionLocked(ss)
		c.srv.mu.Unlock()
		c.owned = nil
		return wire.Reply{}, nil
	case wire.OpTraceStart:
		return c.srv.traceStart(ss, c.peer, req.FromExec)
	case wire.OpTraceReport:
		return c.srv.traceReport(ss)

	}
	return wire.Reply{}, fmt.Errorf("unknown op %q", req.Op)
}

// serveRefusal answers a client that arrived while dald was full: its first
// request gets c.refuse, then the connection closes. The caller set a
// deadline on c.c.
func (c *conn) serveRefusal() {
	defer c.srv.wg.Done()
	defer c.c.Close()
	body, err := wire.ReadFrame(c.r, handshakeFrame)
	if err != nil {
		return
	}
	req, _ := wire.DecodeRequest(body)
	c.reply(bufio.NewWriter(c.c), wire.Reply{ID: req.ID, Err: c.refuse.Error()})
}
