package prompts

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dal-runtime/dal/internal/golden"
	"github.com/dal-runtime/dal/internal/netcap/har"
	"github.com/klauspost/compress/gzip"
)

const (
	openaiKey    = "sk-proj-FIXTURESECRET0123456789"
	anthropicKey = "sk-ant-api03-FIXTURESECRET-abcdefghij"
)

func fixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "fixtures", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func gzipped(t *testing.T, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	if _, err := w.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// entry records a fixture exchange through har.FromExchange, as the
// proxy does. A stream is cut every 97 bytes, across its events.
func entry(t *testing.T, seq int, url string, reqHeader http.Header, reqBody []byte, status int, ct string, respBody []byte, stream, gz bool) *har.Entry {
	t.Helper()
	reqHeader.Set("Content-Type", "application/json")
	resp := &har.Response{Status: status, Proto: "HTTP/1.1", Header: http.Header{"Content-Type": {ct}}, Streamed: stream}
	body := respBody
	if gz {
		body = gzipped(t, respBody)
		resp.Header.Set("Content-Encoding", "gzip")
	}
	resp.Body = body
	if stream {
		for i := 0; i < len(body); i += 97 {
			resp.Chunks = append(resp.Chunks, har.Chunk{At: time.Duration(i) * time.Microsecond, Data: body[i:min(i+97, len(body))]})
		}
	}
	x := &har.Exchange{
		Seq: seq, Started: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC),
		Request:  har.Request{Method: "POST", URL: url, Proto: "HTTP/1.1", Header: reqHeader, Body: reqBody},
		Response: resp, Via: "connect",
	}
	e, err := har.FromExchange(x, nil)
	if err != nil {
		t.Fatal(err)
	}
	return &e
}

func openaiHeaders() http.Header {
	return http.Header{"Authorization": {"Bearer " + openaiKey}, "User-Agent": {"OpenAI/Python 1.66.0"}}
}

func anthropicHeaders() http.Header {
	return http.Header{"X-Api-Key": {anthropicKey}, "Anthropic-Version": {"2023-06-01"}}
}

func TestExtractGolden(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name     string
		url      string
		header   func() http.Header
		ct       string
		respFile string
		stream   bool
		gzip     bool
	}{
		{"chat", "https://api.openai.com/v1/chat/completions", openaiHeaders, "application/json", "chat.response.json", false, false},
		{"chat-stream", "http://localhost:11434/v1/chat/completions", openaiHeaders, "text/event-stream; charset=utf-8", "chat-stream.response.sse", true, true},
		{"responses", "https://api.openai.com/v1/responses", openaiHeaders, "application/json", "responses.response.json", false, true},
		{"responses-stream", "https://api.openai.com/v1/responses", openaiHeaders, "text/event-stream; charset=utf-8", "responses-stream.response.sse", true, false},
		{"messages", "https://api.anthropic.com/v1/messages", anthropicHeaders, "application/json", "messages.response.json", false, false},
		{"messages-stream", "https://api.anthropic.com/v1/messages?beta=true", anthropicHeaders, "text/event-stream; charset=utf-8", "messages-stream.response.sse", true, false},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := entry(t, i, tc.url, tc.header(), fixture(t, tc.name+".request.json"), 200, tc.ct, fixture(t, tc.respFile), tc.stream, tc.gzip)
			p, ok := Extract(e)
			if !ok {
				t.Fatalf("%s is not recognised as an LLM call", tc.name)
			}
			got, err := Marshal(p)
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range []string{openaiKey, anthropicKey, "FIXTURESECRET"} {
				if bytes.Contains(got, []byte(s)) {
					t.Errorf("the prompt contains the secret %q", s)
				}
			}
			golden.Check(t, filepath.Join("testdata", "golden", tc.name+".json"), got)
		})
	}
}

func TestExtractNotLLM(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, method, url, body string
	}{
		{"models list", "GET", "https://api.openai.com/v1/models", ""},
		{"embeddings", "POST", "https://api.openai.com/v1/embeddings", `{"model":"text-embedding-3-small","input":"x"}`},
		{"count tokens", "POST", "https://api.anthropic.com/v1/messages/count_tokens", `{"model":"claude","messages":[]}`},
		{"chat not JSON", "POST", "https://api.openai.com/v1/chat/completions", `model=x`},
		{"chat without messages", "POST", "https://api.openai.com/v1/chat/completions", `{"model":"x"}`},
		{"discord message", "POST", "https://discord.com/api/v10/channels/1/messages", `{"content":"hello"}`},
		{"other", "POST", "https://example.com/api", `{"messages":[]}`},
	}
	for _, tc := range cases {
		x := &har.Exchange{Request: har.Request{Method: tc.method, URL: tc.url, Header: http.Header{"Content-Type": {"application/json"}}, Body: []byte(tc.body)},
			Response: &har.Response{Status: 200, Header: http.Header{}}}
		e, err := har.FromExchange(x, nil)
		if err != nil {
			t.Fatal(err)
		}
		if p, ok := Extract(&e); ok {
			t.Errorf("%s: extracted %+v", tc.name, p)
		}
	}
	if _, ok := Extract(nil); ok {
		t.Errorf("Extract(nil) found a call")
	}
}

