package netcap

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/dal-runtime/dal/internal/netcap/har"
	"github.com/dal-runtime/dal/internal/netcap/prompts"
)

// watchedPair is a client socket (a raw fd, so that the test decides
// every read and close) connected to a clientConn the proxy would hold.
func watchedPair(t *testing.T) (cfd int, c *clientConn) {
	t.Helper()
	l := listen(t)
	defer l.Close()
	cfd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(cfd) })
	port := l.Addr().(*net.TCPAddr).Port
	if err := unix.Connect(cfd, &unix.SockaddrInet4{Port: port, Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	sc, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sc.Close() })
	c = &clientConn{Conn: sc, diag: newDiagSet()}
	t.Cleanup(c.diag.close)
	if c.once.Do(func() { c.peer = c.diag.watch(c.Conn) }); c.peer == nil {
		t.Fatal("sock_diag does not see the client's socket")
	}
	return cfd, c
}

// waitReadable waits until the client's socket has bytes to read.
func waitReadable(t *testing.T, fd int) {
	t.Helper()
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	for {
		n, err := unix.Poll(fds, int(testTimeout.Milliseconds()))
		if err == unix.EINTR {
			continue
		}
		if err != nil || n == 0 {
			t.Fatalf("the client's socket got nothing to read: %v", err)
		}
		return
	}
}

// TestDrainedTellsHowTheClientClosed: once a client closes, drained says
// whether it had read the last piece, in each order the close and the
// piece can meet, each one forced with real sockets.
func TestDrainedTellsHowTheClientClosed(t *testing.T) {
	t.Parallel()
	piece := []byte("data: {\"n\":2}\n\n")
	t.Run("read, then closed before the question", func(t *testing.T) {
		t.Parallel()
		cfd, c := watchedPair(t)
		c.Write(piece)
		readExactly(t, cfd, len(piece))
		unix.Close(cfd) // a FIN
		if d := c.drained(context.Background()); d != drainRead {
			t.Errorf("drained %v, want drainRead", d)
		}
	})
	t.Run("closed with the piece unread in its socket", func(t *testing.T) {
		t.Parallel()
		cfd, c := watchedPair(t)
		c.Write(piece)
		waitReadable(t, cfd)
		unix.Close(cfd) // a reset
		if d := c.drained(context.Background()); d != drainLeft {
			t.Errorf("drained %v, want drainLeft", d)
		}
	})
	t.Run("closed before the piece arrived", func(t *testing.T) {
		t.Parallel()
		cfd, c := watchedPair(t)
		unix.Close(cfd) // a FIN; the piece then meets a closed socket
		if _, err := c.Write(piece); err != nil {
			t.Fatal(err)
		}
		if d := c.drained(context.Background()); d != drainLeft {
			t.Errorf("drained %v, want drainLeft", d)
		}
	})
	t.Run("half-closed, reading later", func(t *testing.T) {
		// Its FIN acknowledges the piece as received, not read: drained
		// must wait for the read the socket still shows pending.
		t.Parallel()
		cfd, c := watchedPair(t)
		c.Write(piece)
		waitReadable(t, cfd)
		if err := unix.Shutdown(cfd, unix.SHUT_WR); err != nil {
			t.Fatal(err)
		}
		asked := make(chan bool, 1)
		questions := 0
		c.peer.beforeQuery = func() {
			if questions++; questions == 3 {
				asked <- true
			}
		}
		done := make(chan drain, 1)
		go func() { done <- c.drained(context.Background()) }()
		select {
		case d := <-done:
			t.Fatalf("drained %v while the client had the piece unread", d)
		case <-asked:
		}
		readExactly(t, cfd, len(piece))
		if d := <-done; d != drainRead {
			t.Errorf("drained %v, want drainRead", d)
		}
	})
}

// responsesEvents are the first events of a Responses API stream, as the
// server sends them before the model's text goes on.
var responsesEvents = func() []string {
	var out []string
	for i, name := range []string{"response.created", "response.in_progress", "response.output_item.added",
		"response.content_part.added", "response.output_text.delta"} {
		out = append(out, fmt.Sprintf("event: %s\ndata: {\"type\":%q,\"sequence_number\":%d,\"delta\":\"reply\"}\n\n", name, name, i))
	}
	return out
}()

