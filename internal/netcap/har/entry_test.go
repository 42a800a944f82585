package har

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dal-runtime/dal/internal/golden"
)

const chatBody = `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi ✓"}],"temperature":0.2}`

func TestFromExchangeBodies(t *testing.T) {
	t.Parallel()
	png := []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\xff\xfe")
	long := []byte(strings.Repeat(`{"a":"text that compresses well"},`, 200))
	single := func(t *testing.T, coding string, b []byte) []byte {
		return bytes.Join(compress(t, coding, b), nil)
	}
	tests := []struct {
		name     string
		coding   string // Content-Encoding
		ct       string
		body     func(t *testing.T) []byte // as received
		want     []byte                    // stored, decoded
		encoding string                    // content.encoding
		encoded  bool                      // _dal.encoded
	}{
		{name: "identity", ct: "application/json", body: func(*testing.T) []byte { return []byte(chatBody) }, want: []byte(chatBody)},
		{name: "gzip", coding: "gzip", ct: "application/json", body: func(t *testing.T) []byte { return single(t, "gzip", long) }, want: long},
		{name: "br", coding: "br", ct: "application/json", body: func(t *testing.T) []byte { return single(t, "br", long) }, want: long},
		{name: "deflate zlib", coding: "deflate", ct: "application/json", body: func(t *testing.T) []byte { return single(t, "deflate", long) }, want: long},
		{name: "deflate raw", coding: "deflate", ct: "application/json", body: func(t *testing.T) []byte { return single(t, "deflate-raw", long) }, want: long},
		{name: "zstd", coding: "zstd", ct: "application/json", body: func(t *testing.T) []byte { return single(t, "zstd", long) }, want: long},
		{name: "gzip then br", coding: "gzip, br", ct: "application/json", body: func(t *testing.T) []byte {
			return single(t, "br", single(t, "gzip", long))
		}, want: long},
		{name: "binary", ct: "image/png", body: func(*testing.T) []byte { return png }, want: png, encoding: "base64"},
		{name: "binary gzip", coding: "gzip", ct: "image/png", body: func(t *testing.T) []byte { return single(t, "gzip", png) }, want: png, encoding: "base64"},
		{name: "corrupt gzip", coding: "gzip", ct: "application/json", body: func(*testing.T) []byte { return []byte("\x1f\x8b\x08\x00garbage") },
			want: []byte("\x1f\x8b\x08\x00garbage"), encoding: "base64", encoded: true},
		{name: "unknown coding", coding: "compress", ct: "text/plain", body: func(*testing.T) []byte { return []byte("plain") },
			want: []byte("plain"), encoded: true},
		{name: "empty", ct: "text/plain", body: func(*testing.T) []byte { return nil }, want: []byte{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			raw := tc.body(t)
			resp := okResp(tc.ct, "")
			resp.Body = raw
			if tc.coding != "" {
				resp.Header.Set("Content-Encoding", tc.coding)
			}
			resp.Header.Set("Content-Length", "999")
			e := mustEntry(t, exchange(0, jsonReq("POST", "https://api.example.com/v1/x", `{}`), resp), nil)
			validate(t, writeHAR(t, e))

			got, err := e.ResponseBody()
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, tc.want) {
				t.Fatalf("stored body %q, want %q", got, tc.want)
			}
			c := e.Response.Content
			if c.Encoding != tc.encoding || e.Dal.Encoded != tc.encoded {
				t.Errorf("content.encoding %q _dal.encoded %v, want %q %v", c.Encoding, e.Dal.Encoded, tc.encoding, tc.encoded)
			}
			if c.Size != int64(len(tc.want)) || e.Response.BodySize != int64(len(raw)) {
				t.Errorf("content.size %d bodySize %d, want %d %d", c.Size, e.Response.BodySize, len(tc.want), len(raw))
			}
			if c.Encoding == "" && c.Text != string(tc.want) {
				t.Errorf("content.text %q is not the decoded body", c.Text)
			}

			// Replay serves the body as received, with its recorded
			// Content-Encoding and the length of those bytes.
			req := &Request{Method: "POST", URL: "https://api.example.com/v1/x", Header: hdr("Content-Type", "application/json"), Body: []byte(`{}`)}
			l := NewLog(nil, "test")
			l.Entries = []Entry{e}
			s, err := NewIndex(l, nil, nil).Next(req)
			if err != nil {
				t.Fatal(err)
			}
			if len(s.Chunks) != 1 || !bytes.Equal(s.Chunks[0].Data, raw) || s.Notice != "" {
				t.Fatalf("served %v (notice %q), want one chunk %q", s.Chunks, s.Notice, raw)
			}
			if ce, cl := s.Header.Get("Content-Encoding"), s.Header.Get("Content-Length"); ce != tc.coding || cl != itoa(len(raw)) {
				t.Errorf("served Content-Encoding %q Content-Length %q, want %q %d", ce, cl, tc.coding, len(raw))
			}

			// An entry of an older bundle keeps only the decoded body:
			// replay sends it without the coding, and says so.
			if e.Dal.Wire == "" {
				return
			}
			e.Dal.Wire = ""
			l.Entries = []Entry{e}
			s, err = NewIndex(l, nil, nil).Next(req)
			if err != nil {
				t.Fatal(err)
			}
			if len(s.Chunks) != 1 || !bytes.Equal(s.Chunks[0].Data, tc.want) || !strings.Contains(s.Notice, "decoded") {
				t.Fatalf("without wire bytes: served %v (notice %q), want one chunk %q and a notice", s.Chunks, s.Notice, tc.want)
			}
			if ce, cl := s.Header.Get("Content-Encoding"), s.Header.Get("Content-Length"); ce != "" || cl != itoa(len(tc.want)) {
				t.Errorf("without wire bytes: served Content-Encoding %q Content-Length %q, want none and %d", ce, cl, len(tc.want))
			}
		})
	}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

