package har

import (
	"encoding/json"
	"strconv"
	"strings"
	"unicode/utf8"
)

// span is a JSON value at path, b[start:end].
type span struct {
	start, end int
	path       string
}

// maxDepth bounds the nesting the scanner follows.
const maxDepth = 512

// scanCredentials returns the values of the credential members of the
// JSON text b: members whose name satisfies cred, at any depth. It
// tolerates a truncated or malformed text (a piece of a stream) and
// returns the complete values it found before the damage. A credential
// member's value is one span, whatever it holds.
func scanCredentials(b []byte, cred func(string) bool) []span {
	s := &scanner{b: b, cred: cred}
	s.ws()
	s.value("$", 0)
	return s.out
}

type scanner struct {
	b    []byte
	i    int
	cred func(string) bool
	out  []span
}

func (s *scanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\r', '\n':
			s.i++
		default:
			return
		}
	}
}

// value scans one value at s.i; false when the text ends or breaks.
func (s *scanner) value(path string, depth int) bool {
	if s.i >= len(s.b) || depth > maxDepth {
		return false
	}
	switch c := s.b[s.i]; {
	case c == '{':
		return s.object(path, depth)
	case c == '[':
		return s.array(path, depth)
	case c == '"':
		_, ok := s.str()
		return ok
	default:
		start := s.i
		for s.i < len(s.b) && strings.IndexByte("+-.0123456789eEtruefalsn", s.b[s.i]) >= 0 {
			s.i++
		}
		return s.i > start && s.i < len(s.b)
	}
}

func (s *scanner) object(path string, depth int) bool {
	s.i++ // {
	s.ws()
	if s.i < len(s.b) && s.b[s.i] == '}' {
		s.i++
		return true
	}
	for {
		s.ws()
		if s.i >= len(s.b) || s.b[s.i] != '"' {
			return false
		}
		name, ok := s.str()
		if !ok {
			return false
		}
		s.ws()
		if s.i >= len(s.b) || s.b[s.i] != ':' {
			return false
		}
		s.i++
		s.ws()
		start, mark := s.i, len(s.out)
		sub := memberPath(path, name)
		if !s.value(sub, depth+1) {
			return false
		}
		if s.cred(name) {
			s.out = append(s.out[:mark], span{start, s.i, sub})
		}
		s.ws()
		if s.i >= len(s.b) {
			return false
		}
		switch s.b[s.i] {
		case ',':
			s.i++
		case '}':
			s.i++
			return true
		default:
			return false
		}
	}
}

func (s *scanner) array(path string, depth int) bool {
	s.i++ // [
	s.ws()
	if s.i < len(s.b) && s.b[s.i] == ']' {
		s.i++
		return true
	}
	for n := 0; ; n++ {
		s.ws()
		if !s.value(path+"["+strconv.Itoa(n)+"]", depth+1) {
			return false
		}
		s.ws()
		if s.i >= len(s.b) {
			return false
		}
		switch s.b[s.i] {
		case ',':
			s.i++
		case ']':
			s.i++
			return true
		default:
			return false
		}
	}
}

// str scans a string at s.i and returns its raw contents.
func (s *scanner) str() (string, bool) {
	start := s.i
	s.i++ // "
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case '\\':
			s.i += 2
		case '"':
			s.i++
			if u, ok := unquoteJSON(s.b[start:s.i]); ok {
				return u, true
			}
			return string(s.b[start+1 : s.i-1]), true
		default:
			s.i++
		}
	}
	s.i = len(s.b)
	return "", false
}

// unquoteJSON reads a JSON string literal as encoding/json does. Most
// have no escapes and are valid UTF-8: they read as they are, without
// the decoder (which costs ~1 µs a string).
func unquoteJSON(b []byte) (string, bool) {
	if n := len(b); n >= 2 && b[0] == '"' && b[n-1] == '"' && plainJSONString(b[1:n-1]) {
		return string(b[1 : n-1]), true
	}
	var u string
	if err := json.Unmarshal(b, &u); err != nil {
		return "", false
	}
	return u, true
}

// plainJSONString reports whether b, between a string's quotes, needs no
// decoding: no escape, quote or control character, and valid UTF-8.
func plainJSONString(b []byte) bool {
	for _, c := range b {
		if c == '\\' || c == '"' || c < 0x20 {
			return false
		}
	}
	return utf8.Valid(b)
}

// memberPath appends a member to a JSONPath: $.a, or $["a b"] when the
// name is not a plain identifier.
func memberPath(path, name string) string {
	plain := name != ""
	for _, c := range name {
		if !(c == '_' || c == '-' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
			plain = false
			break
		}
	}
	if plain {
		return path + "." + name
	}
	return path + "[" + strconv.Quote(name) + "]"
}
