package prompts

import (
	"bytes"
	"strings"

	"github.com/dal-runtime/dal/internal/netcap/har"
)

// event is one server-sent event.
type event struct {
	name string // the event: field, "" when absent
	data []byte // the data: lines joined by "\n"
}

// sse parses body as an event stream when the response is one (by its
// Content-Type, or a streamed body that starts like one).
func sse(e *har.Entry, body []byte) ([]event, bool) {
	ct := strings.ToLower(e.Response.Content.MimeType)
	t := bytes.TrimLeft(body, " \t\r\n")
	isSSE := strings.Contains(ct, "text/event-stream") ||
		e.Dal != nil && e.Dal.Streamed && (bytes.HasPrefix(t, []byte("data:")) || bytes.HasPrefix(t, []byte("event:")))
	if !isSSE {
		return nil, false
	}
	return parseSSE(body), true
}

// parseSSE splits an event stream into its events (the WHATWG rules:
// lines end in \n, \r\n or \r; a blank line ends an event; ':' starts a
// comment; one optional space after the field's colon).
func parseSSE(body []byte) []event {
	var out []event
	var cur event
	var data [][]byte
	hasData := false
	flush := func() {
		if hasData {
			cur.data = bytes.Join(data, []byte("\n"))
			out = append(out, cur)
		}
		cur, data, hasData = event{}, nil, false
	}
	body = bytes.ReplaceAll(body, []byte("\r\n"), []byte("\n"))
	body = bytes.ReplaceAll(body, []byte("\r"), []byte("\n"))
	for line := range bytes.SplitSeq(body, []byte("\n")) {
		if len(line) == 0 {
			flush()
			continue
		}
		if line[0] == ':' {
			continue
		}
		field, value, _ := bytes.Cut(line, []byte(":"))
		value = bytes.TrimPrefix(value, []byte(" "))
		switch string(field) {
		case "event":
			cur.name = string(value)
		case "data":
			data = append(data, value)
			hasData = true
		}
	}
	flush()
	return out
}

// done reports the OpenAI end-of-stream sentinel.
func done(ev event) bool { return bytes.Equal(bytes.TrimSpace(ev.data), []byte("[DONE]")) }
