package har

import (
	"bytes"
	"cmp"
	"encoding/base64"
	"errors"
	"net"
	"net/http"
	"slices"
	"strings"
	"time"
)

// FromExchange turns a raw exchange into the entry dal writes: the match
// key computed on the raw request (with the headers named in keyHeaders,
// default none; replay must use the same, see [LogDal.KeyHeaders]), then
// every secret redacted, bodies content-decoded and a streamed body kept
// in its recorded pieces. A nil r is the default [Redactor]. It does not
// keep references to x. It fails only on an exchange without a method or
// URL.
func FromExchange(x *Exchange, r *Redactor, keyHeaders ...string) (Entry, error) {
	if x == nil || x.Request.Method == "" || x.Request.URL == "" {
		return Entry{}, errors.New("har: exchange has no request method or URL")
	}
	if r == nil {
		r = defaultRedactor
	}
	key := r.Key(&x.Request, keyHeaders)
	rd := &redaction{}

	// Pass 1: structured redactions, collecting the credential values.
	req := EntryRequest{
		Method:      x.Request.Method,
		URL:         r.redactURL(x.Request.URL, "request", rd),
		HTTPVersion: orDefault(x.Request.Proto, "HTTP/1.1"),
		Cookies:     requestCookies(x.Request.Header),
		Headers:     r.redactHeaders(x.Request.Header, "request", rd),
		QueryString: r.queryString(x.Request.URL),
		HeadersSize: -1,
		BodySize:    int64(len(x.Request.Body)),
	}
	reqBody := requestBody(&x.Request)
	reqCT := x.Request.Header.Get("Content-Type")
	reqEdits := r.bodyEdits(reqBody, reqCT, "request.body", rd)

	resp := EntryResponse{
		Cookies:     []Cookie{},
		Headers:     []NameValue{},
		Content:     Content{MimeType: "x-unknown"},
		HeadersSize: -1,
		BodySize:    -1,
	}
	var body *responseBody
	var respEdits []edit
	if x.Response != nil {
		resp = EntryResponse{
			Status:      x.Response.Status,
			StatusText:  orDefault(x.Response.StatusText, http.StatusText(x.Response.Status)),
			HTTPVersion: orDefault(x.Response.Proto, "HTTP/1.1"),
			Cookies:     responseCookies(x.Response.Header),
			Headers:     r.redactHeaders(x.Response.Header, "response", rd),
			Content:     Content{MimeType: x.Response.Header.Get("Content-Type")},
			HeadersSize: -1,
			BodySize:    int64(len(x.Response.Body)),
		}
		body = decodeResponse(x.Response)
		respEdits = r.bodyEdits(body.data, resp.Content.MimeType, "response.body", rd)
	}
	rd.finish()

	// Pass 2: apply them, and replace the credentials wherever else they
	// appear verbatim.
	req.URL = rd.echo(req.URL, "request.url")
	for i, h := range req.Headers {
		req.Headers[i].Value = rd.echo(h.Value, "request.header."+strings.ToLower(h.Name))
	}
	for i, q := range req.QueryString {
		req.QueryString[i].Value = rd.echo(q.Value, "request.query."+strings.ToLower(q.Name))
	}
	if len(x.Request.Body) > 0 {
		b, _ := rd.redactBytes(reqBody, reqEdits, "request.body", nil)
		text, enc := encodeText(b)
		req.PostData = &PostData{MimeType: reqCT, Params: r.formParams(reqCT, b), Text: text, Encoding: enc}
	}
	for i, h := range resp.Headers {
		resp.Headers[i].Value = rd.echo(h.Value, "response.header."+strings.ToLower(h.Name))
		if strings.EqualFold(h.Name, "Location") {
			resp.RedirectURL = resp.Headers[i].Value
		}
	}
	dal := &EntryDal{
		Key:         key,
		Seq:         x.Seq,
		Via:         x.Via,
		Error:       rd.echo(x.Error, "error"),
		ServerAddr:  x.ServerAddr,
		Destination: x.Dest,
		RemoteAddr:  x.RemoteAddr,
		Refused:     x.Refused,
		Answered:    x.Answered,
	}
	if c := x.ClientClosed; c != nil {
		dal.ClientClosed = &DalClientClose{Bytes: c.Bytes, Chunks: c.Chunks, Read: c.Read, Truncated: c.Truncated}
	}
	if body != nil {
		b, bounds := rd.redactBytes(body.data, respEdits, "response.body", body.bounds)
		resp.Content.Size = int64(len(b))
		resp.Content.Text, resp.Content.Encoding = encodeText(b)
		dal.Encoded = body.encoded
		// The bytes as received go along when the text is them decoded,
		// unless a secret was redacted from the body (they would hold it).
		wire := body.decoded && bytes.Equal(b, body.data) && len(rd.echoEdits(x.Response.Body)) == 0
		if wire && !x.Response.Streamed {
			dal.Wire = base64.StdEncoding.EncodeToString(x.Response.Body)
		}
		if x.Response.Streamed {
			dal.Streamed = true
			dal.Chunks = make([]DalChunk, len(body.at))
			for i, at := range body.at {
				c := DalChunk{AtMs: ms(at)}
				c.Text, c.Encoding = encodeText(b[bounds[i]:bounds[i+1]])
				if wire {
					c.Wire = base64.StdEncoding.EncodeToString(body.wire[i])
				}
				dal.Chunks[i] = c
			}
		}
	}
	dal.Redactions = rd.sortedPlaces()

	send, wait, receive := clampMicros(x.Send), clampMicros(x.Wait), clampMicros(x.Receive)
	e := Entry{
		StartedDateTime: x.Started.UTC(),
		Time:            float64(send+wait+receive) / 1000,
		Request:         req,
		Response:        resp,
		Timings: Timings{
			Blocked: -1, DNS: -1, Connect: -1, SSL: -1,
			Send: float64(send) / 1000, Wait: float64(wait) / 1000, Receive: float64(receive) / 1000,
		},
		ServerIPAddress: serverIP(cmp.Or(x.RemoteAddr, x.ServerAddr)),
		Dal:             dal,
	}
	return e, nil
}

