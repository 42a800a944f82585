package netcap

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

// reach decides which addresses a recording proxy may connect to: the
// internet and machines behind a router, and of this host, its
// link-local neighbours and the networks attached to it only the
// addresses allowed for the run. The check runs in the dialer's Control
// function, on the very address the socket is about to connect to (after
// name resolution), so there is no gap between checking and connecting:
// a name is resolved once, and the address checked is the address
// dialled.
type reach struct {
	allow map[netip.AddrPort]bool
	// allowNets are the networks (and single addresses) allowed at any
	// port (--allow-address ADDR or CIDR).
	allowNets []netip.Prefix
	// own are this host's interface addresses and attached the networks
	// of its interfaces, listed when the proxy starts and again whenever
	// they change (watch).
	own      atomic.Pointer[map[netip.Addr]bool]
	attached atomic.Pointer[[]netip.Prefix]
	// probe: the change watch is not running, so each check also asks
	// the kernel (isLocal).
	probe atomic.Bool
	stop  func()
}

// newReach lists the host's addresses and starts watching them; close
// stops the watch.
func newReach(allow []netip.AddrPort, nets []netip.Prefix) (*reach, error) {
	r := &reach{allow: make(map[netip.AddrPort]bool, len(allow))}
	for _, ap := range allow {
		r.allow[canonical(ap)] = true
	}
	for _, n := range nets {
		r.allowNets = append(r.allowNets, netip.PrefixFrom(n.Addr().Unmap().WithZone(""), unmappedBits(n)).Masked())
	}
	stop, err := r.watch()
	if err != nil {
		return nil, err
	}
	r.stop = stop
	return r, nil
}

func (r *reach) close() { r.stop() }

// refresh lists the host's addresses and attached networks again.
func (r *reach) refresh() error {
	addrs, nets, err := hostNets()
	if err != nil {
		return err
	}
	own := make(map[netip.Addr]bool, len(addrs))
	for _, a := range addrs {
		own[a] = true
	}
	r.own.Store(&own)
	r.attached.Store(&nets)
	return nil
}

// check returns nil when ap may be connected to, else a *RefusedError.
func (r *reach) check(ap netip.AddrPort) error {
	ap = canonical(ap)
	a := ap.Addr()
	if r.allow[ap] {
		return nil
	}
	if a.IsLoopback() || a.IsUnspecified() || (*r.own.Load())[a] || (r.probe.Load() && isLocal(a)) {
		// This host's services: a network allowed does not open them,
		// only the address named.
		if r.allowedNet(a, true) {
			return nil
		}
		return &RefusedError{Addr: ap}
	}
	if r.allowedNet(a, false) {
		return nil
	}
	if a.IsLinkLocalUnicast() || a == aliyunMetadata || a == awsMetadata6 {
		return &RefusedError{Addr: ap, Why: WhyLinkLocal}
	}
	if nets := r.attached.Load(); nets != nil {
		for _, n := range *nets {
			if n.Contains(a) {
				return &RefusedError{Addr: ap, Why: WhyAttached, Net: n}
			}
		}
	}
	return nil
}

// allowedNet reports whether a is in an allowed network, or, if single,
// is an allowed address.
func (r *reach) allowedNet(a netip.Addr, single bool) bool {
	for _, n := range r.allowNets {
		if n.Contains(a) && (!single || n.IsSingleIP()) {
			return true
		}
	}
	return false
}

// Cloud metadata services outside the link-local ranges: Alibaba
// Cloud's, and AWS's IPv6 one (the others, AWS, GCP, Azure, Oracle,
// DigitalOcean, answer at 169.254.169.254, which metadata.google.internal
// and instance-data resolve to).
var (
	aliyunMetadata = netip.MustParseAddr("100.100.100.200")
	awsMetadata6   = netip.MustParseAddr("fd00:ec2::254")
)

// control is the dialer's Control function: address is the resolved
// "ip:port" the socket connects to next.
func (r *reach) control(network, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		// Not an IP socket address: nothing the proxy should dial.
		return fmt.Errorf("dal refuses to connect to %s over %s", address, network)
	}
	return r.check(ap)
}

