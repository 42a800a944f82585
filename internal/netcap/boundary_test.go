package netcap

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/dal-runtime/dal/internal/netcap/har"
)

// readAll reads a chunked response off c read by read until its last
// chunk, and returns what each read returned.
func readEach(t *testing.T, c net.Conn) []string {
	t.Helper()
	var reads []string
	var all strings.Builder
	buf := make([]byte, 64<<10)
	for !strings.HasSuffix(all.String(), "\r\n0\r\n\r\n") {
		n, err := c.Read(buf)
		if n > 0 {
			reads = append(reads, string(buf[:n]))
			all.Write(buf[:n])
		}
		if err != nil {
			t.Fatalf("after %d reads (%q): %v", len(reads), all.String(), err)
		}
	}
	return reads
}

// TestReadBoundaries: a client reading as fast as it can gets the
// response headers, every chunk and the last, empty chunk each as a read
// of its own, over HTTP and HTTPS, when recording from a server that sent
// the whole response in one write and when replaying without pacing.
func TestReadBoundaries(t *testing.T) {
	t.Parallel()
	events := sseEvents(8)
	head := "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
	whole := head + chunked(events, nil, "")
	up := newRawUpstream(t, func(_, _ int, _ *http.Request) (string, bool) { return whole, false })
	tlsUp := tlsUpstream(t, whole)
	chunks := make([]har.Chunk, len(events))
	for i, e := range events {
		chunks[i] = har.Chunk{Data: []byte(e)}
	}
	src := &fixedSource{served: har.Served{Status: 200, Streamed: true, Chunks: chunks,
		Header: http.Header{"Content-Type": {"text/event-stream"}}}}
	for _, tc := range []struct {
		name   string
		replay bool
		tls    bool
	}{
		{"record-http", false, false},
		{"record-https", false, true},
		{"replay-http", true, false},
		{"replay-https", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg := Config{}
			dst := up.addr()
			switch {
			case tc.replay:
				cfg.Source = src
			case tc.tls:
				cfg.UpstreamRoots = caPool(testCA(t))
				dst = tlsUp
			}
			r := newRig(t, cfg)
			for round := range 3 {
				c := dial(t, r.transparent(dst))
				if tc.tls {
					tc := tls.Client(c, &tls.Config{RootCAs: caPool(r.ca), ServerName: "127.0.0.1"})
					c = tc
				}
				if _, err := fmt.Fprintf(c, "GET /stream HTTP/1.1\r\nHost: %s\r\n\r\n", dst); err != nil {
					t.Fatal(err)
				}
				reads := readEach(t, c)
				want := []string{}
				for _, e := range events {
					want = append(want, fmt.Sprintf("%x\r\n%s\r\n", len(e), e))
				}
				want = append(want, "0\r\n\r\n")
				if len(reads) != len(want)+1 || !strings.HasPrefix(reads[0], "HTTP/1.1 200 OK\r\n") || !strings.HasSuffix(reads[0], "\r\n\r\n") {
					t.Fatalf("round %d: %d reads, want the headers and %d chunks each alone:\n%q", round, len(reads), len(want), reads)
				}
				for i, w := range want {
					if reads[i+1] != w {
						t.Errorf("round %d: read %d is %q, want %q", round, i+1, reads[i+1], w)
					}
				}
				c.Close()
			}
		})
	}
}

// tlsUpstream serves resp over TLS (a certificate from the test CA) to
// every request, in one write: one TLS record.
func tlsUpstream(t *testing.T, resp string) string {
	t.Helper()
	leaf, err := testCA(t).Leaf("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	l := tls.NewListener(listen(t), &tls.Config{Certificates: []tls.Certificate{*leaf}})
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				br := bufio.NewReader(c)
				for {
					if _, err := http.ReadRequest(br); err != nil {
						return
					}
					if _, err := io.WriteString(c, resp); err != nil {
						return
					}
				}
			}()
		}
	}()
	return l.Addr().String()
}
