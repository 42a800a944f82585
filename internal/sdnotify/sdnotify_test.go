package sdnotify

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// childEnv selects a child mode of this test binary, run by the
// socket-activation tests in place of systemd's service process.
const childEnv = "DAL_SDNOTIFY_TEST_CHILD"

func TestMain(m *testing.M) {
	switch os.Getenv(childEnv) {
	case "":
		os.Exit(m.Run())
	case "serve":
		os.Exit(childServe())
	case "refuse":
		os.Exit(childRefuse())
	default:
		fmt.Fprintf(os.Stderr, "unknown %s\n", childEnv)
		os.Exit(2)
	}
}

// listenGram binds a notification socket like systemd's and returns its
// name as NOTIFY_SOCKET would spell it.
func listenGram(t *testing.T, abstract bool) (*net.UnixConn, string) {
	t.Helper()
	name := filepath.Join(t.TempDir(), "notify")
	if abstract {
		name = fmt.Sprintf("@dal-sdnotify-test-%d-%d", os.Getpid(), time.Now().UnixNano())
	}
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: name, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn, name
}

func receive(t *testing.T, conn *net.UnixConn) string {
	t.Helper()
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	buf := make([]byte, 4096)
	n, err := conn.Read(buf)
	if err != nil {
		t.Fatal(err)
	}
	return string(buf[:n])
}

func TestNotifySockets(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		abstract bool
		state    string
		want     string
	}{
		{"path ready", false, Ready, "READY=1"},
		{"abstract ready", true, Ready, "READY=1"},
		{"status joins lines", false, Status("serving\n3 sessions"), "STATUS=serving 3 sessions"},
		{"several states", true, Stopping + "\n" + Status("draining"), "STOPPING=1\nSTATUS=draining"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			conn, name := listenGram(t, tt.abstract)
			if err := notify(name, tt.state); err != nil {
				t.Fatal(err)
			}
			if got := receive(t, conn); got != tt.want {
				t.Errorf("received %q, want %q", got, tt.want)
			}
		})
	}
}

func TestNotifyErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		socket string
		want   string
	}{
		{"relative path", "notify.sock", "is neither a path nor an abstract socket"},
		{"nobody listens", filepath.Join(t.TempDir(), "gone"), "no such file or directory"},
	}
	for _, tt := range tests {
		err := notify(tt.socket, Ready)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: notify(%q) = %v, want an error containing %q", tt.name, tt.socket, err, tt.want)
		}
	}
}

// TestNotifyEnvironment goes through $NOTIFY_SOCKET as systemd sets it.
// t.Setenv rules out t.Parallel.
func TestNotifyEnvironment(t *testing.T) {
	t.Setenv("NOTIFY_SOCKET", "")
	if sent, err := Notify(Ready); sent || err != nil {
		t.Errorf("without NOTIFY_SOCKET: Notify = %v, %v; want false, nil", sent, err)
	}

	conn, name := listenGram(t, true)
	t.Setenv("NOTIFY_SOCKET", name)
	if sent, err := Notify(Ready); !sent || err != nil {
		t.Fatalf("Notify = %v, %v; want true, nil", sent, err)
	}
	if got := receive(t, conn); got != Ready {
		t.Errorf("received %q, want %q", got, Ready)
	}
	if os.Getenv("NOTIFY_SOCKET") != name {
		t.Error("Notify unset NOTIFY_SOCKET; STOPPING=1 could not follow")
	}
}

// TestListenersNotOurs covers the variables a child inherited by mistake
// and bad values. No fd is touched in these cases, so it runs in-process.
func TestListenersNotOurs(t *testing.T) {
	tests := []struct {
		name    string
		pid     string
		fds     string
		wantErr string
	}{
		{"unset", "", "", ""},
		{"another process", "1", "2", ""},
		{"pid without fds", fmt.Sprint(os.Getpid()), "", ""},
		{"bad pid", "self", "1", `LISTEN_PID "self" is not a process id`},
		{"bad count", fmt.Sprint(os.Getpid()), "-1", `LISTEN_FDS "-1" is not a count`},
		{"huge count", fmt.Sprint(os.Getpid()), "1000000", `LISTEN_FDS "1000000" is not a count`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("LISTEN_PID", tt.pid)
			t.Setenv("LISTEN_FDS", tt.fds)
			t.Setenv("LISTEN_FDNAMES", "x")
			ls, err := Listeners()
			if ls != nil {
				t.Errorf("got %d listeners, want none", len(ls))
			}
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Errorf("err = %v, want %q", err, tt.wantErr)
			}
			for _, v := range []string{"LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES"} {
				if _, set := os.LookupEnv(v); set {
					t.Errorf("%s is still set", v)
				}
			}
		})
	}
}