func TestExtractProviders(t *testing.T) {
	t.Parallel()
	chat := []byte(`{"model":"llama3.1","messages":[{"role":"user","content":"hi"}]}`)
	msgs := []byte(`{"model":"claude-3-5-haiku","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`)
	cases := []struct {
		url, provider, api string
		body               []byte
	}{
		{"https://api.openai.com/v1/chat/completions", "openai", ChatCompletions, chat},
		{"http://127.0.0.1:8000/v1/chat/completions/", "openai-compatible", ChatCompletions, chat},
		{"https://openrouter.ai/api/v1/chat/completions", "openai-compatible", ChatCompletions, chat},
		{"https://api.anthropic.com/v1/messages", "anthropic", Messages, msgs},
		{"http://localhost:4000/anthropic/v1/messages", "anthropic", Messages, msgs},
		{"http://localhost:8080/v1/responses", "openai-compatible", Responses, []byte(`{"model":"gpt-oss","input":"hi"}`)},
	}
	for _, tc := range cases {
		e := entry(t, 0, tc.url, http.Header{}, tc.body, 200, "application/json", []byte(`{}`), false, false)
		p, ok := Extract(e)
		if !ok || p.Provider != tc.provider || p.API != tc.api {
			t.Errorf("%s: %v %+v, want %s %s", tc.url, ok, p, tc.provider, tc.api)
		}
	}
}

func TestExtractErrors(t *testing.T) {
	t.Parallel()
	body := []byte(`{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}],"stream":true}`)
	e := entry(t, 4, "https://api.openai.com/v1/chat/completions", openaiHeaders(), body, 401, "application/json",
		[]byte(`{"error":{"message":"Incorrect API key provided: sk-proj-****6789.","type":"invalid_request_error","code":"invalid_api_key"}}`), false, false)
	p, ok := Extract(e)
	if !ok || p.Status != 401 || p.Response.Error != "Incorrect API key provided: sk-proj-****6789." || !p.Stream || p.Model != "gpt-4o" {
		t.Errorf("error response: %v %+v", ok, p)
	}

	x := &har.Exchange{Seq: 5, Request: har.Request{Method: "POST", URL: "https://api.anthropic.com/v1/messages",
		Header: http.Header{"Content-Type": {"application/json"}}, Body: []byte(`{"model":"claude","max_tokens":5,"messages":[]}`)},
		Error: "dial tcp: lookup api.anthropic.com: no such host"}
	fe, err := har.FromExchange(x, nil)
	if err != nil {
		t.Fatal(err)
	}
	p, ok = Extract(&fe)
	if !ok || p.Status != 0 || p.Response.Error != x.Error || p.Seq != 5 {
		t.Errorf("failed exchange: %v %+v", ok, p)
	}
}

func TestWriteAndTotals(t *testing.T) {
	t.Parallel()
	ps := []*Prompt{
		{Seq: 9, API: Messages, Usage: Usage{InputTokens: 100, OutputTokens: 7}, Parameters: map[string]json.RawMessage{}},
		{Seq: 2, API: ChatCompletions, Usage: Usage{InputTokens: 10, OutputTokens: 3}, Parameters: map[string]json.RawMessage{"b": json.RawMessage(`1`), "a": json.RawMessage(`"x"`)}},
		{Seq: 5, API: Responses, Usage: Usage{InputTokens: 1, OutputTokens: 1}},
	}
	dir := filepath.Join(t.TempDir(), "prompts")
	if err := Write(dir, ps); err != nil {
		t.Fatal(err)
	}
	for i, seq := range []int{2, 5, 9} {
		b, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("%04d.json", i+1)))
		if err != nil {
			t.Fatal(err)
		}
		var p Prompt
		if err := json.Unmarshal(b, &p); err != nil || p.Seq != seq {
			t.Errorf("%04d.json holds seq %d (%v), want %d", i+1, p.Seq, err, seq)
		}
		if i == 0 && !strings.Contains(string(b), "\"parameters\": {\n    \"a\": \"x\",\n    \"b\": 1\n  }") {
			t.Errorf("parameters are not written sorted and indented:\n%s", b)
		}
	}
	if in, out := Totals(ps); in != 111 || out != 11 {
		t.Errorf("Totals = %d, %d, want 111, 11", in, out)
	}
	if err := Write(filepath.Join(t.TempDir(), "none"), nil); err != nil {
		t.Fatal(err)
	}
}