// responseBody is a response body content-decoded when possible, with
// the offsets where its recorded pieces start (and its end) and when
// they arrived.
type responseBody struct {
	data    []byte
	bounds  []int // len(at)+1 offsets into data; nil when not streamed
	at      []time.Duration
	encoded bool // data is still content-encoded
	// decoded: data is the body with its content codings removed (it
	// differs from the bytes received); wire holds the pieces received
	// when streamed.
	decoded bool
	wire    [][]byte
}

func decodeResponse(resp *Response) *responseBody {
	cs := codings(resp.Header)
	if !resp.Streamed {
		if data, err := decodeBody(resp.Body, cs); err == nil {
			return &responseBody{data: data, decoded: len(cs) > 0}
		}
		return &responseBody{data: resp.Body, encoded: true}
	}
	chunks := resp.Chunks
	if chunks == nil {
		chunks = []Chunk{{Data: resp.Body}}
	}
	pieces := make([][]byte, len(chunks))
	at := make([]time.Duration, len(chunks))
	for i, c := range chunks {
		pieces[i], at[i] = c.Data, c.At
	}
	b := &responseBody{at: at, bounds: make([]int, 0, len(pieces)+1)}
	if out, err := decodeChunks(pieces, cs); err == nil {
		if len(cs) > 0 {
			b.decoded, b.wire = true, pieces
		}
		pieces = out
	} else {
		b.encoded = true
	}
	for _, p := range pieces {
		b.bounds = append(b.bounds, len(b.data))
		b.data = append(b.data, p...)
	}
	b.bounds = append(b.bounds, len(b.data))
	return b
}

