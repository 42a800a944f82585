package record

import (
	"crypto/ed25519"
	"crypto/rand"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dal-runtime/dal/bundle"
	"github.com/dal-runtime/dal/internal/netcap/har"
	"github.com/dal-runtime/dal/internal/runner"
	"github.com/dal-runtime/dal/internal/sandbox"
	"github.com/dal-runtime/dal/vclock"
)

// benchExchanges are n chat completions as bench/agents/llm_calls.py
// makes them against e2e/testdata/llm_server.py: every third streamed
// (eight events and [DONE], one chunk each), the rest plain.
func benchExchanges(n int) []*har.Exchange {
	started := time.Date(2026, 11, 24, 8, 0, 0, 0, time.UTC)
	xs := make([]*har.Exchange, n)
	for i := range xs {
		stream := i%3 == 2
		body := fmt.Sprintf(`{"model": "test-model", "temperature": 0, "messages": [{"role": "user", "content": "turn %d after %d"}]}`, i, 9000+i)
		if stream {
			body = fmt.Sprintf(`{"model": "test-model", "stream": true, "messages": [{"role": "user", "content": "turn %d after %d"}]}`, i, 9000+i)
		}
		x := &har.Exchange{Seq: i, Started: started.Add(time.Duration(i) * time.Millisecond), Via: "proxy", ServerAddr: "127.0.0.1:8080",
			Send: 100 * time.Microsecond, Wait: 700 * time.Microsecond, Receive: 50 * time.Microsecond,
			Request: har.Request{Method: "POST", URL: "http://127.0.0.1:8080/v1/chat/completions", Proto: "HTTP/1.1", Body: []byte(body),
				Header: http.Header{"Accept-Encoding": {"identity"}, "Authorization": {"Bearer sk-bench-7f3e0123456789"}, "Connection": {"close"},
					"Content-Length": {fmt.Sprint(len(body))}, "Content-Type": {"application/json"}, "Host": {"127.0.0.1:8080"}, "User-Agent": {"Python-urllib/3.11"}}}}
		h := http.Header{"Content-Type": {"application/json"}, "Date": {"Tue, 24 Nov 2026 08:55:26 GMT"}, "Server": {"BaseHTTP/0.6 Python/3.11.7"}}
		text := fmt.Sprintf("reply %d to: turn %d after %d", 9001+i, i, 9000+i)
		if !stream {
			b := fmt.Sprintf(`{"id": "chatcmpl-%d", "object": "chat.completion", "created": 1767225600, "model": "test-model", "system_fingerprint": "fp_test", "choices": [{"index": 0, "message": {"role": "assistant", "content": %q}, "finish_reason": "stop"}], "usage": {"prompt_tokens": 9, "completion_tokens": 6, "total_tokens": 15}}`, i, text)
			h.Set("Content-Length", fmt.Sprint(len(b)))
			x.Response = &har.Response{Status: 200, StatusText: "OK", Proto: "HTTP/1.1", Header: h, Body: []byte(b)}
			xs[i] = x
			continue
		}
		h.Set("Content-Type", "text/event-stream")
		h.Set("Cache-Control", "no-cache")
		h.Set("Set-Cookie", "session=abcdef0123456789; Path=/")
		r := &har.Response{Status: 200, StatusText: "OK", Proto: "HTTP/1.1", Header: h, Streamed: true}
		var all []byte
		for j, w := range strings.Split(text, " ") {
			ev := fmt.Sprintf(`data: {"id": "chatcmpl-%d", "object": "chat.completion.chunk", "created": 1767225600, "model": "test-model", "system_fingerprint": "fp_test", "choices": [{"index": 0, "delta": {"content": %q}, "finish_reason": null}]}`+"\n\n", i, " "[:min(j, 1)]+w)
			all = append(all, ev...)
			r.Chunks = append(r.Chunks, har.Chunk{At: time.Duration(j+1) * 60 * time.Microsecond, Data: []byte(ev)})
		}
		for _, ev := range []string{fmt.Sprintf(`data: {"id": "chatcmpl-%d", "object": "chat.completion.chunk", "created": 1767225600, "model": "test-model", "system_fingerprint": "fp_test", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}`+"\n\n", i), "data: [DONE]\n\n"} {
			all = append(all, ev...)
			r.Chunks = append(r.Chunks, har.Chunk{At: time.Duration(len(r.Chunks)+1) * 60 * time.Microsecond, Data: []byte(ev)})
		}
		r.Body = all
		x.Response = r
		xs[i] = x
	}
	return xs
}