var sseEvents = []string{
	"data: {\"id\":\"c1\",\"choices\":[{\"delta\":{\"content\":\"Hel\"}}]}\n\n",
	"data: {\"id\":\"c1\",\"choices\":[{\"delta\":{\"content\":\"lo ✓\"}}]}\n\n",
	"data: {\"id\":\"c1\",\"choices\":[{\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n",
	"data: [DONE]\n\n",
}

func TestFromExchangeStreamBoundaries(t *testing.T) {
	t.Parallel()
	for _, coding := range []string{"", "gzip", "deflate", "deflate-raw", "br", "zstd"} {
		t.Run("coding="+coding, func(t *testing.T) {
			t.Parallel()
			pieces := make([][]byte, len(sseEvents))
			for i, ev := range sseEvents {
				pieces[i] = []byte(ev)
			}
			if coding != "" {
				pieces = compress(t, coding, pieces...)
			}
			resp := okResp("text/event-stream", "", "Transfer-Encoding", "chunked")
			if coding != "" {
				resp.Header.Set("Content-Encoding", headerCoding(coding))
			}
			resp.Streamed = true
			for i, p := range pieces {
				resp.Chunks = append(resp.Chunks, Chunk{At: time.Duration(i*40+5) * time.Millisecond, Data: p})
				resp.Body = append(resp.Body, p...)
			}
			e := mustEntry(t, exchange(0, jsonReq("POST", "https://api.openai.com/v1/chat/completions", chatBody), resp), nil)
			validate(t, writeHAR(t, e))

			if !e.Dal.Streamed || len(e.Dal.Chunks) != len(sseEvents) {
				t.Fatalf("streamed %v with %d chunks, want %d", e.Dal.Streamed, len(e.Dal.Chunks), len(sseEvents))
			}
			for i, c := range e.Dal.Chunks {
				if c.Text != sseEvents[i] || c.Encoding != "" {
					t.Errorf("chunk %d is %q (%s), want %q: boundaries not preserved", i, c.Text, c.Encoding, sseEvents[i])
				}
				if want := float64(i*40 + 5); c.AtMs != want {
					t.Errorf("chunk %d at %v ms, want %v", i, c.AtMs, want)
				}
			}
			if e.Response.Content.Text != strings.Join(sseEvents, "") {
				t.Errorf("content.text %q is not the chunks joined", e.Response.Content.Text)
			}

			l := NewLog(nil, "test")
			l.Entries = []Entry{e}
			s, err := NewIndex(l, nil, nil).Next(&Request{Method: "POST", URL: "https://api.openai.com/v1/chat/completions", Header: hdr("Content-Type", "application/json"), Body: []byte(chatBody)})
			if err != nil {
				t.Fatal(err)
			}
			if !s.Streamed || len(s.Chunks) != len(sseEvents) {
				t.Fatalf("served %d chunks streamed=%v, want %d", len(s.Chunks), s.Streamed, len(sseEvents))
			}
			for i, c := range s.Chunks {
				if !bytes.Equal(c.Data, pieces[i]) || c.At != time.Duration(i*40+5)*time.Millisecond {
					t.Errorf("served chunk %d = %q at %v, want the piece received %q", i, c.Data, c.At, pieces[i])
				}
			}
			if ce := s.Header.Get("Content-Encoding"); coding != "" && ce != headerCoding(coding) {
				t.Errorf("served stream has Content-Encoding %q, want %q", ce, headerCoding(coding))
			}
			for _, h := range []string{"Content-Length", "Transfer-Encoding"} {
				if v := s.Header.Get(h); v != "" {
					t.Errorf("served stream has %s: %s", h, v)
				}
			}
		})
	}
}

