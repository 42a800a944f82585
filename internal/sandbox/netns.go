package sandbox

import (
	"fmt"
	"net"
	"os"
	"runtime"
	"strconv"

	"golang.org/x/sys/unix"
)

// loopbackUp brings up the loopback interface of the init's fresh network
// namespace (it starts down, with 127.0.0.1 and ::1 unusable).
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("sandbox: open a socket to configure loopback: %v", err)
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return fmt.Errorf("sandbox: name the loopback interface: %v", err)
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return fmt.Errorf("sandbox: read the loopback interface's flags: %v", err)
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("sandbox: bring up the loopback interface: %v", err)
	}
	return nil
}

// ListenIn opens a TCP listener at addr ("127.0.0.1:3128") inside the
// network namespace of process pid (a sandbox init from [Command] with
// Config.Network, typically from the BeforeAgent hook). The listener
// belongs to that namespace for its whole life while its owner, dal-exec,
// stays in its own: connections the agent opens to addr arrive here, and
// whatever dal dials from them goes out of dal-exec's namespace. The
// caller owns the listener.
func ListenIn(pid int, addr string) (net.Listener, error) {
	type result struct {
		l   net.Listener
		err error
	}
	ch := make(chan result, 1)
	// A thread of its own: if switching back failed, the thread must die
	// with its goroutine rather than run other code in the wrong namespace.
	go func() {
		runtime.LockOSThread()
		l, err, back := listenIn(pid, addr)
		if back {
			runtime.UnlockOSThread()
		}
		ch <- result{l, err}
	}()
	r := <-ch
	return r.l, r.err
}

// listenIn does ListenIn's work on the locked calling thread; back reports
// whether the thread is in its original namespace again.
func listenIn(pid int, addr string) (l net.Listener, err error, back bool) {
	self, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		return nil, fmt.Errorf("open dal-exec's network namespace: %w", err), true
	}
	defer self.Close()
	target, err := os.Open("/proc/" + strconv.Itoa(pid) + "/ns/net")
	if err != nil {
		return nil, fmt.Errorf("open the sandbox's network namespace: %w", err), true
	}
	defer target.Close()
	if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
		return nil, fmt.Errorf("enter the sandbox's network namespace: %w", err), true
	}
	l, lerr := net.Listen("tcp", addr)
	if err := unix.Setns(int(self.Fd()), unix.CLONE_NEWNET); err != nil {
		if l != nil {
			l.Close()
		}
		return nil, fmt.Errorf("return to dal-exec's network namespace: %w", err), false
	}
	if lerr != nil {
		return nil, fmt.Errorf("listen at %s in the sandbox: %w", addr, lerr), true
	}
	return l, nil, true
}
