package sandbox

import (
	"errors"
	"fmt"
	"net"
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

// The gate is a SOCK_SEQPACKET pair between dal-exec and a gated init
// ([Config.BeforeAgent]). Once set up, the init writes gateByte on the
// status pipe and serves the gate until the go-ahead:
//
//	parent → init: gateByte              start the agent
//	parent → init: 'L' + "host:port"     listen there, in the sandbox
//	init → parent: 0 + SCM_RIGHTS fd     the listening socket
//	init → parent: 1 + message           why it could not
//
// Listening is done by the init, in its own namespaces, and the socket is
// passed back: dal-exec never enters the sandbox's network namespace,
// which an unprivileged dal-exec could not do (setns needs CAP_SYS_ADMIN
// in its own user namespace) and which would otherwise need a thread
// switched in and out.

// gates maps the pid of an init whose BeforeAgent hook is running to its
// pending start, for [ListenIn].
var gates sync.Map

// gateSocket returns the init's end and dal-exec's end of a gate.
func gateSocket() (child, parent *os.File, err error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("create the sandbox gate: %w", err)
	}
	return os.NewFile(uintptr(fds[0]), "gate"), os.NewFile(uintptr(fds[1]), "gate"), nil
}

// ListenIn opens a TCP listener at addr ("127.0.0.1:3128") inside the
// network namespace of the sandbox whose init has pid initPID (from
// [Command] with Config.Network); it may be called only from that
// sandbox's BeforeAgent hook. The listener belongs to that namespace for
// its whole life while its owner, dal-exec, stays in its own: connections
// the agent opens to addr arrive here, and whatever dal dials from them
// goes out of dal-exec's namespace. The caller owns the listener.
func ListenIn(initPID int, addr string) (net.Listener, error) {
	v, ok := gates.Load(initPID)
	if !ok {
		return nil, fmt.Errorf("sandbox.ListenIn: process %d is not a sandbox waiting to start its agent (call it from BeforeAgent)", initPID)
	}
	p := v.(*pending)
	p.gateMu.Lock()
	defer p.gateMu.Unlock()
	if _, err := p.gate.Write(append([]byte{'L'}, addr...)); err != nil {
		return nil, fmt.Errorf("ask the sandbox to listen at %s: %w", addr, err)
	}
	buf := make([]byte, 512)
	oob := make([]byte, unix.CmsgSpace(4))
	n, oobn, _, _, err := unix.Recvmsg(int(p.gate.Fd()), buf, oob, unix.MSG_CMSG_CLOEXEC)
	if err != nil || n == 0 {
		return nil, fmt.Errorf("the sandbox did not answer its listen request for %s: %v", addr, err)
	}
	fd := -1
	if msgs, err := unix.ParseSocketControlMessage(oob[:oobn]); err == nil && len(msgs) == 1 {
		if fds, err := unix.ParseUnixRights(&msgs[0]); err == nil && len(fds) == 1 {
			fd = fds[0]
		}
	}
	if buf[0] != 0 || fd < 0 {
		if fd >= 0 {
			unix.Close(fd)
		}
		return nil, fmt.Errorf("listen at %s in the sandbox: %s", addr, buf[1:n])
	}
	f := os.NewFile(uintptr(fd), "listener")
	defer f.Close()
	l, err := net.FileListener(f)
	if err != nil {
		return nil, fmt.Errorf("listen at %s in the sandbox: %w", addr, err)
	}
	return l, nil
}

// serveGate answers the parent's listen requests until it says go (true)
// or goes away (false). It runs on the init's locked thread, which has
// dropped its capabilities: each listen is made by another thread, which
// keeps them (a port below 1024).
func serveGate(gate *os.File) bool {
	fd := int(gate.Fd())
	buf := make([]byte, 512)
	for {
		n, _, _, _, err := unix.Recvmsg(fd, buf, nil, 0)
		if err == unix.EINTR {
			continue
		}
		if err != nil || n == 0 {
			return false
		}
		switch {
		case n == 1 && buf[0] == gateByte:
			return true
		case buf[0] == 'L':
			addr := string(buf[1:n])
			done := make(chan error, 1)
			var lfd int
			go func() {
				var err error
				lfd, err = listenFD(addr)
				done <- err
			}()
			if err := <-done; err != nil {
				unix.Sendmsg(fd, append([]byte{1}, err.Error()...), nil, nil, 0)
				continue
			}
			err := unix.Sendmsg(fd, []byte{0}, unix.UnixRights(lfd), nil, 0)
			unix.Close(lfd)
			if err != nil {
				return false
			}
		default:
			return false
		}
	}
}

// listenFD listens at addr and returns a descriptor of the socket.
func listenFD(addr string) (int, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		var oe *net.OpError
		if errors.As(err, &oe) {
			return -1, oe.Err
		}
		return -1, err
	}
	defer l.Close()
	f, err := l.(*net.TCPListener).File()
	if err != nil {
		return -1, err
	}
	defer f.Close()
	return unix.Dup(int(f.Fd()))
}