// heldSSEServer serves the events, each an HTTP chunk, then holds the stream
// open (a model still generating) until the client goes, or ends it when
// end is set.
func heldSSEServer(t *testing.T, events []string, end bool) *httptest.Server {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		for _, e := range events {
			io.WriteString(w, e)
			w.(http.Flusher).Flush()
		}
		if !end {
			<-r.Context().Done()
		}
	}))
	t.Cleanup(ts.Close)
	return ts
}

// readEvents asks for a Responses stream through the proxy, reads the
// headers and n events, each a read of its own, and closes; waitNext:
// not before the next event is in its socket (so that it closes with
// it unread).
func readEvents(t *testing.T, proxy, upstream string, n int, waitNext bool) {
	t.Helper()
	conn := dial(t, proxy)
	defer conn.Close()
	body := `{"model":"test-model","input":"close early","stream":true}`
	fmt.Fprintf(conn, "POST %s/v1/responses HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
		upstream, strings.TrimPrefix(upstream, "http://"), len(body), body)
	br := bufio.NewReader(conn)
	if code, _ := readHead(t, br); code != 200 {
		t.Fatalf("status %d", code)
	}
	for i := range n {
		b, err := readFrame(br)
		if err != nil || string(b) != responsesEvents[i] {
			t.Fatalf("event %d: %q, %v", i, b, err)
		}
	}
	if br.Buffered() > 0 {
		t.Fatalf("the client read more than %d events at once", n)
	}
	if waitNext {
		rc, _ := conn.(*net.TCPConn).SyscallConn()
		rc.Control(func(fd uintptr) { waitReadable(t, int(fd)) })
	}
}

// TestEarlyCloseCountsWhatWasRead: a client that reads some of the events
// a server already sent and closes is recorded with exactly the events it
// read, however its close and the next event meet (before this, dal
// counted what it had handed to the connection: one or two more, by a
// race); replay hands it those and records the same; the prompt is
// parsed from them alone, in the recording and in the replay.
func TestEarlyCloseCountsWhatWasRead(t *testing.T) {
	t.Parallel()
	size := func(n int) (b int64) {
		for _, e := range responsesEvents[:n] {
			b += int64(len(e))
		}
		return b
	}
	for _, tc := range []struct {
		name     string
		read     int
		waitNext bool // the client closes with the next event in its socket
		end      bool // the server ends the stream after the events
		times    int
	}{
		{name: "one read, the next event unread in its socket", read: 1, waitNext: true, times: 3},
		{name: "one read, closed at once", read: 1, times: 10},
		{name: "two reads, closed at once", read: 2, times: 10},
		{name: "one read of a stream the server ended", read: 1, waitNext: true, end: true, times: 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			events := responsesEvents
			if tc.end {
				events = events[:2]
			}
			ts := heldSSEServer(t, events, tc.end)
			// Whether dal read the end of a stream the server ended before
			// it learnt that the client had gone is a matter of timing
			// (truncated); what the client read is not.
			want := har.ClientClose{Bytes: size(tc.read), Chunks: tc.read, Read: true, Truncated: true}
			var x *har.Exchange
			for range tc.times {
				rec := newRig(t, Config{})
				readEvents(t, rec.explicit(), ts.URL, tc.read, tc.waitNext)
				x = rec.one()
				got := x.ClientClosed
				if got != nil && tc.end {
					c := *got
					c.Truncated = true
					got = &c
				}
				if x.Error != "" || got == nil || *got != want {
					t.Fatalf("record: error %q, client closed %+v, want %+v", x.Error, x.ClientClosed, want)
				}
				rec.shutdown()
			}
			rp, _ := replayRig(t, x)
			readEvents(t, rp.explicit(), ts.URL, tc.read, false)
			y := rp.one()
			if y.Error != "" || y.ClientClosed == nil || y.ClientClosed.Bytes != want.Bytes || y.ClientClosed.Chunks != want.Chunks || !y.ClientClosed.Read {
				t.Fatalf("replay: error %q, client closed %+v, want %+v", y.Error, y.ClientClosed, want)
			}
			if ev := rp.reports(); len(ev) != 0 {
				t.Errorf("replay reports: %v", ev)
			}
			pr, pp := prompt(t, x), prompt(t, y)
			if d := prompts.Diff([]*prompts.Prompt{pr}, []*prompts.Prompt{pp}); d != "" || pr.Chunks != tc.read {
				t.Errorf("prompts: %d chunks recorded; %s", pr.Chunks, d)
			}
		})
	}
}

