package netcap

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/textproto"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/dal-runtime/dal/internal/netcap/har"
)

// route is where a request goes.
type route struct {
	// url is the request's absolute URL as the client addressed it: the
	// recorded one.
	url string
	// upstream is the URL to send it to when recording (its host is the
	// host dialled and the TLS server name).
	upstream *url.URL
	// serverAddr is the upstream "host:port".
	serverAddr string
	transport  *upstream
}

// handle serves one request from a client connection.
func (p *Proxy) handle(w http.ResponseWriter, r *http.Request) {
	started := time.Now()
	info, ok := r.Context().Value(connInfoKey{}).(*connInfo)
	if !ok {
		http.Error(w, "dal: connection of unknown origin", http.StatusInternalServerError)
		return
	}
	if r.Method == http.MethodConnect {
		if info.via == viaProxy {
			p.connect(w, r, info)
			return
		}
		p.refuse(w, http.StatusMethodNotAllowed, KindNotProxied, info.addr,
			fmt.Sprintf("a client sent CONNECT %s inside a connection to %s, which dal does not nest: answered 405, not captured", r.Host, info.addr))
		return
	}
	rt, err := p.route(r, info)
	if err != nil {
		p.refuse(w, http.StatusBadRequest, KindNotProxied, info.addr, err.Error())
		return
	}
	if isWebSocket(r.Header) {
		p.refuse(w, http.StatusNotImplemented, KindWebSocket, info.addr,
			fmt.Sprintf("WebSocket upgrade to %s is not supported: answered 501, not captured", rt.url))
		return
	}

	x := &har.Exchange{Seq: p.seq.assign(), Started: started, Via: info.via}
	defer p.seq.finish(x)
	x.Request = har.Request{Method: r.Method, URL: rt.url, Proto: r.Proto, Header: requestHeader(r)}
	body, err := io.ReadAll(r.Body) // answers Expect: 100-continue
	x.Request.Body = body
	if err != nil {
		x.Send = time.Since(started)
		x.Error = fmt.Sprintf("reading the request body from the client: %v", err)
		writeError(w, http.StatusBadRequest, "dal: "+x.Error, "dal_bad_request", "X-Dal-Proxy", "error")
		return
	}
	if p.cfg.Before != nil {
		if a := p.cfg.Before(r.Context(), x); a != nil {
			p.answer(w, x, a)
			return
		}
	}
	if p.replaying() {
		p.replay(w, r, x, info.addr)
		return
	}
	p.forward(w, r, x, rt, body)
}

// route works out r's recorded URL and upstream.
func (p *Proxy) route(r *http.Request, info *connInfo) (route, error) {
	if info.via == viaProxy {
		u := r.URL
		scheme := strings.ToLower(u.Scheme)
		if !u.IsAbs() || u.Host == "" {
			return route{}, fmt.Errorf("a client sent %s %s to the proxy at %s without an absolute URL (it addressed the proxy as a server): answered 400, not captured", r.Method, r.RequestURI, info.addr)
		}
		if scheme != "http" && scheme != "https" {
			return route{}, fmt.Errorf("a client asked the proxy at %s for %s, a scheme dal does not handle: answered 400, not captured", info.addr, r.RequestURI)
		}
		up := *u
		up.Scheme = scheme
		return route{url: r.RequestURI, upstream: &up, serverAddr: withPort(u.Host, scheme), transport: info.transport}, nil
	}
	// Origin-form inside a tunnel or on a transparent connection (an
	// absolute URL there is taken for its path).
	reqURI := r.RequestURI
	if !strings.HasPrefix(reqURI, "/") {
		reqURI = r.URL.RequestURI()
	}
	host := info.urlHost
	if host == "" {
		host = r.Host
		if host == "" {
			h, port, _ := net.SplitHostPort(info.target)
			host = hostPortURL(h, port, defaultPort(info.scheme))
		}
	}
	up, err := url.Parse(info.scheme + "://" + info.upstreamHost + reqURI)
	if err != nil {
		return route{}, fmt.Errorf("a client sent %s %s to %s, which is not a valid request target: answered 400, not captured", r.Method, r.RequestURI, info.addr)
	}
	return route{url: info.scheme + "://" + host + reqURI, upstream: up, serverAddr: info.target, transport: info.transport}, nil
}

