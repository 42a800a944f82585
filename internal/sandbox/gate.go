package sandbox

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"

	"golang.org/x/sys/unix"
)

// The gate is a SOCK_SEQPACKET pair between dal-exec and the init. An init
// started by [Prestart] first reads its specification there, in pieces of
// at most specChunk bytes:
//
//	parent → init: 'P' + piece                 the next piece of the spec (JSON)
//	parent → init: 'E'                         the spec is complete
//
// A gated init ([Config.BeforeAgent]), once set up, writes gateByte on the
// status pipe and serves the gate until the go-ahead:
//
//	parent → init: gateByte                    start the agent
//	parent → init: 'S' + domain, type, proto   a socket of the sandbox's
//	                                           namespaces (3 × int32, native order)
//	init → parent: 0 + SCM_RIGHTS fd           the socket
//	init → parent: 1 + message                 why it could not
//
// The init makes the socket, which belongs to the network namespace it was
// made in for its whole life, and passes it back; dal-exec binds and
// listens on it. dal-exec never enters the sandbox's network namespace,
// which an unprivileged dal-exec could not do (setns needs CAP_SYS_ADMIN
// in its own user namespace) and which would otherwise need a thread
// switched in and out. Binding a port below 1024 needs no more: the
// caller holds every capability in the user namespace it made (rootless),
// or is root.

// gateSocket returns the init's end and dal-exec's end of a gate.
func gateSocket() (child, parent *os.File, err error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("create the sandbox gate: %w", err)
	}
	return os.NewFile(uintptr(fds[0]), "gate"), os.NewFile(uintptr(fds[1]), "gate"), nil
}

// ListenIn opens a TCP listener at addr ("127.0.0.1:3128") inside the
// network namespace of c's sandbox (from [Command] with Config.Network);
// it may be called only while c's BeforeAgent hook runs. The listener
// belongs to that namespace for its whole life while its owner, dal-exec,
// stays in its own: connections the agent opens to addr arrive here, and
// whatever dal dials from them goes out of dal-exec's namespace. The
// caller owns the listener.
func (c *Cmd) ListenIn(addr string) (net.Listener, error) {
	ap, err := netip.ParseAddrPort(addr)
	if err != nil {
		return nil, fmt.Errorf("sandbox.Cmd.ListenIn: %q is not an IP address and port", addr)
	}
	var domain int
	var sa unix.Sockaddr
	if a := ap.Addr().Unmap(); a.Is4() {
		domain, sa = unix.AF_INET, &unix.SockaddrInet4{Port: int(ap.Port()), Addr: a.As4()}
	} else {
		domain, sa = unix.AF_INET6, &unix.SockaddrInet6{Port: int(ap.Port()), Addr: a.As16()}
	}
	f, err := c.SocketIn(domain, unix.SOCK_STREAM, 0)
	if err != nil {
		return nil, fmt.Errorf("listen at %s in the sandbox: %w", addr, err)
	}
	defer f.Close()
	fd := int(f.Fd())
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEADDR, 1); err != nil {
		return nil, fmt.Errorf("listen at %s in the sandbox: %w", addr, err)
	}
	if err := unix.Bind(fd, sa); err != nil {
		return nil, fmt.Errorf("listen at %s in the sandbox: %w", addr, err)
	}
	if err := unix.Listen(fd, unix.SOMAXCONN); err != nil {
		return nil, fmt.Errorf("listen at %s in the sandbox: %w", addr, err)
	}
	l, err := net.FileListener(f)
	if err != nil {
		return nil, fmt.Errorf("listen at %s in the sandbox: %w", addr, err)
	}
	return l, nil
}

// SocketIn makes a socket (socket(2)'s domain, type and protocol; it is
// close-on-exec) in the namespaces of c's sandbox, while c's BeforeAgent
// hook runs (from any goroutine; requests take turns on the gate): a
// listener's socket, or a NETLINK_SOCK_DIAG socket that sees the
// sandbox's connections. The caller owns the socket.
func (c *Cmd) SocketIn(domain, typ, proto int) (*os.File, error) {
	c.gateMu.Lock()
	defer c.gateMu.Unlock()
	if !c.gateOpen {
		return nil, errors.New("sandbox.Cmd.SocketIn: the sandbox is not waiting to start its agent (call it from Config.BeforeAgent)")
	}
	req := []byte{'S'}
	for _, n := range []int{domain, typ, proto} {
		req = binary.NativeEndian.AppendUint32(req, uint32(int32(n)))
	}
	if _, err := c.gate.Write(req); err != nil {
		return nil, fmt.Errorf("ask the sandbox for a socket: %w", err)
	}
	buf := make([]byte, 512)
	n, fds, err := recvWithFDs(c.gate, buf, 1)
	if err != nil || n == 0 {
		return nil, fmt.Errorf("the sandbox did not answer its socket request: %v", err)
	}
	if buf[0] != 0 || len(fds) != 1 {
		closeFDs(fds)
		return nil, fmt.Errorf("the sandbox could not make the socket: %s", buf[1:n])
	}
	return os.NewFile(uintptr(fds[0]), "socket"), nil
}

