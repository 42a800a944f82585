package netcap

import (
	"errors"
	"net/netip"
	"os"
	"strings"
	"sync"
	"syscall"
)

// Netlink multicast groups of address changes (linux/rtnetlink.h).
const (
	rtmgrpIPv4Ifaddr = 0x10
	rtmgrpIPv6Ifaddr = 0x100
)

// watch keeps the host's address list current for the proxy's lifetime:
// a netlink socket subscribed to address changes (RTMGRP_IPV4_IFADDR,
// RTMGRP_IPV6_IFADDR) lists the addresses again after every change, so a
// dial's check stays a map lookup. It subscribes before the first
// listing, so no change is missed. The returned stop closes the socket
// and ends the goroutine. When the subscription fails, or later breaks,
// every check asks the kernel instead (isLocal, about 30 µs a dial).
func (r *reach) watch() (stop func(), err error) {
	fd, err := syscall.Socket(syscall.AF_NETLINK, syscall.SOCK_RAW|syscall.SOCK_CLOEXEC|syscall.SOCK_NONBLOCK, syscall.NETLINK_ROUTE)
	if err != nil {
		r.probe.Store(true)
		return func() {}, r.refresh()
	}
	sa := &syscall.SockaddrNetlink{Family: syscall.AF_NETLINK, Groups: rtmgrpIPv4Ifaddr | rtmgrpIPv6Ifaddr}
	if err := syscall.Bind(fd, sa); err != nil {
		syscall.Close(fd)
		r.probe.Store(true)
		return func() {}, r.refresh()
	}
	f := os.NewFile(uintptr(fd), "netlink-addr")
	if err := r.refresh(); err != nil {
		f.Close()
		return nil, err
	}
	go func() {
		buf := make([]byte, 32<<10)
		for {
			_, err := f.Read(buf)
			if errors.Is(err, os.ErrClosed) {
				return
			}
			// A change, or changes lost to an overrun (ENOBUFS): list
			// again either way.
			if r.refresh() != nil || (err != nil && !errors.Is(err, syscall.ENOBUFS)) {
				r.probe.Store(true)
				f.Close()
				return
			}
		}
	}()
	return func() { f.Close() }, nil
}

// isLocal reports whether the kernel takes a as one of this host's own
// addresses now, whatever interface carries it: binding a socket to it
// succeeds (EADDRNOTAVAIL otherwise). Where the host lets any address be
// bound (net.ipv4/ipv6.ip_nonlocal_bind), it tells nothing and reports
// false; the listed addresses still count.
func isLocal(a netip.Addr) bool {
	if !a.IsValid() || nonlocalBind() {
		return false
	}
	family := syscall.AF_INET
	var sa syscall.Sockaddr
	if a.Is4() {
		sa = &syscall.SockaddrInet4{Addr: a.As4()}
	} else {
		family = syscall.AF_INET6
		sa = &syscall.SockaddrInet6{Addr: a.As16()}
	}
	fd, err := syscall.Socket(family, syscall.SOCK_DGRAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return false
	}
	defer syscall.Close(fd)
	return syscall.Bind(fd, sa) == nil
}

// nonlocalBind reports whether this host lets sockets bind addresses it
// does not have.
var nonlocalBind = sync.OnceValue(func() bool {
	for _, p := range []string{"/proc/sys/net/ipv4/ip_nonlocal_bind", "/proc/sys/net/ipv6/ip_nonlocal_bind"} {
		if b, err := os.ReadFile(p); err == nil && strings.TrimSpace(string(b)) != "0" {
			return true
		}
	}
	return false
})
