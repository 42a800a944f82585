package netcap

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dal-runtime/dal/internal/netcap/har"
)

// rawUpstream is an HTTP/1.1 server written by hand. respond gets the
// connection's and the request's number (from 0) and returns the whole
// response, written with a single Write so that it reaches the proxy in
// one TCP read, and whether to hang up afterwards (without reading the
// request's body); an empty response means hanging up without answering.
type rawUpstream struct {
	l     net.Listener
	conns atomic.Int32 // accepted, the proxy's spare (spare.go) included
	// used counts the connections that carried a request.
	used atomic.Int32
	// hungUp receives the connection's number each time the server
	// closes one.
	hungUp chan int
}

func newRawUpstream(t *testing.T, respond func(conn, req int, r *http.Request) (string, bool)) *rawUpstream {
	t.Helper()
	u := &rawUpstream{l: listen(t), hungUp: make(chan int, 16)}
	// The accept loop is in wg too, so that its Adds never race with
	// Cleanup's Wait on a zero count.
	var wg sync.WaitGroup
	t.Cleanup(func() {
		u.l.Close()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := u.l.Accept()
			if err != nil {
				return
			}
			n := int(u.conns.Add(1)) - 1
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				br := bufio.NewReader(c)
				for i := 0; ; i++ {
					r, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					if i == 0 {
						u.used.Add(1)
					}
					resp, hangUp := respond(n, i, r)
					if !hangUp {
						io.Copy(io.Discard, r.Body)
					}
					if resp != "" {
						if _, err := io.WriteString(c, resp); err != nil {
							return
						}
					}
					if resp == "" || hangUp {
						c.Close()
						u.hungUp <- n
						return
					}
				}
			}()
		}
	}()
	return u
}

func (u *rawUpstream) addr() string { return u.l.Addr().String() }

// waitHangUp waits until the server has closed a connection.
func (u *rawUpstream) waitHangUp(t *testing.T) {
	t.Helper()
	select {
	case <-u.hungUp:
	case <-time.After(testTimeout):
		t.Fatalf("the server closed no connection within %s", testTimeout)
	}
}

// chunked frames pieces as a chunked body: size lines from sizeLine,
// then trailer (header lines, each ending in CRLF).
func chunked(pieces []string, sizeLine func(n int) string, trailer string) string {
	if sizeLine == nil {
		sizeLine = func(n int) string { return fmt.Sprintf("%x", n) }
	}
	var b strings.Builder
	for _, p := range pieces {
		b.WriteString(sizeLine(len(p)) + "\r\n" + p + "\r\n")
	}
	b.WriteString("0\r\n" + trailer + "\r\n")
	return b.String()
}

// readChunked reads a chunked body's frames off br; err is nil once the
// last chunk and the trailer were read.
func readChunked(br *bufio.Reader) (frames []string, err error) {
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			return frames, err
		}
		size, err := strconv.ParseInt(strings.TrimSpace(strings.SplitN(line, ";", 2)[0]), 16, 64)
		if err != nil {
			return frames, fmt.Errorf("chunk size line %q: %w", line, err)
		}
		if size == 0 {
			for {
				line, err := br.ReadString('\n')
				if err != nil || line == "\r\n" {
					return frames, err
				}
			}
		}
		data := make([]byte, size+2)
		if _, err := io.ReadFull(br, data); err != nil {
			return frames, err
		}
		if !bytes.HasSuffix(data, []byte("\r\n")) {
			return frames, fmt.Errorf("chunk of %d bytes not followed by CRLF", size)
		}
		frames = append(frames, string(data[:size]))
	}
}

// exchangeFrames sends req on the client connection c (read through br)
// and returns the response's chunked frames.
func exchangeFrames(t *testing.T, c net.Conn, br *bufio.Reader, req string) []string {
	t.Helper()
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatal(err)
	}
	code, h := readHead(t, br)
	if code != 200 || h.Get("Transfer-Encoding") != "chunked" {
		t.Fatalf("response head: %d %v", code, h)
	}
	frames, err := readChunked(br)
	if err != nil {
		t.Fatalf("after %d frames: %v", len(frames), err)
	}
	return frames
}

