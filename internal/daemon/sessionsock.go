package daemon

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"
)

// A session's processes reach dald through a socket of their own, not
// dald's: session.open makes a listener for the new session (its path in
// the reply), and dal-exec shows that socket, and only that one, to the
// agent. A connection accepted on it holds the session's capability by
// where it arrived: it may say hello as one of that session's processes
// (with the session's token still) and ask status about that session,
// and nothing else. It cannot open sessions, join another, or take one
// of dald's client slots (--max-conns); what it may hold is bounded per
// session (--max-session-conns, and the session's own limits). The
// socket is removed when the session ends.
//
// The socket is mode 0600, dald's alone, unless another user (root) opened
// the session: that user's agent runs as its uid without capabilities, so
// it could not open a socket of dald's user, and the socket is open to
// everyone instead (0666), its directory searchable. Who connects is then
// checked as on every dald socket, by its peer credentials: dald's user
// and root alone.

// sessionSocket is a session's own listener.
type sessionSocket struct {
	ln   *net.UnixListener
	path string
	// dir, if set, is a private directory made for the socket, removed
	// with it.
	dir string
}

// listenSession makes ss's socket beside dald's own (or, where that
// directory cannot take it, in a private directory of the temporary
// directory) and starts accepting on it. s.mu is not held.
func (s *Server) listenSession(ss *session) error {
	var suffix [4]byte
	if _, err := rand.Read(suffix[:]); err != nil {
		return fmt.Errorf("name the session's socket: %w", err)
	}
	name := fmt.Sprintf("dald.sock.%s.%s", ss.id, hex.EncodeToString(suffix[:]))
	sock := &sessionSocket{}
	mode, dirMode := uint32(0o600), uint32(0o700)
	if int(ss.owner) != os.Getuid() {
		mode, dirMode = 0o666, 0o711
	}
	var err error
	if s.path != "" && searchable(filepath.Dir(s.path), dirMode) {
		sock.path = filepath.Join(filepath.Dir(s.path), name)
		sock.ln, err = listenPrivate(sock.path, mode)
	}
	if sock.ln == nil {
		dir, derr := os.MkdirTemp("", "dald-")
		if derr == nil {
			derr = os.Chmod(dir, os.FileMode(dirMode))
		}
		if derr != nil {
			os.RemoveAll(dir)
			return fmt.Errorf("make a directory for session %s's socket: %w", ss.id, errors.Join(err, derr))
		}
		sock.dir, sock.path = dir, filepath.Join(dir, "s.sock")
		if sock.ln, err = listenPrivate(sock.path, mode); err != nil {
			os.RemoveAll(dir)
			return fmt.Errorf("listen for session %s's processes: %w", ss.id, err)
		}
	}
	ss.sock = sock
	s.wg.Add(1)
	go s.acceptSession(ss, sock.ln)
	return nil
}

// searchable reports whether dir lets in everyone dirMode does: with
// 0711, a user other than its owner must be able to search it.
func searchable(dir string, dirMode uint32) bool {
	if dirMode&0o001 == 0 {
		return true
	}
	var st unix.Stat_t
	return unix.Stat(dir, &st) == nil && st.Mode&0o001 != 0
}

// listenPrivate listens on a new socket at path with mode (0600, or 0666
// for another user's session), removed when closed.
func listenPrivate(path string, mode uint32) (*net.UnixListener, error) {
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, err
	}
	ln.SetUnlinkOnClose(true)
	if err := unix.Fchmodat(unix.AT_FDCWD, path, mode, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		ln.Close()
		return nil, err
	}
	return ln, nil
}

// close stops accepting and removes the socket.
func (sock *sessionSocket) close() {
	sock.ln.Close()
	if sock.dir != "" {
		os.RemoveAll(sock.dir)
	}
}

// acceptSession serves ss's socket until it is closed (the session ended,
// or dald shuts down).
func (s *Server) acceptSession(ss *session, ln *net.UnixListener) {
	defer s.wg.Done()
	for {
		c, err := ln.AcceptUnix()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			s.opts.Log.Warn("accept", "session", ss.id, "err", err)
			time.Sleep(10 * time.Millisecond)
			continue
		}
		cred, err := peerCred(c)
		if err != nil || (int(cred.Uid) != os.Getuid() && cred.Uid != 0) {
			s.opts.Log.Warn("refused peer", "session", ss.id, "uid", credUID(cred), "err", err)
			c.Close()
			continue
		}
		cn := &conn{srv: s, c: c, r: bufio.NewReader(c), peer: cred, bound: ss}
		s.mu.Lock()
		ss.mu.Lock()
		full := ss.boundConns >= s.lim.SessionConns
		if !full && !s.closing && !ss.closed {
			ss.boundConns++
		}
		closed := s.closing || ss.closed
		ss.mu.Unlock()
		if closed {
			s.mu.Unlock()
			c.Close()
			continue
		}
		if full {
			s.mu.Unlock()
			s.opts.Log.Warn("refused client: at the session's connection limit", "session", ss.id, "limit", s.lim.SessionConns, "pid", credPID(cred))
			c.SetDeadline(time.Now().Add(min(s.lim.IdleTimeout, 5*time.Second)))
			cn.refuse = ss.limitNoted("conns", limitError(fmt.Sprintf("session %s's processes already hold %d connections to dald", ss.id, s.lim.SessionConns), s.lim.SessionConns, "max-session-conns"))
			s.wg.Add(1)
			go cn.serveRefusal()
			continue
		}
		s.conns[cn] = struct{}{}
		s.bound++
		s.mu.Unlock()
		s.wg.Add(1)
		go cn.serve()
	}
}

// limitNoted returns err, noting it as the session's drift as
// limitLocked does.
func (ss *session) limitNoted(kind string, err error) error {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return ss.limitLocked("", kind, err)
}
