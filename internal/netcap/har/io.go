package har

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"time"
)

// Write writes log as a HAR file: {"log": ...}, indented, fields in a
// fixed order, entries sorted by _dal.seq (stable), absent arrays as [].
// It does not modify log.
func Write(w io.Writer, log *Log) error {
	if log == nil {
		return errors.New("write network.har: no log")
	}
	entries := slices.Clone(log.Entries)
	slices.SortStableFunc(entries, func(a, b Entry) int { return a.Seq() - b.Seq() })
	enc := make([]EncodedEntry, len(entries))
	for i := range entries {
		var err error
		if enc[i], err = EncodeEntry(&entries[i]); err != nil {
			return fmt.Errorf("write network.har: %w", err)
		}
	}
	return WriteEncoded(w, log, enc)
}

// EncodedEntry is an entry as [Write] puts it in a log: its indented JSON.
// A recorder encodes entries one by one as exchanges finish
// ([EncodeEntry]) and writes the log once with [WriteEncoded], which gives
// the bytes [Write] gives for the same entries.
type EncodedEntry struct {
	json []byte
}

// entriesIndent is the indentation of log.entries' elements.
const entriesIndent = "      "

// EncodeEntry encodes e (absent arrays as []) for [WriteEncoded]. It does
// not modify e.
func EncodeEntry(e *Entry) (EncodedEntry, error) {
	c := *e
	fillArrays(&c)
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(&c); err != nil {
		return EncodedEntry{}, fmt.Errorf("entry %d: %w", e.Seq(), err)
	}
	compact := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
	return EncodedEntry{json: indentCompact(make([]byte, 0, 2*len(compact)), compact, entriesIndent, "  ")}, nil
}

// indentCompact appends to dst the JSON src, which encoding/json wrote
// (valid, no space outside strings), indented as json.Indent indents it
// with prefix and indent. It does not check src: json.Indent runs a
// validating scanner over every byte, which was most of the time taken
// to write an entry (a 5 KB streamed one: ~25 µs of ~40).
func indentCompact(dst, src []byte, prefix, indent string) []byte {
	newline := func(depth int) {
		dst = append(dst, '\n')
		dst = append(dst, prefix...)
		for range depth {
			dst = append(dst, indent...)
		}
	}
	needIndent, inString, depth := false, false, 0
	for i := 0; i < len(src); i++ {
		if inString { // copy up to the closing quote, escapes as they are
			j := i
			for j < len(src) && src[j] != '"' && src[j] != '\\' {
				j++
			}
			switch {
			case j == len(src):
				return append(dst, src[i:]...)
			case src[j] == '\\':
				j = min(j+2, len(src))
				dst = append(dst, src[i:j]...)
			default:
				j++
				dst = append(dst, src[i:j]...)
				inString = false
			}
			i = j - 1
			continue
		}
		c := src[i]
		if c == ' ' || c == '\t' || c == '\n' || c == '\r' {
			continue
		}
		if needIndent && c != '}' && c != ']' {
			needIndent = false
			depth++
			newline(depth)
		}
		switch c {
		case '"':
			inString = true
			dst = append(dst, c)
		case '{', '[':
			needIndent = true // {} and [] stay as they are
			dst = append(dst, c)
		case ',':
			dst = append(dst, c)
			newline(depth)
		case ':':
			dst = append(dst, c, ' ')
		case '}', ']':
			if needIndent {
				needIndent = false
			} else {
				depth--
				newline(depth)
			}
			dst = append(dst, c)
		default:
			dst = append(dst, c)
		}
	}
	return dst
}

