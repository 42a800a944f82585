package netcap

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"

	"github.com/dal-runtime/dal/internal/netcap/har"
	"golang.org/x/net/idna"
)

// A request inside a CONNECT tunnel, or inside TLS intercepted on a
// transparent connection, names its server twice: once where the tunnel
// goes (the CONNECT target, the TLS server name) and once in its Host
// header. The proxy dials the first; the second is whatever the client
// wrote. A request whose Host names another server is answered 421
// Misdirected Request (RFC 9110 §15.5.20), reported and recorded, never
// forwarded, so that the URL the policy decides on and the bundle
// records is always the server the bytes went to.

// sameAuthority reports whether the Host header host names the server
// at target ("host:port"), for a request of scheme: the same host
// (case-insensitive, a trailing dot ignored, internationalized names
// compared in their ASCII form, IP addresses by value) and the same port,
// which host may leave out when target's is the scheme's default.
func sameAuthority(host, target, scheme string) bool {
	th, tp, err := net.SplitHostPort(target)
	if err != nil {
		return false
	}
	hh, hp, ok := splitHost(host, defaultPort(scheme))
	if !ok || hp != tp {
		return false
	}
	if hh == th && hh != "" {
		return true // as most clients write it
	}
	if isASCII(hh) && isASCII(th) && !mayBeIP(hh) && !mayBeIP(th) {
		return strings.EqualFold(strings.TrimSuffix(hh, "."), strings.TrimSuffix(th, ".")) && strings.TrimSuffix(hh, ".") != ""
	}
	a, ok1 := normalHost(hh)
	b, ok2 := normalHost(th)
	return ok1 && ok2 && a == b
}

// splitHost splits a Host header's value into host and port, the port
// being defaultPort when it names none; an IPv6 literal is in brackets.
func splitHost(host, defaultPort string) (h, port string, ok bool) {
	if strings.HasPrefix(host, "[") {
		end := strings.IndexByte(host, ']')
		if end < 0 {
			return "", "", false
		}
		h, rest := host[1:end], host[end+1:]
		switch {
		case rest == "":
			return h, defaultPort, true
		case len(rest) > 1 && rest[0] == ':':
			return h, rest[1:], true
		}
		return "", "", false
	}
	switch strings.Count(host, ":") {
	case 0:
		return host, defaultPort, true
	case 1:
		i := strings.IndexByte(host, ':')
		if i == len(host)-1 {
			return "", "", false
		}
		return host[:i], host[i+1:], true
	}
	return "", "", false // an IPv6 address without brackets
}

// normalHost is host as the proxy compares it: an IP address in its
// canonical form (IPv4-mapped unmapped), a name lowercased, without a
// trailing dot, in its ASCII (punycode) form.
func normalHost(host string) (string, bool) {
	if mayBeIP(host) {
		if a, err := netip.ParseAddr(host); err == nil {
			return a.Unmap().String(), true
		}
	}
	host = strings.TrimSuffix(host, ".")
	if host == "" {
		return "", false
	}
	if isASCII(host) {
		// Already in its ASCII form (xn-- labels included): only case
		// differs between spellings.
		return strings.ToLower(host), true
	}
	ascii, err := idna.Lookup.ToASCII(host)
	if err != nil {
		return "", false
	}
	return strings.ToLower(ascii), true
}

// misdirected answers x, a request whose Host header names another
// server than the one its connection goes to (target), with 421: the
// proxy neither forwards it nor asks the policy. It is reported as a
// [KindMisdirected] event and recorded (Exchange.Refused is the Host it
// named, the 421 its response). Replay serves the recorded answer from
// the Source, so that the recording's entries are taken in order.
func (p *Proxy) misdirected(w http.ResponseWriter, r *http.Request, x *har.Exchange, host, target, addr string) {
	msg := fmt.Sprintf("a request inside a connection to %s named the server %q in its Host header: refused with 421 Misdirected Request, not forwarded (a client must send a tunnel's requests to the server it opened the tunnel to)", target, host)
	p.report(KindMisdirected, addr, msg)
	x.Refused = host
	if p.replaying() {
		p.replay(w, r, x, addr)
		return
	}
	body, _ := json.Marshal(map[string]map[string]string{"error": {"message": "dal: " + msg, "type": "dal_misdirected"}})
	body = append(body, '\n')
	h := http.Header{
		"Content-Type":   {"application/json"},
		"Content-Length": {strconv.Itoa(len(body))},
		"X-Dal-Proxy":    {"misdirected"},
	}
	x.Response = &har.Response{Status: http.StatusMisdirectedRequest, StatusText: "Misdirected Request", Proto: "HTTP/1.1", Header: h.Clone(), Body: body}
	for k, v := range h {
		w.Header()[k] = v
	}
	w.Header()["Date"] = nil
	w.WriteHeader(http.StatusMisdirectedRequest)
	w.Write(body)
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

// mayBeIP reports whether s could be an IP address (IPv4 is digits and
// dots, IPv6 has a colon), so that names skip a parse bound to fail.
func mayBeIP(s string) bool {
	if strings.IndexByte(s, ':') >= 0 {
		return true
	}
	for i := 0; i < len(s); i++ {
		if (s[i] < '0' || s[i] > '9') && s[i] != '.' {
			return false
		}
	}
	return true
}
