package daemon

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"syscall"
	"time"

	"github.com/dal-runtime/dal/internal/version"
	"github.com/dal-runtime/dal/internal/wire"
	"golang.org/x/sys/unix"
)

// DefaultBatch is the number of ticks a shim buffers between uploads, and
// the prefetch size it asks for on replay.
const DefaultBatch = 4096

// maxPage caps how many ticks or bytes one reply carries, well inside a frame.
const maxPage = 65536

// Options configure a Server.
type Options struct {
	MaxFrame int          // frame limit; wire.DefaultMaxFrame if zero
	Limits   Limits       // zero fields take DefaultLimits
	Log      *slog.Logger // dald's own log; discarded if nil
	// Metrics, when set, is kept up to date: sessions, clock reads,
	// syscalls by category, and what dal-exec reports (replays, coverage,
	// revert times, network outcomes).
	Metrics Metrics
	// Tracer, when set, traces every session's process tree; nil means
	// boundary tracing is off (TracerOff says why).
	Tracer    Tracer
	TracerOff string
}

// Server is a running dald. Create it with Listen; stop it with Shutdown.
type Server struct {
	opts    Options
	lim     Limits
	path    string
	ln      *net.UnixListener
	started time.Time

	mu       sync.Mutex
	nextNum  uint32 // the last session number handed out (the tracer's key)
	sessions map[string]*session
	conns    map[*conn]struct{}
	bound    int // of conns, those on sessions' own sockets (not counted against Limits.Conns)
	refusing int // connections being told dald is full
	closing  bool
	wg       sync.WaitGroup
	idle     chan struct{} // closed when closing and no conns remain
}

// ErrInUse reports a socket path a live daemon answers on.
var ErrInUse = errors.New("a dald is already listening")

// Listen binds the socket at path and starts serving. An existing socket
// that nothing answers on is stale and replaced; a live one is not touched
// (ErrInUse); a path that exists and is not a socket is refused. The socket
// is mode 0600 and every connection's peer credentials are checked: only the
// daemon's own user and root may connect.
func Listen(path string, opts Options) (*Server, error) {
	if err := clearStale(path); err != nil {
		return nil, err
	}
	// Made 0600 once bound, not through the umask, which is the whole
	// process's: an embedded dald's caller forks meanwhile (dal-exec run
	// starts its sandbox while its dald starts), and a process forked then
	// inherited 0177, a directory made then was 0600. Until the chmod the
	// peer check alone turns other users away.
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", path, explainPathErr(path, err))
	}
	ln.SetUnlinkOnClose(true)
	if err := unix.Fchmodat(unix.AT_FDCWD, path, 0o600, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		ln.Close()
		return nil, fmt.Errorf("make %s private (mode 0600): %w", path, err)
	}
	return Serve(ln, opts), nil
}