// activate starts this test binary in a child mode the way systemd starts a
// socket-activated service: the sockets as fds 3, 4, ... and LISTEN_PID set
// to the child's own pid before exec (sh's $$ survives its exec).
func activate(t *testing.T, mode string, files []*os.File, names string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("/bin/sh", "-c", `LISTEN_PID=$$ exec "$0"`, os.Args[0])
	cmd.Env = append(os.Environ(), childEnv+"="+mode, fmt.Sprintf("LISTEN_FDS=%d", len(files)), "LISTEN_FDNAMES="+names)
	cmd.ExtraFiles = files
	return cmd
}

// TestListenersInherited hands a child a TCP and a Unix listening socket
// and talks to the child through them once the parent has closed its own
// copies: the connections can only be accepted by the child.
func TestListenersInherited(t *testing.T) {
	t.Parallel()
	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	unixLn, err := net.Listen("unix", filepath.Join(t.TempDir(), "dald.sock"))
	if err != nil {
		t.Fatal(err)
	}
	var files []*os.File
	for _, ln := range []net.Listener{tcp, unixLn} {
		f, err := ln.(interface{ File() (*os.File, error) }).File()
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	var stderr strings.Builder
	cmd := activate(t, "serve", files, "metrics:dald")
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	tcpAddr, unixAddr := tcp.Addr(), unixLn.Addr()
	unixLn.(*net.UnixListener).SetUnlinkOnClose(false)
	for _, c := range []interface{ Close() error }{tcp, unixLn, files[0], files[1]} {
		c.Close()
	}

	for _, addr := range []net.Addr{tcpAddr, unixAddr} {
		conn, err := net.DialTimeout(addr.Network(), addr.String(), 10*time.Second)
		if err != nil {
			t.Fatalf("dial %s: %v", addr, err)
		}
		conn.SetDeadline(time.Now().Add(10 * time.Second))
		line, err := bufio.NewReader(conn).ReadString('\n')
		conn.Close()
		if want := fmt.Sprintf("child %d\n", cmd.Process.Pid); line != want {
			t.Errorf("%s answered %q (%v), want %q", addr, line, err, want)
		}
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("child: %v\n%s", err, stderr.String())
	}
}

// childServe is the socket-activated side: it takes its listeners, checks
// what Listeners promises, and answers one connection on each.
func childServe() int {
	fail := func(format string, args ...any) int {
		fmt.Fprintf(os.Stderr, format+"\n", args...)
		return 1
	}
	ls, err := Listeners()
	if err != nil {
		return fail("Listeners: %v", err)
	}
	if len(ls) != 2 {
		return fail("got %d listeners, want 2", len(ls))
	}
	if ls[0].Addr().Network() != "tcp" || ls[1].Addr().Network() != "unix" {
		return fail("listeners out of order: %s, %s", ls[0].Addr().Network(), ls[1].Addr().Network())
	}
	for _, v := range []string{"LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES"} {
		if _, set := os.LookupEnv(v); set {
			return fail("%s is still set after Listeners", v)
		}
	}
	for fd := listenFDsStart; fd < listenFDsStart+2; fd++ {
		flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
		if err == nil && flags&unix.FD_CLOEXEC == 0 {
			return fail("inherited fd %d is open and not close-on-exec", fd)
		}
	}
	for _, ln := range ls {
		rc, err := ln.(interface {
			SyscallConn() (syscall.RawConn, error)
		}).SyscallConn()
		if err != nil {
			return fail("%v", err)
		}
		var flags int
		rc.Control(func(fd uintptr) { flags, err = unix.FcntlInt(fd, unix.F_GETFD, 0) })
		if err != nil || flags&unix.FD_CLOEXEC == 0 {
			return fail("listener %s is not close-on-exec (%v)", ln.Addr(), err)
		}
		conn, err := ln.Accept()
		if err != nil {
			return fail("accept on %s: %v", ln.Addr(), err)
		}
		fmt.Fprintf(conn, "child %d\n", os.Getpid())
		conn.Close()
		ln.Close()
	}
	return 0
}

// TestListenersRefusesNonSocket passes a regular file where a socket
// should be, as a misconfigured socket unit could.
func TestListenersRefusesNonSocket(t *testing.T) {
	t.Parallel()
	f, err := os.Create(filepath.Join(t.TempDir(), "not-a-socket"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cmd := activate(t, "refuse", []*os.File{f}, "")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	if want := "socket activation: fd 3 (LISTEN_FD_3) is not a listening socket"; !strings.Contains(string(out), want) {
		t.Errorf("child reported %q, want %q", out, want)
	}
}

// childRefuse expects Listeners to fail and to leave no inherited fd open.
func childRefuse() int {
	ls, err := Listeners()
	if err == nil {
		fmt.Fprintf(os.Stderr, "Listeners accepted a regular file: %v\n", ls)
		return 1
	}
	fmt.Println(err)
	if _, ferr := unix.FcntlInt(3, unix.F_GETFD, 0); ferr != unix.EBADF {
		fmt.Fprintf(os.Stderr, "fd 3 is still open after the error (%v)\n", ferr)
		return 1
	}
	return 0
}
