package sysvirt

import (
	"sync"

	"golang.org/x/sys/unix"
)

// Which outstanding I/O is awaited.
//
// A held wait whose descriptors include a connection dal's proxy owes a
// response (a request read whole, its response not yet handed over) is
// waiting for that response: its real timeout passing decides nothing
// (docs/design.md §3.1), only the response, a jump, or the stall limit.
// Other outstanding I/O — an idle keep-alive connection, dald's socket, a
// terminal, a pipe from a child — may never speak: a wait on it alone
// expires at its real timeout, as the kernel's would, and moves the
// clock by the timeout (counted "wait_outstanding": real time decided).
// The proxy tells the supervisor what it owes (SetOwed, through the
// sandbox's gate) whenever that changes.

// owed is the set of the proxy's connections that owe a response, by
// the agent's end's port and the proxy's.
type owed struct {
	mu    sync.Mutex
	known bool // the proxy reports what it owes
	ports map[[2]uint16]bool
}

// SetOwed replaces the set of connections dal's proxy owes a response:
// each by the agent's port and the proxy's port.
func (s *Supervisor) SetOwed(pairs [][2]uint16) {
	m := make(map[[2]uint16]bool, len(pairs))
	for _, p := range pairs {
		m[p] = true
	}
	s.owed.mu.Lock()
	s.owed.known, s.owed.ports = true, m
	s.owed.mu.Unlock()
}

// awaited reports whether one of h's descriptors is a connection the
// proxy owes a response.
func (s *Supervisor) awaited(h *heldWait) bool {
	s.owed.mu.Lock()
	known, n := s.owed.known, len(s.owed.ports)
	s.owed.mu.Unlock()
	if !known || n == 0 {
		return false
	}
	if h.w.epoll < 0 {
		for _, f := range h.l.watch {
			if s.owes(int(f.Fd)) {
				return true
			}
		}
		return false
	}
	if h.l.pidfd < 0 {
		return false
	}
	for _, fd := range epollMembers(h.p.tgid, h.w.epoll) {
		d, err := unix.PidfdGetfd(h.l.pidfd, fd, 0)
		if err != nil {
			continue
		}
		yes := s.owes(d)
		unix.Close(d)
		if yes {
			return true
		}
	}
	return false
}

// owes reports whether descriptor d (the supervisor's copy) is a
// connection the proxy owes a response.
func (s *Supervisor) owes(d int) bool {
	local, err := unix.Getsockname(d)
	if err != nil {
		return false
	}
	peer, err := unix.Getpeername(d)
	if err != nil {
		return false
	}
	k := [2]uint16{port(local), port(peer)}
	if k[0] == 0 || k[1] == 0 {
		return false
	}
	s.owed.mu.Lock()
	defer s.owed.mu.Unlock()
	return s.owed.ports[k]
}

func port(sa unix.Sockaddr) uint16 {
	switch a := sa.(type) {
	case *unix.SockaddrInet4:
		return uint16(a.Port)
	case *unix.SockaddrInet6:
		return uint16(a.Port)
	}
	return 0
}
