// Package sdnotify speaks the two systemd protocols dald uses: readiness
// notification through $NOTIFY_SOCKET (sd_notify(3)) and socket activation
// through $LISTEN_PID/$LISTEN_FDS (sd_listen_fds(3)). Outside systemd both
// are no-ops, so dald calls them unconditionally. It is not a client of
// systemd's D-Bus API and does not implement the watchdog.
package sdnotify

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// States for Notify; several may be sent at once, separated by newlines.
const (
	Ready    = "READY=1"    // startup finished: the service is up
	Stopping = "STOPPING=1" // shutdown began: draining
)

// Status is a state line that sets the one-line status systemctl status
// shows for the service.
func Status(text string) string {
	return "STATUS=" + strings.ReplaceAll(text, "\n", " ")
}

// Notify sends state to the service manager over the datagram socket named
// by $NOTIFY_SOCKET: a path, or an abstract socket name written with a
// leading @. It returns false and no error when the variable is unset (not
// run by systemd, or a unit that is not Type=notify), true once the
// datagram is sent. The variable stays set, so that STOPPING=1 can follow
// READY=1.
func Notify(state string) (bool, error) {
	socket := os.Getenv("NOTIFY_SOCKET")
	if socket == "" {
		return false, nil
	}
	if err := notify(socket, state); err != nil {
		return false, err
	}
	return true, nil
}

func notify(socket, state string) error {
	if !strings.HasPrefix(socket, "/") && !strings.HasPrefix(socket, "@") {
		return fmt.Errorf("notify systemd: NOTIFY_SOCKET %q is neither a path nor an abstract socket (@name)", socket)
	}
	// Go's net package maps a leading @ to the abstract namespace's NUL.
	conn, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: socket, Net: "unixgram"})
	if err != nil {
		return fmt.Errorf("notify systemd: %w", err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte(state)); err != nil {
		return fmt.Errorf("notify systemd: %w", err)
	}
	return nil
}

// listenFDsStart is the first fd systemd passes; the rest follow in order.
const listenFDsStart = 3

// maxListenFDs bounds $LISTEN_FDS so that a garbage value cannot make
// Listeners walk the whole fd table.
const maxListenFDs = 1024

// Listeners returns the sockets systemd passed to this process for socket
// activation, in the order of the socket unit's Listen* lines, and nil when
// there are none ($LISTEN_PID unset or naming another process, which
// inherited the variables by mistake). It unsets $LISTEN_PID, $LISTEN_FDS
// and $LISTEN_FDNAMES, so that children do not take the sockets for theirs,
// and marks the inherited fds close-on-exec. The caller owns the returned
// listeners; the original fds are closed (the listeners hold duplicates).
// Call it once, early: a second call finds nothing.
//
// Only listening sockets are supported (ListenStream=, ListenSequentialPacket=);
// any other inherited fd is an error, after which none of them stay open.
func Listeners() ([]net.Listener, error) {
	pidEnv, fdsEnv, namesEnv := os.Getenv("LISTEN_PID"), os.Getenv("LISTEN_FDS"), os.Getenv("LISTEN_FDNAMES")
	os.Unsetenv("LISTEN_PID")
	os.Unsetenv("LISTEN_FDS")
	os.Unsetenv("LISTEN_FDNAMES")
	if pidEnv == "" || fdsEnv == "" {
		return nil, nil
	}
	pid, err := strconv.Atoi(pidEnv)
	if err != nil {
		return nil, fmt.Errorf("socket activation: LISTEN_PID %q is not a process id", pidEnv)
	}
	if pid != os.Getpid() {
		return nil, nil
	}
	n, err := strconv.Atoi(fdsEnv)
	if err != nil || n < 0 || n > maxListenFDs {
		return nil, fmt.Errorf("socket activation: LISTEN_FDS %q is not a count of file descriptors", fdsEnv)
	}
	names := strings.Split(namesEnv, ":")
	for fd := listenFDsStart; fd < listenFDsStart+n; fd++ {
		unix.CloseOnExec(fd)
	}
	var listeners []net.Listener
	var errs []error
	for i := range n {
		fd := listenFDsStart + i
		name := fmt.Sprintf("LISTEN_FD_%d", fd)
		if i < len(names) && names[i] != "" {
			name = names[i]
		}
		f := os.NewFile(uintptr(fd), name)
		ln, err := net.FileListener(f) // duplicates the fd
		f.Close()
		if err != nil {
			errs = append(errs, fmt.Errorf("socket activation: fd %d (%s) is not a listening socket: %w", fd, name, err))
			continue
		}
		listeners = append(listeners, ln)
	}
	if len(errs) > 0 {
		for _, ln := range listeners {
			ln.Close()
		}
		return nil, errors.Join(errs...)
	}
	return listeners, nil
}
