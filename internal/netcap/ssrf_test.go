package netcap

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// neighbour is an address on a network attached to this host that is
// not one of the host's own, or fails the test.
func neighbour(t *testing.T) (netip.Addr, netip.Prefix) {
	t.Helper()
	addrs, nets, err := hostNets()
	if err != nil {
		t.Fatal(err)
	}
	own := map[netip.Addr]bool{}
	for _, a := range addrs {
		own[a] = true
	}
	for _, n := range nets {
		if !n.Addr().Is4() {
			continue
		}
		for a := n.Addr().Next(); n.Contains(a); a = a.Next() {
			if !own[a] {
				return a, n
			}
		}
	}
	t.Fatalf("this host has no IPv4 network besides loopback (%v): the test needs one to prove the proxy refuses its neighbours", nets)
	return netip.Addr{}, netip.Prefix{}
}

// TestReachSSRF: link-local and cloud metadata addresses and machines on
// a network attached to this host are refused (each naming
// --allow-address), unless allowed by address, network or address and
// port; the internet and private addresses behind a router are not.
func TestReachSSRF(t *testing.T) {
	t.Parallel()
	nb, attached := neighbour(t)
	r, err := newReach(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.close()
	routed := netip.MustParseAddr("10.123.45.67")
	for _, n := range *r.attached.Load() {
		if n.Contains(routed) {
			t.Fatalf("%s is on a network of this host (%s): pick another routed address for the test", routed, n)
		}
	}
	nbAP := netip.AddrPortFrom(nb, 8080).String()
	for _, tc := range []struct {
		addr, why string // why "" means allowed, "host" the host's own
	}{
		{"169.254.169.254:80", WhyLinkLocal},
		{"[::ffff:169.254.169.254]:80", WhyLinkLocal},
		{"169.254.1.2:8080", WhyLinkLocal},
		{"[fe80::a9fe:a9fe]:80", WhyLinkLocal},
		{"[fe80::1%lo]:80", WhyLinkLocal},
		{"100.100.100.200:80", WhyLinkLocal}, // Alibaba Cloud's metadata
		{"[fd00:ec2::254]:80", WhyLinkLocal}, // AWS's IPv6 metadata
		{nbAP, WhyAttached},
		{"127.0.0.1:80", "host"},
		{"203.0.113.7:443", ""},
		{netip.AddrPortFrom(routed, 80).String(), ""},
		{"[2001:db8::7]:443", ""},
	} {
		err := r.check(netip.MustParseAddrPort(tc.addr))
		var re *RefusedError
		switch {
		case tc.why == "" && err != nil:
			t.Errorf("%s: refused: %v", tc.addr, err)
		case tc.why == "":
		case !asRefused(err, &re):
			t.Errorf("%s: %v, want refused (%s)", tc.addr, err, tc.why)
		case tc.why == "host" && re.Why != "":
			t.Errorf("%s: refused as %q, want the host's own", tc.addr, re.Why)
		case tc.why != "host" && (re.Why != tc.why || !strings.Contains(re.Error(), "--allow-address "+re.Addr.String())):
			t.Errorf("%s: %q (%s), want %s naming --allow-address", tc.addr, re.Error(), re.Why, tc.why)
		}
	}
	if err := r.check(netip.AddrPortFrom(nb, 80)); err == nil || !strings.Contains(err.Error(), "--allow-address "+attached.String()) {
		t.Errorf("attached: %v does not name the network %s", err, attached)
	}

	allowed, err := newReach([]netip.AddrPort{netip.MustParseAddrPort("169.254.169.254:80")},
		[]netip.Prefix{netip.PrefixFrom(nb, 32), netip.MustParsePrefix("::ffff:100.100.0.0/112")})
	if err != nil {
		t.Fatal(err)
	}
	defer allowed.close()
	for _, tc := range []struct {
		addr string
		ok   bool
	}{
		{"169.254.169.254:80", true},
		{"[::ffff:169.254.169.254]:80", true},
		{"169.254.169.254:81", false},
		{nbAP, true},
		{netip.AddrPortFrom(nb, 22).String(), true},
		{netip.AddrPortFrom(nb.Next(), 22).String(), nb.Next() == netip.Addr{} || !attached.Contains(nb.Next())},
		{"100.100.100.200:80", true},
		{"127.0.0.1:80", false},
	} {
		if err := allowed.check(netip.MustParseAddrPort(tc.addr)); (err == nil) != tc.ok {
			t.Errorf("allowed %s: %v, want allowed %v", tc.addr, err, tc.ok)
		}
	}
}

func asRefused(err error, re **RefusedError) bool {
	e, ok := err.(*RefusedError)
	*re = e
	return ok
}

func TestParseAllowAddress(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in        string
		aps, nets string
		err       string
	}{
		{"169.254.169.254", "", "169.254.169.254/32", ""},
		{"fe80::1", "", "fe80::1/128", ""},
		{"[fe80::1]", "", "fe80::1/128", ""},
		{"::ffff:169.254.169.254", "", "169.254.169.254/32", ""},
		{"172.17.0.0/16", "", "172.17.0.0/16", ""},
		{"172.17.3.4/16", "", "172.17.0.0/16", ""},
		{"::ffff:10.0.0.0/104", "", "10.0.0.0/8", ""},
		{"169.254.169.254:80", "169.254.169.254:80", "", ""},
		{"[fd00:ec2::254]:80", "[fd00:ec2::254]:80", "", ""},
		{"localhost:8080", "", "", ""}, // resolved: checked below
		{"0.0.0.0/0", "", "", "that is every address"},
		{"0.0.0.0", "", "", "the unspecified address means this host"},
		{"[::]:80", "", "", "the unspecified address means this host"},
		{"169.254.169.254:0", "", "", "the port must be a number from 1 to 65535"},
		{"169.254.169.254:http", "", "", "the port must be a number from 1 to 65535"},
		{"metadata", "", "", "want an address (169.254.169.254), a network (172.17.0.0/16) or HOST:PORT"},
		{"no-such-host.invalid:80", "", "", "no-such-host.invalid does not resolve here"},
	} {
		aps, nets, err := ParseAllowAddress(context.Background(), tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) || !strings.HasPrefix(err.Error(), "--allow-address "+`"`+tc.in+`"`) {
				t.Errorf("%q: %v, want an error saying %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", tc.in, err)
			continue
		}
		if tc.in == "localhost:8080" {
			if len(aps) == 0 || len(nets) != 0 || !aps[0].Addr().IsLoopback() || aps[0].Port() != 8080 {
				t.Errorf("%q: %v %v", tc.in, aps, nets)
			}
			continue
		}
		var a, n []string
		for _, x := range aps {
			a = append(a, x.String())
		}
		for _, x := range nets {
			n = append(n, x.String())
		}
		if strings.Join(a, ",") != tc.aps || strings.Join(n, ",") != tc.nets {
			t.Errorf("%q: %v %v, want %q %q", tc.in, a, n, tc.aps, tc.nets)
		}
	}
}

