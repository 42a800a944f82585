package daemon

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"

	"github.com/dal-runtime/dal/internal/version"
	"github.com/dal-runtime/dal/internal/wire"
	"github.com/dal-runtime/dal/vclock"
	"golang.org/x/sys/unix"
)

// conn is one client connection. Its goroutine owns every field.
type conn struct {
	srv   *Server
	c     *net.UnixConn
	r     *bufio.Reader
	peer  *unix.Ucred
	hello bool
	role  string
	// shim connections
	sess   *session
	stream *stream
	// exec connections own the session they opened
	owned *session
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
		body, err := wire.ReadFrame(c.r, c.srv.opts.MaxFrame)
		if err != nil {
			if errors.Is(err, wire.ErrFrameSize) {
				c.reply(w, wire.Reply{Err: err.Error() + ": the connection is closed"})
			} else if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
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
		return c.srv.status(), nil
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
	switch req.Role {
	case wire.RoleExec, wire.RoleCtl:
	case wire.RoleShim:
		ss, err := c.srv.session(req.Session)
		if err != nil {
			return rep, errClose{err}
		}
		name, err := ss.claim(req.Stream, req.PID, req.Runtime)
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

// own checks that a shim request names its own session and stream.
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
		return wire.Reply{Child: ss.spawn(st.name)}, nil
	}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	switch req.Op {
	case wire.OpTicksPut:
		return wire.Reply{}, st.log.Append(req.Kinds, req.Values)
	case wire.OpTicksFetch:
		if st.recorded == nil {
			return wire.Reply{End: true}, nil
		}
		k, v, end := st.recorded.Page(req.From, clampPage(req.Max))
		return wire.Reply{Kinds: k, Values: v, End: end}, nil
	case wire.OpDrawsPut:
		if st.draws == nil {
			st.draws = make(map[string][]byte)
		}
		st.draws[req.Label] = append(st.draws[req.Label], req.Data...)
		return wire.Reply{}, nil
	case wire.OpDrawsFetch:
		data := st.served[req.Label]
		from := min(max(req.From, 0), len(data))
		to := min(from+clampPage(req.Max), len(data))
		return wire.Reply{Data: data[from:to], End: to == len(data)}, nil
	case wire.OpReport:
		r := req
		r.Kinds, r.Values, r.Data = nil, nil, nil
		st.report = &r
		return wire.Reply{}, nil
	case wire.OpDrift:
		ss.drift = append(ss.drift, wire.Drift{Stream: st.name, What: req.What, Detail: req.Detail})
		return wire.Reply{}, nil
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
		default:
			return wire.Reply{}, fmt.Errorf("unknown mode %q: use strict, seeded, logged or default", req.Mode)
		}
		c.owned = c.srv.newSession(req)
		return wire.Reply{Session: c.owned.id}, nil
	}
	if req.Op == wire.OpObserve {
		return wire.Reply{}, c.srv.observe(req)
	}
	ss := c.owned
	if ss == nil || req.Session != ss.id {
		return wire.Reply{}, fmt.Errorf("session %q is not owned by this connection", req.Session)
	}
	switch req.Op {
	case wire.OpSessionLoad:
		if err := vclock.ValidStream(req.Stream); err != nil {
			return wire.Reply{}, err
		}
		ss.mu.Lock()
		defer ss.mu.Unlock()
		st := ss.streamLocked(req.Stream)
		if st.recorded == nil {
			st.recorded = &vclock.Log{}
		}
		if len(req.Timers) > 0 {
			st.schedule = append(st.schedule, req.Timers...)
		}
		if req.Label != "" {
			if st.served == nil {
				st.served = make(map[string][]byte)
			}
			st.served[req.Label] = append(st.served[req.Label], req.Data...)
		}
		return wire.Reply{}, st.recorded.Append(req.Kinds, req.Values)
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