// Serve serves on a listener someone else bound, e.g. one systemd passed
// by socket activation (whose socket file systemd owns). It takes
// ownership of ln.
func Serve(ln *net.UnixListener, opts Options) *Server {
	if opts.MaxFrame == 0 {
		opts.MaxFrame = wire.DefaultMaxFrame
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	path := ""
	if a, ok := ln.Addr().(*net.UnixAddr); ok {
		path = a.Name
	}
	s := &Server{
		opts: opts, lim: opts.Limits.withDefaults(), path: path, ln: ln, started: time.Now(),
		sessions: make(map[string]*session),
		conns:    make(map[*conn]struct{}),
		idle:     make(chan struct{}),
	}
	s.wg.Add(1)
	go s.accept()
	return s
}

// Path returns the socket path.
func (s *Server) Path() string { return s.path }

func clearStale(path string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("socket path %s: %w", path, err)
	}
	if fi.Mode().Type() != os.ModeSocket {
		return fmt.Errorf("socket path %s exists and is not a socket: choose another --socket or remove the file", path)
	}
	c, err := net.DialTimeout("unix", path, time.Second)
	if err == nil {
		c.Close()
		return fmt.Errorf("%w at %s: use it with --socket %s, or stop it first", ErrInUse, path, path)
	}
	if !errors.Is(err, syscall.ECONNREFUSED) && !errors.Is(err, syscall.ENOENT) {
		return fmt.Errorf("probe socket %s: %w", path, err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove stale socket %s: %w", path, err)
	}
	return nil
}

func explainPathErr(path string, err error) error {
	if errors.Is(err, syscall.EACCES) || errors.Is(err, syscall.EROFS) || errors.Is(err, syscall.ENOENT) {
		return fmt.Errorf("%s is not writable (%w): pick a --socket path in a directory you own, such as $XDG_RUNTIME_DIR/dald.sock", filepath.Dir(path), err)
	}
	return err
}

func (s *Server) accept() {
	defer s.wg.Done()
	for {
		c, err := s.ln.AcceptUnix()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			s.opts.Log.Warn("accept", "err", err)
			time.Sleep(10 * time.Millisecond)
			continue
		}
		cred, err := peerCred(c)
		if err != nil || (int(cred.Uid) != os.Getuid() && cred.Uid != 0) {
			s.opts.Log.Warn("refused peer", "uid", credUID(cred), "err", err)
			c.Close()
			continue
		}
		cn := &conn{srv: s, c: c, r: bufio.NewReader(c), peer: cred}
		s.mu.Lock()
		if s.closing {
			s.mu.Unlock()
			c.Close()
			continue
		}
		if len(s.conns)-s.bound >= s.lim.Conns {
			// Full: answer the client's first request with why, unless
			// too many are already being told.
			if s.refusing >= maxRefusing {
				s.mu.Unlock()
				c.Close()
				continue
			}
			s.refusing++
			s.mu.Unlock()
			s.opts.Log.Warn("refused client: at the connection limit", "limit", s.lim.Conns, "uid", credUID(cred), "pid", credPID(cred))
			cn.refuse = limitError(fmt.Sprintf("dald already serves %d clients", s.lim.Conns), s.lim.Conns, "max-conns")
			s.wg.Add(1)
			go func() {
				c.SetDeadline(time.Now().Add(min(s.lim.IdleTimeout, 5*time.Second)))
				cn.serveRefusal()
				s.mu.Lock()
				s.refusing--
				s.mu.Unlock()
			}()
			continue
		}
		s.conns[cn] = struct{}{}
		s.mu.Unlock()
		s.wg.Add(1)
		go cn.serve()
	}
}

func credUID(c *unix.Ucred) int {
	if c == nil {
		return -1
	}
	return int(c.Uid)
}

func credPID(c *unix.Ucred) int {
	if c == nil {
		return -1
	}
	return int(c.Pid)
}

func peerCred(c *net.UnixConn) (*unix.Ucred, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return nil, err
	}
	var cred *unix.Ucred
	var serr error
	err = raw.Control(func(fd uintptr) {
		cred, serr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	})
	if err != nil {
		return nil, err
	}
	return cred, serr
}

func (s *Server) dropConn(c *conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.conns, c)
	if b := c.bound; b != nil {
		s.bound--
		b.mu.Lock()
		b.boundConns--
		b.mu.Unlock()
	}
	if c.owned != nil {
		s.endSessionLocked(c.owned)
	}
	if s.closing && len(s.conns) == 0 {
		select {
		case <-s.idle:
		default:
			close(s.idle)
		}
	}
}

// Shutdown stops accepting, removes the socket, and waits for connected
// clients to finish until ctx ends; then it closes the rest. It returns
// ctx's error if clients had to be cut off.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	if !s.closing {
		s.closing = true
		if len(s.conns) == 0 {
			close(s.idle)
		}
	}
	for _, ss := range s.sessions {
		if ss.sock != nil {
			ss.sock.close()
		}
	}
	s.mu.Unlock()
	s.ln.Close()
	var err error
	select {
	case <-s.idle:
	case <-ctx.Done():
		err = ctx.Err()
		s.mu.Lock()
		for c := range s.conns {
			c.c.Close()
		}
		s.mu.Unlock()
	}
	s.wg.Wait()
	return err
}