// TestReachSSRFServers: real servers at a link-local (metadata) address,
// at metadata.google.internal (resolving there through /etc/hosts), on a
// network attached to the host and at the host's own address on it; the
// proxy refuses each with 403 naming the flag, through absolute URLs and
// CONNECT tunnels, and the servers see no connection; allowed with
// AllowNets, they answer. The test runs itself again in network and mount
// namespaces of its own (unshare), where it adds addresses and an
// /etc/hosts line without disturbing the host.
func TestReachSSRFServers(t *testing.T) {
	if os.Getenv("DAL_NETCAP_IN_NETNS") != "1" {
		if os.Geteuid() != 0 {
			t.Fatal("creating network and mount namespaces needs root (CAP_SYS_ADMIN); the network tests run as root")
		}
		hosts := filepath.Join(t.TempDir(), "hosts")
		if err := os.WriteFile(hosts, []byte("127.0.0.1 localhost\n169.254.169.254 metadata.google.internal\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("unshare", "--net", "--mount", "--propagation", "private", "--", "sh", "-c",
			`mount --bind "$1" /etc/hosts && exec "$2" -test.run '^TestReachSSRFServers$' -test.count 1 -test.v`, "sh", hosts, os.Args[0])
		cmd.Env = append(os.Environ(), "DAL_NETCAP_IN_NETNS=1")
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "--- PASS: TestReachSSRFServers") {
			t.Fatalf("in new network and mount namespaces: %v\n%s", err, out)
		}
		return
	}
	for _, args := range [][]string{
		{"link", "set", "lo", "up"},
		// 10.9.0.0/24 becomes a network attached to this namespace's
		// host (and, on lo, every address of it local, so that a
		// server can listen on a neighbour's address).
		{"addr", "add", "10.9.0.1/24", "dev", "lo"},
		{"route", "add", "local", "169.254.169.254/32", "dev", "lo"},
	} {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %v: %v: %s", args, err, out)
		}
	}
	meta := serveAt(t, listenOn(t, "169.254.169.254:0"), false)
	nb := serveAt(t, listenOn(t, "10.9.0.2:0"), false)
	own := serveAt(t, listenOn(t, "10.9.0.1:0"), false)
	metaName := net.JoinHostPort("metadata.google.internal", fmtPort(meta.addr))

	rg := newRig(t, Config{Allow: []netip.AddrPort{}})
	proxy := rg.explicit()
	for _, tc := range []struct {
		target, refused, flag string
	}{
		{meta.addr.String(), meta.addr.String(), "--allow-address " + meta.addr.String()},
		{metaName, meta.addr.String(), "--allow-address " + meta.addr.String()},
		{nb.addr.String(), nb.addr.String(), "--allow-address 10.9.0.0/24"},
		{own.addr.String(), own.addr.String(), "--allow-loopback " + own.addr.String()},
	} {
		for _, how := range []string{"proxy", "connect"} {
			code, body := rawVia(t, proxy, tc.target, how)
			var msg struct{ Error string }
			json.Unmarshal([]byte(body), &msg)
			if code != http.StatusForbidden || !strings.HasPrefix(msg.Error, "dal: connection to "+tc.refused+" refused") || !strings.Contains(msg.Error, tc.flag) {
				t.Errorf("%s via %s: %d %q, want 403 naming %s", tc.target, how, code, body, tc.flag)
			}
		}
	}
	for _, s := range []*counted{meta, nb, own} {
		if n := s.conns.Load(); n != 0 {
			t.Errorf("the server at %s got %d connection(s)", s.addr, n)
		}
	}
	refusals := 0
	for _, e := range rg.reports() {
		if e.Kind == KindRefused {
			refusals++
		}
	}
	if refusals != 8 {
		t.Errorf("%d refusals reported, want 8: %v", refusals, rg.reports())
	}

	open := newRig(t, Config{Allow: []netip.AddrPort{}, AllowNets: []netip.Prefix{
		netip.MustParsePrefix("169.254.169.254/32"), netip.MustParsePrefix("10.9.0.0/24")}})
	proxy = open.explicit()
	for _, s := range []*counted{meta, nb} {
		for _, target := range []string{s.addr.String(), metaName} {
			if target == metaName && s != meta {
				continue
			}
			if code, body := rawVia(t, proxy, target, "connect"); code != 200 || body != "hello from "+s.addr.String() {
				t.Errorf("allowed %s: %d %q", target, code, body)
			}
		}
	}
	// The host's own address stays its own: a network allowed does not
	// name it.
	if code, _ := rawVia(t, proxy, own.addr.String(), "proxy"); code != http.StatusForbidden {
		t.Errorf("own address with the network allowed: %d, want 403", code)
	}
}

func fmtPort(ap netip.AddrPort) string { return strconv.Itoa(int(ap.Port())) }
