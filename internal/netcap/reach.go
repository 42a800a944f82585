package netcap

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
)

// reach decides which addresses a recording proxy may connect to: the
// non-local internet, and of this host's own services only the addresses
// allowed for the run. The check runs in the dialer's Control function,
// on the very address the socket is about to connect to (after name
// resolution), so there is no gap between checking and connecting.
type reach struct {
	allow map[netip.AddrPort]bool
	// own are this host's interface addresses, listed when the proxy
	// starts and again whenever they change (watch).
	own atomic.Pointer[map[netip.Addr]bool]
	// probe: the change watch is not running, so each check also asks
	// the kernel (isLocal).
	probe atomic.Bool
	stop  func()
}

// newReach lists the host's addresses and starts watching them; close
// stops the watch.
func newReach(allow []netip.AddrPort) (*reach, error) {
	r := &reach{allow: make(map[netip.AddrPort]bool, len(allow))}
	for _, ap := range allow {
		r.allow[canonical(ap)] = true
	}
	stop, err := r.watch()
	if err != nil {
		return nil, err
	}
	r.stop = stop
	return r, nil
}

func (r *reach) close() { r.stop() }

// refresh lists the host's addresses again.
func (r *reach) refresh() error {
	addrs, err := HostAddrs()
	if err != nil {
		return err
	}
	own := make(map[netip.Addr]bool, len(addrs))
	for _, a := range addrs {
		own[a] = true
	}
	r.own.Store(&own)
	return nil
}

// check returns nil when ap may be connected to, else a *RefusedError.
func (r *reach) check(ap netip.AddrPort) error {
	ap = canonical(ap)
	if r.allow[ap] {
		return nil
	}
	a := ap.Addr()
	if a.IsLoopback() || a.IsUnspecified() || (*r.own.Load())[a] || (r.probe.Load() && isLocal(a)) {
		return &RefusedError{Addr: ap}
	}
	return nil
}

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
// unspecified address, not allowed for the run ([Config.Allow]). The
// client gets 403 with a JSON body carrying the message.
type RefusedError struct {
	// Addr is the address the proxy was about to connect to.
	Addr netip.AddrPort
}

func (e *RefusedError) Error() string {
	if a := e.Addr.Addr(); a.IsUnspecified() {
		lo := netip.AddrPortFrom(netip.IPv6Loopback(), e.Addr.Port())
		if a.Is4() {
			lo = netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 0, 1}), e.Addr.Port())
		}
		return fmt.Sprintf("connection to %s refused: it means this host; connect to %s and pass --allow-loopback %s to allow it", e.Addr, lo, lo)
	}
	return fmt.Sprintf("connection to %s refused: pass --allow-loopback %s to allow it", e.Addr, e.Addr)
}

// HostAddrs lists this host's own interface addresses, loopback
// included, IPv4-mapped ones unmapped and without zones.
func HostAddrs() ([]netip.Addr, error) {
	ifas, err := net.InterfaceAddrs()
	if err != nil {
		return nil, fmt.Errorf("list this host's addresses: %w", err)
	}
	out := make([]netip.Addr, 0, len(ifas))
	for _, ifa := range ifas {
		var ip net.IP
		switch v := ifa.(type) {
		case *net.IPNet:
			ip = v.IP
		case *net.IPAddr:
			ip = v.IP
		}
		if a, ok := netip.AddrFromSlice(ip); ok {
			out = append(out, a.Unmap().WithZone(""))
		}
	}
	return out, nil
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
