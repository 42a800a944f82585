package netcap

import (
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/dal-runtime/dal/internal/netcap/har"
)

// minFree is the room a read from a streamed body without chunked framing
// always has, so that what arrived together is relayed as one piece.
const minFree = 64 << 10

// upstreamErrPrefix starts Exchange.Error when no response was obtained
// from upstream; the client was answered 502 "dal record: <error>".
const upstreamErrPrefix = "upstream: "

// maxPrealloc bounds the memory reserved up front from an upstream's
// Content-Length.
const maxPrealloc = 256 << 20

// forward sends the request upstream, relays the response to the client
// and records both (recording mode).
func (p *Proxy) forward(w http.ResponseWriter, r *http.Request, x *har.Exchange, rt route, body []byte) {
	x.ServerAddr = rt.serverAddr
	out := &http.Request{
		Method:        r.Method,
		URL:           rt.upstream,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        make(http.Header, len(r.Header)),
		Host:          r.Host,
		ContentLength: int64(len(body)),
	}
	copyEndToEnd(out.Header, r.Header)
	// The body is already read, and the client answered: no Expect
	// upstream.
	out.Header.Del("Expect")
	if _, ok := out.Header["User-Agent"]; !ok {
		out.Header["User-Agent"] = []string{""} // no Go default
	}

	ex, sent, err := rt.transport.roundTrip(r.Context(), out, body)
	headersAt := time.Now()
	if sent.IsZero() {
		sent = headersAt
	}
	x.Send, x.Wait = sent.Sub(x.Started), headersAt.Sub(sent)
	// Its turn: the response reaches the client in the delivery order
	// (order.go), however soon upstream answered.
	if t, ok := r.Context().Value(turnKey{}).(*turn); ok && !p.awaitTurn(r.Context(), t, x) {
		if err == nil {
			ex.finish(false)
		}
		x.ClientClosed = &har.ClientClose{Truncated: true}
		return
	}
	if err != nil {
		var refused *RefusedError
		switch {
		case errors.As(err, &refused):
			p.refuseDial(w, x, refused)
		case r.Context().Err() != nil && p.base.Err() == nil:
			// The client left before the response arrived: nothing
			// reached it, and nothing can.
			x.ClientClosed = &har.ClientClose{Truncated: true}
		default:
			x.Error = upstreamErrPrefix + err.Error()
			writeError(w, http.StatusBadGateway, "dal record: "+err.Error(), "dal_upstream_error", "X-Dal-Record", "error")
		}
		return
	}
	x.RemoteAddr = remoteAddr(ex.c.raw)
	reusable := false
	defer func() { ex.finish(reusable) }()
	resp := ex.resp

	streamed := isStream(r.Method, resp)
	x.Response = &har.Response{
		Status:     resp.StatusCode,
		StatusText: strings.TrimSpace(strings.TrimPrefix(resp.Status, strconv.Itoa(resp.StatusCode))),
		Proto:      resp.Proto,
		Header:     resp.Header.Clone(),
		Streamed:   streamed,
	}
	h := w.Header()
	copyEndToEnd(h, resp.Header)
	suppressDefaults(h, resp.Header)
	w.WriteHeader(resp.StatusCode)
	var sw *streamWriter // nil: not streamed
	if streamed {
		sw = newStreamWriter(w, r, p.base)
		sw.headers() // a failure shows at the first write
		// A stream's turn ends with its headers (order.go).
		p.endTurnOf(w, r)
		if p.order != nil {
			if info, ok := r.Context().Value(connInfoKey{}).(*connInfo); ok {
				sw.stream = p.order.stream(info.client)
				defer sw.stream.end()
			}
		}
	}
	var res relayed
	switch {
	case !bodyAllowed(r.Method, resp.StatusCode):
		res = relay(w, sw, resp.Body, 0, false, headersAt)
	case isChunked(resp):
		res = relayChunked(w, sw, ex.c, headersAt)
	default:
		res = relay(w, sw, resp.Body, resp.ContentLength, streamed, headersAt)
	}
	if sw != nil {
		sw.settle() // the last piece: read, or left in the socket of a client that closed
	}
	reusable = res.readErr == nil && res.writeErr == nil
	x.Receive = time.Since(headersAt)
	x.Response.Body = res.body
	x.Response.Chunks = res.chunks
	switch {
	case res.readErr != nil && p.base.Err() != nil:
		x.Error = "dal shut down during the response"
		panic(http.ErrAbortHandler)
	case res.writeErr != nil || (res.readErr != nil && r.Context().Err() != nil) || (sw != nil && sw.left):
		// An ordinary event (a client that stops at "data: [DONE]", a
		// cancelled stream): recorded with how far it got, replayed alike.
		x.ClientClosed = &har.ClientClose{Bytes: res.delivered, Truncated: !res.complete}
		if streamed {
			x.ClientClosed.Bytes, x.ClientClosed.Read = sw.consumed()
			x.ClientClosed.Chunks = chunksWithin(res.chunks, x.ClientClosed.Bytes)
		}
	case res.readErr != nil:
		x.Error = "reading the response body from upstream: " + res.readErr.Error()
		// The client must see a broken response, not a short one that
		// looks complete: abort its connection (the deferred finish
		// still records x).
		panic(http.ErrAbortHandler)
	}
}

