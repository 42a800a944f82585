package netcap

import (
	"context"
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
	// misdirected: the request's Host names another server than the
	// one its tunnel goes to (dest.go).
	misdirected bool
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
			t := p.turnFor(info, r.Method, r.Host, nil)
			if !p.awaitTurn(r.Context(), t, nil) {
				return
			}
			p.connect(w, r, info, func() { p.endTurn(t, nil) })
			return
		}
		p.deliver(w, r, info, func() {
			p.refuse(w, http.StatusMethodNotAllowed, KindNotProxied, info.addr,
				fmt.Sprintf("a client sent CONNECT %s inside a connection to %s, which dal does not nest: answered 405, not captured", r.Host, info.addr))
		})
		return
	}
	rt, err := p.route(r, info)
	if err != nil {
		p.deliver(w, r, info, func() { p.refuse(w, http.StatusBadRequest, KindNotProxied, info.addr, err.Error()) })
		return
	}
	if isWebSocket(r.Header) {
		p.deliver(w, r, info, func() {
			p.refuse(w, http.StatusNotImplemented, KindWebSocket, info.addr,
				fmt.Sprintf("WebSocket upgrade to %s is not supported: answered 501, not captured", rt.url))
		})
		return
	}

	x := &har.Exchange{Seq: -1, Started: started, Via: info.via, Dest: rt.serverAddr}
	if p.order == nil {
		x.Seq = p.seq.assign()
	}
	defer func() {
		if x.Seq < 0 {
			x.Seq = p.seq.assign()
		}
		p.seq.finish(x)
	}()
	x.Request = har.Request{Method: r.Method, URL: rt.url, Proto: r.Proto, Header: requestHeader(r)}
	body, err := io.ReadAll(r.Body) // answers Expect: 100-continue
	x.Request.Body = body
	t := p.turnFor(info, r.Method, rt.url, body)
	defer p.endTurn(t, w)
	if t != nil {
		r = r.WithContext(context.WithValue(r.Context(), turnKey{}, t))
	}
	if err != nil {
		x.Send = time.Since(started)
		x.Error = fmt.Sprintf("reading the request body from the client: %v", err)
		if p.awaitTurn(r.Context(), t, x) {
			writeError(w, http.StatusBadRequest, "dal: "+x.Error, "dal_bad_request", "X-Dal-Proxy", "error")
		}
		return
	}
	if rt.misdirected {
		if p.awaitTurn(r.Context(), t, x) {
			p.misdirected(w, r, x, r.Host, info.upstreamHost, info.addr)
		}
		return
	}
	if p.cfg.Before != nil {
		if a := p.cfg.Before(r.Context(), x); a != nil {
			if p.awaitTurn(r.Context(), t, x) {
				p.answer(w, x, a)
			}
			return
		}
	}
	if p.replaying() {
		if !p.awaitTurn(r.Context(), t, x) {
			x.ClientClosed = &har.ClientClose{Truncated: true}
			return
		}
		p.replay(w, r, x, info.addr)
		return
	}
	p.forward(w, r, x, rt, body)
}

// turnKey carries a request's turn (order.go) in its context.
type turnKey struct{}

// turnFor gives a request read whole its turn in the delivery order; nil
// when the proxy does not order deliveries.
func (p *Proxy) turnFor(info *connInfo, method, url string, body []byte) *turn {
	if p.order == nil {
		return nil
	}
	return p.order.take(info.client, method, url, body)
}

// awaitTurn waits until t is delivered (at once without an order), and
// numbers x, when given, in delivery order; false when the client left
// first.
func (p *Proxy) awaitTurn(ctx context.Context, t *turn, x *har.Exchange) bool {
	if t == nil {
		return true
	}
	if !p.order.await(ctx, t) {
		return false
	}
	if x != nil && x.Seq < 0 {
		x.Seq = p.seq.assign()
	}
	return true
}

// endTurn ends t once what was written is on its way to the client (w
// flushed; nil when the caller wrote to the connection itself).
func (p *Proxy) endTurn(t *turn, w http.ResponseWriter) {
	if t == nil {
		return
	}
	if w != nil {
		http.NewResponseController(w).Flush()
	}
	p.order.done(t)
}

// endTurnOf ends r's turn early: a replayed response held open until the
// client closes must not hold every other delivery back.
func (p *Proxy) endTurnOf(w http.ResponseWriter, r *http.Request) {
	if t, ok := r.Context().Value(turnKey{}).(*turn); ok {
		p.endTurn(t, w)
	}
}

// deliver writes an answer the proxy makes without a request body read
// (a refusal) in its turn.
func (p *Proxy) deliver(w http.ResponseWriter, r *http.Request, info *connInfo, write func()) {
	t := p.turnFor(info, r.Method, r.RequestURI, nil)
	defer p.endTurn(t, w)
	if p.awaitTurn(r.Context(), t, nil) {
		write()
	}
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
	// The recorded URL names the server the connection goes to, never
	// the Host header: a Host naming another server is misdirected.
	host := info.urlHost
	if host == "" {
		h, port, _ := net.SplitHostPort(info.target)
		host = hostPortURL(h, port, defaultPort(info.scheme))
	}
	up, err := url.Parse(info.scheme + "://" + info.upstreamHost + reqURI)
	if err != nil {
		return route{}, fmt.Errorf("a client sent %s %s to %s, which is not a valid request target: answered 400, not captured", r.Method, r.RequestURI, info.addr)
	}
	misdirected := r.Host != "" && info.checkHost && !sameAuthority(r.Host, info.upstreamHost, info.scheme)
	return route{url: info.scheme + "://" + host + reqURI, upstream: up, serverAddr: info.target, transport: info.transport, misdirected: misdirected}, nil
}

// connect takes over the connection of a CONNECT request.
func (p *Proxy) connect(w http.ResponseWriter, r *http.Request, info *connInfo, written func()) {
	target := r.Host
	if _, _, err := net.SplitHostPort(target); err != nil {
		target = net.JoinHostPort(strings.Trim(target, "[]"), "443")
	}
	hj, ok := w.(http.Hijacker)
	if !ok {
		http.Error(w, "dal: cannot take over this connection", http.StatusInternalServerError)
		written()
		return
	}
	raw, brw, err := hj.Hijack()
	if err != nil {
		written()
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
		written()
		return
	}
	p.tunnel(raw, pre, target, info.transport, written)
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
