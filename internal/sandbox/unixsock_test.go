package sandbox

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func init() { testAgents["unixdial"] = agentUnixDial }

// agentUnixDial connects to each Unix socket path, says hello and prints
// "path: result".
func agentUnixDial(args []string) int {
	for _, p := range args {
		c, err := net.Dial("unix", p)
		if err == nil {
			c.Write([]byte("escaped\n"))
			c.Close()
		}
		fmt.Printf("%s: %s\n", p, errName(err))
	}
	return 0
}

// TestHostUnixSockets: the host's Unix sockets are out of the agent's
// reach, wherever they are bound — in /run and /var/tmp (private tmpfs in
// the sandbox), in any other directory of the read-only host tree, and in
// a directory bound into the sandbox — while a socket named in
// Config.Sockets or Config.SocketsAt still answers. Nothing reaches a host listener.
func TestHostUnixSockets(t *testing.T) {
	t.Parallel()
	parents := []string{"/var/tmp"}
	if os.Geteuid() == 0 {
		parents = append(parents, "/run", "/var/cache") // writable by root only
	}
	cfg := newConfig(t, nil)
	var paths []string
	var listeners []*net.UnixListener
	for _, parent := range parents {
		dir, err := os.MkdirTemp(parent, "dal-sandbox-test-")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
		p := filepath.Join(dir, "svc.sock")
		l, err := net.ListenUnix("unix", &net.UnixAddr{Name: p, Net: "unix"})
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		os.Chmod(p, 0o777)
		paths, listeners = append(paths, p), append(listeners, l)
		if parent == "/var/cache" {
			cfg.Binds = append(cfg.Binds, dir) // seen twice: on the host tree and bound
		}
	}
	own := filepath.Join(t.TempDir(), "dald.sock")
	ol, err := net.Listen("unix", own)
	if err != nil {
		t.Fatal(err)
	}
	defer ol.Close()
	go func() {
		for c, err := ol.Accept(); err == nil; c, err = ol.Accept() {
			c.Close()
		}
	}()
	cfg.Sockets = []string{own}
	// The same socket shown at a path of its own as well, in the private /run.
	const at = "/run/dal/dald.sock"
	cfg.SocketsAt = []Mount{{Source: own, Target: at}}

	r := runAgent(t, cfg, "unixdial", append(slices.Clone(paths), own, at)...)
	got := lines(r.stdout)
	for _, p := range paths {
		if !got[p+": ECONNREFUSED"] && !got[p+": ENOENT"] {
			t.Errorf("the agent's connect to the host socket %s: want ECONNREFUSED or ENOENT; output %q", p, r.stdout)
		}
	}
	if !got[own+": ok"] || !got[at+": ok"] {
		t.Errorf("the agent could not reach dal's own socket at %s and %s: output %q", own, at, r.stdout)
	}
	for i, l := range listeners {
		l.SetDeadline(time.Now())
		if c, err := l.Accept(); err == nil {
			c.Close()
			t.Errorf("the host listener at %s accepted a connection from the sandbox", paths[i])
		} else if !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Errorf("accept on %s: %v", paths[i], err)
		}
	}
}

func TestParseUnixTable(t *testing.T) {
	t.Parallel()
	table := `Num       RefCount Protocol Flags    Type St Inode Path
0000000000000000: 00000002 00000000 00010000 0001 01 26190 /run/dbus/system_bus_socket
0000000000000000: 00000002 00000000 00010000 0001 01 26191 @/tmp/.X11-unix/X0
0000000000000000: 00000003 00000000 00000000 0001 03  1221
0000000000000000: 00000002 00000000 00010000 0001 01 26192 /srv/a dir/with space.sock
0000000000000000: 00000002 00000000 00010000 0001 01 26193 relative.sock
0000000000000000: 00000002 00000000 00010000 0001 01 26194 /run/dbus/system_bus_socket
`
	got, err := parseUnixTable(strings.NewReader(table))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"/run/dbus/system_bus_socket", "/srv/a dir/with space.sock"}
	if !slices.Equal(got, want) {
		t.Errorf("parseUnixTable = %q, want %q", got, want)
	}
}
