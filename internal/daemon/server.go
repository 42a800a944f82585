// Package daemon is dald: the Unix-socket server that names process streams,
// hands out clock configuration, keeps tick logs and timer schedules, and
// reports status. It serves internal/wire's protocol; cmd/dald runs it as a
// daemon and dal-exec embeds it in-process when no daemon is given.
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
	"sync"
	"syscall"
	"time"

	"github.com/dal-runtime/dal/internal/version"
	"github.com/dal-runtime/dal/internal/wire"
	"github.com/dal-runtime/dal/metrics"
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
	Log      *slog.Logger // dald's own log; discarded if nil
	// Metrics, when set, is kept up to date: sessions, clock reads,
	// syscalls by category, and what dal-exec reports (replays, coverage,
	// revert times, network outcomes).
	Metrics *metrics.Metrics
	// Tracer, when set, traces every session's process tree; nil means
	// boundary tracing is off (TracerOff says why).
	Tracer    Tracer
	TracerOff string
}

// Server is a running dald. Create it with Listen; stop it with Shutdown.
type Server struct {
	opts    Options
	path    string
	ln      *net.UnixListener
	started time.Time

	mu       sync.Mutex
	nextNum  uint32 // the last session number handed out (the tracer's key)
	sessions map[string]*session
	conns    map[*conn]struct{}
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
	// The umask makes the socket 0600 from the moment it exists.
	old := unix.Umask(0o177)
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	unix.Umask(old)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", path, explainPathErr(path, err))
	}
	ln.SetUnlinkOnClose(true)
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
		opts: opts, path: path, ln: ln, started: time.Now(),
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

func (s *Server) newSession(req wire.Request) *session {
	var b [8]byte
	rand.Read(b[:])
	ss := newSession(hex.EncodeToString(b[:]), req)
	s.mu.Lock()
	s.nextNum++
	ss.num = s.nextNum
	s.sessions[ss.id] = ss
	s.mu.Unlock()
	if m := s.opts.Metrics; m != nil {
		m.SessionStarted()
	}
	return ss
}

// endSessionLocked forgets a session (closed, or its dal-exec gone) and
// counts what it did. s.mu is held.
func (s *Server) endSessionLocked(ss *session) {
	if _, ok := s.sessions[ss.id]; !ok {
		return
	}
	delete(s.sessions, ss.id)
	ss.mu.Lock()
	traced := ss.traced
	ss.mu.Unlock()
	if s.opts.Tracer != nil && traced {
		s.opts.Tracer.Forget(ss.num)
	}
	m := s.opts.Metrics
	if m == nil {
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

func (s *Server) status() wire.Reply {
	s.mu.Lock()
	list := make([]*session, 0, len(s.sessions))
	for _, ss := range s.sessions {
		list = append(list, ss)
	}
	s.mu.Unlock()
	rep := wire.Reply{OK: true, Proto: wire.Proto, Version: version.Version, PID: os.Getpid(),
		UptimeS: time.Since(s.started).Seconds(), Tracing: s.opts.Tracer != nil, Reason: s.opts.TracerOff}
	for _, ss := range list {
		rep.Sessions = append(rep.Sessions, ss.status())
	}
	return rep
}