func TestParseSSE(t *testing.T) {
	t.Parallel()
	got := parseSSE([]byte(": comment\r\nevent: a\r\ndata: 1\r\ndata:2\r\n\r\ndata: x\n\nevent: no-data\n\ndata: tail"))
	want := []event{{"a", []byte("1\n2")}, {"", []byte("x")}, {"", []byte("tail")}}
	if len(got) != len(want) {
		t.Fatalf("got %d events %q, want %d", len(got), got, len(want))
	}
	for i := range want {
		if got[i].name != want[i].name || !bytes.Equal(got[i].data, want[i].data) {
			t.Errorf("event %d = %q %q, want %q %q", i, got[i].name, got[i].data, want[i].name, want[i].data)
		}
	}
}

func TestStreamEdgeCases(t *testing.T) {
	t.Parallel()
	sseOf := func(events ...string) []byte {
		var b strings.Builder
		for _, e := range events {
			b.WriteString("data: " + e + "\n\n")
		}
		return []byte(b.String())
	}
	cases := []struct {
		name, url, req string
		resp           []byte
		want           Response
		usage          Usage
		chunks         int
	}{
		{
			name: "responses function call from deltas",
			url:  "https://api.openai.com/v1/responses",
			req:  `{"model":"gpt-4.1","input":"x","stream":true}`,
			resp: sseOf(
				`{"type":"response.created","response":{"id":"resp_1","model":"gpt-4.1","status":"in_progress"}}`,
				`{"type":"response.output_item.added","output_index":1,"item":{"type":"function_call","call_id":"call_1","name":"f","arguments":""}}`,
				`{"type":"response.function_call_arguments.delta","output_index":1,"delta":"{\"a\":"}`,
				`{"type":"response.function_call_arguments.delta","output_index":1,"delta":"1}"}`,
				`{"type":"response.incomplete","response":{"id":"resp_1","status":"incomplete","incomplete_details":{"reason":"max_output_tokens"},"usage":{"input_tokens":5,"output_tokens":7}}}`,
			),
			want:   Response{ToolCalls: []ToolCall{{ID: "call_1", Type: "function_call", Name: "f", Arguments: `{"a":1}`}}, FinishReason: "max_output_tokens", ID: "resp_1"},
			usage:  Usage{InputTokens: 5, OutputTokens: 7, TotalTokens: 12},
			chunks: 5,
		},
		{
			name: "anthropic tool without input deltas, and an error event",
			url:  "https://api.anthropic.com/v1/messages",
			req:  `{"model":"claude","max_tokens":5,"messages":[],"stream":true}`,
			resp: sseOf(
				`{"type":"message_start","message":{"id":"msg_1","model":"claude-x","usage":{"input_tokens":3,"cache_read_input_tokens":2,"output_tokens":1}}}`,
				`{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_1","name":"now","input":{}}}`,
				`{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`,
			),
			want:   Response{ToolCalls: []ToolCall{{ID: "toolu_1", Type: "tool_use", Name: "now", Arguments: "{}"}}, ID: "msg_1", Error: "Overloaded"},
			usage:  Usage{InputTokens: 5, OutputTokens: 1, TotalTokens: 6},
			chunks: 3,
		},
		{
			name: "chat stream without usage, content parts",
			url:  "http://localhost:8000/v1/chat/completions",
			req:  `{"model":"m","messages":[{"role":"user","content":"x"}],"stream":true}`,
			resp: sseOf(
				`{"id":"c","model":"m","choices":[{"index":0,"delta":{"content":"a"}},{"index":1,"delta":{"content":"IGNORED"}}]}`,
				`{"id":"c","choices":[{"index":0,"delta":{"content":[{"type":"text","text":"b"}]},"finish_reason":"length"}]}`,
				`[DONE]`,
			),
			want:   Response{Text: "ab", FinishReason: "length", ID: "c"},
			chunks: 2,
		},
	}
	for _, tc := range cases {
		e := entry(t, 0, tc.url, http.Header{}, []byte(tc.req), 200, "text/event-stream", tc.resp, true, false)
		p, ok := Extract(e)
		if !ok {
			t.Fatalf("%s: not extracted", tc.name)
		}
		got, _ := json.Marshal(p.Response)
		want, _ := json.Marshal(tc.want)
		if !bytes.Equal(got, want) || p.Usage != tc.usage || p.Chunks != tc.chunks || !p.Stream {
			t.Errorf("%s:\nresponse %s usage %+v chunks %d\nwant     %s usage %+v chunks %d", tc.name, got, p.Usage, p.Chunks, want, tc.usage, tc.chunks)
		}
	}
}

