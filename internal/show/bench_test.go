package show_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dal-runtime/dal/bundle"
	"github.com/dal-runtime/dal/internal/netcap/har"
	"github.com/dal-runtime/dal/internal/netcap/prompts"
	"github.com/dal-runtime/dal/internal/record"
	"github.com/dal-runtime/dal/internal/show"
)

// The large bundle of the benchmarks: 10,000 HTTP exchanges (one in ten
// an LLM call, with its prompts/ file) and 100 MB of stdout. It is
// written with the bundle package rather than recorded: recording 10,000
// requests and 100 MB of output would take minutes of the benchmark's
// time for nothing the page reads differently.
var large struct {
	once sync.Once
	path string
	err  error
}

const (
	largeEntries = 10000
	largeLogMB   = 100
)

func largeBundle(b *testing.B) string {
	b.Helper()
	large.once.Do(func() {
		dir, err := os.MkdirTemp("", "dal-show-bench-")
		if err != nil {
			large.err = err
			return
		}
		large.path, large.err = writeLargeBundle(filepath.Join(dir, "large"), largeLogMB)
	})
	if large.err != nil {
		b.Fatal(large.err)
	}
	return large.path
}

func writeLargeBundle(out string, logMB int) (string, error) {
	w, err := bundle.Create(out)
	if err != nil {
		return "", err
	}
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	env := record.RunEnv{Version: record.EnvVersion, Command: []string{"python3", "agent.py"}, Cwd: ".", Workspace: "/work/ws",
		Mode: "strict", Epoch: start, StartedAt: start, DurationMS: 600000}
	if err := w.WriteJSON("env.json", env); err != nil {
		return "", err
	}
	var entries []har.Entry
	nLLM := 0
	for i := range largeEntries {
		at := start.Add(time.Duration(i) * 60 * time.Millisecond)
		e := har.Entry{StartedDateTime: at, Time: 42,
			Request: har.EntryRequest{Method: "GET", URL: fmt.Sprintf("https://api.example.com/v1/items/%d?page=2", i), HTTPVersion: "HTTP/1.1",
				Headers: []har.NameValue{{Name: "Authorization", Value: har.Redacted}, {Name: "Accept", Value: "application/json"}}, HeadersSize: -1},
			Response: har.EntryResponse{Status: 200, StatusText: "OK", HTTPVersion: "HTTP/1.1", HeadersSize: -1,
				Headers: []har.NameValue{{Name: "Content-Type", Value: "application/json"}}},
			Timings: har.Timings{Blocked: -1, DNS: -1, Connect: -1, SSL: -1, Send: 1, Wait: 40, Receive: 1},
			Dal:     &har.EntryDal{Seq: i},
		}
		resp := fmt.Sprintf(`{"id":%d,"items":[%s]}`, i, strings.Repeat(`{"name":"item","value":12345},`, 30)+`{}`)
		if i%10 == 0 {
			nLLM++
			req := fmt.Sprintf(`{"model":"test-model","messages":[{"role":"system","content":"be brief"},{"role":"user","content":"question %d: %s"}]}`, i, strings.Repeat("lorem ipsum ", 40))
			e.Request.Method, e.Request.URL = "POST", "https://api.openai.com/v1/chat/completions"
			e.Request.PostData = &har.PostData{MimeType: "application/json", Text: req}
			e.Request.BodySize = int64(len(req))
			resp = fmt.Sprintf(`{"id":"c%d","model":"test-model","choices":[{"index":0,"message":{"role":"assistant","content":"answer %d"},"finish_reason":"stop"}],"usage":{"prompt_tokens":90,"completion_tokens":3,"total_tokens":93}}`, i, i)
		}
		e.Response.Content = har.Content{Size: int64(len(resp)), MimeType: "application/json", Text: resp}
		e.Response.BodySize = int64(len(resp))
		entries = append(entries, e)
	}
	var hb bytes.Buffer
	if err := har.Write(&hb, har.NewLog(entries, "bench")); err != nil {
		return "", err
	}
	if err := w.WriteFile("network.har", hb.Bytes()); err != nil {
		return "", err
	}
	for i := range entries {
		if p, ok := prompts.Extract(&entries[i]); ok {
			if err := w.WriteJSON(fmt.Sprintf("prompts/%04d.json", i/10+1), p); err != nil {
				return "", err
			}
		}
	}
	var log bytes.Buffer
	for n := 0; log.Len() < logMB<<20; n++ {
		fmt.Fprintf(&log, "%08d step done: the agent printed a line of about eighty bytes of text here\n", n)
	}
	if err := w.WriteFile("logs/stdout", log.Bytes()); err != nil {
		return "", err
	}
	if err := w.WriteFile("logs/stderr", []byte("warning: slow\n")); err != nil {
		return "", err
	}
	_, key, _ := ed25519.GenerateKey(nil)
	m := &bundle.Manifest{WorkflowID: "python3 agent.py", Config: bundle.Config{Model: bundle.Model{ID: "test-model", Provider: "openai"}, ExecutionMode: "strict"}}
	if err := w.Commit(m, key); err != nil {
		return "", err
	}
	return out, nil
}