func checkChunks(t *testing.T, r *har.Response, want []string) {
	t.Helper()
	if r == nil || !r.Streamed {
		t.Fatalf("recorded response %v, want a streamed one", r)
	}
	var got []string
	var joined []byte
	for i, c := range r.Chunks {
		got = append(got, string(c.Data))
		joined = append(joined, c.Data...)
		if i > 0 && c.At < r.Chunks[i-1].At {
			t.Errorf("chunk %d at %v, before chunk %d (%v)", i, c.At, i-1, r.Chunks[i-1].At)
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("recorded %d chunks %.200q, want %d %.200q", len(got), got, len(want), want)
	}
	if !bytes.Equal(joined, r.Body) {
		t.Error("the chunks do not add up to the body")
	}
}

func sseEvents(n int) []string {
	ev := make([]string, n)
	for i := range ev {
		ev[i] = sseEvent(i)
	}
	return ev
}

// TestChunkFrames: an upstream that writes a whole chunked response in
// one write, so that every chunk reaches dal in the same TCP read, is
// recorded chunk for chunk and relayed chunk for chunk, when recording
// and when replaying; two requests share one client and one upstream
// connection.
func TestChunkFrames(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("0123456789abcdef", 3<<20/16) // over maxFrame
	cases := []struct {
		name   string
		head   string // response head, up to the final CRLF
		pre    string // informational responses before it
		pieces []string
		size   func(int) string
		trail  string
		exact  bool // the recording client sees exactly pieces as frames
	}{
		{name: "sse", head: "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n",
			pieces: sseEvents(7), exact: true},
		{name: "extensions and trailer", head: "HTTP/1.1 200 OK\r\nContent-Type: application/x-ndjson\r\nTrailer: X-Sum\r\nTransfer-Encoding: chunked\r\n",
			pieces: []string{"{\"a\":1}\n", "{\"b\":2}\n", "{\"c\":3}\n"},
			size:   func(n int) string { return fmt.Sprintf("%X ;name=value;q=\"x y\"", n) }, trail: "X-Sum: abc\r\n", exact: true},
		{name: "early hints", head: "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n",
			pre: "HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\n", pieces: sseEvents(3), exact: true},
		{name: "chunk over maxFrame", head: "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nTransfer-Encoding: chunked\r\n",
			pieces: []string{"first", big, "last"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			up := newRawUpstream(t, func(_, _ int, _ *http.Request) (string, bool) {
				return tc.pre + tc.head + "\r\n" + chunked(tc.pieces, tc.size, tc.trail), false
			})
			url := "http://" + up.addr() + "/stream"
			req := "GET " + url + " HTTP/1.1\r\nHost: " + up.addr() + "\r\n\r\n"
			const rounds = 2

			rec := newRig(t, Config{})
			c := dial(t, rec.explicit())
			br := bufio.NewReader(c)
			for range rounds {
				frames := exchangeFrames(t, c, br, req)
				if tc.exact && !slices.Equal(frames, tc.pieces) {
					t.Errorf("recording: the client saw %d frames %q, want %d %q", len(frames), frames, len(tc.pieces), tc.pieces)
				}
				if !tc.exact && (strings.Join(frames, "") != strings.Join(tc.pieces, "") || len(frames) < len(tc.pieces) ||
					frames[0] != tc.pieces[0] || frames[len(frames)-1] != tc.pieces[len(tc.pieces)-1]) {
					t.Errorf("recording: the client saw %d frames, want the small chunks as frames of their own and the body intact", len(frames))
				}
			}
			recs := rec.records()
			if len(recs) != rounds {
				t.Fatalf("%d records, want %d", len(recs), rounds)
			}
			for _, x := range recs {
				if x.Error != "" {
					t.Errorf("recorded error %q", x.Error)
				}
				checkChunks(t, x.Response, tc.pieces)
			}
			if n := up.used.Load(); n != 1 {
				t.Errorf("the proxy used %d upstream connections, want 1 (keep-alive)", n)
			}

			rp := newRig(t, Config{Source: newRecordedSource(recs)})
			c = dial(t, rp.explicit())
			br = bufio.NewReader(c)
			for range rounds {
				if frames := exchangeFrames(t, c, br, req); !slices.Equal(frames, tc.pieces) {
					t.Errorf("replay: the client saw %d frames, want %d", len(frames), len(tc.pieces))
				}
			}
			for _, y := range rp.records() {
				checkChunks(t, y.Response, tc.pieces)
			}
		})
	}
}

// TestChunkedBroken: a chunked body that breaks off or is malformed is
// recorded as failed with what arrived, and the client's response is cut
// short rather than completed.
func TestChunkedBroken(t *testing.T) {
	t.Parallel()
	head := "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
	cases := []struct {
		name, body string
		chunks     []string
		err        string
	}{
		{"bad size", "5\r\nhello\r\nzz\r\n", []string{"hello"}, "not a hexadecimal number"},
		{"no CRLF after data", "5\r\nhelloXX", []string{"hello"}, "not followed by CRLF"},
		{"bare LF", "5\nhello\r\n", nil, "not ended by CRLF"},
		{"cut in a chunk", "5\r\nhello\r\na\r\nabc", []string{"hello", "abc"}, "unexpected EOF"},
		{"cut before the last chunk", "5\r\nhello\r\n", []string{"hello"}, "unexpected EOF"},
		{"cut in the trailer", "5\r\nhello\r\n0\r\nX-Sum: 1\r\n", []string{"hello"}, "reading the trailer"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			up := newRawUpstream(t, func(_, _ int, _ *http.Request) (string, bool) { return head + tc.body, true })
			rg := newRig(t, Config{})
			c := dial(t, rg.explicit())
			br := bufio.NewReader(c)
			fmt.Fprintf(c, "GET http://%s/ HTTP/1.1\r\nHost: %s\r\n\r\n", up.addr(), up.addr())
			if code, _ := readHead(t, br); code != 200 {
				t.Fatalf("status %d", code)
			}
			if frames, err := readChunked(br); err == nil {
				t.Errorf("the client got a complete response (%q) from a broken one", frames)
			}
			x := rg.one()
			if !strings.HasPrefix(x.Error, "reading the response body from upstream: ") || !strings.Contains(x.Error, tc.err) {
				t.Errorf("recorded error %q, want one about %q", x.Error, tc.err)
			}
			checkChunks(t, x.Response, tc.chunks)
		})
	}
}

