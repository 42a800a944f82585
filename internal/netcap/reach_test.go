package netcap

import (
	"bufio"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
)

// counted is a real HTTP server on a given address that counts the
// connections it accepts.
type counted struct {
	srv   *httptest.Server
	addr  netip.AddrPort
	conns atomic.Int32
}

// serveAt starts an HTTP (or HTTPS) server listening on l.
func serveAt(t *testing.T, l net.Listener, useTLS bool) *counted {
	t.Helper()
	c := &counted{addr: netip.MustParseAddrPort(l.Addr().String())}
	c.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "hello from %s", c.addr)
	}))
	c.srv.Listener.Close()
	c.srv.Listener = l
	c.srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	c.srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			c.conns.Add(1)
		}
	}
	if useTLS {
		c.srv.StartTLS()
	} else {
		c.srv.Start()
	}
	t.Cleanup(c.srv.Close)
	return c
}

func listenOn(t *testing.T, addr string) net.Listener {
	t.Helper()
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listen on %s: %v", addr, err)
	}
	return l
}

// hostAddr is one of this host's own addresses that is not loopback or
// link-local (the machine's address on its network), or fails the test.
func hostAddr(t *testing.T) netip.Addr {
	t.Helper()
	addrs, err := HostAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if a.Is4() && !a.IsLoopback() && !a.IsLinkLocalUnicast() {
			return a
		}
	}
	t.Fatalf("this host has no IPv4 address besides loopback (%v): the test needs one to prove the proxy refuses it", addrs)
	return netip.Addr{}
}