// serveGate answers the parent's socket requests until it says go (true)
// or goes away (false).
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
		case n == 13 && buf[0] == 'S':
			var arg [3]int
			for i := range arg {
				arg[i] = int(int32(binary.NativeEndian.Uint32(buf[1+4*i:])))
			}
			sfd, err := unix.Socket(arg[0], arg[1]|unix.SOCK_CLOEXEC, arg[2])
			if err != nil {
				unix.Sendmsg(fd, append([]byte{1}, err.Error()...), nil, nil, 0)
				continue
			}
			err = unix.Sendmsg(fd, []byte{0}, unix.UnixRights(sfd), nil, 0)
			unix.Close(sfd)
			if err != nil {
				return false
			}
		default:
			return false
		}
	}
}

// specChunk is the largest piece of a spec sent on the gate: well below
// the socket's buffer, so one message always fits.
const specChunk = 32 << 10

// maxSpec bounds the spec an init reads: the agent's argv and environment
// are the bulk, and execve takes at most a few MB of them.
const maxSpec = 64 << 20

// sendSpec sends the spec b to a prestarted init.
func sendSpec(gate *os.File, b []byte) error {
	for len(b) > 0 {
		n := min(len(b), specChunk)
		if _, err := gate.Write(append([]byte{'P'}, b[:n]...)); err != nil {
			return err
		}
		b = b[n:]
	}
	_, err := gate.Write([]byte{'E'})
	return err
}

// sendFiles sends a prestarted init the files it writes in the staging
// directory, which did not exist when it started: the denied-writes list
// and the syscall layer's counts ('F', with their descriptors).
func sendFiles(gate *os.File, denied, counts *os.File) error {
	return unix.Sendmsg(int(gate.Fd()), []byte{'F'}, unix.UnixRights(int(denied.Fd()), int(counts.Fd())), nil, 0)
}

// receiveFiles takes the files sendFiles sends and puts them at deniedFD
// and countsFD, where the placeholders Prestart passed were. gone says the
// parent went away first.
func receiveFiles(gate *os.File) (gone bool, err error) {
	buf := make([]byte, 8)
	n, fds, err := recvWithFDs(gate, buf, 2)
	if err != nil || n == 0 {
		return true, err
	}
	if n != 1 || buf[0] != 'F' || len(fds) != 2 {
		closeFDs(fds)
		return false, errors.New("the sandbox was started with a malformed specification")
	}
	for i, to := range []int{deniedFD, countsFD} {
		err := unix.Dup3(fds[i], to, unix.O_CLOEXEC)
		unix.Close(fds[i])
		if err != nil {
			return false, fmt.Errorf("sandbox: take the staging files: %v", err)
		}
	}
	return false, nil
}

// recvWithFDs receives one message of the gate into buf with up to max
// descriptors (close-on-exec), retrying an interrupted receive.
func recvWithFDs(gate *os.File, buf []byte, max int) (n int, fds []int, err error) {
	oob := make([]byte, unix.CmsgSpace(max*4))
	for {
		var oobn int
		n, oobn, _, _, err = unix.Recvmsg(int(gate.Fd()), buf, oob, unix.MSG_CMSG_CLOEXEC)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return 0, nil, err
		}
		if msgs, err := unix.ParseSocketControlMessage(oob[:oobn]); err == nil && len(msgs) == 1 {
			fds, _ = unix.ParseUnixRights(&msgs[0])
		}
		return n, fds, nil
	}
}

// closeFDs closes descriptors received that are not used.
func closeFDs(fds []int) {
	for _, fd := range fds {
		unix.Close(fd)
	}
}

// receiveSpec reads a spec from the gate into sp. gone says the parent
// went away first.
func receiveSpec(gate *os.File, sp *spec) (gone bool, err error) {
	b, err := readSpec(gate)
	if err != nil {
		return true, err
	}
	if err := json.Unmarshal(b, sp); err != nil {
		return false, errors.New("the sandbox was started with a malformed specification")
	}
	return false, nil
}

// readSpec reads the spec sendSpec sends; an error means the parent went
// away (or spoke something else) before the spec was complete.
func readSpec(gate *os.File) ([]byte, error) {
	fd := int(gate.Fd())
	buf := make([]byte, specChunk+1)
	var b []byte
	for {
		n, _, _, _, err := unix.Recvmsg(fd, buf, nil, 0)
		if err == unix.EINTR {
			continue
		}
		switch {
		case err != nil:
			return nil, err
		case n == 1 && buf[0] == 'E':
			return b, nil
		case n > 1 && buf[0] == 'P' && len(b)+n-1 <= maxSpec:
			b = append(b, buf[1:n]...)
		default:
			return nil, errors.New("the sandbox's specification was cut short")
		}
	}
}