// A piece that ends inside a multi-byte character is stored in base64;
// the pieces still join to the body.
func TestStreamChunkSplitsRune(t *testing.T) {
	t.Parallel()
	body := []byte("data: ✓✓\n\n")
	resp := okResp("text/event-stream", "")
	resp.Streamed = true
	resp.Chunks = []Chunk{{Data: body[:7]}, {At: time.Millisecond, Data: body[7:]}}
	resp.Body = body
	e := mustEntry(t, exchange(0, Request{Method: "GET", URL: "http://localhost:8080/events"}, resp), nil)
	var joined []byte
	for i, c := range e.Dal.Chunks {
		if c.Encoding != "base64" {
			t.Errorf("chunk %d encoding %q, want base64", i, c.Encoding)
		}
		b, err := c.Bytes()
		if err != nil {
			t.Fatal(err)
		}
		joined = append(joined, b...)
	}
	if !bytes.Equal(joined, body) || e.Response.Content.Text != string(body) {
		t.Fatalf("chunks join to %q, content %q, want %q", joined, e.Response.Content.Text, body)
	}
}

// The HAR 1.2 requirements FIELD-NOTES lists, on a plain and a failed
// exchange.
func TestHARRequirements(t *testing.T) {
	t.Parallel()
	ok := exchange(0, jsonReq("POST", "https://API.Example.com:443/v1/x?b=2&a=1", chatBody), okResp("application/json", `{"ok":true}`))
	failed := exchange(1, Request{Method: "GET", URL: "https://down.example.com/"}, nil)
	failed.Error = "dial tcp 203.0.113.9:443: connection refused"
	negative := exchange(2, Request{Method: "GET", URL: "http://x.test/"}, okResp("text/plain", "x"))
	negative.Send, negative.Wait = -time.Millisecond, -5*time.Second

	var entries []Entry
	for _, x := range []*Exchange{ok, failed, negative} {
		entries = append(entries, mustEntry(t, x, nil))
	}
	doc := writeHAR(t, entries...)
	validate(t, doc)

	for i, e := range entries {
		tm := e.Timings
		if tm.Send < 0 || tm.Wait < 0 || tm.Receive < 0 {
			t.Errorf("entry %d has negative timings %+v", i, tm)
		}
		if e.Time != tm.Send+tm.Wait+tm.Receive {
			t.Errorf("entry %d time %v != send+wait+receive %v", i, e.Time, tm.Send+tm.Wait+tm.Receive)
		}
	}
	if e := entries[0]; e.Time != 24.5 || e.Timings.Send != 1.5 || e.ServerIPAddress != "203.0.113.7" {
		t.Errorf("time %v send %v server %q, want 24.5 1.5 203.0.113.7", e.Time, e.Timings.Send, e.ServerIPAddress)
	}
	if q := entries[0].Request.QueryString; !slices.Equal(q, []NameValue{{Name: "b", Value: "2"}, {Name: "a", Value: "1"}}) {
		t.Errorf("queryString %v, want b=2 a=1 in order", q)
	}
	f := entries[1]
	if f.Response.Status != 0 || f.Dal.Error == "" || f.Response.Content.MimeType != "x-unknown" {
		t.Errorf("failed exchange: status %d error %q mimeType %q", f.Response.Status, f.Dal.Error, f.Response.Content.MimeType)
	}

	// The written arrays and cache exist even when empty.
	var generic struct {
		Log struct {
			Entries []map[string]json.RawMessage `json:"entries"`
		} `json:"log"`
	}
	if err := json.Unmarshal(doc, &generic); err != nil {
		t.Fatal(err)
	}
	if c := string(generic.Log.Entries[1]["cache"]); c != "{}" {
		t.Errorf("cache is %s, want {}", c)
	}
	if !bytes.Contains(doc, []byte(`"cookies": []`)) || !bytes.Contains(doc, []byte(`"queryString": []`)) {
		t.Errorf("empty arrays are not written as []")
	}
}

