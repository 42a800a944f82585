package netcap

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dal-runtime/dal/internal/golden"
	"github.com/dal-runtime/dal/internal/netcap/har"
)

// sseServer sends n events, each flushed on its own and each (after the
// first) only once the test says next, so that no two can merge on the
// way.
type sseServer struct {
	*httptest.Server
	next    chan struct{}
	flushes atomic.Int32
	conns   atomic.Int32
}

func newSSEServer(t *testing.T, n int) *sseServer {
	s := &sseServer{next: make(chan struct{})}
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Cache-Control", "no-cache")
		w.WriteHeader(http.StatusOK)
		for i := range n {
			if i > 0 {
				select {
				case <-s.next:
				case <-r.Context().Done():
					return
				}
			}
			io.WriteString(w, sseEvent(i))
			w.(http.Flusher).Flush()
			s.flushes.Add(1)
		}
	}))
	s.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			s.conns.Add(1)
		}
	}
	s.Start()
	t.Cleanup(s.Close)
	return s
}

func sseEvent(i int) string {
	return fmt.Sprintf("data: {\"choices\":[{\"delta\":{\"content\":\"token %d\"}}]}\n\n", i)
}

// readFrames sends GET url to the proxy at addr on a raw connection and
// returns the chunked-encoding frames of the response as they arrived,
// calling after(i) once frame i is in.
func readFrames(t *testing.T, addr, url string, after func(i int)) []string {
	t.Helper()
	conn := dial(t, addr)
	host := strings.SplitN(strings.TrimPrefix(url, "http://"), "/", 2)[0]
	fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: %s\r\nAccept: text/event-stream\r\n\r\n", url, host)
	br := bufio.NewReader(conn)
	code, h := readHead(t, br)
	if code != 200 || h.Get("Transfer-Encoding") != "chunked" || h.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("stream head: %d %v", code, h)
	}
	var frames []string
	for {
		f, err := readFrame(br)
		if err == io.EOF {
			return frames
		}
		if err != nil {
			t.Fatalf("after %d frames: %v", len(frames), err)
		}
		frames = append(frames, string(f))
		if after != nil {
			after(len(frames) - 1)
		}
	}
}

// TestSSEFrames: an event stream keeps its frame boundaries through the
// proxy when recording, and again when replayed from the record.
func TestSSEFrames(t *testing.T) {
	t.Parallel()
	const n = 5
	up := newSSEServer(t, n)
	url := up.URL + "/v1/chat/completions"
	want := make([]string, n)
	for i := range want {
		want[i] = sseEvent(i)
	}

	rec := newRig(t, Config{})
	frames := readFrames(t, rec.explicit(), url, func(i int) {
		if i < n-1 {
			up.next <- struct{}{}
		}
	})
	if up.flushes.Load() != n || !slices.Equal(frames, want) {
		t.Fatalf("recording: upstream flushed %d times, client saw %d frames %q, want %q", up.flushes.Load(), len(frames), frames, want)
	}
	x := rec.one()
	r := x.Response
	if !r.Streamed || len(r.Chunks) != n {
		t.Fatalf("recorded streamed=%v with %d chunks, want %d", r.Streamed, len(r.Chunks), n)
	}
	var joined []byte
	for i, c := range r.Chunks {
		if string(c.Data) != want[i] || (i > 0 && c.At < r.Chunks[i-1].At) {
			t.Errorf("chunk %d: %q at %v", i, c.Data, c.At)
		}
		joined = append(joined, c.Data...)
	}
	if !bytes.Equal(joined, r.Body) {
		t.Error("chunks do not add up to the body")
	}

	connsBefore := up.conns.Load()
	rp := newRig(t, Config{Source: newRecordedSource([]*har.Exchange{x})})
	replayed := readFrames(t, rp.explicit(), url, nil)
	if !slices.Equal(replayed, want) {
		t.Errorf("replay: client saw %d frames %q, want %q", len(replayed), replayed, want)
	}
	if got := up.conns.Load(); got != connsBefore {
		t.Errorf("replay opened %d connections to the upstream", got-connsBefore)
	}
	y := rp.one()
	if y.Error != "" || !y.Response.Streamed || len(y.Response.Chunks) != n || !bytes.Equal(y.Response.Body, r.Body) {
		t.Errorf("replayed record: error %q streamed %v chunks %d", y.Error, y.Response.Streamed, len(y.Response.Chunks))
	}
}

// TestReplayOffline: a replaying proxy answers every kind of connection
// from its Source and never connects anywhere.
func TestReplayOffline(t *testing.T) {
	t.Parallel()
	if _, err := New(Config{CA: testCA(t), Source: &fixedSource{}, Dial: (&net.Dialer{}).DialContext}); err == nil {
		t.Error("New accepted a dialer for a replaying proxy")
	}
	tw := newTripwire(t)
	_, port, _ := net.SplitHostPort(tw.addr())
	src := &fixedSource{served: har.Served{
		Status: 200, StatusText: "OK",
		Header: http.Header{"Content-Type": {"application/json"}},
		Chunks: []har.Chunk{{Data: []byte(`{"ok":true}`)}},
	}}
	rg := newRig(t, Config{Source: src})
	if rg.p.transport != nil || rg.p.dial != nil {
		t.Fatal("a replaying proxy holds a transport or a dialer")
	}
	roots := caPool(rg.ca)
	explicit := proxyClient(rg.explicit(), roots)
	transparent := directedClient(rg.transparent(tw.addr()), roots)
	cases := []struct {
		c   *http.Client
		url string
	}{
		{explicit, "http://" + tw.addr() + "/plain"},
		{explicit, "https://" + tw.addr() + "/tunnel"},
		{explicit, "https://api.openai.com/v1/models"},
		{transparent, "http://" + tw.addr() + "/mirror"},
		{transparent, "https://127.0.0.1:" + port + "/mirror-ip"},
		{transparent, "https://example.com:" + port + "/mirror-sni"},
	}
	for _, tc := range cases {
		resp, body := get(t, tc.c, tc.url)
		if resp.StatusCode != 200 || string(body) != `{"ok":true}` || resp.ContentLength != int64(len(body)) {
			t.Errorf("%s: %d %q (length %d)", tc.url, resp.StatusCode, body, resp.ContentLength)
		}
	}
	recs := rg.records()
	if len(recs) != len(cases) {
		t.Fatalf("%d records, want %d", len(recs), len(cases))
	}
	for i, x := range recs {
		if x.Error != "" || x.ServerAddr != "" || x.Response == nil || x.Request.URL != cases[i].url {
			t.Errorf("record %d: url %q error %q server %q", i, x.Request.URL, x.Error, x.ServerAddr)
		}
	}
	if n := tw.accepted.Load(); n != 0 {
		t.Errorf("the replaying proxy connected %d times", n)
	}
}

