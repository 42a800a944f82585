package netcap

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/dal-runtime/dal/internal/netcap/har"
)

// signalSource is a Source that says when it was asked.
type signalSource struct {
	Source
	asked chan struct{}
}

func (s *signalSource) Next(req *har.Request) (*har.Served, error) {
	defer close(s.asked)
	return s.Source.Next(req)
}

// replayRig replays x through the real HAR path: the entry dal writes,
// read back by the replay Index.
func replayRig(t *testing.T, x *har.Exchange) (*rig, chan struct{}) {
	t.Helper()
	e, err := har.FromExchange(x, nil)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := har.Write(&buf, har.NewLog([]har.Entry{e}, "test")); err != nil {
		t.Fatal(err)
	}
	log, err := har.Read(&buf)
	if err != nil {
		t.Fatal(err)
	}
	src := &signalSource{Source: har.NewIndex(log, nil, nil), asked: make(chan struct{})}
	return newRig(t, Config{Source: src}), src.asked
}

// TestEarlyCloseStream: a client that reads the first event of a stream
// and closes (as clients stopping at "data: [DONE]" do) is an ordinary
// recorded event: how much it was handed, no error, the stream cut where
// dal stopped reading. Replay hands it the same bytes, holds the response
// open until it closes, and records the same.
func TestEarlyCloseStream(t *testing.T) {
	t.Parallel()
	first := "data: {\"n\":1}\n\n"
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, first)
		w.(http.Flusher).Flush()
		<-r.Context().Done() // until dal closes the connection: the client left
	}))
	defer ts.Close()

	read := func(proxy string) []byte {
		c := dial(t, proxy)
		fmt.Fprintf(c, "GET %s/stream HTTP/1.1\r\nHost: %s\r\n\r\n", ts.URL, strings.TrimPrefix(ts.URL, "http://"))
		br := bufio.NewReader(c)
		if code, h := readHead(t, br); code != 200 || h.Get("Content-Type") != "text/event-stream" {
			t.Fatalf("head: %d %v", code, h)
		}
		b, err := readFrame(br)
		if err != nil {
			t.Fatal(err)
		}
		c.Close()
		return b
	}

	rec := newRig(t, Config{})
	if got := read(rec.explicit()); string(got) != first {
		t.Fatalf("record: the client read %q", got)
	}
	x := rec.one()
	if x.Error != "" || x.ClientClosed == nil || *x.ClientClosed != (har.ClientClose{Bytes: int64(len(first)), Chunks: 1, Read: true, Truncated: true}) {
		t.Fatalf("record: error %q client closed %+v", x.Error, x.ClientClosed)
	}
	if x.Response == nil || len(x.Response.Chunks) != 1 || string(x.Response.Body) != first {
		t.Fatalf("record: response %+v", x.Response)
	}
	if ev := rec.reports(); len(ev) != 0 {
		t.Errorf("record reports: %v", ev)
	}
	e, _ := har.FromExchange(x, nil)
	if e.Dal.Error != "" || e.Dal.ClientClosed == nil || e.Dal.ClientClosed.Chunks != 1 || !e.Dal.ClientClosed.Truncated {
		t.Errorf("entry _dal: %+v", e.Dal)
	}

	rp, _ := replayRig(t, x)
	if got := read(rp.explicit()); string(got) != first {
		t.Fatalf("replay: the client read %q", got)
	}
	y := rp.one()
	if y.Error != "" || y.ClientClosed == nil || *y.ClientClosed != *x.ClientClosed {
		t.Errorf("replay: error %q client closed %+v, recorded %+v", y.Error, y.ClientClosed, x.ClientClosed)
	}
	if ev := rp.reports(); len(ev) != 0 {
		t.Errorf("replay reports: %v", ev)
	}
}

// TestEarlyCloseBody: a client that reads the start of a large body and
// closes; replay gives it the same first bytes under the recorded
// Content-Length.
func TestEarlyCloseBody(t *testing.T) {
	t.Parallel()
	const size = 32 << 20 // more than the sockets on both sides hold
	body := bytes.Repeat([]byte("0123456789abcdef"), size/16)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", fmt.Sprint(size))
		w.Write(body)
	}))
	defer ts.Close()

	read := func(proxy string) []byte {
		c := dial(t, proxy)
		fmt.Fprintf(c, "GET %s/big HTTP/1.1\r\nHost: %s\r\n\r\n", ts.URL, strings.TrimPrefix(ts.URL, "http://"))
		br := bufio.NewReader(c)
		if code, h := readHead(t, br); code != 200 || h.Get("Content-Length") != fmt.Sprint(size) {
			t.Fatalf("head: %d %v", code, h)
		}
		b := make([]byte, 1000)
		if _, err := io.ReadFull(br, b); err != nil {
			t.Fatal(err)
		}
		c.Close()
		return b
	}

	rec := newRig(t, Config{})
	if got := read(rec.explicit()); !bytes.Equal(got, body[:1000]) {
		t.Fatal("record: the client read other bytes")
	}
	x := rec.one()
	if x.Error != "" || x.ClientClosed == nil || x.ClientClosed.Bytes < 1000 || x.ClientClosed.Bytes >= size || x.ClientClosed.Chunks != 0 {
		t.Fatalf("record: error %q client closed %+v", x.Error, x.ClientClosed)
	}
	rp, _ := replayRig(t, x)
	if got := read(rp.explicit()); !bytes.Equal(got, body[:1000]) {
		t.Fatal("replay: the client read other bytes")
	}
	if y := rp.one(); y.Error != "" || y.ClientClosed == nil {
		t.Errorf("replay: error %q client closed %+v", y.Error, y.ClientClosed)
	}
}

// TestEarlyCloseBeforeResponse: a client that gives up before the
// response arrives is recorded as such, without an error, and replay
// sends it nothing until it gives up again.
func TestEarlyCloseBeforeResponse(t *testing.T) {
	t.Parallel()
	arrived := make(chan struct{})
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(arrived)
		<-r.Context().Done()
	}))
	defer ts.Close()
	ask := func(proxy string, asked <-chan struct{}) {
		c := dial(t, proxy)
		fmt.Fprintf(c, "GET %s/slow HTTP/1.1\r\nHost: %s\r\n\r\n", ts.URL, strings.TrimPrefix(ts.URL, "http://"))
		<-asked
		c.Close()
	}

	rec := newRig(t, Config{})
	ask(rec.explicit(), arrived)
	x := rec.one()
	if x.Error != "" || x.Response != nil || x.ClientClosed == nil || *x.ClientClosed != (har.ClientClose{Truncated: true}) {
		t.Fatalf("record: error %q response %+v client closed %+v", x.Error, x.Response, x.ClientClosed)
	}
	rp, asked := replayRig(t, x)
	ask(rp.explicit(), asked)
	if y := rp.one(); y.Error != "" || y.Response != nil || y.ClientClosed == nil {
		t.Errorf("replay: error %q response %+v client closed %+v", y.Error, y.Response, y.ClientClosed)
	}
}