// connect takes over the connection of a CONNECT request.
func (p *Proxy) connect(w http.ResponseWriter, r *http.Request, info *connInfo) {
	target := r.Host
	if _, _, err := net.SplitHostPort(target); err != nil {
		target = net.JoinHostPort(strings.Trim(target, "[]"), "443")
	}
	hj, ok := w.(http.Hijacker)
	if !ok {
		http.Error(w, "dal: cannot take over this connection", http.StatusInternalServerError)
		return
	}
	raw, brw, err := hj.Hijack()
	if err != nil {
		return
	}
	// Bytes the client sent right after CONNECT, already buffered.
	var pre []byte
	if n := brw.Reader.Buffered(); n > 0 {
		b, _ := brw.Reader.Peek(n)
		pre = append([]byte(nil), b...)
	}
	if !p.pending.add(raw) {
		raw.Close()
		return
	}
	p.tunnel(raw, pre, target, info.transport)
}

// refuse answers a request that is not captured, and reports it.
func (p *Proxy) refuse(w http.ResponseWriter, status int, kind, addr, msg string) {
	p.report(kind, addr, msg)
	writeError(w, status, "dal: "+msg, "dal_not_captured", "X-Dal-Proxy", "refused")
}

// answer serves a, given by Config.Before, and records it as dal's own
// answer so that replay serves it again.
func (p *Proxy) answer(w http.ResponseWriter, x *har.Exchange, a *Answer) {
	body, _ := json.Marshal(map[string]map[string]string{"error": {"message": a.Message, "type": a.Type}})
	body = append(body, '\n')
	h := http.Header{
		"Content-Type":   {"application/json"},
		"Content-Length": {strconv.Itoa(len(body))},
		"X-Dal-Proxy":    {a.By},
	}
	x.Answered = a.By
	x.Response = &har.Response{Status: a.Status, StatusText: http.StatusText(a.Status), Proto: "HTTP/1.1", Header: h.Clone(), Body: body}
	for k, v := range h {
		w.Header()[k] = v
	}
	w.Header()["Date"] = nil
	w.WriteHeader(a.Status)
	w.Write(body)
}

// writeError answers with status and an OpenAI-style JSON error body,
// which LLM client libraries surface as is.
func writeError(w http.ResponseWriter, status int, msg, typ, hkey, hval string) {
	body, _ := json.Marshal(map[string]map[string]string{"error": {"message": msg, "type": typ}})
	body = append(body, '\n')
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	h.Set(hkey, hval)
	h["Date"] = nil
	w.WriteHeader(status)
	w.Write(body)
}

func isWebSocket(h http.Header) bool {
	for _, v := range h.Values("Upgrade") {
		for _, tok := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(tok), "websocket") {
				return true
			}
		}
	}
	return false
}

// requestHeader is r's header as the client sent it: Go's server moves
// Host and Transfer-Encoding out of the map, they are put back.
func requestHeader(r *http.Request) http.Header {
	h := r.Header.Clone()
	if h == nil {
		h = http.Header{}
	}
	if r.Host != "" {
		h.Set("Host", r.Host)
	}
	if len(r.TransferEncoding) > 0 {
		h.Set("Transfer-Encoding", strings.Join(r.TransferEncoding, ", "))
	}
	return h
}

// hopHeaders are meaningful for one connection only (RFC 9110 §7.6.1) and
// are never forwarded.
var hopHeaders = []string{
	"Connection",
	"Proxy-Connection",
	"Keep-Alive",
	"Proxy-Authenticate",
	"Proxy-Authorization",
	"Te",
	"Trailer",
	"Transfer-Encoding",
	"Upgrade",
}

// copyEndToEnd copies src's end-to-end headers into dst, leaving out the
// hop-by-hop ones and those src's Connection header names.
func copyEndToEnd(dst, src http.Header) {
	skip := make(map[string]bool, len(hopHeaders))
	for _, k := range hopHeaders {
		skip[k] = true
	}
	for _, v := range src.Values("Connection") {
		for _, tok := range strings.Split(v, ",") {
			if tok = strings.TrimSpace(tok); tok != "" {
				skip[textproto.CanonicalMIMEHeaderKey(tok)] = true
			}
		}
	}
	for k, vv := range src {
		if skip[k] {
			continue
		}
		dst[k] = append([]string(nil), vv...)
	}
}

func defaultPort(scheme string) string {
	if scheme == "https" {
		return "443"
	}
	return "80"
}

// withPort is host with the scheme's default port when it has none.
func withPort(host, scheme string) string {
	if _, _, err := net.SplitHostPort(host); err == nil {
		return host
	}
	return net.JoinHostPort(strings.Trim(host, "[]"), defaultPort(scheme))
}