func TestReplayMiss(t *testing.T) {
	t.Parallel()
	rg := newRig(t, Config{Source: newRecordedSource(nil)})
	addr := rg.explicit()
	req, _ := http.NewRequest(http.MethodPost, "http://api.example.com/v1/chat/completions", strings.NewReader(`{"model":"m"}`))
	resp, body := do(t, proxyClient(addr, nil), req)
	if resp.StatusCode != http.StatusBadGateway || resp.Header.Get("X-Dal-Replay") != "miss" || resp.Header.Get("Content-Type") != "application/json" {
		t.Errorf("miss answered %d %v", resp.StatusCode, resp.Header)
	}
	golden.Check(t, filepath.Join("testdata", "replay-miss.json"), body)
	x := rg.one()
	if x.Response != nil || !strings.HasPrefix(x.Error, "replay miss: ") || string(x.Request.Body) != `{"model":"m"}` {
		t.Errorf("miss recorded as response %v error %q", x.Response, x.Error)
	}
	ev := rg.reports()
	if len(ev) != 1 || ev[0].Kind != KindReplayMiss || ev[0].Addr != addr {
		t.Fatalf("reports %v, want one replay miss", ev)
	}
	golden.Check(t, filepath.Join("testdata", "replay-miss.txt"), []byte(ev[0].Msg+"\n"))
}

// TestReplaySpeed: streamed chunks are paced at their recorded offsets
// divided by Speed, and not at all with Speed 0.
func TestReplaySpeed(t *testing.T) {
	t.Parallel()
	chunks := []har.Chunk{
		{At: 0, Data: []byte("data: a\n\n")},
		{At: 10 * time.Millisecond, Data: []byte("data: b\n\n")},
		{At: 40 * time.Millisecond, Data: []byte("data: c\n\n")},
	}
	for _, tc := range []struct {
		speed float64
		want  []time.Duration
	}{
		{0, nil},
		{1, []time.Duration{10 * time.Millisecond, 40 * time.Millisecond}},
		{2, []time.Duration{5 * time.Millisecond, 20 * time.Millisecond}},
	} {
		t.Run(fmt.Sprint(tc.speed), func(t *testing.T) {
			t.Parallel()
			src := &fixedSource{served: har.Served{
				Status: 200, Header: http.Header{"Content-Type": {"text/event-stream"}}, Chunks: chunks, Streamed: true,
			}}
			rg := newRig(t, Config{Source: src, Speed: tc.speed})
			var waits []time.Duration
			rg.p.pace = func(_ context.Context, _ time.Time, at time.Duration) error {
				waits = append(waits, at)
				return nil
			}
			frames := readFrames(t, rg.explicit(), "http://llm.example/v1/stream", nil)
			if len(frames) != len(chunks) {
				t.Errorf("%d frames, want %d", len(frames), len(chunks))
			}
			rg.shutdown()
			if !slices.Equal(waits, tc.want) {
				t.Errorf("paced at %v, want %v", waits, tc.want)
			}
		})
	}
	if _, err := New(Config{CA: testCA(t), Speed: -1}); err == nil {
		t.Error("New accepted a negative speed")
	}
}

// failingSource answers every request with the replay of a recorded
// failure.
type failingSource struct{ err string }

func (s failingSource) Next(req *har.Request) (*har.Served, error) {
	return nil, &har.RecordedFailure{Method: req.Method, URL: req.URL, Err: s.err}
}

// TestReplayRecordedFailure: an exchange that failed when recorded fails
// the same way on replay, and is not a miss.
func TestReplayRecordedFailure(t *testing.T) {
	t.Parallel()
	l := listen(t)
	dead := "http://" + l.Addr().String() + "/v1/models"
	l.Close()
	rec := newRig(t, Config{})
	recResp, recBody := get(t, proxyClient(rec.explicit(), nil), dead)
	x := rec.one()

	rp := newRig(t, Config{Source: failingSource{x.Error}})
	resp, body := get(t, proxyClient(rp.explicit(), nil), dead)
	if resp.StatusCode != recResp.StatusCode || !bytes.Equal(body, recBody) || resp.Header.Get("X-Dal-Record") != "error" {
		t.Errorf("replayed failure: %d %q, recorded %d %q", resp.StatusCode, body, recResp.StatusCode, recBody)
	}
	y := rp.one()
	if y.Error != x.Error || y.Response != nil {
		t.Errorf("replayed record: error %q response %v, want error %q", y.Error, y.Response, x.Error)
	}
	if ev := rp.reports(); len(ev) != 0 {
		t.Errorf("a recorded failure was reported: %v", ev)
	}
}