func TestReadDirAndDiff(t *testing.T) {
	t.Parallel()
	mk := func(seq int, content, text string) *Prompt {
		return &Prompt{Seq: seq, Provider: "openai", API: ChatCompletions, Model: "m", Parameters: map[string]json.RawMessage{"temperature": json.RawMessage(`0`)},
			Messages: json.RawMessage(`[{"role":"user","content":"` + content + `"}]`), Response: Response{Text: text}}
	}
	recorded := []*Prompt{mk(0, "hi", "hello"), mk(3, "more", "sure")}
	dir := filepath.Join(t.TempDir(), "prompts")
	if err := Write(dir, recorded); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "README"), []byte("not a prompt"), 0o644); err != nil {
		t.Fatal(err)
	}
	back, err := ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if d := Diff(recorded, back); d != "" || len(back) != 2 {
		t.Fatalf("written and read back differ: %s (%d prompts)", d, len(back))
	}
	cases := []struct {
		name string
		got  []*Prompt
		want string
	}{
		{"same but seq", []*Prompt{mk(1, "hi", "hello"), mk(7, "more", "sure")}, ""},
		{"message", []*Prompt{mk(0, "hi", "hello"), mk(3, "less", "sure")}, `prompts/0002.json differs at $.messages[0].content: recorded "more", replayed "less"`},
		{"response", []*Prompt{mk(0, "hi", "bye"), mk(3, "more", "sure")}, `prompts/0001.json differs at $.response.text: recorded "hello", replayed "bye"`},
		{"fewer", []*Prompt{mk(0, "hi", "hello")}, "the replay made 1 LLM call(s), the recording 2"},
		{"parameter", func() []*Prompt {
			p := mk(0, "hi", "hello")
			p.Parameters["seed"] = json.RawMessage(`1`)
			return []*Prompt{p, mk(3, "more", "sure")}
		}(), `prompts/0001.json differs at $.parameters.seed: recorded none, replayed 1`},
	}
	for _, tc := range cases {
		if got := Diff(back, tc.got); got != tc.want {
			t.Errorf("%s: Diff = %q, want %q", tc.name, got, tc.want)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "0003.json"), []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadDir(dir); err == nil || !strings.Contains(err.Error(), "prompts/0003.json is not a prompt") {
		t.Errorf("a broken prompt file reads as %v", err)
	}
}

// TestExtractClosedEarly: of a stream the client closed early, the prompt
// holds the events it read (its first client_closed.chunks chunks), not
// those dal read from the server after them; without client_closed, all.
func TestExtractClosedEarly(t *testing.T) {
	events := bytes.SplitAfter(fixture(t, "chat-stream.response.sse"), []byte("\n\n"))
	x := &har.Exchange{
		Request: har.Request{Method: "POST", URL: "https://api.openai.com/v1/chat/completions", Proto: "HTTP/1.1",
			Header: openaiHeaders(), Body: fixture(t, "chat-stream.request.json")},
		Response: &har.Response{Status: 200, Proto: "HTTP/1.1", Header: http.Header{"Content-Type": {"text/event-stream"}}, Streamed: true},
	}
	for _, e := range events {
		x.Response.Body = append(x.Response.Body, e...)
		x.Response.Chunks = append(x.Response.Chunks, har.Chunk{Data: e})
	}
	extract := func(cc *har.ClientClose) *Prompt {
		t.Helper()
		x.ClientClosed = cc
		e, err := har.FromExchange(x, nil)
		if err != nil {
			t.Fatal(err)
		}
		p, ok := Extract(&e)
		if !ok {
			t.Fatal("not an LLM call")
		}
		return p
	}
	whole := extract(nil)
	if whole.Chunks < 3 {
		t.Fatalf("the fixture has %d chunks", whole.Chunks)
	}
	first := string(bytes.TrimPrefix(bytes.TrimSpace(events[0]), []byte("data: ")))
	for _, read := range []int{0, 1, 2} {
		p := extract(&har.ClientClose{Bytes: int64(len(bytes.Join(events[:read], nil))), Chunks: read, Read: true, Truncated: true})
		if p.Chunks != read || len(p.Response.Text) >= len(whole.Response.Text) {
			t.Errorf("%d read: %d chunks, text %q (whole: %q)", read, p.Chunks, p.Response.Text, whole.Response.Text)
		}
		if read == 1 && !strings.Contains(first, p.Response.Text) {
			t.Errorf("1 read: text %q is not from the first event %s", p.Response.Text, first)
		}
	}
}