// WriteEncoded writes log as [Write] does, with entries in the order
// given in place of log.Entries (which it ignores).
func WriteEncoded(w io.Writer, log *Log, entries []EncodedEntry) error {
	if log == nil {
		return errors.New("write network.har: no log")
	}
	l := *log
	l.Entries = []Entry{}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(struct {
		Log *Log `json:"log"`
	}{&l}); err != nil {
		return fmt.Errorf("write network.har: %w", err)
	}
	out := buf.Bytes()
	if len(entries) > 0 {
		// The key, quotes unescaped, cannot be inside a string value, and
		// the log's fields before it (version, creator, browser) have no
		// such key: the first match is log.entries.
		const empty = `"entries": []`
		i := bytes.Index(out, []byte(empty))
		if i < 0 {
			return errors.New("write network.har: the log has no entries array")
		}
		var b bytes.Buffer
		b.Grow(len(out) + len(entries)*(len(entries[0].json)+len(entriesIndent)+2))
		b.Write(out[:i+len(empty)-1])
		for j, e := range entries {
			if j > 0 {
				b.WriteByte(',')
			}
			b.WriteString("\n" + entriesIndent)
			b.Write(e.json)
		}
		b.WriteString("\n    ]")
		b.Write(out[i+len(empty):])
		out = b.Bytes()
	}
	if _, err := w.Write(out); err != nil {
		return fmt.Errorf("write network.har: %w", err)
	}
	return nil
}

// fillArrays gives the arrays HAR requires a value, on e's own copies.
func fillArrays(e *Entry) {
	fill := func(s *[]NameValue) {
		if *s == nil {
			*s = []NameValue{}
		}
	}
	fillC := func(s *[]Cookie) {
		if *s == nil {
			*s = []Cookie{}
		}
	}
	fill(&e.Request.Headers)
	fill(&e.Request.QueryString)
	fill(&e.Response.Headers)
	fillC(&e.Request.Cookies)
	fillC(&e.Response.Cookies)
	if p := e.Request.PostData; p != nil && p.Params == nil {
		c := *p
		c.Params = []Param{}
		e.Request.PostData = &c
	}
}

// ReadFile reads a HAR file written by [Write]; see [Read].
func ReadFile(path string) (*Log, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read network.har: %w", err)
	}
	defer f.Close()
	return read(f, filepath.Base(path))
}

// Read reads a HAR file written by [Write] and checks what replay relies
// on: HAR 1.2, dal's format, the fields HAR requires, timings, the _dal
// data of every entry and the bodies' encodings. Its errors are one
// sentence naming the file and the problem.
func Read(r io.Reader) (*Log, error) {
	return read(r, "network.har")
}

func read(r io.Reader, name string) (*Log, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	var doc any
	if err := json.Unmarshal(data, &doc); err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			return nil, fmt.Errorf("%s is not valid JSON at byte %d: %v", name, se.Offset, err)
		}
		return nil, fmt.Errorf("%s is not valid JSON: %v", name, err)
	}
	root, _ := doc.(map[string]any)
	lg, ok := root["log"].(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%s is not a HAR file: it has no \"log\" object", name)
	}
	switch v := lg["version"].(type) {
	case string:
		if v != Version {
			return nil, fmt.Errorf("%s is HAR version %s; dal replays HAR 1.2 written by dal: re-record the run", name, v)
		}
	case nil:
		return nil, fmt.Errorf("%s has no log.version: it is not a HAR 1.2 file written by dal; re-record the run", name)
	default:
		return nil, fmt.Errorf("%s has a log.version that is not a string: it is not a HAR file written by dal", name)
	}
	ld, ok := lg["_dal"].(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%s has no _dal data: this HAR was not written by dal; re-record the run", name)
	}
	if f, ok := ld["format"].(float64); !ok || f != Format {
		return nil, fmt.Errorf("%s is dal HAR format %v; this dal reads format %d: use the dal that recorded it", name, ld["format"], Format)
	}
	if err := checkShape(lg); err != nil {
		return nil, fmt.Errorf("%s %w", name, err)
	}
	var file struct {
		Log Log `json:"log"`
	}
	if err := json.Unmarshal(data, &file); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return nil, fmt.Errorf("%s has %s at %s where %s is required (byte %d): the file is damaged or was not written by dal", name, article(te.Value), te.Field, goKind(te.Type), te.Offset)
		}
		return nil, fmt.Errorf("%s is not a valid HAR file: %v", name, err)
	}
	for i := range file.Log.Entries {
		if err := checkEntry(&file.Log.Entries[i]); err != nil {
			return nil, fmt.Errorf("%s entry %d %w", name, i, err)
		}
	}
	return &file.Log, nil
}

