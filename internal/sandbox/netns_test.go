package sandbox

import (
	"bufio"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestNetwork: with Config.Network the agent has only loopback; a listener
// dal opens in its namespace from BeforeAgent answers it at a fixed address
// while dal itself dials out of its own namespace; attempts to reach other
// machines fail and are listed.
func TestNetwork(t *testing.T) {
	t.Parallel()
	// A service on the host's loopback that the agent must NOT reach
	// directly (its 127.0.0.1 is its own).
	host, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer host.Close()
	hostHit := make(chan struct{}, 1)
	go func() {
		for {
			c, err := host.Accept()
			if err != nil {
				return
			}
			hostHit <- struct{}{}
			c.Close()
		}
	}()

	cfg := newConfig(t, nil)
	cfg.Network = true
	mountSrc := filepath.Join(t.TempDir(), "trust.pem")
	os.WriteFile(mountSrc, []byte("CERT\n"), 0o644)
	cfg.Mounts = []Mount{{Source: mountSrc, Target: "/tmp/.dal/trust.pem", ReadOnly: true}}
	// Ports below 1024 and IPv6 too: rootless, dal-exec binds them with
	// the capabilities it holds in the user namespace it made.
	inner := make(chan string, 2)
	cfg.BeforeAgent = func(c *Cmd) error {
		for _, addr := range []string{"127.0.0.1:80", "[::1]:443"} {
			l, err := c.ListenIn(addr)
			if err != nil {
				return err
			}
			go func() {
				defer l.Close()
				c, err := l.Accept()
				if err != nil {
					inner <- "accept: " + err.Error()
					return
				}
				line, _ := bufio.NewReader(c).ReadString('\n')
				c.Write([]byte("pong\n"))
				c.Close()
				inner <- strings.TrimSpace(line)
			}()
		}
		return nil
	}
	script := `cat /tmp/.dal/trust.pem
echo ping | python3 -c '
import socket, sys
for a in [("127.0.0.1", 80), ("::1", 443)]:
    s = socket.create_connection(a); s.sendall(b"ping\n"); print(s.recv(10).decode().strip())
for addr in [("127.0.0.1", ` + portOf(host) + `), ("10.255.255.1", 80), ("2001:db8::1", 443)]:
    try:
        socket.create_connection(addr, timeout=5); print("connected", addr[0])
    except OSError as e:
        print("refused" if isinstance(e, ConnectionRefusedError) else "unreachable", addr[0])
'
echo x > /tmp/.dal/trust.pem || echo read-only`
	r := run(t, cfg, script)
	want := "CERT\npong\npong\nrefused 127.0.0.1\nunreachable 10.255.255.1\nunreachable 2001:db8::1\nread-only\n"
	if r.code != 0 || r.stdout != want {
		t.Fatalf("exit %d, stdout %q (stderr %q), want %q", r.code, r.stdout, r.stderr, want)
	}
	for range 2 {
		if got := <-inner; got != "ping" {
			t.Errorf("a listener in the agent's namespace got %q", got)
		}
	}
	select {
	case <-hostHit:
		t.Error("the agent reached the host's loopback service directly")
	default:
	}
	blocked, err := Blocked(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var addrs []string
	for _, b := range blocked {
		addrs = append(addrs, b.Addr)
	}
	if got := strings.Join(addrs, " "); got != "10.255.255.1:80 [2001:db8::1]:443" {
		t.Errorf("Blocked = %q", got)
	}
}

// TestGateError: an error from BeforeAgent stops the sandbox before the
// agent runs, and Ready returns it.
func TestGateError(t *testing.T) {
	t.Parallel()
	cfg := newConfig(t, nil)
	boom := errors.New("tracing refused")
	cfg.BeforeAgent = func(*Cmd) error { return boom }
	cmd := command(t, cfg, "touch ran")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); !errors.Is(err, boom) {
		t.Fatalf("Wait = %v, want the hook's error", err)
	}
	if _, err := os.Stat(filepath.Join(Upper(cfg), "ran")); err == nil {
		t.Error("the agent ran although the hook failed")
	}
}

func portOf(l net.Listener) string {
	_, p, _ := net.SplitHostPort(l.Addr().String())
	return p
}

// TestConnectReport: only IPv4/IPv6 connects off loopback are listed as
// blocked. A Unix-socket connect that succeeds is not, nor an IPv4 address
// handed to a Unix socket (the agent cannot make the list claim what did
// not happen).
func TestConnectReport(t *testing.T) {
	t.Parallel()
	cfg := newConfig(t, nil)
	cfg.Network = true
	sock := filepath.Join(t.TempDir(), "svc.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	cfg.Sockets = []string{sock}
	r := runAgent(t, cfg, "connect", sock, "192.0.2.1:80")
	if want := "unix: ok\nunix socket, inet address: EINVAL\ninet: ENETUNREACH\n"; r.stdout != want {
		t.Errorf("the agent's connects: %q, want %q", r.stdout, want)
	}
	blocked, err := Blocked(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(blocked) != 1 || blocked[0] != (BlockedConnect{Op: "connect", Addr: "192.0.2.1:80"}) {
		t.Errorf("Blocked = %+v, want only 192.0.2.1:80", blocked)
	}
	if denied, _ := Denied(cfg); len(denied) != 0 {
		t.Errorf("Denied = %+v, want nothing", denied)
	}
}