// redactBytes applies a body's structured edits, then replaces the
// collected credentials verbatim (recording place when it does), and
// maps the piece boundaries through both.
func (rd *redaction) redactBytes(b []byte, structured []edit, place string, bounds []int) ([]byte, []int) {
	b1, e1 := applyEdits(b, structured)
	b2, e2 := applyEdits(b1, rd.echoEdits(b1))
	if len(e2) > 0 {
		rd.place(place)
	}
	out := make([]int, len(bounds))
	for i, o := range bounds {
		out[i] = mapOffset(mapOffset(o, e1), e2)
	}
	return b2, out
}

// redactHeaders lists h sorted by name, credential values redacted and a
// Location's query credentials redacted. where is "request" or
// "response".
func (r *Redactor) redactHeaders(h http.Header, where string, rd *redaction) []NameValue {
	names := make([]string, 0, len(h))
	for n := range h {
		names = append(names, n)
	}
	slices.Sort(names)
	out := make([]NameValue, 0, len(h))
	for _, n := range names {
		place := where + ".header." + strings.ToLower(n)
		for _, v := range h[n] {
			switch {
			case r.header(n):
				v = r.headerValue(n, v, rd)
				rd.place(place)
			case strings.EqualFold(n, "Location"):
				v = r.redactURL(v, place, rd)
			}
			out = append(out, NameValue{Name: n, Value: v})
		}
	}
	return out
}

// queryString lists a raw URL's query parameters in order, decoded,
// credential values redacted.
func (r *Redactor) queryString(raw string) []NameValue {
	out := []NameValue{}
	rest, _, _ := strings.Cut(raw, "#")
	_, query, ok := strings.Cut(rest, "?")
	if !ok {
		return out
	}
	for p := range strings.SplitSeq(query, "&") {
		if p == "" {
			continue
		}
		n, v, _ := strings.Cut(p, "=")
		nv := NameValue{Name: unescapeQuery(n), Value: unescapeQuery(v)}
		if r.queryField(nv.Name) {
			nv.Value = Redacted
		}
		out = append(out, nv)
	}
	return out
}

// formParams lists a form body's (already redacted) fields; nil for other
// bodies.
func (r *Redactor) formParams(contentType string, body []byte) []Param {
	out := []Param{}
	if !strings.Contains(strings.ToLower(contentType), "application/x-www-form-urlencoded") {
		return out
	}
	for p := range strings.SplitSeq(string(body), "&") {
		if p == "" {
			continue
		}
		n, v, _ := strings.Cut(p, "=")
		out = append(out, Param{Name: unescapeQuery(n), Value: unescapeQuery(v)})
	}
	return out
}

// requestCookies lists the cookies of the Cookie headers, values
// redacted.
func requestCookies(h http.Header) []Cookie {
	out := []Cookie{}
	for _, line := range h.Values("Cookie") {
		for p := range strings.SplitSeq(line, ";") {
			if n, _, ok := strings.Cut(strings.TrimSpace(p), "="); ok {
				out = append(out, Cookie{Name: n, Value: Redacted})
			}
		}
	}
	return out
}

// responseCookies lists the cookies set by Set-Cookie headers, values
// redacted.
func responseCookies(h http.Header) []Cookie {
	out := []Cookie{}
	for _, line := range h.Values("Set-Cookie") {
		c, err := http.ParseSetCookie(line)
		if err != nil {
			first, _, _ := strings.Cut(line, ";")
			n, _, _ := strings.Cut(first, "=")
			out = append(out, Cookie{Name: strings.TrimSpace(n), Value: Redacted})
			continue
		}
		hc := Cookie{Name: c.Name, Value: Redacted, Path: c.Path, Domain: c.Domain, HTTPOnly: c.HttpOnly, Secure: c.Secure}
		if !c.Expires.IsZero() {
			hc.Expires = c.Expires.UTC().Format(time.RFC3339)
		}
		out = append(out, hc)
	}
	return out
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func clampMicros(d time.Duration) int64 { return max(d.Microseconds(), 0) }

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func serverIP(addr string) string {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	if net.ParseIP(host) == nil {
		return ""
	}
	return host
}