// TestStaleUpstreamConn: a kept-alive upstream connection the server
// closes is not used again, and a request the server drops on a reused
// connection is sent again on a new one only when that is safe.
func TestStaleUpstreamConn(t *testing.T) {
	t.Parallel()
	const ok = "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n\r\nok"
	t.Run("closed while idle", func(t *testing.T) {
		t.Parallel()
		up := newRawUpstream(t, func(_, _ int, _ *http.Request) (string, bool) { return ok, true })
		rg := newRig(t, Config{})
		c := proxyClient(rg.explicit(), nil)
		for i := range 2 {
			req, _ := http.NewRequest(http.MethodPost, "http://"+up.addr()+"/v1/chat/completions", strings.NewReader(`{"n":1}`))
			if resp, body := do(t, c, req); resp.StatusCode != 200 || string(body) != "ok" {
				t.Errorf("request %d: %d %q", i, resp.StatusCode, body)
			}
			if i == 0 {
				up.waitHangUp(t) // the server has closed the connection the proxy keeps
			}
		}
		for _, x := range rg.records() {
			if x.Error != "" {
				t.Errorf("recorded error %q", x.Error)
			}
		}
		if n := up.used.Load(); n != 2 {
			t.Errorf("%d upstream connections used, want 2", n)
		}
	})
	for _, tc := range []struct {
		method string
		hdr    string
		retry  bool
	}{
		{http.MethodGet, "", true},
		{http.MethodPost, "", false},
		{http.MethodPost, "Idempotency-Key", true},
	} {
		t.Run("dropped "+tc.method+" "+tc.hdr, func(t *testing.T) {
			t.Parallel()
			// The first connection answers its first request and drops
			// the second; later connections answer.
			up := newRawUpstream(t, func(conn, req int, _ *http.Request) (string, bool) {
				if conn == 0 && req == 1 {
					return "", true
				}
				return ok, false
			})
			rg := newRig(t, Config{})
			c := proxyClient(rg.explicit(), nil)
			var codes []int
			for range 2 {
				req, _ := http.NewRequest(tc.method, "http://"+up.addr()+"/", strings.NewReader("x"))
				if tc.hdr != "" {
					req.Header.Set(tc.hdr, "k1")
				}
				resp, _ := do(t, c, req)
				codes = append(codes, resp.StatusCode)
			}
			want := []int{200, 502}
			if tc.retry {
				want = []int{200, 200}
			}
			if !slices.Equal(codes, want) {
				t.Errorf("status codes %v, want %v", codes, want)
			}
			recs := rg.records()
			if got := recs[1].Error; tc.retry != (got == "") {
				t.Errorf("second exchange recorded error %q (retry %v)", got, tc.retry)
			}
			if !tc.retry && !strings.Contains(recs[1].Error, "closed the connection without a response") {
				t.Errorf("recorded error %q", recs[1].Error)
			}
		})
	}
}

