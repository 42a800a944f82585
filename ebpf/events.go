package ebpf

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net/netip"
	"strings"
)

// Layout of struct event in bpf/boundary.c (little-endian host order, except
// the port, which is in network order).
const (
	eventSize     = 288
	offSession    = 0
	offPID        = 4
	offKind       = 8
	offFamily     = 10
	offPort       = 12
	offAddr       = 16
	offPath       = 32
	familyUnix    = 1
	familyInet    = 2
	familyInet6   = 10
	kindConnect   = 1
	kindSendto    = 2
	kindRandomDev = 3
	kindExec      = 4
	kindWriteOut  = 5
)

var kindNames = map[byte]string{
	kindConnect:   "connect",
	kindSendto:    "sendto",
	kindRandomDev: "random_device",
	kindExec:      "exec",
	kindWriteOut:  "write_outside",
}

// decodeEvent turns one ring buffer record into its session and Event.
func decodeEvent(raw []byte) (uint32, Event, error) {
	if len(raw) < eventSize {
		return 0, Event{}, fmt.Errorf("decode event: %d bytes, want %d", len(raw), eventSize)
	}
	kind, ok := kindNames[raw[offKind]]
	if !ok {
		return 0, Event{}, fmt.Errorf("decode event: unknown kind %d", raw[offKind])
	}
	session := binary.LittleEndian.Uint32(raw[offSession:])
	ev := Event{Kind: kind, PID: int(binary.LittleEndian.Uint32(raw[offPID:]))}
	switch raw[offKind] {
	case kindConnect, kindSendto:
		ev.Detail = destination(raw)
	default:
		ev.Detail = cString(raw[offPath:eventSize])
	}
	return session, ev, nil
}

// destination formats the socket address of a connect or sendto event.
func destination(raw []byte) string {
	port := binary.BigEndian.Uint16(raw[offPort:])
	switch binary.LittleEndian.Uint16(raw[offFamily:]) {
	case familyInet:
		return netip.AddrPortFrom(netip.AddrFrom4([4]byte(raw[offAddr:offAddr+4])), port).String()
	case familyInet6:
		return netip.AddrPortFrom(netip.AddrFrom16([16]byte(raw[offAddr:offAddr+16])), port).String()
	case familyUnix:
		path := raw[offPath:eventSize]
		if len(path) > 0 && path[0] == 0 { // abstract socket name
			return "unix:@" + cString(path[1:])
		}
		return "unix:" + cString(path)
	}
	return "unreadable address"
}

func cString(b []byte) string {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	return string(b)
}

// plumbing reports whether a write_outside path is a terminal or the null
// device rather than state the run leaves behind.
func plumbing(path string) bool {
	switch path {
	case "/dev/null", "/dev/tty", "/dev/stdout", "/dev/stderr":
		return true
	}
	for _, p := range []string{"/dev/pts/", "/dev/fd/", "/proc/self/fd/"} {
		if strings.HasPrefix(path, p) {
			return true
		}
	}
	return false
}
