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
	hh, hp, err := net.SplitHostPort(host)
	if err != nil {
		// No port (or an IPv6 literal in brackets without one).
		hh, hp = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]"), defaultPort(scheme)
		if strings.Contains(host, "]:") || strings.HasSuffix(host, ":") {
			return false
		}
	}
	if hp != tp {
		return false
	}
	a, ok1 := normalHost(hh)
	b, ok2 := normalHost(th)
	return ok1 && ok2 && a == b
}

// normalHost is host as the proxy compares it: an IP address in its
// canonical form (IPv4-mapped unmapped), a name lowercased, without a
// trailing dot, in its ASCII (punycode) form.
func normalHost(host string) (string, bool) {
	if a, err := netip.ParseAddr(host); err == nil {
		return a.Unmap().String(), true
	}
	host = strings.TrimSuffix(host, ".")
	if host == "" {
		return "", false
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