// isStream reports whether a response is relayed piece by piece: an
// event stream, or a body of unknown length (chunked or ended by close).
func isStream(method string, resp *http.Response) bool {
	if !bodyAllowed(method, resp.StatusCode) {
		return false
	}
	if mt, _, err := mime.ParseMediaType(resp.Header.Get("Content-Type")); err == nil && mt == "text/event-stream" {
		return true
	}
	return resp.ContentLength < 0
}

// isChunked reports whether resp's body has chunked framing (net/http
// accepts no other transfer coding).
func isChunked(resp *http.Response) bool {
	return len(resp.TransferEncoding) > 0 && resp.TransferEncoding[len(resp.TransferEncoding)-1] == "chunked"
}

func bodyAllowed(method string, status int) bool {
	return method != http.MethodHead && status >= 200 && status != http.StatusNoContent && status != http.StatusNotModified
}

// suppressDefaults stops Go's server from adding Date and a sniffed
// Content-Type the upstream did not send.
func suppressDefaults(h, upstream http.Header) {
	if _, ok := upstream["Date"]; !ok {
		h["Date"] = nil
	}
	if _, ok := upstream["Content-Type"]; !ok {
		h["Content-Type"] = nil
	}
}

type relayed struct {
	body     []byte
	chunks   []har.Chunk // streamed only
	readErr  error
	writeErr error // the client's connection failed: it closed
	// delivered counts the body bytes written (and flushed) to the
	// client without error: what it was handed (a stream's streamWriter
	// counts what it read).
	delivered int64
	// complete: the body was read from upstream to its end.
	complete bool
}

// relay copies src to w while keeping every byte. Streamed, each read is
// written and flushed on its own and becomes a chunk; otherwise chunks
// stay nil. size is the body's length, or -1. A nil sw means the writes
// are not flushed one by one.
func relay(w io.Writer, sw *streamWriter, src io.Reader, size int64, streamed bool, headersAt time.Time) relayed {
	type mark struct {
		end int
		at  time.Duration
	}
	var (
		marks []mark
		res   relayed
	)
	initial := int64(minFree)
	if size >= 0 {
		// +1: the read that sees EOF needs room. A length beyond
		// maxPrealloc is believed only as the bytes arrive.
		initial = min(size+1, maxPrealloc)
	}
	buf := make([]byte, 0, initial)
	for {
		free := cap(buf) - len(buf)
		if free == 0 || (streamed && free < minFree) {
			nb := make([]byte, len(buf), len(buf)+max(len(buf), minFree))
			copy(nb, buf)
			buf = nb
		}
		n, err := src.Read(buf[len(buf):cap(buf)])
		if n > 0 {
			piece := buf[len(buf) : len(buf)+n]
			buf = buf[:len(buf)+n]
			if streamed {
				marks = append(marks, mark{end: len(buf), at: time.Since(headersAt)})
			}
			if werr := writeFlush(w, sw, piece); werr != nil {
				res.writeErr = werr
				res.complete = err == io.EOF || (size >= 0 && int64(len(buf)) >= size)
				break
			}
			res.delivered += int64(n)
		}
		if err == io.EOF {
			res.complete = true
			break
		}
		if err != nil {
			res.readErr = err
			break
		}
	}
	res.body = buf
	if streamed {
		prev := 0
		for _, m := range marks {
			res.chunks = append(res.chunks, har.Chunk{At: m.at, Data: buf[prev:m.end:m.end]})
			prev = m.end
		}
	}
	return res
}

// writeFlush writes p to w; streamed (sw set), once the client has read
// the piece before, and flushed so that it is a read of its own.
func writeFlush(w io.Writer, sw *streamWriter, p []byte) error {
	if sw != nil {
		return sw.write(w, p)
	}
	_, err := w.Write(p)
	return err
}

// refuseDial answers a request whose upstream connection the guarded
// dialer refused: 403 with a JSON body that names the flag, reported,
// and recorded as dal's own answer so that replay serves it again.
func (p *Proxy) refuseDial(w http.ResponseWriter, x *har.Exchange, e *RefusedError) {
	body, _ := json.Marshal(map[string]string{"error": "dal: " + e.Error()})
	body = append(body, '\n')
	h := http.Header{
		"Content-Type":   {"application/json"},
		"Content-Length": {strconv.Itoa(len(body))},
		"X-Dal-Proxy":    {"refused"},
	}
	x.ServerAddr = ""
	x.Refused = e.Addr.String()
	x.Response = &har.Response{Status: http.StatusForbidden, StatusText: "Forbidden", Proto: "HTTP/1.1", Header: h.Clone(), Body: body}
	for k, v := range h {
		w.Header()[k] = v
	}
	w.Header()["Date"] = nil
	w.WriteHeader(http.StatusForbidden)
	w.Write(body)
	p.report(KindRefused, x.Refused, e.Error()+" (the agent got 403)")
}

// remoteAddr is the IP address and port c is connected to, "" when it is
// not a TCP connection (a test's pipe).
func remoteAddr(c net.Conn) string {
	a, ok := c.RemoteAddr().(*net.TCPAddr)
	if !ok {
		return ""
	}
	return canonical(a.AddrPort()).String()
}
