package prompts

import (
	"encoding/json"
	"slices"
	"strings"
)

// OpenAI chat completions.

type chatUsage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

func (u *chatUsage) usage() Usage {
	if u == nil {
		return Usage{}
	}
	return Usage{InputTokens: u.PromptTokens, OutputTokens: u.CompletionTokens, TotalTokens: u.TotalTokens}
}

type chatToolCall struct {
	Index    int    `json:"index"`
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

type chatMessage struct {
	Content   json.RawMessage `json:"content"`
	ToolCalls []chatToolCall  `json:"tool_calls"`
}

type chatCompletion struct {
	ID                string     `json:"id"`
	Model             string     `json:"model"`
	SystemFingerprint string     `json:"system_fingerprint"`
	Usage             *chatUsage `json:"usage"`
	Choices           []struct {
		Index        int         `json:"index"`
		Message      chatMessage `json:"message"`
		Delta        chatMessage `json:"delta"`
		FinishReason *string     `json:"finish_reason"`
	} `json:"choices"`
}

// content is a message's text: a string, or the text of its parts.
func content(raw json.RawMessage) string {
	if s := str(raw); s != "" {
		return s
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &parts) != nil {
		return ""
	}
	var b strings.Builder
	for _, p := range parts {
		if p.Type == "text" || p.Type == "output_text" {
			b.WriteString(p.Text)
		}
	}
	return b.String()
}

func chatBody(body []byte) result {
	var r result
	var c chatCompletion
	if err := json.Unmarshal(body, &c); err != nil {
		r.resp.Error = apiError(body)
		return r
	}
	r.resp.ID, r.model, r.fingerprint, r.usage = c.ID, c.Model, c.SystemFingerprint, c.Usage.usage()
	r.resp.Error = apiError(body)
	for _, ch := range c.Choices {
		if ch.Index != 0 {
			continue
		}
		r.resp.Text = content(ch.Message.Content)
		for _, tc := range ch.Message.ToolCalls {
			r.resp.ToolCalls = append(r.resp.ToolCalls, ToolCall{ID: tc.ID, Type: tc.Type, Name: tc.Function.Name, Arguments: tc.Function.Arguments})
		}
		if ch.FinishReason != nil {
			r.resp.FinishReason = *ch.FinishReason
		}
		break
	}
	return r
}

func chatStream(events []event) result {
	var r result
	var text strings.Builder
	calls := map[int]*ToolCall{}
	for _, ev := range events {
		if done(ev) {
			continue
		}
		r.chunks++
		var c chatCompletion
		if json.Unmarshal(ev.data, &c) != nil {
			if msg := apiError(ev.data); msg != "" {
				r.resp.Error = msg
			}
			continue
		}
		if r.resp.ID == "" {
			r.resp.ID = c.ID
		}
		if c.Model != "" {
			r.model = c.Model
		}
		if c.SystemFingerprint != "" {
			r.fingerprint = c.SystemFingerprint
		}
		if c.Usage != nil {
			r.usage = c.Usage.usage()
		}
		for _, ch := range c.Choices {
			if ch.Index != 0 {
				continue
			}
			text.WriteString(content(ch.Delta.Content))
			for _, d := range ch.Delta.ToolCalls {
				tc := calls[d.Index]
				if tc == nil {
					tc = &ToolCall{}
					calls[d.Index] = tc
				}
				if d.ID != "" {
					tc.ID = d.ID
				}
				if d.Type != "" {
					tc.Type = d.Type
				}
				if d.Function.Name != "" && tc.Name == "" {
					tc.Name = d.Function.Name
				}
				tc.Arguments += d.Function.Arguments
			}
			if ch.FinishReason != nil && *ch.FinishReason != "" {
				r.resp.FinishReason = *ch.FinishReason
			}
		}
	}
	r.resp.Text = text.String()
	r.resp.ToolCalls = ordered(calls)
	return r
}

// ordered lists tool calls by their index.
func ordered(calls map[int]*ToolCall) []ToolCall {
	idx := make([]int, 0, len(calls))
	for i := range calls {
		idx = append(idx, i)
	}
	slices.Sort(idx)
	var out []ToolCall
	for _, i := range idx {
		out = append(out, *calls[i])
	}
	return out
}
