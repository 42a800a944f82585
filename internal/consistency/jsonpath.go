package consistency

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// jsonPath is a parsed --answer-json expression: $ followed by steps,
// .name or ['name'] / ["name"] for an object's member, [N] for an array's
// element (negative N counts from the end: [-1] is the last). It is the
// common subset of JSONPath and jq paths; there are no wildcards or
// filters, so a path names at most one value.
type jsonPath []jsonStep

type jsonStep struct {
	key   string
	index int
	isKey bool
}

func (s jsonStep) String() string {
	if s.isKey {
		return strconv.Quote(s.key)
	}
	return fmt.Sprintf("[%d]", s.index)
}

// parseJSONPath reads an expression; the error says where it went wrong.
func parseJSONPath(expr string) (jsonPath, error) {
	if !strings.HasPrefix(expr, "$") {
		return nil, fmt.Errorf("JSON path %q must start with $, e.g. $.final.answer", expr)
	}
	var path jsonPath
	rest := expr[1:]
	for rest != "" {
		switch rest[0] {
		case '.':
			end := 1
			for end < len(rest) && rest[end] != '.' && rest[end] != '[' {
				end++
			}
			if end == 1 {
				return nil, fmt.Errorf("JSON path %q has an empty member name after a dot", expr)
			}
			path = append(path, jsonStep{key: rest[1:end], isKey: true})
			rest = rest[end:]
		case '[':
			end := strings.IndexByte(rest, ']')
			if len(rest) > 1 && (rest[1] == '\'' || rest[1] == '"') {
				q := rest[1]
				close := strings.IndexByte(rest[2:], q)
				if close < 0 || 2+close+1 >= len(rest) || rest[2+close+1] != ']' {
					return nil, fmt.Errorf("JSON path %q has an unterminated [%c...%c]", expr, q, q)
				}
				path = append(path, jsonStep{key: rest[2 : 2+close], isKey: true})
				rest = rest[2+close+2:]
				continue
			}
			if end < 0 {
				return nil, fmt.Errorf("JSON path %q has a [ without ]", expr)
			}
			n, err := strconv.Atoi(rest[1:end])
			if err != nil {
				return nil, fmt.Errorf("JSON path %q: [%s] is neither an index nor a quoted name", expr, rest[1:end])
			}
			path = append(path, jsonStep{index: n})
			rest = rest[end+1:]
		default:
			return nil, fmt.Errorf("JSON path %q: expected . or [ at %q", expr, rest)
		}
	}
	return path, nil
}

// find evaluates the path on the JSON in data (see decodeJSON) and returns
// the value as text: a string's contents, anything else as compact JSON
// (object members sorted, numbers as written).
func (p jsonPath) find(data []byte) (string, error) {
	v, err := decodeJSON(data)
	if err != nil {
		return "", err
	}
	for i, s := range p {
		where := "$"
		for _, prev := range p[:i] {
			where += prev.String()
		}
		switch x := v.(type) {
		case map[string]any:
			if !s.isKey {
				return "", fmt.Errorf("%s is an object, not an array to take %s of", where, s)
			}
			m, ok := x[s.key]
			if !ok {
				return "", fmt.Errorf("%s has no member %q", where, s.key)
			}
			v = m
		case []any:
			if s.isKey {
				return "", fmt.Errorf("%s is an array, not an object with member %q", where, s.key)
			}
			k := s.index
			if k < 0 {
				k += len(x)
			}
			if k < 0 || k >= len(x) {
				return "", fmt.Errorf("%s has %d elements, no %s", where, len(x), s)
			}
			v = x[k]
		default:
			return "", fmt.Errorf("%s is a %s, not an object or array", where, kind(v))
		}
	}
	if s, ok := v.(string); ok {
		return s, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return "", err
	}
	return string(b), nil
}

func kind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case json.Number:
		return "number"
	case string:
		return "string"
	}
	return "value"
}