// TestEarlyCloseReplayReadsLess: a client that, in replay, closes before
// it reads every piece it read when recorded (a client that reads while
// it closes, as asyncio's TLS does, reads what has come by then) is
// recorded as closing after the pieces replay handed it, not read, and
// its prompt is the recorded one: the race is the client's, not a drift.
func TestEarlyCloseReplayReadsLess(t *testing.T) {
	t.Parallel()
	ts := heldSSEServer(t, responsesEvents, false)
	rec := newRig(t, Config{})
	readEvents(t, rec.explicit(), ts.URL, 2, false)
	x := rec.one()
	if x.ClientClosed == nil || x.ClientClosed.Chunks != 2 || !x.ClientClosed.Read {
		t.Fatalf("record: client closed %+v", x.ClientClosed)
	}
	rp, _ := replayRig(t, x)
	readEvents(t, rp.explicit(), ts.URL, 1, true)
	y := rp.one()
	if y.Error != "" || y.ClientClosed == nil || y.ClientClosed.Chunks != 2 || y.ClientClosed.Bytes != x.ClientClosed.Bytes || y.ClientClosed.Read {
		t.Fatalf("replay: error %q, client closed %+v, recorded %+v", y.Error, y.ClientClosed, x.ClientClosed)
	}
	if d := prompts.Diff([]*prompts.Prompt{prompt(t, x)}, []*prompts.Prompt{prompt(t, y)}); d != "" {
		t.Errorf("prompts: %s", d)
	}
}

// prompt is the LLM call in x, as written to prompts/.
func prompt(t *testing.T, x *har.Exchange) *prompts.Prompt {
	t.Helper()
	e, err := har.FromExchange(x, nil)
	if err != nil {
		t.Fatal(err)
	}
	p, ok := prompts.Extract(&e)
	if !ok {
		t.Fatal("not an LLM call")
	}
	return p
}

// TestEarlyCloseOlderBundle: a stream closed early recorded without
// "read" (an older dal counted what it had handed the client) is served
// with a one-line notice, the chunks it names, and held open.
func TestEarlyCloseOlderBundle(t *testing.T) {
	t.Parallel()
	x := &har.Exchange{
		Request: har.Request{Method: "POST", URL: "http://127.0.0.1:1/v1/responses", Proto: "HTTP/1.1",
			Header: http.Header{"Content-Type": {"application/json"}}, Body: []byte(`{"model":"test-model","input":"close early","stream":true}`)},
		Response: &har.Response{Status: 200, Proto: "HTTP/1.1", Header: http.Header{"Content-Type": {"text/event-stream"}}, Streamed: true,
			Body: []byte(strings.Join(responsesEvents[:3], ""))},
		ClientClosed: &har.ClientClose{Bytes: int64(len(responsesEvents[0]) + len(responsesEvents[1])), Chunks: 2, Truncated: true},
	}
	for _, e := range responsesEvents[:3] {
		x.Response.Chunks = append(x.Response.Chunks, har.Chunk{Data: []byte(e)})
	}
	e, err := har.FromExchange(x, nil)
	if err != nil {
		t.Fatal(err)
	}
	s, err := har.NewIndex(&har.Log{Entries: []har.Entry{e}}, nil, nil).Next(&x.Request)
	if err != nil {
		t.Fatal(err)
	}
	if !s.HoldOpen || len(s.Chunks) != 2 || !strings.Contains(s.Notice, "not how much it had read") || strings.Contains(s.Notice, "\n") {
		t.Errorf("served: hold open %v, %d chunks, notice %q", s.HoldOpen, len(s.Chunks), s.Notice)
	}
	rp, _ := replayRig(t, x)
	readEvents(t, rp.explicit(), "http://127.0.0.1:1", 2, false)
	if y := rp.one(); y.Error != "" || y.ClientClosed == nil || y.ClientClosed.Chunks != 2 {
		t.Errorf("replay: error %q, client closed %+v", y.Error, y.ClientClosed)
	}
}
