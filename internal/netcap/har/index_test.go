package har

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/dal-runtime/dal/internal/golden"
)

func indexOf(t *testing.T, xs ...*Exchange) *Index {
	t.Helper()
	l := NewLog(nil, "test")
	for _, x := range xs {
		l.Entries = append(l.Entries, mustEntry(t, x, nil))
	}
	return NewIndex(l, nil, nil)
}

func TestIndexFIFO(t *testing.T) {
	t.Parallel()
	req := jsonReq("POST", "https://api.example.com/v1/chat/completions", chatBody)
	other := Request{Method: "GET", URL: "https://api.example.com/v1/models"}
	ix := indexOf(t,
		exchange(0, req, okResp("application/json", `{"n":1}`)),
		exchange(1, other, okResp("application/json", `{"models":[]}`)),
		exchange(2, req, okResp("application/json", `{"n":2}`)),
		exchange(3, req, okResp("application/json", `{"n":3}`)),
	)
	for n := 1; n <= 3; n++ {
		s, err := ix.Next(&req)
		if err != nil {
			t.Fatalf("request #%d: %v", n, err)
		}
		if got, want := string(s.Chunks[0].Data), fmt.Sprintf(`{"n":%d}`, n); got != want {
			t.Errorf("request #%d served %s, want %s", n, got, want)
		}
	}
	_, err := ix.Next(&req)
	var miss *MissError
	if !errors.As(err, &miss) || miss.Recorded != 3 || miss.Request != 4 || miss.Seq != 3 {
		t.Fatalf("4th request: %v (%+v), want a miss recorded 3 times, #4, nearest seq 3", err, miss)
	}
	if want := "POST https://api.example.com/v1/chat/completions was recorded 3 times, this is request #4"; err.Error() != want {
		t.Errorf("error %q\nwant  %q", err, want)
	}
	if u := ix.Unused(); !slices.Equal(u, []int{1}) {
		t.Errorf("unused %v, want [1]", u)
	}
}

func TestIndexConcurrentFIFO(t *testing.T) {
	t.Parallel()
	req := Request{Method: "GET", URL: "https://x.test/poll"}
	var xs []*Exchange
	for i := range 50 {
		xs = append(xs, exchange(i, req, okResp("text/plain", fmt.Sprint(i))))
	}
	ix := indexOf(t, xs...)
	var mu sync.Mutex
	seen := map[int]bool{}
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() {
			r := req
			s, err := ix.Next(&r)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			seen[s.Seq] = true
			mu.Unlock()
		})
	}
	wg.Wait()
	if len(seen) != 50 || len(ix.Unused()) != 0 {
		t.Errorf("served %d distinct entries, %d unused; want 50, 0", len(seen), len(ix.Unused()))
	}
}

func TestIndexRecordedFailure(t *testing.T) {
	t.Parallel()
	req := Request{Method: "GET", URL: "https://flaky.test/"}
	failed := exchange(0, req, nil)
	failed.Error = "dial tcp: connection refused"
	ix := indexOf(t, failed, exchange(1, req, okResp("text/plain", "ok")))
	_, err := ix.Next(&req)
	var rf *RecordedFailure
	if !errors.As(err, &rf) || rf.Seq != 0 {
		t.Fatalf("first request: %v, want the recorded failure", err)
	}
	if want := "GET https://flaky.test/ failed when it was recorded (seq 0): dial tcp: connection refused"; err.Error() != want {
		t.Errorf("error %q, want %q", err, want)
	}
	if s, err := ix.Next(&req); err != nil || string(s.Chunks[0].Data) != "ok" {
		t.Fatalf("the retry: %v %v, want the recorded success", s, err)
	}
}