func article(s string) string {
	if s != "" && strings.ContainsRune("aeiou", rune(s[0])) {
		return "an " + s
	}
	return "a " + s
}

// goKind names the JSON kind a Go type decodes from.
func goKind(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Bool:
		return "a boolean"
	case reflect.String:
		return "a string"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Struct, reflect.Map, reflect.Pointer:
		return "an object"
	default:
		return "a number"
	}
}

type kind int

const (
	kString kind = iota
	kNumber
	kObject
	kArray
)

func (k kind) String() string {
	return [...]string{"a string", "a number", "an object", "an array"}[k]
}

type field struct {
	name string
	kind kind
}

var (
	logFields     = []field{{"version", kString}, {"creator", kObject}, {"entries", kArray}}
	creatorFields = []field{{"name", kString}, {"version", kString}}
	entryFields   = []field{{"startedDateTime", kString}, {"time", kNumber}, {"request", kObject},
		{"response", kObject}, {"cache", kObject}, {"timings", kObject}}
	requestFields = []field{{"method", kString}, {"url", kString}, {"httpVersion", kString},
		{"cookies", kArray}, {"headers", kArray}, {"queryString", kArray}, {"headersSize", kNumber}, {"bodySize", kNumber}}
	responseFields = []field{{"status", kNumber}, {"statusText", kString}, {"httpVersion", kString},
		{"cookies", kArray}, {"headers", kArray}, {"content", kObject}, {"redirectURL", kString},
		{"headersSize", kNumber}, {"bodySize", kNumber}}
	contentFields   = []field{{"size", kNumber}, {"mimeType", kString}}
	timingsFields   = []field{{"send", kNumber}, {"wait", kNumber}, {"receive", kNumber}}
	nameValueFields = []field{{"name", kString}, {"value", kString}}
	postDataFields  = []field{{"mimeType", kString}}
	dalFields       = []field{{"key", kString}, {"seq", kNumber}}
	chunkFields     = []field{{"at_ms", kNumber}, {"text", kString}}
)

// shapeError is a missing or mistyped required field.
type shapeError struct {
	path string
	want kind
	got  any
}

func (e *shapeError) Error() string {
	if e.got == nil {
		return fmt.Sprintf("lacks the required field %s: the file is damaged or was not written by dal", e.path)
	}
	return fmt.Sprintf("has %s at %s where %s is required: the file is damaged or was not written by dal", jsonKind(e.got), e.path, e.want)
}

