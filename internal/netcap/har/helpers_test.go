package har

import (
	"bytes"
	"io"
	"net/http"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/andybalholm/brotli"
	"github.com/klauspost/compress/flate"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zlib"
	"github.com/klauspost/compress/zstd"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

var epoch = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// hdr builds a header from name, value pairs.
func hdr(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Add(kv[i], kv[i+1])
	}
	return h
}

func exchange(seq int, req Request, resp *Response) *Exchange {
	if req.Header == nil {
		req.Header = http.Header{}
	}
	if req.Proto == "" {
		req.Proto = "HTTP/1.1"
	}
	if resp != nil && resp.Header == nil {
		resp.Header = http.Header{}
	}
	return &Exchange{
		Seq: seq, Started: epoch.Add(time.Duration(seq) * time.Second), Request: req, Response: resp,
		Send: 1500 * time.Microsecond, Wait: 20 * time.Millisecond, Receive: 3 * time.Millisecond,
		Via: "proxy", ServerAddr: "203.0.113.7:443",
	}
}

func jsonReq(method, url, body string, kv ...string) Request {
	return Request{Method: method, URL: url, Header: hdr(append([]string{"Content-Type", "application/json"}, kv...)...), Body: []byte(body)}
}

func okResp(ct, body string, kv ...string) *Response {
	return &Response{Status: 200, StatusText: "OK", Proto: "HTTP/1.1", Header: hdr(append([]string{"Content-Type", ct}, kv...)...), Body: []byte(body)}
}

// streamWriter compresses pieces one flush at a time.
type streamWriter interface {
	io.Writer
	Flush() error
	Close() error
}

func newWriter(t testing.TB, coding string, w io.Writer) streamWriter {
	t.Helper()
	switch coding {
	case "gzip":
		return gzip.NewWriter(w)
	case "deflate":
		return zlib.NewWriter(w)
	case "deflate-raw":
		fw, err := flate.NewWriter(w, flate.DefaultCompression)
		if err != nil {
			t.Fatal(err)
		}
		return fw
	case "br":
		return brotli.NewWriter(w)
	case "zstd":
		zw, err := zstd.NewWriter(w, zstd.WithEncoderConcurrency(1))
		if err != nil {
			t.Fatal(err)
		}
		return zw
	}
	t.Fatalf("no writer for %q", coding)
	return nil
}

// compress encodes pieces, flushing after each, and returns the encoded
// bytes each piece produced (the last one including the stream's end).
func compress(t testing.TB, coding string, pieces ...[]byte) [][]byte {
	t.Helper()
	var buf bytes.Buffer
	w := newWriter(t, coding, &buf)
	out := make([][]byte, len(pieces))
	for i, p := range pieces {
		if _, err := w.Write(p); err != nil {
			t.Fatal(err)
		}
		if i == len(pieces)-1 {
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
		} else if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
		out[i] = bytes.Clone(buf.Bytes())
		buf.Reset()
	}
	return out
}

func headerCoding(c string) string {
	if c == "deflate-raw" {
		return "deflate"
	}
	return c
}

// writeHAR writes entries as a log and returns the bytes.
func writeHAR(t testing.TB, entries ...Entry) []byte {
	t.Helper()
	l := NewLog(nil, "test")
	l.Entries = entries
	var buf bytes.Buffer
	if err := Write(&buf, l); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func mustEntry(t testing.TB, x *Exchange, r *Redactor) Entry {
	t.Helper()
	e, err := FromExchange(x, r)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

var compiledSchema = sync.OnceValues(func() (*jsonschema.Schema, error) {
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	abs, err := filepath.Abs("testdata/har-1.2.schema.json")
	if err != nil {
		return nil, err
	}
	return c.Compile(abs)
})

func harSchema(t testing.TB) *jsonschema.Schema {
	t.Helper()
	s, err := compiledSchema()
	if err != nil {
		t.Fatalf("testdata/har-1.2.schema.json does not compile: %v", err)
	}
	return s
}

// validate checks a HAR document against the HAR 1.2 schema.
func validate(t testing.TB, doc []byte) {
	t.Helper()
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil {
		t.Fatal(err)
	}
	if err := harSchema(t).Validate(v); err != nil {
		t.Fatalf("HAR does not validate against HAR 1.2: %v\n%s", err, doc)
	}
}