// BenchmarkWriteBundle is what record does with an agent's 100 LLM calls
// once the agent has exited: network.har and prompts/ written into the
// bundle's staging (writeNetwork, which record runs beside capture), the
// other records (writeRecords: the secret scrub, env.json, prov.json, ...)
// and the commit (every file hashed and synced, the manifest signed, the
// bundle published). Its metrics are each step's time per call (go test
// ./internal/record -run '^$' -bench WriteBundle).
func BenchmarkWriteBundle(b *testing.B) {
	const calls = 100
	xs := benchExchanges(calls)
	dir := b.TempDir()
	_, key, _ := ed25519.GenerateKey(rand.Reader)
	ws, stage := filepath.Join(dir, "ws"), filepath.Join(dir, "stage")
	os.MkdirAll(ws, 0o755)
	os.MkdirAll(stage, 0o755)
	var network, records, commit time.Duration
	for i := 0; b.Loop(); i++ {
		b.StopTimer()
		n, err := NewNetwork(filepath.Join(dir, "net", fmt.Sprint(i)), NetworkOptions{SecretValues: []string{"sk-bench-7f3e0123456789"}}, nil, nil, io.Discard)
		if err != nil {
			b.Fatal(err)
		}
		out := filepath.Join(dir, fmt.Sprint(i))
		w, err := bundle.Create(out)
		if err != nil {
			b.Fatal(err)
		}
		logs, err := createLogs(filepath.Join(w.Dir(), "logs"))
		if err != nil {
			b.Fatal(err)
		}
		logs.stdout.WriteString("calls 100\n")
		r := &recording{o: Options{NoApply: true}, ws: ws, cwd: ".", out: out, key: key, w: w, stage: stage, logs: logs, nw: n,
			spec: runner.Spec{Args: []string{"python3", "llm_calls.py"}, Mode: "strict", KeepEnv: []string{"OPENAI_API_KEY"}, Log: io.Discard},
			cfg:  sandbox.Config{Workspace: ws, Staging: filepath.Join(stage, "sandbox")}}
		r.res = &runner.Result{Wall: time.Second, Env: runner.Env{"DAL_MODE": "strict", "OPENAI_API_KEY": "sk-bench-7f3e0123456789"},
			Rails: []string{"DAL_MODE"}, Clock: &vclock.File{Version: 1, Mode: "strict"}}
		r.env = newRunEnv(&r.spec, r.res, ws, ".", time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), nil)
		r.env.Network = &n.env
		b.StartTimer()
		t0 := time.Now()
		if err := writeNetwork(w.Dir(), n, xs); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if err := r.writeRecords(); err != nil {
			b.Fatal(err)
		}
		t2 := time.Now()
		if err := r.commit(); err != nil {
			b.Fatal(err)
		}
		network, records, commit = network+t1.Sub(t0), records+t2.Sub(t1), commit+time.Since(t2)
		b.StopTimer()
		os.RemoveAll(out)
		b.StartTimer()
	}
	per := func(d time.Duration) float64 { return float64(d.Microseconds()) / float64(b.N*calls) }
	b.ReportMetric(per(network), "µs-network/call")
	b.ReportMetric(per(records), "µs-records/call")
	b.ReportMetric(per(commit), "µs-commit/call")
	b.ReportMetric(0, "ns/op")
}