// TestLLMServerStream: the end-to-end tests' model server writes every
// SSE event as its own HTTP chunk; each is recorded as one chunk and
// reaches the client as one frame, recording and replaying.
func TestLLMServerStream(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, "python3", "../../e2e/testdata/llm_server.py")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting the model server: %v", err)
	}
	t.Cleanup(func() {
		cancel()
		cmd.Wait()
	})
	kill := time.AfterFunc(testTimeout, cancel) // no port: fail, not hang
	line, err := bufio.NewReader(out).ReadString('\n')
	kill.Stop()
	if err != nil {
		t.Fatalf("the model server printed no port: %v (stderr: %s)", err, stderr.String())
	}
	port, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		t.Fatalf("the model server printed %q, not a port", line)
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	body := `{"model":"m","stream":true,"messages":[{"role":"user","content":"a b c d e"}]}`
	req := fmt.Sprintf("POST http://%s/v1/chat/completions HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer sk-test\r\n"+
		"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", addr, addr, len(body), body)

	rec := newRig(t, Config{})
	c := dial(t, rec.explicit())
	frames := exchangeFrames(t, c, bufio.NewReader(c), req)
	x := rec.one()
	if x.Error != "" {
		t.Fatalf("recorded error %q", x.Error)
	}
	events := strings.Count(string(x.Response.Body), "data: ")
	if events < 2 || !strings.HasSuffix(string(x.Response.Body), "data: [DONE]\n\n") {
		t.Fatalf("the stream %q is not a chat completion stream", x.Response.Body)
	}
	if len(frames) != events {
		t.Errorf("the client saw %d frames for %d events", len(frames), events)
	}
	for _, f := range frames {
		if !strings.HasPrefix(f, "data: ") || strings.Count(f, "data: ") != 1 || !strings.HasSuffix(f, "\n\n") {
			t.Errorf("frame %q is not one event", f)
		}
	}
	checkChunks(t, x.Response, frames)

	rp := newRig(t, Config{Source: newRecordedSource([]*har.Exchange{x})})
	c = dial(t, rp.explicit())
	if replayed := exchangeFrames(t, c, bufio.NewReader(c), req); !slices.Equal(replayed, frames) {
		t.Errorf("replay: the client saw %d frames, want %d", len(replayed), len(frames))
	}
	if y := rp.one(); y.Error != "" || len(y.Response.Chunks) != events {
		t.Errorf("replayed record: error %q, %d chunks", y.Error, len(y.Response.Chunks))
	}
}

// TestEarlyAnswer: a server that answers before reading the whole request
// and hangs up (the proxy's write fails) has its answer relayed.
func TestEarlyAnswer(t *testing.T) {
	t.Parallel()
	const tooLarge = "HTTP/1.1 413 Content Too Large\r\nContent-Type: text/plain\r\nContent-Length: 9\r\nConnection: close\r\n\r\ntoo large"
	up := newRawUpstream(t, func(_, _ int, _ *http.Request) (string, bool) { return tooLarge, true })
	rg := newRig(t, Config{})
	req, _ := http.NewRequest(http.MethodPost, "http://"+up.addr()+"/upload", bytes.NewReader(make([]byte, 32<<20)))
	resp, body := do(t, proxyClient(rg.explicit(), nil), req)
	if resp.StatusCode != http.StatusRequestEntityTooLarge || string(body) != "too large" {
		t.Errorf("client got %d %q, want the server's 413", resp.StatusCode, body)
	}
	if x := rg.one(); x.Error != "" || x.Response == nil || x.Response.Status != http.StatusRequestEntityTooLarge {
		t.Errorf("recorded error %q response %v", x.Error, x.Response)
	}
}