// Clients returns the number of connected clients.
func (s *Server) Clients() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

// newSession opens a session for the exec client peer, minting its id and
// token.
func (s *Server) newSession(req wire.Request, peer *unix.Ucred) (*session, error) {
	token := make([]byte, wire.TokenLen)
	if _, err := rand.Read(token); err != nil {
		return nil, fmt.Errorf("draw a session token: %w", err)
	}
	s.mu.Lock()
	if len(s.sessions) >= s.lim.Sessions {
		s.mu.Unlock()
		return nil, limitError(fmt.Sprintf("dald already has %d sessions open", len(s.sessions)), s.lim.Sessions, "max-sessions")
	}
	// Ids count sessions: the id grants nothing (the token does), and
	// dal-exec's embedded dald gives its run the same id every time, so
	// the agent's DAL_SESSION repeats.
	s.nextNum++
	ss := newSession(fmt.Sprintf("%016x", s.nextNum), hex.EncodeToString(token), uint32(credUID(peer)), &s.lim, req)
	ss.num = s.nextNum
	s.sessions[ss.id] = ss
	s.mu.Unlock()
	if !ss.figures {
		if err := s.listenSession(ss); err != nil {
			s.mu.Lock()
			delete(s.sessions, ss.id)
			s.mu.Unlock()
			return nil, err
		}
	}
	if m := s.opts.Metrics; m != nil && !ss.figures {
		m.SessionStarted()
	}
	return ss, nil
}

// endSessionLocked forgets a session (closed, or its dal-exec gone) and
// counts what it did. s.mu is held.
func (s *Server) endSessionLocked(ss *session) {
	if _, ok := s.sessions[ss.id]; !ok {
		return
	}
	delete(s.sessions, ss.id)
	ss.mu.Lock()
	ss.closed = true
	if ss.sock != nil {
		ss.sock.close()
	}
	traced := ss.traced
	// Its processes' connections end with it: what they would still send
	// has nowhere to go, and nothing else bounds their lifetime.
	for c := range ss.conns {
		c.c.Close()
	}
	ss.mu.Unlock()
	// And so do the connections on its socket that never said hello.
	for c := range s.conns {
		if c.bound == ss {
			c.c.Close()
		}
	}
	if s.opts.Tracer != nil && traced {
		s.opts.Tracer.Forget(ss.num)
	}
	m := s.opts.Metrics
	if m == nil || ss.figures {
		return
	}
	m.SessionEnded()
	streams, _ := ss.dump()
	var reads int64
	for _, st := range streams {
		reads += st.Reads
	}
	m.AddClockReads(uint64(reads))
}

func (s *Server) session(id string) (*session, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ss := s.sessions[id]
	if ss == nil {
		return nil, fmt.Errorf("session %q is not open on this dald (it ended, or DAL_SESSION belongs to another daemon)", id)
	}
	return ss, nil
}

// status lists the sessions peer may see: those its uid opened, or every
// session for root; a connection on a session's own socket (bound) sees
// that session only.
func (s *Server) status(peer *unix.Ucred, bound *session) wire.Reply {
	uid := credUID(peer)
	s.mu.Lock()
	list := make([]*session, 0, len(s.sessions))
	for _, ss := range s.sessions {
		if bound != nil {
			if ss == bound {
				list = append(list, ss)
			}
			continue
		}
		if !ss.figures && (uid == 0 || int(ss.owner) == uid) {
			list = append(list, ss)
		}
	}
	s.mu.Unlock()
	rep := wire.Reply{OK: true, Proto: wire.Proto, Version: version.Version, PID: os.Getpid(),
		UptimeS: time.Since(s.started).Seconds(), Tracing: s.opts.Tracer != nil, Reason: s.opts.TracerOff,
		Attached: s.opts.Tracer != nil && s.opts.Tracer.Attached()}
	for _, ss := range list {
		rep.Sessions = append(rep.Sessions, ss.status())
	}
	sort.Slice(rep.Sessions, func(i, j int) bool { return rep.Sessions[i].ID < rep.Sessions[j].ID })
	return rep
}
