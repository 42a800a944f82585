package har

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/dal-runtime/dal/internal/golden"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// edited returns testdata/example.har with change applied to its generic
// decoding.
func edited(t *testing.T, change func(log map[string]any)) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/example.har")
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	change(doc["log"].(map[string]any))
	out, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func entryAt(log map[string]any, i int) map[string]any {
	return log["entries"].([]any)[i].(map[string]any)
}

func sub(m map[string]any, key string) map[string]any { return m[key].(map[string]any) }

func TestReadErrors(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		doc  func(t *testing.T) []byte
	}{
		{"truncated", func(*testing.T) []byte { return []byte(`{"log": {"version": "1.2",`) }},
		{"not JSON", func(*testing.T) []byte { return []byte("HTTP/1.1 200 OK\r\n") }},
		{"no log", func(*testing.T) []byte { return []byte(`{"entries": []}`) }},
		{"HAR 1.1", func(t *testing.T) []byte { return edited(t, func(l map[string]any) { l["version"] = "1.1" }) }},
		{"no version", func(t *testing.T) []byte { return edited(t, func(l map[string]any) { delete(l, "version") }) }},
		{"not dal", func(t *testing.T) []byte { return edited(t, func(l map[string]any) { delete(l, "_dal") }) }},
		{"newer dal format", func(t *testing.T) []byte {
			return edited(t, func(l map[string]any) { l["_dal"] = map[string]any{"format": 2} })
		}},
		{"no creator", func(t *testing.T) []byte { return edited(t, func(l map[string]any) { delete(l, "creator") }) }},
		{"entry without url", func(t *testing.T) []byte {
			return edited(t, func(l map[string]any) { delete(sub(entryAt(l, 1), "request"), "url") })
		}},
		{"entry without timings.wait", func(t *testing.T) []byte {
			return edited(t, func(l map[string]any) { delete(sub(entryAt(l, 2), "timings"), "wait") })
		}},
		{"header without value", func(t *testing.T) []byte {
			return edited(t, func(l map[string]any) {
				sub(entryAt(l, 1), "request")["headers"] = []any{map[string]any{"name": "X"}}
			})
		}},
		{"entry without _dal", func(t *testing.T) []byte { return edited(t, func(l map[string]any) { delete(entryAt(l, 3), "_dal") }) }},
		{"negative wait", func(t *testing.T) []byte {
			return edited(t, func(l map[string]any) { sub(entryAt(l, 0), "timings")["wait"] = -3 })
		}},
		{"blocked -2", func(t *testing.T) []byte {
			return edited(t, func(l map[string]any) { sub(entryAt(l, 0), "timings")["blocked"] = -2 })
		}},
		{"status as a string", func(t *testing.T) []byte {
			return edited(t, func(l map[string]any) { sub(entryAt(l, 0), "response")["status"] = "200" })
		}},
		{"seq as a string", func(t *testing.T) []byte {
			return edited(t, func(l map[string]any) { sub(entryAt(l, 0), "_dal")["seq"] = "0" })
		}},
		{"streamed as a string", func(t *testing.T) []byte {
			return edited(t, func(l map[string]any) { sub(entryAt(l, 0), "_dal")["streamed"] = "yes" })
		}},
		{"bad date", func(t *testing.T) []byte {
			return edited(t, func(l map[string]any) { entryAt(l, 0)["startedDateTime"] = "yesterday" })
		}},
		{"bad base64", func(t *testing.T) []byte {
			return edited(t, func(l map[string]any) {
				c := sub(sub(entryAt(l, 0), "response"), "content")
				c["encoding"], c["text"] = "base64", "!!"
			})
		}},
		{"unknown chunk encoding", func(t *testing.T) []byte {
			return edited(t, func(l map[string]any) {
				sub(entryAt(l, 2), "_dal")["chunks"].([]any)[0].(map[string]any)["encoding"] = "hex"
			})
		}},
	}
	var out strings.Builder
	for _, tc := range cases {
		_, err := Read(bytes.NewReader(tc.doc(t)))
		if err == nil {
			t.Errorf("%s: Read succeeded", tc.name)
			continue
		}
		if strings.Count(err.Error(), "\n") > 0 || !strings.HasPrefix(err.Error(), "network.har ") {
			t.Errorf("%s: %q is not one sentence about network.har", tc.name, err)
		}
		fmt.Fprintf(&out, "%s: %v\n", tc.name, err)
	}
	golden.Check(t, filepath.Join("testdata", "read-errors.golden"), []byte(out.String()))
}

func TestReadRoundTrip(t *testing.T) {
	t.Parallel()
	x := secretExchange(t, "gzip")
	e := mustEntry(t, x, nil)
	l := NewLog(nil, "test")
	l.Dal.KeyHeaders = []string{"x-tenant"}
	l.Entries = []Entry{e}
	dir := t.TempDir()
	path := filepath.Join(dir, "network.har")
	var buf bytes.Buffer
	if err := Write(&buf, l); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, l) {
		t.Errorf("read back a different log:\n%+v\nwant\n%+v", got.Entries[0], l.Entries[0])
	}
	var again bytes.Buffer
	if err := Write(&again, got); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(again.Bytes(), buf.Bytes()) {
		t.Errorf("write → read → write is not byte-identical")
	}
	if _, err := ReadFile(filepath.Join(dir, "missing.har")); err == nil {
		t.Errorf("ReadFile of a missing file succeeded")
	}
}

