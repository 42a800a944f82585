package sysvirt

import (
	"encoding/binary"
	"unsafe"

	"github.com/dal-runtime/dal/seedrng"
	"golang.org/x/sys/unix"
)

// The port of a bind to port 0 (strict mode).
//
// The kernel gives a socket bound to port 0 a port from its ephemeral
// range at a random offset, in the sandbox's own network namespace too.
// The filter hands every bind to the supervisor; one of an IPv4 or IPv6
// socket to port 0 gets the tree's next port instead: the ports run on
// from a first one drawn from the seed (stream "net/bind_port"), in the
// default ephemeral range 32768–60999, one per such bind in the order the
// tree makes them, skipping a port already taken. The supervisor binds
// the caller's own socket (its copy through pidfd_getfd names the same
// socket) to the caller's address with that port, and answers the call
// with the result. Any other bind, and one whose ports were all taken,
// runs as the kernel's.

const (
	portFirst = 32768
	portCount = 60999 - portFirst + 1
	portTries = 64
)

// ports is the tree's sequence of ports for binds to port 0.
type ports struct {
	drawn bool
	next  int // offset in the range of the next port to give
}

// bind serves bind(fd, addr, len).
func (s *Supervisor) bind(n *Notif) {
	fd, addr, size := int(int32(n.Args[0])), n.Args[1], n.Args[2]
	if addr == 0 || size < 16 || size > 128 {
		Continue(s.fd, n.ID)
		return
	}
	sa := make([]byte, size)
	if ReadMem(int(n.Pid), addr, sa) != nil {
		Continue(s.fd, n.ID) // the kernel reports it
		return
	}
	family := binary.LittleEndian.Uint16(sa)
	if (family != unix.AF_INET && family != unix.AF_INET6) || (family == unix.AF_INET6 && size < 24) ||
		sa[2] != 0 || sa[3] != 0 {
		Continue(s.fd, n.ID)
		return
	}
	s.mu.Lock()
	p := s.caller(n)
	pidfd := -1
	if p != nil {
		pidfd = s.pidfds.get(p)
	}
	stale := s.pidfds.takeStale()
	s.mu.Unlock()
	for _, fd := range stale {
		unix.Close(fd)
	}
	if pidfd < 0 {
		Continue(s.fd, n.ID)
		return
	}
	d, err := unix.PidfdGetfd(pidfd, fd, 0)
	if err != nil {
		Continue(s.fd, n.ID) // not a descriptor: the kernel says so
		return
	}
	defer unix.Close(d)
	if dom, err := unix.GetsockoptInt(d, unix.SOL_SOCKET, unix.SO_DOMAIN); err != nil || dom != int(family) {
		Continue(s.fd, n.ID) // not a socket, or another family: the kernel's error
		return
	}
	for range portTries {
		s.mu.Lock()
		if !s.ports.drawn {
			s.ports.next = int(seedrng.Derive(s.cfg.Seed, "net/bind_port").Uint64() % portCount)
			s.ports.drawn = true
		}
		port := portFirst + s.ports.next
		s.ports.next = (s.ports.next + 1) % portCount
		s.mu.Unlock()
		binary.BigEndian.PutUint16(sa[2:], uint16(port))
		_, _, e := unix.Syscall(unix.SYS_BIND, uintptr(d), uintptr(unsafe.Pointer(&sa[0])), uintptr(size))
		switch e {
		case 0:
			s.mu.Lock()
			s.served(Port)
			s.mu.Unlock()
			s.reply(n, 0)
			return
		case unix.EADDRINUSE:
			continue
		}
		s.fail(n, e)
		return
	}
	s.mu.Lock()
	s.escaped(Port)
	s.counts.note("a bind to port 0 found its next %d ports taken: the kernel chose its port", portTries)
	s.mu.Unlock()
	Continue(s.fd, n.ID)
}