func jsonKind(v any) string {
	switch v.(type) {
	case string:
		return "a string"
	case float64:
		return "a number"
	case bool:
		return "a boolean"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return "null"
}

// require checks that obj has fields of the right kinds.
func require(obj map[string]any, path string, fields []field) error {
	for _, f := range fields {
		v, ok := obj[f.name]
		var good bool
		switch f.kind {
		case kString:
			_, good = v.(string)
		case kNumber:
			_, good = v.(float64)
		case kObject:
			_, good = v.(map[string]any)
		case kArray:
			_, good = v.([]any)
		}
		if !good {
			if !ok {
				v = nil
			} else if v == nil {
				v = struct{}{} // present but null
			}
			return &shapeError{path + "." + f.name, f.kind, v}
		}
	}
	return nil
}

// requireEach checks that every element of obj[name], an array, is an
// object with fields.
func requireEach(obj map[string]any, path, name string, fields []field) error {
	arr, _ := obj[name].([]any)
	for i, el := range arr {
		p := fmt.Sprintf("%s.%s[%d]", path, name, i)
		o, ok := el.(map[string]any)
		if !ok {
			return &shapeError{p, kObject, orPresent(el)}
		}
		if err := require(o, p, fields); err != nil {
			return err
		}
	}
	return nil
}

func orPresent(v any) any {
	if v == nil {
		return struct{}{}
	}
	return v
}

// checkShape checks the fields HAR 1.2 and dal require, on the generic
// decoding, so that a missing field is told from a zero one.
func checkShape(lg map[string]any) error {
	if err := require(lg, "log", logFields); err != nil {
		return err
	}
	if err := require(lg["creator"].(map[string]any), "log.creator", creatorFields); err != nil {
		return err
	}
	for i, el := range lg["entries"].([]any) {
		p := fmt.Sprintf("log.entries[%d]", i)
		e, ok := el.(map[string]any)
		if !ok {
			return &shapeError{p, kObject, orPresent(el)}
		}
		if err := require(e, p, entryFields); err != nil {
			return err
		}
		if s := e["startedDateTime"].(string); !validTime(s) {
			return fmt.Errorf("has %s.startedDateTime %q, which is not an ISO 8601 date-time", p, s)
		}
		req, resp := e["request"].(map[string]any), e["response"].(map[string]any)
		checks := []func() error{
			func() error { return require(req, p+".request", requestFields) },
			func() error { return requireEach(req, p+".request", "cookies", nameValueFields) },
			func() error { return requireEach(req, p+".request", "headers", nameValueFields) },
			func() error { return requireEach(req, p+".request", "queryString", nameValueFields) },
			func() error {
				if pd, ok := req["postData"]; ok {
					o, ok := pd.(map[string]any)
					if !ok {
						return &shapeError{p + ".request.postData", kObject, orPresent(pd)}
					}
					return require(o, p+".request.postData", postDataFields)
				}
				return nil
			},
			func() error { return require(resp, p+".response", responseFields) },
			func() error { return requireEach(resp, p+".response", "cookies", nameValueFields) },
			func() error { return requireEach(resp, p+".response", "headers", nameValueFields) },
			func() error {
				return require(resp["content"].(map[string]any), p+".response.content", contentFields)
			},
			func() error { return require(e["timings"].(map[string]any), p+".timings", timingsFields) },
			func() error {
				d, ok := e["_dal"].(map[string]any)
				if !ok {
					return fmt.Errorf("entry %d has no _dal data: this HAR was not written by dal (or was edited); re-record the run", i)
				}
				if err := require(d, p+"._dal", dalFields); err != nil {
					return err
				}
				return requireEach(d, p+"._dal", "chunks", chunkFields)
			},
		}
		for _, c := range checks {
			if err := c(); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkEntry checks the values of a decoded entry.
func checkEntry(e *Entry) error {
	if e.Dal == nil {
		return errors.New("has no _dal data: this HAR was not written by dal (or was edited); re-record the run")
	}
	t := e.Timings
	for _, c := range []struct {
		name string
		v    float64
	}{{"send", t.Send}, {"wait", t.Wait}, {"receive", t.Receive}} {
		if c.v < 0 {
			return fmt.Errorf("has a negative timings.%s (%g): HAR 1.2 requires send, wait and receive >= 0", c.name, c.v)
		}
	}
	for _, c := range []struct {
		name string
		v    float64
	}{{"blocked", t.Blocked}, {"dns", t.DNS}, {"connect", t.Connect}, {"ssl", t.SSL}} {
		if c.v < 0 && c.v != -1 {
			return fmt.Errorf("has timings.%s %g: HAR 1.2 allows -1 (not known) or a value >= 0", c.name, c.v)
		}
	}
	if e.Time < 0 {
		return fmt.Errorf("has a negative time (%g)", e.Time)
	}
	if e.Request.PostData != nil {
		if _, err := e.Request.PostData.Bytes(); err != nil {
			return fmt.Errorf("has a request.postData that does not decode: %w", err)
		}
	}
	if _, err := e.Response.Content.Bytes(); err != nil {
		return fmt.Errorf("has a response.content that does not decode: %w", err)
	}
	for i := range e.Dal.Chunks {
		if _, err := e.Dal.Chunks[i].Bytes(); err != nil {
			return fmt.Errorf("has a _dal.chunks[%d] that does not decode: %w", i, err)
		}
	}
	return nil
}

// validTime reports whether s is an ISO 8601 date-time as HAR writes it.
func validTime(s string) bool {
	_, err := time.Parse(time.RFC3339Nano, s)
	return err == nil
}
