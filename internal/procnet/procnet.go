// Package procnet reads the kernel's tables of TCP sockets, /proc/net/tcp
// and /proc/net/tcp6, as this process's network namespace shows them.
package procnet

import (
	"encoding/hex"
	"net/netip"
	"os"
	"strconv"
	"strings"
)

// Listen is the state of a listening socket (TCP_LISTEN).
const Listen = 0x0A

// Socket is one row of the tables.
type Socket struct {
	Local, Remote netip.AddrPort
	State         int
	UID           int
}

// TCP returns the IPv4 and IPv6 TCP sockets; a table that cannot be read
// is left out.
func TCP() []Socket {
	var out []Socket
	for _, file := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		b, err := os.ReadFile(file)
		if err != nil {
			continue
		}
		for line := range strings.Lines(string(b)) {
			fl := strings.Fields(line)
			if len(fl) < 8 {
				continue
			}
			local, ok1 := addr(fl[1])
			remote, ok2 := addr(fl[2])
			state, err1 := strconv.ParseUint(fl[3], 16, 8)
			uid, err2 := strconv.Atoi(fl[7])
			if ok1 && ok2 && err1 == nil && err2 == nil {
				out = append(out, Socket{Local: local, Remote: remote, State: int(state), UID: uid})
			}
		}
	}
	return out
}

// addr parses "0100007F:1F90": the kernel prints each 32-bit word of the
// address in host (little-endian) order, the port in hex.
func addr(s string) (netip.AddrPort, bool) {
	h, p, ok := strings.Cut(s, ":")
	if !ok {
		return netip.AddrPort{}, false
	}
	raw, err := hex.DecodeString(h)
	if err != nil || (len(raw) != 4 && len(raw) != 16) {
		return netip.AddrPort{}, false
	}
	for w := 0; w < len(raw); w += 4 {
		raw[w], raw[w+1], raw[w+2], raw[w+3] = raw[w+3], raw[w+2], raw[w+1], raw[w]
	}
	port, err := strconv.ParseUint(p, 16, 16)
	if err != nil {
		return netip.AddrPort{}, false
	}
	a, _ := netip.AddrFromSlice(raw)
	return netip.AddrPortFrom(a.Unmap(), uint16(port)), true
}