// canonical unmaps IPv4-mapped IPv6 addresses and drops zones, so that
// ::ffff:127.0.0.1 is 127.0.0.1.
func canonical(ap netip.AddrPort) netip.AddrPort {
	return netip.AddrPortFrom(ap.Addr().Unmap().WithZone(""), ap.Port())
}

// RefusedError is a connection the recording proxy would not open: to a
// loopback address, to one of this host's own addresses or to the
// unspecified address, to a link-local or cloud metadata address, or to
// a machine on a network attached to this host, not allowed for the run
// ([Config.Allow], [Config.AllowNets]). The client gets 403 with a JSON
// body carrying the message.
type RefusedError struct {
	// Addr is the address the proxy was about to connect to.
	Addr netip.AddrPort
	// Why is the rule that refused it; "" means one of this host's own
	// addresses.
	Why string
	// Net is the attached network Addr is on (WhyAttached).
	Net netip.Prefix
}

// Why a connection was refused, besides the host's own addresses.
const (
	// WhyLinkLocal: 169.254.0.0/16, fe80::/10, or a cloud metadata
	// address.
	WhyLinkLocal = "link-local"
	// WhyAttached: on a network attached to one of this host's
	// interfaces (a bridge, another namespace, the local subnet).
	WhyAttached = "attached"
)

func (e *RefusedError) Error() string {
	switch e.Why {
	case WhyLinkLocal:
		return fmt.Sprintf("connection to %s refused: it is a link-local address, where cloud metadata services answer; pass --allow-address %s to allow it", e.Addr, e.Addr)
	case WhyAttached:
		return fmt.Sprintf("connection to %s refused: it is on %s, a network attached to this host (a bridge, a container or another namespace on it); pass --allow-address %s (or --allow-address %s) to allow it", e.Addr, e.Net, e.Addr, e.Net)
	}
	if a := e.Addr.Addr(); a.IsUnspecified() {
		lo := netip.AddrPortFrom(netip.IPv6Loopback(), e.Addr.Port())
		if a.Is4() {
			lo = netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 0, 1}), e.Addr.Port())
		}
		return fmt.Sprintf("connection to %s refused: it means this host; connect to %s and pass --allow-loopback %s to allow it", e.Addr, lo, lo)
	}
	return fmt.Sprintf("connection to %s refused: pass --allow-loopback %s to allow it", e.Addr, e.Addr)
}

// unmappedBits is n's length once its address is unmapped
// (::ffff:10.0.0.0/104 is 10.0.0.0/8).
func unmappedBits(n netip.Prefix) int {
	if n.Addr().Is4In6() {
		return max(n.Bits()-96, 0)
	}
	return n.Bits()
}

// HostAddrs lists this host's own interface addresses, loopback
// included, IPv4-mapped ones unmapped and without zones.
func HostAddrs() ([]netip.Addr, error) {
	addrs, _, err := hostNets()
	return addrs, err
}

// hostNets lists this host's own interface addresses (as HostAddrs) and
// the networks they are on: each address's prefix, less loopback and
// link-local ones (refused whole anyway) and single addresses.
func hostNets() ([]netip.Addr, []netip.Prefix, error) {
	ifas, err := net.InterfaceAddrs()
	if err != nil {
		return nil, nil, fmt.Errorf("list this host's addresses: %w", err)
	}
	addrs := make([]netip.Addr, 0, len(ifas))
	var nets []netip.Prefix
	for _, ifa := range ifas {
		var ip net.IP
		ones := -1
		switch v := ifa.(type) {
		case *net.IPNet:
			ip = v.IP
			ones, _ = v.Mask.Size()
		case *net.IPAddr:
			ip = v.IP
		}
		a, ok := netip.AddrFromSlice(ip)
		if !ok {
			continue
		}
		if len(ip) == net.IPv6len && ip.To4() != nil && ones >= 96 {
			ones -= 96 // a 16-byte IPv4 address with a 16-byte mask
		}
		a = a.Unmap().WithZone("")
		addrs = append(addrs, a)
		if ones <= 0 || ones >= a.BitLen() || a.IsLoopback() || a.IsLinkLocalUnicast() {
			continue
		}
		n := netip.PrefixFrom(a, ones).Masked()
		if !slices.Contains(nets, n) {
			nets = append(nets, n)
		}
	}
	return addrs, nets, nil
}