// BenchmarkShowLargeBundle measures what dal-exec show does for the large
// bundle (verify excluded: bundle.Open is benchmarked by the bundle
// package): load it and write the page.
func BenchmarkShowLargeBundle(b *testing.B) {
	path := largeBundle(b)
	bd, err := bundle.Open(path, bundle.OpenOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer bd.Close()
	var size int
	for b.Loop() {
		v := show.Load(bd, "large", show.DefaultLimits)
		var cw countWriter
		if err := show.Write(&cw, &show.Page{Runs: []*show.View{v}}); err != nil {
			b.Fatal(err)
		}
		size = cw.n
	}
	b.ReportMetric(float64(size)/(1<<20), "page-MB")
}

type countWriter struct{ n int }

func (c *countWriter) Write(p []byte) (int, error) { c.n += len(p); return len(p), nil }

var _ io.Writer = (*countWriter)(nil)

var readyRE = regexp.MustCompile(`data-ready-ms="([0-9]+)"`)

// BenchmarkShowLargeBundleChromium opens the large bundle's page in
// headless Chromium (real time, no virtual time budget) and reports the
// page's own figure, ready-ms: from navigation start to the end of its
// first render (HTML parsed, data parsed, every panel built), read from
// the DOM Chromium dumps after the load event. It also reports the wall
// time of Chromium taking a screenshot of the page (wall-ms) beside the
// same for an empty page (empty-page-wall-ms), measured in the same run.
func BenchmarkShowLargeBundleChromium(b *testing.B) {
	if _, err := os.Stat("/usr/bin/chromium"); err != nil {
		b.Fatalf("/usr/bin/chromium is missing: install it with apt-get install -y chromium (%v)", err)
	}
	path := largeBundle(b)
	dir := b.TempDir()
	pageFile := filepath.Join(dir, "large.html")
	if code, so, se := dalExec("show", "--out", pageFile, path); code != 0 {
		// The bundle is signed by a throwaway key: shown with a notice.
		b.Fatalf("show: exit %d\n%s\n%s", code, so, se)
	}
	empty := filepath.Join(dir, "empty.html")
	if err := os.WriteFile(empty, []byte("<!DOCTYPE html><p>empty</p>"), 0o644); err != nil {
		b.Fatal(err)
	}
	// run opens page and returns the wall time and what Chromium printed:
	// with dump, the DOM after the load event; else it takes a screenshot,
	// which does not serialize the page's 16 MB of data back out.
	run := func(page string, dump bool) (time.Duration, []byte) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		what := "--screenshot=" + filepath.Join(b.TempDir(), "shot.png")
		if dump {
			what = "--dump-dom"
		}
		cmd := exec.CommandContext(ctx, "/usr/bin/chromium", "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
			"--disable-background-networking", "--disable-component-update", "--disable-sync", "--user-data-dir="+b.TempDir(),
			"--window-size=1440,1000", what, "file://"+page)
		var so bytes.Buffer
		cmd.Stdout = &so
		t0 := time.Now()
		if err := cmd.Run(); err != nil {
			b.Fatalf("chromium: %v", err)
		}
		return time.Since(t0), so.Bytes()
	}
	var ready, wall, base time.Duration
	for b.Loop() {
		_, dom := run(pageFile, true)
		m := readyRE.FindSubmatch(dom)
		if m == nil {
			b.Fatalf("the page did not render: %.500s", dom)
		}
		ms, _ := strconv.Atoi(string(m[1]))
		ready += time.Duration(ms) * time.Millisecond
		d, _ := run(pageFile, false)
		wall += d
		e, _ := run(empty, false)
		base += e
	}
	fi, _ := os.Stat(pageFile)
	b.ReportMetric(float64(ready.Milliseconds())/float64(b.N), "ready-ms")
	b.ReportMetric(float64(wall.Milliseconds())/float64(b.N), "wall-ms")
	b.ReportMetric(float64(base.Milliseconds())/float64(b.N), "empty-page-wall-ms")
	b.ReportMetric(float64(fi.Size())/(1<<20), "page-MB")
}

// TestLargeBundlePageIsBounded: the large bundle's page (with 8 MB of
// stdout here) stays small: the logs and bodies are cut. No time is
// asserted; the benchmarks measure.
func TestLargeBundlePageIsBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("writes and renders a large bundle (20 s): skipped under -short (testing.Short())")
	}
	t.Parallel()
	out, err := writeLargeBundle(filepath.Join(t.TempDir(), "large"), 8)
	if err != nil {
		t.Fatal(err)
	}
	bd, err := bundle.Open(out, bundle.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer bd.Close()
	v := show.Load(bd, "large", show.DefaultLimits)
	var buf bytes.Buffer
	if err := show.Write(&buf, &show.Page{Runs: []*show.View{v}}); err != nil {
		t.Fatal(err)
	}
	if len(v.HTTP) != largeEntries || len(v.LLM) != largeEntries/10 || v.HTTP[10].LLM != 1 || v.LLM[1].HTTP != 10 {
		t.Fatalf("%d exchanges, %d LLM calls", len(v.HTTP), len(v.LLM))
	}
	var stdout show.Log
	for _, l := range v.Logs {
		if l.Name == "stdout" {
			stdout = l
		}
	}
	if stdout.Size < 8<<20 || stdout.Omitted <= 0 || int64(len(stdout.Head)+len(stdout.Tail)) > show.DefaultLimits.LogBytes ||
		!strings.HasPrefix(stdout.Head, "00000000 step") || !strings.HasSuffix(stdout.Tail, "here\n") {
		t.Errorf("stdout: size %d, omitted %d, head %d B, tail %d B", stdout.Size, stdout.Omitted, len(stdout.Head), len(stdout.Tail))
	}
	if buf.Len() > 40<<20 {
		t.Errorf("the page is %d MB", buf.Len()>>20)
	}
	var p show.Page
	data := buf.String()
	data = data[strings.Index(data, `id="dal-data">`)+len(`id="dal-data">`):]
	data = data[:strings.Index(data, "</script>")]
	if err := json.Unmarshal([]byte(data), &p); err != nil || len(p.Runs[0].HTTP) != largeEntries {
		t.Errorf("the page's data: %v", err)
	}
}