func TestFromExchangeRejects(t *testing.T) {
	t.Parallel()
	for _, x := range []*Exchange{nil, {Request: Request{URL: "http://x/"}}, {Request: Request{Method: "GET"}}} {
		if _, err := FromExchange(x, nil); err == nil {
			t.Errorf("FromExchange(%+v) succeeded", x)
		}
	}
}

func TestRequestBodyEncodings(t *testing.T) {
	t.Parallel()
	gz := bytes.Join(compress(t, "gzip", []byte(chatBody)), nil)
	req := jsonReq("POST", "https://api.example.com/v1/x", "", "Content-Encoding", "gzip")
	req.Body = gz
	e := mustEntry(t, exchange(0, req, okResp("text/plain", "")), nil)
	if p := e.Request.PostData; p == nil || p.Text != chatBody || p.Encoding != "" || e.Request.BodySize != int64(len(gz)) {
		t.Fatalf("gzip request body stored as %+v", p)
	}
	plain := jsonReq("POST", "https://api.example.com/v1/x", chatBody)
	if Key(&req, nil) != Key(&plain, nil) {
		t.Errorf("a gzip request body and the same body plain have different keys")
	}

	bin := Request{Method: "PUT", URL: "https://s3.example.com/b/o", Header: hdr("Content-Type", "application/octet-stream"), Body: []byte{0xff, 0x00, 0xfe}}
	e = mustEntry(t, exchange(1, bin, okResp("text/plain", "")), nil)
	if p := e.Request.PostData; p == nil || p.Encoding != "base64" || p.Text != base64.StdEncoding.EncodeToString(bin.Body) {
		t.Fatalf("binary request body stored as %+v", p)
	}
	validate(t, writeHAR(t, e))
}

