// Command goclient is an agent using Go's net/http without dal's agent
// package: two plain chat completions, a streamed one read by read, a
// tool call and a stream closed after its first read, against $LLM_BASE
// (SSL_CERT_FILE is trusted, as Go does on Linux); then the same over the
// Responses API and (given ANTHROPIC_BASE_URL) Anthropic's messages API.
//
// Its transport has no dial or handshake timeouts: under the syscall
// layer's virtual clock, net/http's default 30 s dial deadline expired
// before a loopback connect completed in about 1 run in 15 (issue 14's
// Go limits: the runtime's netpoller waits are timed on the virtual clock).
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
)

var client = &http.Client{Transport: &http.Transport{}}

func post(body string) *http.Response {
	return postTo(os.Getenv("LLM_BASE")+"/chat/completions", body, "Authorization", "Bearer "+os.Getenv("OPENAI_API_KEY"))
}

// postTo posts the JSON body to url with the headers given as name, value.
func postTo(url, body string, header ...string) *http.Response {
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		fail(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		fail(err)
	}
	return resp
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "agent error:", err)
	os.Exit(3)
}

func main() {
	for _, text := range []string{"hello", "again"} {
		resp := post(`{"model":"test-model","messages":[{"role":"user","content":"` + text + `"}],"temperature":0}`)
		var r struct {
			Choices []struct{ Message struct{ Content string } }
		}
		if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
			fail(err)
		}
		resp.Body.Close()
		fmt.Println("plain:", r.Choices[0].Message.Content, "uncompressed:", resp.Uncompressed)
	}
	resp := post(`{"model":"test-model","stream":true,"messages":[{"role":"user","content":"stream please"}]}`)
	buf := make([]byte, 64<<10)
	for {
		n, err := resp.Body.Read(buf)
		fmt.Printf("read: %q\n", buf[:n])
		if err == io.EOF {
			break
		}
		if err != nil {
			fail(err)
		}
	}
	resp.Body.Close()
	resp = post(`{"model":"test-model","messages":[{"role":"user","content":"weather?"}],"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object"}}}]}`)
	var t struct {
		Choices []struct {
			Message struct {
				ToolCalls []struct {
					Function struct{ Name, Arguments string }
				} `json:"tool_calls"`
			}
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&t); err != nil {
		fail(err)
	}
	f := t.Choices[0].Message.ToolCalls[0].Function
	fmt.Println("tool:", f.Name, f.Arguments)

	// A stream the server holds open after its first event: read that,
	// then close the body (the transport closes the connection).
	resp = post(`{"model":"test-model","stream":true,"messages":[{"role":"user","content":"close early"}]}`)
	n, err := resp.Body.Read(buf)
	if err != nil {
		fail(err)
	}
	fmt.Printf("early read: %q\n", buf[:n])
	resp.Body.Close()
	for _, a := range apis() {
		a.run(buf)
	}
	fmt.Println("closed early")
}

// api is the Responses API or Anthropic's messages API: where, how, what
// to ask (a request body with its text and more fields), what to print of
// the answers.
type api struct {
	name, url  string
	header     []string
	ask        func(text, more string) string
	tool       string
	text, call func(r map[string]any) string
}

func apis() []api {
	str := func(v any) string { s, _ := v.(string); return s }
	at := func(v any, path ...any) any {
		for _, p := range path {
			switch p := p.(type) {
			case string:
				m, _ := v.(map[string]any)
				v = m[p]
			case int:
				l, _ := v.([]any)
				if p >= len(l) {
					return nil
				}
				v = l[p]
			}
		}
		return v
	}
	weather := `{"type":"object","properties":{"city":{"type":"string"}}}`
	out := []api{{
		name: "responses", url: os.Getenv("LLM_BASE") + "/responses",
		header: []string{"Authorization", "Bearer " + os.Getenv("OPENAI_API_KEY")},
		ask:    func(text, more string) string { return `{"model":"test-model","input":"` + text + `"` + more + `}` },
		tool:   `,"tools":[{"type":"function","name":"get_weather","parameters":` + weather + `}]`,
		text:   func(r map[string]any) string { return str(at(r, "output", 0, "content", 0, "text")) },
		call: func(r map[string]any) string {
			return str(at(r, "output", 0, "name")) + " " + str(at(r, "output", 0, "arguments"))
		},
	}}
	if base, ok := os.LookupEnv("ANTHROPIC_BASE_URL"); ok {
		out = append(out, api{
			name: "messages", url: base + "/v1/messages",
			header: []string{"X-Api-Key", os.Getenv("ANTHROPIC_API_KEY"), "Anthropic-Version", "2023-06-01"},
			ask: func(text, more string) string {
				return `{"model":"test-model","max_tokens":64,"messages":[{"role":"user","content":"` + text + `"}]` + more + `}`
			},
			tool: `,"tools":[{"name":"get_weather","input_schema":` + weather + `}]`,
			text: func(r map[string]any) string { return str(at(r, "content", 0, "text")) },
			call: func(r map[string]any) string {
				in, _ := json.Marshal(at(r, "content", 0, "input"))
				return str(at(r, "content", 0, "name")) + " " + string(in)
			},
		})
	}
	return out
}

// run makes a plain call, a stream read read by read, a tool call and a
// stream closed after one read (one of the several events the server
// sent).
func (a api) run(buf []byte) {
	decode := func(resp *http.Response) map[string]any {
		defer resp.Body.Close()
		var r map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
			fail(err)
		}
		return r
	}
	fmt.Println(a.name, "plain:", a.text(decode(postTo(a.url, a.ask("hello", ""), a.header...))))
	resp := postTo(a.url, a.ask("stream please", `,"stream":true`), a.header...)
	for {
		n, err := resp.Body.Read(buf)
		fmt.Printf("%s read: %q\n", a.name, buf[:n])
		if err == io.EOF {
			break
		}
		if err != nil {
			fail(err)
		}
	}
	resp.Body.Close()
	fmt.Println(a.name, "tool:", a.call(decode(postTo(a.url, a.ask("weather?", a.tool), a.header...))))
	resp = postTo(a.url, a.ask("close early", `,"stream":true`), a.header...)
	n, err := resp.Body.Read(buf)
	if err != nil {
		fail(err)
	}
	fmt.Printf("%s early read: %q\n", a.name, buf[:n])
	resp.Body.Close()
}
