package netcap

import (
	"bytes"
	"io"
	"mime"
	"net/http"
	"net/http/httptrace"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/dal-runtime/dal/internal/netcap/har"
)

// minFree is the room a read from a streamed upstream body always has, so
// that one upstream flush arrives in one read (Go's chunked decoder
// returns at the end of a chunk) and is relayed as one piece.
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
	if len(body) > 0 {
		out.Body = io.NopCloser(bytes.NewReader(body))
		out.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	}
	var wrote atomic.Int64
	trace := &httptrace.ClientTrace{WroteRequest: func(httptrace.WroteRequestInfo) { wrote.Store(time.Now().UnixNano()) }}
	out = out.WithContext(httptrace.WithClientTrace(r.Context(), trace))

	resp, err := rt.transport.RoundTrip(out)
	headersAt := time.Now()
	sent := headersAt
	if ns := wrote.Load(); ns != 0 {
		sent = time.Unix(0, ns)
	}
	x.Send, x.Wait = sent.Sub(x.Started), headersAt.Sub(sent)
	if err != nil {
		x.Error = upstreamErrPrefix + err.Error()
		writeError(w, http.StatusBadGateway, "dal record: "+err.Error(), "dal_upstream_error", "X-Dal-Record", "error")
		return
	}
	defer resp.Body.Close()

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
	flusher, _ := w.(http.Flusher)
	if streamed && flusher != nil {
		flusher.Flush()
	}

	var flush func()
	if streamed && flusher != nil {
		flush = flusher.Flush
	}
	size := resp.ContentLength
	if !bodyAllowed(r.Method, resp.StatusCode) {
		size = 0
	}
	res := relay(w, flush, resp.Body, size, streamed, headersAt)
	x.Receive = time.Since(headersAt)
	x.Response.Body = res.body
	x.Response.Chunks = res.chunks
	switch {
	case res.readErr != nil && p.base.Err() != nil:
		x.Error = "dal shut down during the response"
		panic(http.ErrAbortHandler)
	case res.writeErr != nil || (res.readErr != nil && r.Context().Err() != nil):
		x.Error = "the client closed the connection during the response"
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
	writeErr error
}

// relay copies src to w while keeping every byte. Streamed, each read is
// written and flushed on its own and becomes a chunk; otherwise chunks
// stay nil. size is the body's length, or -1.
func relay(w io.Writer, flush func(), src io.Reader, size int64, streamed bool, headersAt time.Time) relayed {
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
			if _, werr := w.Write(piece); werr != nil {
				res.writeErr = werr
				break
			}
			if flush != nil {
				flush()
			}
		}
		if err == io.EOF {
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
