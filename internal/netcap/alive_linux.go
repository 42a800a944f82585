package netcap

import (
	"net"
	"syscall"
)

// peekAlive reports whether an idle upstream connection is still open
// and silent: a server that closed it (or wrote to it, a TLS alert say)
// has left EOF or bytes in the socket, seen here without consuming them.
// Connections that are not sockets are taken as open.
func peekAlive(c net.Conn) bool {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return true
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return true
	}
	alive := false
	err = rc.Control(func(fd uintptr) {
		var b [1]byte
		for {
			_, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
			if err == syscall.EINTR {
				continue
			}
			// Nothing to read: open and silent. No error: EOF or bytes.
			alive = err == syscall.EAGAIN
			return
		}
	})
	return err == nil && alive
}