// ParseAllow parses the value of --allow-loopback: HOST:PORT where HOST
// is an IP address of this host (127.0.0.1, ::1 in brackets, or one of
// its interface addresses) or "localhost", which means both 127.0.0.1
// and ::1. It returns the addresses to allow.
func ParseAllow(s string) ([]netip.AddrPort, error) {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return nil, fmt.Errorf("--allow-loopback %q: want HOST:PORT, e.g. 127.0.0.1:8080 or [::1]:8080", s)
	}
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil || p == 0 {
		return nil, fmt.Errorf("--allow-loopback %q: the port must be a number from 1 to 65535", s)
	}
	if strings.EqualFold(host, "localhost") {
		return []netip.AddrPort{
			netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 0, 1}), uint16(p)),
			netip.AddrPortFrom(netip.IPv6Loopback(), uint16(p)),
		}, nil
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return nil, fmt.Errorf("--allow-loopback %q: the host must be an IP address or localhost (a name could resolve to anything)", s)
	}
	a = a.Unmap().WithZone("")
	if a.IsUnspecified() {
		return nil, fmt.Errorf("--allow-loopback %q: name the address the service listens on, e.g. 127.0.0.1:%d", s, p)
	}
	if !a.IsLoopback() {
		own, err := HostAddrs()
		if err != nil {
			return nil, err
		}
		found := false
		for _, o := range own {
			found = found || o == a
		}
		if !found && !isLocal(a) {
			return nil, fmt.Errorf("--allow-loopback %q: %s is not an address of this host; the proxy reaches other machines without the flag", s, a)
		}
	}
	return []netip.AddrPort{netip.AddrPortFrom(a, uint16(p))}, nil
}

// ParseAllowAddress parses the value of --allow-address: an address
// (169.254.169.254, fe80::1) or a network (172.17.0.0/16), allowed at
// every port, or HOST:PORT, allowed at that port, where HOST is an IP
// address or a name resolved now (the addresses it has when the run
// starts are allowed, not those it may resolve to later). It returns
// the addresses with ports, and the networks (a single address as a /32
// or /128), to allow.
func ParseAllowAddress(ctx context.Context, s string) ([]netip.AddrPort, []netip.Prefix, error) {
	if n, err := netip.ParsePrefix(s); err == nil {
		n = netip.PrefixFrom(n.Addr().Unmap().WithZone(""), unmappedBits(n)).Masked()
		if n.Bits() == 0 {
			return nil, nil, fmt.Errorf("--allow-address %q: that is every address; name the network or address to allow, e.g. 172.17.0.0/16", s)
		}
		return nil, []netip.Prefix{n}, nil
	}
	if a, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(s, "["), "]")); err == nil {
		a = a.Unmap().WithZone("")
		if a.IsUnspecified() {
			return nil, nil, fmt.Errorf("--allow-address %q: the unspecified address means this host; name the address a service listens on", s)
		}
		return nil, []netip.Prefix{netip.PrefixFrom(a, a.BitLen())}, nil
	}
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return nil, nil, fmt.Errorf("--allow-address %q: want an address (169.254.169.254), a network (172.17.0.0/16) or HOST:PORT (metadata.google.internal:80, [fe80::1]:8080)", s)
	}
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil || p == 0 {
		return nil, nil, fmt.Errorf("--allow-address %q: the port must be a number from 1 to 65535", s)
	}
	if a, err := netip.ParseAddr(host); err == nil {
		a = a.Unmap().WithZone("")
		if a.IsUnspecified() {
			return nil, nil, fmt.Errorf("--allow-address %q: the unspecified address means this host; name the address a service listens on", s)
		}
		return []netip.AddrPort{netip.AddrPortFrom(a, uint16(p))}, nil, nil
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	addrs, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil || len(addrs) == 0 {
		return nil, nil, fmt.Errorf("--allow-address %q: %s does not resolve here (%v); name its address instead", s, host, err)
	}
	var out []netip.AddrPort
	for _, a := range addrs {
		ap := netip.AddrPortFrom(a.Unmap().WithZone(""), uint16(p))
		if !slices.Contains(out, ap) {
			out = append(out, ap)
		}
	}
	return out, nil, nil
}