func TestWriteDoesNotModifyAndSorts(t *testing.T) {
	t.Parallel()
	a := mustEntry(t, exchange(2, Request{Method: "GET", URL: "http://a.test/"}, okResp("text/plain", "a")), nil)
	b := mustEntry(t, exchange(1, Request{Method: "GET", URL: "http://b.test/"}, okResp("text/plain", "b")), nil)
	a.Request.Cookies = nil
	l := NewLog(nil, "test")
	l.Entries = []Entry{a, b}
	var buf bytes.Buffer
	if err := Write(&buf, l); err != nil {
		t.Fatal(err)
	}
	if l.Entries[0].Seq() != 2 || l.Entries[0].Request.Cookies != nil {
		t.Errorf("Write modified the log")
	}
	got, err := Read(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if got.Entries[0].Seq() != 1 || got.Entries[1].Seq() != 2 {
		t.Errorf("entries not written in seq order")
	}
}

// The format as a user reads it: a small log with a plain exchange, a
// redacted one, a stream and a failure.
func TestGoldenHAR(t *testing.T) {
	t.Parallel()
	plain := exchange(0, Request{Method: "GET", URL: "https://example.com/robots.txt"}, okResp("text/plain", "User-agent: *\n"))
	secret := exchange(1, jsonReq("POST", "https://api.openai.com/v1/chat/completions?api_key=sk-query-0123456789", chatBody,
		"Authorization", "Bearer sk-live-0123456789abcdef", "Cookie", "session=s3cr3t-cookie-value; theme=dark"),
		okResp("application/json", `{"id":"chatcmpl-1","choices":[{"message":{"role":"assistant","content":"Hello"}}]}`,
			"Set-Cookie", "session=new-s3cr3t-session; Path=/; HttpOnly; Secure"))
	stream := exchange(2, jsonReq("POST", "http://localhost:11434/v1/chat/completions", `{"model":"llama3","stream":true,"messages":[]}`),
		okResp("text/event-stream", ""))
	stream.Response.Streamed = true
	for i, ev := range sseEvents[2:] {
		stream.Response.Chunks = append(stream.Response.Chunks, Chunk{At: time.Duration(i+1) * 10 * time.Millisecond, Data: []byte(ev)})
		stream.Response.Body = append(stream.Response.Body, ev...)
	}
	failed := exchange(3, Request{Method: "GET", URL: "https://down.example.com/"}, nil)
	failed.Error = "dial tcp 203.0.113.9:443: connect: connection refused"
	failed.Via, failed.ServerAddr = "connect", "203.0.113.9:443"

	var entries []Entry
	for _, x := range []*Exchange{plain, secret, stream, failed} {
		entries = append(entries, mustEntry(t, x, nil))
	}
	doc := writeHAR(t, entries...)
	validate(t, doc)
	golden.Check(t, filepath.Join("testdata", "example.har"), doc)
	if _, err := Read(bytes.NewReader(doc)); err != nil {
		t.Fatalf("the golden HAR does not read back: %v", err)
	}
}

// TestWireBytes: the bytes as received are kept beside the decoded text
// only when the body held no secret; an early close of a compressed body
// is replayed cut at the bytes the client had been handed.
func TestWireBytes(t *testing.T) {
	t.Parallel()
	req := jsonReq("POST", "https://api.example.com/v1/x", `{}`)
	serveOne := func(t *testing.T, x *Exchange) (*Entry, *Served) {
		t.Helper()
		e := mustEntry(t, x, nil)
		validate(t, writeHAR(t, e))
		l := NewLog([]Entry{e}, "test")
		s, err := NewIndex(l, nil, nil).Next(&req)
		if err != nil {
			t.Fatal(err)
		}
		return &e, s
	}

	secret := []byte(`{"access_token":"tok-0123456789abcdef","n":1}`)
	resp := okResp("application/json", "", "Content-Encoding", "gzip")
	resp.Body = bytes.Join(compress(t, "gzip", secret), nil)
	resp.Header.Set("Content-Length", itoa(len(resp.Body)))
	e, s := serveOne(t, exchange(0, req, resp))
	if e.Dal.Wire != "" || strings.Contains(e.Response.Content.Text, "tok-0123456789abcdef") {
		t.Fatalf("a body holding a secret kept its bytes as received (wire %q) or the secret (%q)", e.Dal.Wire, e.Response.Content.Text)
	}
	if s.Header.Get("Content-Encoding") != "" || s.Notice == "" || !strings.Contains(string(s.Chunks[0].Data), Redacted) {
		t.Errorf("served %q with Content-Encoding %q and notice %q, want the redacted text decoded and a notice", s.Chunks[0].Data, s.Header.Get("Content-Encoding"), s.Notice)
	}

	long := []byte(strings.Repeat(`{"a":"text that compresses well"},`, 200))
	resp = okResp("application/json", "", "Content-Encoding", "gzip")
	resp.Body = bytes.Join(compress(t, "gzip", long), nil)
	resp.Header.Set("Content-Length", itoa(len(resp.Body)))
	x := exchange(0, req, resp)
	x.ClientClosed = &ClientClose{Bytes: 10}
	_, s = serveOne(t, x)
	if !s.HoldOpen || len(s.Chunks) != 1 || !bytes.Equal(s.Chunks[0].Data, resp.Body[:10]) {
		t.Fatalf("early close: served %v (hold open %v), want the first 10 bytes received", s.Chunks, s.HoldOpen)
	}
	if ce, cl := s.Header.Get("Content-Encoding"), s.Header.Get("Content-Length"); ce != "gzip" || cl != itoa(len(resp.Body)) {
		t.Errorf("early close: Content-Encoding %q Content-Length %q, want gzip and %d as recorded", ce, cl, len(resp.Body))
	}
}
