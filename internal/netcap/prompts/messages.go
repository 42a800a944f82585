package prompts

import (
	"bytes"
	"encoding/json"
	"strings"
)

// Anthropic messages.

type anthropicUsage struct {
	InputTokens              *int `json:"input_tokens"`
	CacheCreationInputTokens int  `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int  `json:"cache_read_input_tokens"`
	OutputTokens             *int `json:"output_tokens"`
}

// apply sets the counts u has.
func (u *anthropicUsage) apply(to *Usage) {
	if u == nil {
		return
	}
	if u.InputTokens != nil {
		to.InputTokens = *u.InputTokens + u.CacheCreationInputTokens + u.CacheReadInputTokens
	}
	if u.OutputTokens != nil {
		to.OutputTokens = *u.OutputTokens
	}
}

type contentBlock struct {
	Type  string          `json:"type"`
	Text  string          `json:"text"`
	ID    string          `json:"id"`
	Name  string          `json:"name"`
	Input json.RawMessage `json:"input"`
}

type anthropicMessage struct {
	ID         string          `json:"id"`
	Model      string          `json:"model"`
	Content    []contentBlock  `json:"content"`
	StopReason string          `json:"stop_reason"`
	Usage      *anthropicUsage `json:"usage"`
}

// compact is a JSON value without insignificant space, "{}" when empty.
func compact(v json.RawMessage) string {
	var b bytes.Buffer
	if len(v) == 0 || json.Compact(&b, v) != nil {
		return "{}"
	}
	return b.String()
}

func messagesBody(body []byte) result {
	var r result
	var m anthropicMessage
	if err := json.Unmarshal(body, &m); err != nil {
		r.resp.Error = apiError(body)
		return r
	}
	r.resp.ID, r.model, r.resp.FinishReason = m.ID, m.Model, m.StopReason
	r.resp.Error = apiError(body)
	m.Usage.apply(&r.usage)
	var text strings.Builder
	for _, b := range m.Content {
		switch b.Type {
		case "text":
			text.WriteString(b.Text)
		case "tool_use", "server_tool_use":
			r.resp.ToolCalls = append(r.resp.ToolCalls, ToolCall{ID: b.ID, Type: b.Type, Name: b.Name, Arguments: compact(b.Input)})
		}
	}
	r.resp.Text = text.String()
	return r
}

type messagesEvent struct {
	Type         string            `json:"type"`
	Index        int               `json:"index"`
	Message      *anthropicMessage `json:"message"`
	ContentBlock *contentBlock     `json:"content_block"`
	Delta        struct {
		Type        string `json:"type"`
		Text        string `json:"text"`
		PartialJSON string `json:"partial_json"`
		StopReason  string `json:"stop_reason"`
	} `json:"delta"`
	Usage *anthropicUsage `json:"usage"`
	Error *struct {
		Message string `json:"message"`
	} `json:"error"`
}

func messagesStream(events []event) result {
	var r result
	var text strings.Builder
	calls := map[int]*ToolCall{}
	partial := map[int]bool{} // the call's arguments came as input_json_delta
	for _, ev := range events {
		r.chunks++
		var e messagesEvent
		if json.Unmarshal(ev.data, &e) != nil {
			continue
		}
		switch e.Type {
		case "message_start":
			if m := e.Message; m != nil {
				r.resp.ID, r.model = m.ID, m.Model
				m.Usage.apply(&r.usage)
			}
		case "content_block_start":
			if b := e.ContentBlock; b != nil {
				switch b.Type {
				case "text":
					text.WriteString(b.Text)
				case "tool_use", "server_tool_use":
					calls[e.Index] = &ToolCall{ID: b.ID, Type: b.Type, Name: b.Name, Arguments: compact(b.Input)}
				}
			}
		case "content_block_delta":
			switch e.Delta.Type {
			case "text_delta":
				text.WriteString(e.Delta.Text)
			case "input_json_delta":
				if tc := calls[e.Index]; tc != nil {
					if !partial[e.Index] {
						tc.Arguments, partial[e.Index] = "", true
					}
					tc.Arguments += e.Delta.PartialJSON
				}
			}
		case "message_delta":
			if e.Delta.StopReason != "" {
				r.resp.FinishReason = e.Delta.StopReason
			}
			e.Usage.apply(&r.usage)
		case "error":
			if e.Error != nil {
				r.resp.Error = e.Error.Message
			}
		}
	}
	r.resp.Text = text.String()
	r.resp.ToolCalls = ordered(calls)
	return r
}
