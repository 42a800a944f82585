package prompts

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"net/url"
	"strings"

	"github.com/dal-runtime/dal/internal/netcap/har"
)

// The APIs.
const (
	ChatCompletions = "chat.completions"
	Responses       = "responses"
	Messages        = "messages"
)

// Prompt is one LLM call; see the package documentation for its JSON.
type Prompt struct {
	Seq               int                        `json:"seq"`
	Provider          string                     `json:"provider"`
	API               string                     `json:"api"`
	URL               string                     `json:"url"`
	Status            int                        `json:"status"`
	Model             string                     `json:"model"`
	Parameters        map[string]json.RawMessage `json:"parameters"`
	System            json.RawMessage            `json:"system,omitempty"`
	Messages          json.RawMessage            `json:"messages"`
	Stream            bool                       `json:"stream"`
	Response          Response                   `json:"response"`
	Usage             Usage                      `json:"usage"`
	SystemFingerprint string                     `json:"system_fingerprint,omitempty"`
	Chunks            int                        `json:"chunks"`
}

// Response is what the model answered.
type Response struct {
	Text         string     `json:"text"`
	ToolCalls    []ToolCall `json:"tool_calls,omitempty"`
	FinishReason string     `json:"finish_reason,omitempty"`
	ID           string     `json:"id,omitempty"`
	// Error is the API's error message, or the exchange's failure.
	Error string `json:"error,omitempty"`
}

// ToolCall is a tool call, its arguments as the JSON text the model
// produced.
type ToolCall struct {
	ID        string `json:"id,omitempty"`
	Type      string `json:"type,omitempty"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// Usage counts tokens.
type Usage struct {
	InputTokens  int `json:"input_tokens"`
	OutputTokens int `json:"output_tokens"`
	TotalTokens  int `json:"total_tokens"`
}

// excluded request fields: the conversation, kept in messages and
// system; every other field is a parameter.
var excluded = map[string]bool{
	"messages": true, "input": true, "system": true, "instructions": true,
}

// Extract returns the LLM call in e, false when e is not one.
func Extract(e *har.Entry) (*Prompt, bool) {
	if e == nil || e.Request.Method != "POST" {
		return nil, false
	}
	body, err := e.RequestBody()
	if err != nil {
		return nil, false
	}
	var req map[string]json.RawMessage
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, false
	}
	u, err := url.Parse(e.Request.URL)
	if err != nil {
		return nil, false
	}
	host := strings.ToLower(u.Hostname())
	path := strings.TrimSuffix(u.Path, "/")
	api := ""
	switch {
	case strings.HasSuffix(path, "/chat/completions") && isArray(req["messages"]):
		api = ChatCompletions
	case strings.HasSuffix(path, "/responses") && (req["input"] != nil || req["model"] != nil):
		api = Responses
	case strings.HasSuffix(path, "/messages") && isArray(req["messages"]) &&
		(req["max_tokens"] != nil || header(e.Request.Headers, "anthropic-version") != "" || isAnthropic(host)):
		api = Messages
	default:
		return nil, false
	}
	p := &Prompt{
		Seq:        e.Seq(),
		Provider:   provider(host, api),
		API:        api,
		URL:        e.Request.URL,
		Status:     e.Response.Status,
		Parameters: map[string]json.RawMessage{},
		Messages:   req["messages"],
	}
	for k, v := range req {
		if !excluded[k] {
			p.Parameters[k] = v
		}
	}
	switch api {
	case Responses:
		p.Messages, p.System = req["input"], req["instructions"]
	case Messages:
		p.System = req["system"]
	}
	if p.Messages == nil {
		p.Messages = json.RawMessage("null")
	}
	p.Model = str(req["model"])
	var stream bool
	_ = json.Unmarshal(req["stream"], &stream)
	if e.Dal != nil && e.Dal.Error != "" {
		p.Response.Error = e.Dal.Error
	}

	resp, err := e.ResponseBody()
	if err == nil {
		resp = given(e, resp)
	}
	if err != nil || len(resp) == 0 {
		p.Stream = stream
		return p, true
	}
	var r result
	if events, ok := sse(e, resp); ok {
		p.Stream = true
		switch api {
		case ChatCompletions:
			r = chatStream(events)
		case Responses:
			r = responsesStream(events)
		case Messages:
			r = messagesStream(events)
		}
	} else {
		p.Stream = stream
		switch api {
		case ChatCompletions:
			r = chatBody(resp)
		case Responses:
			r = responsesBody(resp)
		case Messages:
			r = messagesBody(resp)
		}
	}
	if r.model != "" {
		p.Model = r.model
	}
	if r.resp.Error == "" {
		r.resp.Error = p.Response.Error
	}
	p.Response = r.resp
	p.Usage = r.usage
	if p.Usage.TotalTokens == 0 {
		p.Usage.TotalTokens = p.Usage.InputTokens + p.Usage.OutputTokens
	}
	p.SystemFingerprint = r.fingerprint
	p.Chunks = r.chunks
	return p, true
}

// given is the part of a stream's body the client had when it closed
// the connection early (_dal.client_closed): its first chunks, as many
// as it read. What dal read from the server after them never reached
// the agent, and how much that was is a matter of timing. Other bodies
// are returned whole.
func given(e *har.Entry, body []byte) []byte {
	if e.Dal == nil || e.Dal.ClientClosed == nil || !e.Dal.Streamed {
		return body
	}
	n := 0
	for _, c := range e.Dal.Chunks[:min(max(e.Dal.ClientClosed.Chunks, 0), len(e.Dal.Chunks))] {
		size := len(c.Text)
		if c.Encoding == "base64" {
			b, err := base64.StdEncoding.DecodeString(c.Text)
			if err != nil {
				return body
			}
			size = len(b)
		}
		n += size
	}
	return body[:min(n, len(body))]
}

// result is what a response parser found.
type result struct {
	resp        Response
	usage       Usage
	model       string
	fingerprint string
	chunks      int
}

func provider(host, api string) string {
	switch {
	case host == "api.openai.com" || strings.HasSuffix(host, ".openai.com"):
		return "openai"
	case isAnthropic(host) || api == Messages:
		return "anthropic"
	}
	return "openai-compatible"
}

func isAnthropic(host string) bool {
	return host == "api.anthropic.com" || strings.HasSuffix(host, ".anthropic.com")
}

func header(h []har.NameValue, name string) string {
	for _, nv := range h {
		if strings.EqualFold(nv.Name, name) {
			return nv.Value
		}
	}
	return ""
}

func isArray(v json.RawMessage) bool {
	v = bytes.TrimSpace(v)
	return len(v) > 0 && v[0] == '['
}

// str is a JSON string's value, "" for anything else.
func str(v json.RawMessage) string {
	var s string
	if json.Unmarshal(v, &s) != nil {
		return ""
	}
	return s
}

// apiError is the message of an OpenAI or Anthropic error body.
func apiError(body []byte) string {
	var e struct {
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal(body, &e) != nil || e.Error == nil {
		return ""
	}
	var obj struct {
		Message string `json:"message"`
	}
	if json.Unmarshal(e.Error, &obj) == nil && obj.Message != "" {
		return obj.Message
	}
	return str(e.Error)
}
