package prompts

import (
	"encoding/json"
	"strings"
)

// OpenAI responses.

type responseItem struct {
	Type      string `json:"type"`
	ID        string `json:"id"`
	CallID    string `json:"call_id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
	Content   []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"content"`
}

type responseObject struct {
	ID                string         `json:"id"`
	Model             string         `json:"model"`
	Status            string         `json:"status"`
	Output            []responseItem `json:"output"`
	IncompleteDetails *struct {
		Reason string `json:"reason"`
	} `json:"incomplete_details"`
	Error *struct {
		Message string `json:"message"`
	} `json:"error"`
	Usage *struct {
		InputTokens  int `json:"input_tokens"`
		OutputTokens int `json:"output_tokens"`
		TotalTokens  int `json:"total_tokens"`
	} `json:"usage"`
}

// apply takes from a whole response object what it says: id, model,
// status as finish reason, usage, error, and text and tool calls when
// withOutput.
func (o *responseObject) apply(r *result, withOutput bool) {
	if o.ID != "" {
		r.resp.ID = o.ID
	}
	if o.Model != "" {
		r.model = o.Model
	}
	if o.Status != "" {
		r.resp.FinishReason = o.Status
	}
	if o.IncompleteDetails != nil && o.IncompleteDetails.Reason != "" {
		r.resp.FinishReason = o.IncompleteDetails.Reason
	}
	if o.Error != nil && o.Error.Message != "" {
		r.resp.Error = o.Error.Message
	}
	if u := o.Usage; u != nil {
		r.usage = Usage{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens, TotalTokens: u.TotalTokens}
	}
	if !withOutput {
		return
	}
	var text strings.Builder
	r.resp.ToolCalls = nil
	for _, it := range o.Output {
		switch it.Type {
		case "message":
			for _, c := range it.Content {
				if c.Type == "output_text" {
					text.WriteString(c.Text)
				}
			}
		case "function_call":
			r.resp.ToolCalls = append(r.resp.ToolCalls, ToolCall{ID: it.CallID, Type: it.Type, Name: it.Name, Arguments: it.Arguments})
		}
	}
	r.resp.Text = text.String()
}

func responsesBody(body []byte) result {
	var r result
	var o responseObject
	if err := json.Unmarshal(body, &o); err != nil {
		r.resp.Error = apiError(body)
		return r
	}
	o.apply(&r, true)
	if r.resp.Error == "" {
		r.resp.Error = apiError(body)
	}
	return r
}

type responseEvent struct {
	Type        string          `json:"type"`
	Delta       string          `json:"delta"`
	OutputIndex int             `json:"output_index"`
	Item        *responseItem   `json:"item"`
	Response    *responseObject `json:"response"`
	Message     string          `json:"message"` // type "error"
}

func responsesStream(events []event) result {
	var r result
	var text strings.Builder
	calls := map[int]*ToolCall{}
	var final *responseObject
	for _, ev := range events {
		if done(ev) {
			continue
		}
		r.chunks++
		var e responseEvent
		if json.Unmarshal(ev.data, &e) != nil {
			continue
		}
		switch e.Type {
		case "response.created", "response.in_progress":
			if e.Response != nil {
				e.Response.apply(&r, false)
			}
		case "response.output_text.delta":
			text.WriteString(e.Delta)
		case "response.output_item.added", "response.output_item.done":
			if it := e.Item; it != nil && it.Type == "function_call" {
				tc := calls[e.OutputIndex]
				if tc == nil {
					tc = &ToolCall{Type: it.Type}
					calls[e.OutputIndex] = tc
				}
				tc.ID, tc.Name = it.CallID, it.Name
				if e.Type == "response.output_item.done" {
					tc.Arguments = it.Arguments // the final text wins over the deltas
				}
			}
		case "response.function_call_arguments.delta":
			tc := calls[e.OutputIndex]
			if tc == nil {
				tc = &ToolCall{Type: "function_call"}
				calls[e.OutputIndex] = tc
			}
			tc.Arguments += e.Delta
		case "response.completed", "response.incomplete", "response.failed":
			final = e.Response
		case "error":
			r.resp.Error = e.Message
		}
	}
	r.resp.Text = text.String()
	r.resp.ToolCalls = ordered(calls)
	if final != nil {
		streamed := r.resp
		final.apply(&r, streamed.Text == "" && len(streamed.ToolCalls) == 0)
		if streamed.Text != "" || len(streamed.ToolCalls) > 0 {
			r.resp.Text, r.resp.ToolCalls = streamed.Text, streamed.ToolCalls
		}
	}
	return r
}