// rawVia sends GET / to target through the explicit proxy at proxy,
// either as an absolute URL or inside a CONNECT tunnel, and returns the
// status and body.
func rawVia(t *testing.T, proxy, target, how string) (int, string) {
	t.Helper()
	c := dial(t, proxy)
	br := bufio.NewReader(c)
	host := target
	switch how {
	case "connect":
		fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
		if code, _ := readHead(t, br); code != 200 {
			t.Fatalf("CONNECT %s: %d", target, code)
		}
		fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", host)
	default:
		fmt.Fprintf(c, "GET http://%s/ HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", target, host)
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("%s %s: %v", how, target, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// refusalBody is the 403 body for addr.
func refusalBody(addr string) string {
	return `{"error":"dal: connection to ` + addr + ` refused: pass --allow-loopback ` + addr + ` to allow it"}` + "\n"
}

// TestReachLoopbackAndHost: the guarded dialer reaches the host's own
// services (loopback, IPv6 loopback, the host's network address) only
// when named, whether they listened before the proxy started or after,
// through absolute-URL requests and CONNECT tunnels alike; a refused
// request gets 403 naming the flag, is reported and recorded, and the
// service never sees a connection.
func TestReachLoopbackAndHost(t *testing.T) {
	t.Parallel()
	host := hostAddr(t)
	for _, tc := range []struct {
		name  string
		bind  string
		named bool
		after bool // the service starts listening after the proxy
		how   string
	}{
		{"v4 unnamed before", "127.0.0.1:0", false, false, "proxy"},
		{"v4 unnamed after", "127.0.0.1:0", false, true, "proxy"},
		{"v4 unnamed connect", "127.0.0.1:0", false, false, "connect"},
		{"v4 other loopback", "127.0.0.2:0", false, false, "proxy"},
		{"v4 named before", "127.0.0.1:0", true, false, "proxy"},
		{"v4 named after", "127.0.0.1:0", true, true, "connect"},
		{"v6 unnamed", "[::1]:0", false, false, "proxy"},
		{"v6 unnamed connect", "[::1]:0", false, true, "connect"},
		{"v6 named", "[::1]:0", true, false, "connect"},
		{"host unnamed", net.JoinHostPort(host.String(), "0"), false, false, "proxy"},
		{"host unnamed after connect", net.JoinHostPort(host.String(), "0"), false, true, "connect"},
		{"host named", net.JoinHostPort(host.String(), "0"), true, true, "proxy"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			// A port known before the proxy starts, listened on before or
			// after it.
			var l net.Listener
			var addr, proxy string
			var rg *rig
			for try := 0; l == nil; try++ {
				l = listenOn(t, tc.bind)
				addr = l.Addr().String()
				if tc.after {
					l.Close()
				}
				var allow []netip.AddrPort
				if tc.named {
					allow = []netip.AddrPort{netip.MustParseAddrPort(addr)}
				}
				rg = newRig(t, Config{Allow: append([]netip.AddrPort{}, allow...)})
				proxy = rg.explicit()
				if tc.after {
					// Another test may have taken the freed port meanwhile:
					// then again with another.
					var err error
					if l, err = net.Listen("tcp", addr); err != nil && (try == 9 || !errors.Is(err, syscall.EADDRINUSE)) {
						t.Fatalf("listen on %s: %v", addr, err)
					}
				}
			}
			srv := serveAt(t, l, false)

			code, body := rawVia(t, proxy, addr, tc.how)
			if tc.named {
				if code != 200 || body != "hello from "+addr {
					t.Fatalf("named %s: %d %q", addr, code, body)
				}
				if ev := rg.reports(); len(ev) != 0 {
					t.Errorf("reports: %v", ev)
				}
				return
			}
			if code != http.StatusForbidden || body != refusalBody(addr) {
				t.Fatalf("unnamed %s: %d %q, want 403 %q", addr, code, body, refusalBody(addr))
			}
			var msg struct{ Error string }
			if err := json.Unmarshal([]byte(body), &msg); err != nil || !strings.Contains(msg.Error, "--allow-loopback "+addr) {
				t.Errorf("body %q is not JSON naming the flag: %v", body, err)
			}
			x := rg.one()
			if x.Refused != addr || x.Error != "" || x.ServerAddr != "" || x.Response == nil ||
				x.Response.Status != 403 || string(x.Response.Body) != body || x.Response.Header.Get("Date") != "" {
				t.Errorf("record: refused %q error %q server %q response %+v", x.Refused, x.Error, x.ServerAddr, x.Response)
			}
			ev := rg.reports()
			if len(ev) != 1 || ev[0].Kind != KindRefused || ev[0].Addr != addr || !strings.Contains(ev[0].Msg, "--allow-loopback "+addr) {
				t.Errorf("reports: %+v", ev)
			}
			if n := srv.conns.Load(); n != 0 {
				t.Errorf("the service at %s got %d connection(s)", addr, n)
			}
		})
	}
}

// TestReachResolved: the check is made on the address connected to, after
// name resolution and unmapping: a name that resolves to loopback, an
// IPv4-mapped IPv6 literal and the unspecified address are refused as
// loopback is; a transparent destination is guarded too; HTTPS through a
// CONNECT tunnel gets the 403 inside TLS.
func TestReachResolved(t *testing.T) {
	t.Parallel()
	srv := serveAt(t, listen(t), false)
	port := fmt.Sprint(srv.addr.Port())
	tlsSrv := serveAt(t, listen(t), true)
	roots := x509.NewCertPool()
	roots.AddCert(tlsSrv.srv.Certificate())
	rg := newRig(t, Config{Allow: []netip.AddrPort{}, UpstreamRoots: roots})
	proxy := rg.explicit()
	transparent := rg.transparent(srv.addr.String())

	for _, tc := range []struct {
		target, refused string
	}{
		{"localhost:" + port, ""}, // resolves to 127.0.0.1 or ::1; either is refused
		{"[::ffff:127.0.0.1]:" + port, "127.0.0.1:" + port},
		{"0.0.0.0:" + port, "0.0.0.0:" + port},
	} {
		code, body := rawVia(t, proxy, tc.target, "proxy")
		if code != http.StatusForbidden || !strings.Contains(body, "refused") || !strings.Contains(body, "--allow-loopback") {
			t.Errorf("%s: %d %q", tc.target, code, body)
		}
		if tc.refused != "" && !strings.Contains(body, "connection to "+tc.refused+" refused") {
			t.Errorf("%s: body %q does not name %s", tc.target, body, tc.refused)
		}
	}
	if _, body := rawVia(t, proxy, "0.0.0.0:"+port, "proxy"); !strings.Contains(body, "--allow-loopback 127.0.0.1:"+port) {
		t.Errorf("0.0.0.0: body %q does not suggest 127.0.0.1", body)
	}

	resp, body := get(t, directedClient(transparent, nil), "http://"+srv.addr.String()+"/")
	if resp.StatusCode != http.StatusForbidden || string(body) != refusalBody(srv.addr.String()) {
		t.Errorf("transparent: %d %q", resp.StatusCode, body)
	}

	resp, body = get(t, proxyClient(proxy, caPool(rg.ca)), "https://"+tlsSrv.addr.String()+"/")
	if resp.StatusCode != http.StatusForbidden || string(body) != refusalBody(tlsSrv.addr.String()) || resp.TLS == nil {
		t.Errorf("https through CONNECT: %d %q (TLS %v)", resp.StatusCode, body, resp.TLS != nil)
	}
	if n, m := srv.conns.Load(), tlsSrv.conns.Load(); n != 0 || m != 0 {
		t.Errorf("the services got %d and %d connections", n, m)
	}
	for _, x := range rg.records() {
		if x.Refused == "" || x.Response == nil || x.Response.Status != 403 {
			t.Errorf("record %s %s: refused %q response %+v", x.Request.Method, x.Request.URL, x.Refused, x.Response)
		}
	}
}

// TestReachAddedAddress: an address the host gained after its addresses
// were listed is still its own: with none listed and no change watch,
// the kernel's answer alone refuses the host's network address and
// loopback, and lets a remote one through.
func TestReachAddedAddress(t *testing.T) {
	t.Parallel()
	r := &reach{allow: map[netip.AddrPort]bool{}}
	r.own.Store(&map[netip.Addr]bool{})
	r.probe.Store(true)
	host := hostAddr(t)
	for _, tc := range []struct {
		addr    string
		refused bool
	}{
		{net.JoinHostPort(host.String(), "80"), true},
		{"127.9.9.9:80", true},
		{"[::1]:80", true},
		{"[::]:80", true},
		{"192.0.2.200:80", false}, // not the host (no attached networks listed here)
		{"203.0.113.7:443", false},
		{"[2001:db8::7]:443", false},
	} {
		err := r.check(netip.MustParseAddrPort(tc.addr))
		if (err != nil) != tc.refused {
			t.Errorf("%s: check = %v, want refused %v", tc.addr, err, tc.refused)
		}
	}
}

func TestParseAllow(t *testing.T) {
	t.Parallel()
	host := hostAddr(t)
	for _, tc := range []struct {
		in   string
		want []string
		err  string
	}{
		{"127.0.0.1:8080", []string{"127.0.0.1:8080"}, ""},
		{"[::1]:11434", []string{"[::1]:11434"}, ""},
		{"localhost:3000", []string{"127.0.0.1:3000", "[::1]:3000"}, ""},
		{"LOCALHOST:3000", []string{"127.0.0.1:3000", "[::1]:3000"}, ""},
		{"127.0.0.5:1", []string{"127.0.0.5:1"}, ""},
		{net.JoinHostPort(host.String(), "9000"), []string{net.JoinHostPort(host.String(), "9000")}, ""},
		{"[::ffff:127.0.0.1]:80", []string{"127.0.0.1:80"}, ""},
		{"127.0.0.1", nil, "want HOST:PORT"},
		{"127.0.0.1:0", nil, "from 1 to 65535"},
		{"127.0.0.1:70000", nil, "from 1 to 65535"},
		{"example.com:80", nil, "IP address or localhost"},
		{"0.0.0.0:80", nil, "name the address"},
		{"203.0.113.7:80", nil, "not an address of this host"},
	} {
		got, err := ParseAllow(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ParseAllow(%q) = %v, %v; want an error with %q", tc.in, got, err, tc.err)
			}
			continue
		}
		var s []string
		for _, a := range got {
			s = append(s, a.String())
		}
		if err != nil || strings.Join(s, ",") != strings.Join(tc.want, ",") {
			t.Errorf("ParseAllow(%q) = %v, %v; want %v", tc.in, s, err, tc.want)
		}
	}
}

func BenchmarkReachCheck(b *testing.B) {
	r, err := newReach(nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer r.close()
	if r.probe.Load() {
		b.Fatal("the address watch is not running")
	}
	remote := netip.MustParseAddrPort("203.0.113.7:443")
	for b.Loop() {
		if r.check(remote) != nil {
			b.Fatal("refused")
		}
	}
}

// TestReachWatchesAddressChanges: an address the host gains after the
// proxy started is refused from then on, the address watch having
// listed it again. The test runs itself again in a network namespace of
// its own (unshare -n), where adding an address disturbs nothing.
func TestReachWatchesAddressChanges(t *testing.T) {
	if os.Getenv("DAL_NETCAP_IN_NETNS") != "1" {
		if os.Geteuid() != 0 {
			t.Fatal("creating a network namespace needs root (CAP_SYS_ADMIN); the network tests run as root")
		}
		cmd := exec.Command("unshare", "--net", "--", os.Args[0], "-test.run", "^TestReachWatchesAddressChanges$", "-test.count", "1", "-test.v")
		cmd.Env = append(os.Environ(), "DAL_NETCAP_IN_NETNS=1")
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "--- PASS: TestReachWatchesAddressChanges") {
			t.Fatalf("in a new network namespace: %v\n%s", err, out)
		}
		return
	}
	r, err := newReach(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.close()
	if r.probe.Load() {
		t.Fatal("the address watch is not running")
	}
	added := netip.MustParseAddrPort("198.51.100.77:80")
	if err := r.check(added); err != nil {
		t.Fatalf("before the address exists: %v", err)
	}
	if out, err := exec.Command("ip", "addr", "add", "198.51.100.77/32", "dev", "lo").CombinedOutput(); err != nil {
		t.Fatalf("ip addr add: %v: %s", err, out)
	}
	// The kernel announces the change; the watch lists the addresses
	// again. Bounded by the test's own timeout, not by a sleep.
	for r.check(added) == nil {
		runtime.Gosched()
	}
	if _, ok := r.check(added).(*RefusedError); !ok {
		t.Errorf("after the address was added: %v", r.check(added))
	}
}