func FuzzRead(f *testing.F) {
	seed, err := os.ReadFile("testdata/example.har")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(seed)
	f.Add([]byte(`{"log":{"version":"1.2","creator":{"name":"dal","version":"x"},"entries":[{}],"_dal":{"format":1}}}`))
	f.Add([]byte(`{"log":{"version":"1.2","creator":{"name":"dal","version":"x"},"entries":[],"_dal":{"format":1}}}`))
	f.Add([]byte(`[]`))
	f.Add([]byte(`{"log":null}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		l, err := Read(bytes.NewReader(b))
		if err != nil {
			return
		}
		// What Read accepts, replay can index and serve without panicking.
		ix := NewIndex(l, nil, nil)
		for i := range l.Entries {
			e := &l.Entries[i]
			body, _ := e.RequestBody()
			req := Request{Method: e.Request.Method, URL: e.Request.URL, Body: body}
			_, _ = ix.Next(&req)
		}
		var buf bytes.Buffer
		if err := Write(&buf, l); err != nil {
			t.Fatalf("a log Read accepted does not write: %v", err)
		}
	})
}

// FuzzFromExchange records arbitrary exchanges: FromExchange never
// panics, what it writes reads back, the pieces join to the body, and
// the same raw request replays the entry.
func FuzzFromExchange(f *testing.F) {
	f.Add("POST", "https://api.example.com/v1/x?token=abc", []byte(`{"api_key":"sk-0123456789","a":[1,2]}`), []byte("data: {\"token\":\"x\"}\n\n"), uint8(0), uint16(7))
	f.Add("GET", "http://u:p@h/", []byte{}, []byte{0x1f, 0x8b, 0x08, 0, 1, 2}, uint8(1), uint16(2))
	f.Add("PUT", "h", []byte("a=1&password=2"), []byte("\xff\xfe"), uint8(3), uint16(1))
	codings := []string{"", "gzip", "deflate", "br", "zstd", "gzip, br", "compress"}
	f.Fuzz(func(t *testing.T, method, url string, reqBody, respBody []byte, coding uint8, cut uint16) {
		if method == "" || url == "" {
			return
		}
		ct := []string{"application/json", "text/event-stream", "application/x-www-form-urlencoded", ""}[int(cut)%4]
		req := Request{Method: method, URL: url, Header: hdr("Content-Type", ct, "Authorization", "Bearer sk-fuzz-0123456789"), Body: reqBody}
		resp := okResp(ct, "", "Content-Encoding", codings[int(coding)%len(codings)], "Set-Cookie", "a=b")
		resp.Body, resp.Streamed = respBody, cut%2 == 0
		if resp.Streamed {
			at := min(int(cut), len(respBody))
			resp.Chunks = []Chunk{{Data: respBody[:at]}, {Data: respBody[at:]}}
		}
		e, err := FromExchange(exchange(0, req, resp), nil)
		if err != nil {
			t.Fatal(err)
		}
		body, err := e.ResponseBody()
		if err != nil {
			t.Fatal(err)
		}
		var joined []byte
		for _, c := range e.Dal.Chunks {
			b, err := c.Bytes()
			if err != nil {
				t.Fatal(err)
			}
			joined = append(joined, b...)
		}
		if resp.Streamed && !bytes.Equal(joined, body) {
			t.Fatalf("chunks join to %q, body is %q", joined, body)
		}
		doc := writeHAR(t, e)
		if bytes.Contains(doc, []byte("sk-fuzz-0123456789")) {
			t.Fatalf("the Authorization key is in the HAR")
		}
		l, err := Read(bytes.NewReader(doc))
		if err != nil {
			t.Fatalf("a written HAR does not read: %v", err)
		}
		if _, err := NewIndex(l, nil, nil).Next(&req); err != nil {
			t.Fatalf("the recorded request does not replay: %v", err)
		}
	})
}

// The schema is strict where HAR 1.2 is: it rejects what dal must never
// write.
func TestSchemaRejects(t *testing.T) {
	t.Parallel()
	bad := map[string]func(l map[string]any){
		"negative wait":   func(l map[string]any) { sub(entryAt(l, 0), "timings")["wait"] = -1 },
		"blocked -2":      func(l map[string]any) { sub(entryAt(l, 0), "timings")["blocked"] = -2 },
		"no cache":        func(l map[string]any) { delete(entryAt(l, 0), "cache") },
		"no cookies":      func(l map[string]any) { delete(sub(entryAt(l, 0), "request"), "cookies") },
		"no content.size": func(l map[string]any) { delete(sub(sub(entryAt(l, 0), "response"), "content"), "size") },
		"custom field":    func(l map[string]any) { entryAt(l, 0)["dal"] = 1 },
		"version 1.1":     func(l map[string]any) { l["version"] = "1.1" },
		"bad date":        func(l map[string]any) { entryAt(l, 0)["startedDateTime"] = "yesterday" },
		"bad key":         func(l map[string]any) { sub(entryAt(l, 0), "_dal")["key"] = "GET x" },
		"headersSize -2":  func(l map[string]any) { sub(entryAt(l, 0), "request")["headersSize"] = -2 },
		"chunk encoding": func(l map[string]any) {
			sub(entryAt(l, 2), "_dal")["chunks"].([]any)[0].(map[string]any)["encoding"] = "hex"
		},
		"no timings.send":   func(l map[string]any) { delete(sub(entryAt(l, 0), "timings"), "send") },
		"no response":       func(l map[string]any) { delete(entryAt(l, 0), "response") },
		"status not number": func(l map[string]any) { sub(entryAt(l, 0), "response")["status"] = "200" },
	}
	s := harSchema(t)
	for name, change := range bad {
		v, err := jsonschema.UnmarshalJSON(bytes.NewReader(edited(t, change)))
		if err != nil {
			t.Fatal(err)
		}
		if s.Validate(v) == nil {
			t.Errorf("%s: the schema accepts it", name)
		}
	}
	validate(t, edited(t, func(l map[string]any) { entryAt(l, 0)["_custom"] = map[string]any{"x": 1} }))
}

// Entries encoded one by one and written with WriteEncoded give the bytes
// of the whole log encoded at once, indented, HTML unescaped (as Write
// did before it was built on them): for no entry, one, several with
// arrays left nil, a request body, a stream, a log comment and _dal.
func TestWriteEncodedIsOneEncoding(t *testing.T) {
	t.Parallel()
	plain := mustEntry(t, exchange(0, jsonReq("POST", "http://h/v1/chat/completions", `{"q":"<a> & \"entries\": []"}`, "Authorization", "Bearer sk-0123456789"),
		okResp("application/json", `{"ok":"<b>"}`)), nil)
	stream := mustEntry(t, secretExchange(t, "gzip"), nil)
	stream.Dal.Seq = 1
	bare := Entry{Dal: &EntryDal{Seq: 2}}
	for _, c := range []struct {
		name    string
		entries []Entry
		comment string
	}{
		{"none", nil, ""},
		{"one", []Entry{plain}, ""},
		{"several", []Entry{plain, stream, bare}, `a "comment" with "entries": []`},
	} {
		l := NewLog(c.entries, "test")
		l.Comment = c.comment
		l.Dal.KeyHeaders = []string{"x-tenant"}
		var want bytes.Buffer
		whole := *l
		whole.Entries = make([]Entry, len(l.Entries))
		for i := range l.Entries {
			whole.Entries[i] = l.Entries[i]
			fillArrays(&whole.Entries[i])
		}
		enc := json.NewEncoder(&want)
		enc.SetIndent("", "  ")
		enc.SetEscapeHTML(false)
		if err := enc.Encode(struct {
			Log *Log `json:"log"`
		}{&whole}); err != nil {
			t.Fatal(err)
		}
		var got bytes.Buffer
		if err := Write(&got, l); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got.Bytes(), want.Bytes()) {
			t.Errorf("%s: Write gives\n%s\nwant\n%s", c.name, got.Bytes(), want.Bytes())
		}
	}
}

// indentCompact indents what encoding/json writes exactly as json.Indent
// does: empty and nested objects and arrays, strings with escaped quotes
// and backslashes, punctuation and non-ASCII inside strings, numbers and
// literals, with and without a prefix.
func FuzzIndentCompact(f *testing.F) {
	for _, s := range []string{
		`{}`, `[]`, `{"a":{},"b":[],"c":[{}],"d":[[],[1,2]],"e":{"f":{"g":null}}}`,
		`{"s":"a \"quoted\" {[,:]} \\ \\\" \u00e9 é \u2028 <b>&","n":-1.5e+10,"t":true,"f":false}`,
		`"just a string"`, `42`, `[1,"two",{"three":[3]},null]`, `{"":""}`, `["\\","\\\\\"",""]`,
	} {
		f.Add([]byte(s), "")
		f.Add([]byte(s), "      ")
	}
	f.Fuzz(func(t *testing.T, data []byte, prefix string) {
		var v any
		if json.Unmarshal(data, &v) != nil || strings.ContainsAny(prefix, "\x00") {
			return
		}
		var compact bytes.Buffer
		enc := json.NewEncoder(&compact)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(v); err != nil {
			t.Fatal(err)
		}
		src := bytes.TrimSuffix(compact.Bytes(), []byte("\n"))
		var want bytes.Buffer
		if err := json.Indent(&want, src, prefix, "  "); err != nil {
			t.Fatal(err)
		}
		if got := indentCompact(nil, src, prefix, "  "); !bytes.Equal(got, want.Bytes()) {
			t.Errorf("indentCompact(%s) =\n%s\nwant\n%s", src, got, want.Bytes())
		}
	})
}