func TestServedHeaders(t *testing.T) {
	t.Parallel()
	head := Request{Method: "HEAD", URL: "https://x.test/file"}
	ix := indexOf(t,
		exchange(0, head, &Response{Status: 200, Header: hdr("Content-Length", "1234", "Content-Type", "text/plain")}),
		exchange(1, Request{Method: "GET", URL: "https://x.test/nc"}, &Response{Status: 304, Header: hdr("Etag", `"x"`)}),
	)
	s, err := ix.Next(&head)
	if err != nil {
		t.Fatal(err)
	}
	if s.Header.Get("Content-Length") != "1234" || s.StatusText != "OK" {
		t.Errorf("HEAD served Content-Length %q status %q, want the recorded 1234 OK", s.Header.Get("Content-Length"), s.StatusText)
	}
	s, err = ix.Next(&Request{Method: "GET", URL: "https://x.test/nc"})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := s.Header["Content-Length"]; ok || s.Status != 304 {
		t.Errorf("304 served with Content-Length %q", s.Header.Get("Content-Length"))
	}
}

// The drift report a user sees when replay misses: golden text.
func TestMissDiagnostics(t *testing.T) {
	t.Parallel()
	chat := func(content string, temp string) Request {
		return jsonReq("POST", "https://api.openai.com/v1/chat/completions?temperature="+temp+"&api-version=2",
			`{"model":"gpt-4o","messages":[{"role":"system","content":"be brief"},{"role":"user","content":"`+content+`"}],"api_key":"sk-body-0123456789"}`,
			"Authorization", "Bearer sk-header-0123456789")
	}
	recorded := []*Exchange{
		exchange(0, chat("hi", "0.7"), okResp("application/json", `{}`)),
		exchange(1, Request{Method: "GET", URL: "https://api.openai.com/v1/models"}, okResp("application/json", `{}`)),
		exchange(2, Request{Method: "POST", URL: "https://files.test/upload", Header: hdr("Content-Type", "text/plain"), Body: []byte("hello world")}, okResp("text/plain", "")),
		exchange(3, Request{Method: "POST", URL: "https://auth.test/token", Header: hdr("Content-Type", "application/x-www-form-urlencoded"), Body: []byte("grant_type=client_credentials&scope=a")}, okResp("text/plain", "")),
	}
	long := strings.Repeat("long message ", 10)
	cases := []struct {
		name string
		req  Request
	}{
		{"message changed", chat("hello", "0.7")},
		{"message and query changed", chat("hello", "0.2")},
		{"long value", chat(long, "0.7")},
		{"message added", jsonReq("POST", "https://api.openai.com/v1/chat/completions?temperature=0.7&api-version=2",
			`{"model":"gpt-4o","messages":[{"role":"system","content":"be brief"},{"role":"user","content":"hi"},{"role":"user","content":"more"}],"api_key":"sk-other-0123456789"}`)},
		{"method", Request{Method: "DELETE", URL: "https://api.openai.com/v1/models"}},
		{"path", Request{Method: "GET", URL: "https://api.openai.com/v1/models/gpt-4o?key=AIzaSECRETSECRET"}},
		{"raw body", Request{Method: "POST", URL: "https://files.test/upload", Header: hdr("Content-Type", "text/plain"), Body: []byte("hello there")}},
		{"form", Request{Method: "POST", URL: "https://auth.test/token", Header: hdr("Content-Type", "application/x-www-form-urlencoded"), Body: []byte("grant_type=client_credentials&scope=b&client_secret=SECRETSECRET")}},
		{"host", Request{Method: "GET", URL: "https://elsewhere.test/"}},
	}
	var out strings.Builder
	for _, tc := range cases {
		ix := indexOf(t, recorded...)
		_, err := ix.Next(&tc.req)
		var miss *MissError
		if !errors.As(err, &miss) {
			t.Fatalf("%s: %v, want a miss", tc.name, err)
		}
		fmt.Fprintf(&out, "== %s\n%s\n", tc.name, err)
		for _, d := range miss.Diffs {
			fmt.Fprintf(&out, "  %s\n", d)
		}
	}
	empty := NewIndex(NewLog(nil, "test"), nil, nil)
	_, err := empty.Next(&Request{Method: "GET", URL: "https://x.test/"})
	fmt.Fprintf(&out, "== empty log\n%s\n", err)

	text := out.String()
	for _, s := range []string{"sk-body", "sk-header", "sk-other", "AIzaSECRET", "SECRETSECRET"} {
		if strings.Contains(text, s) {
			t.Errorf("a miss report shows the secret %q", s)
		}
	}
	golden.Check(t, filepath.Join("testdata", "miss.golden"), []byte(text))
}
