package match

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path"
	"regexp"
	"sort"
	"strings"
	"sync"

	"sigs.k8s.io/yaml"
)

// Structure compares a and b by structure with scalar values free and
// returns "" when they have the same structure, else the first structural
// difference in one line. name (a file path, or "" for a stream) picks
// the format:
//
//   - *.yaml, *.yml: YAML, compared as the JSON it converts to;
//   - *.json, and any text both sides of which are a JSON object or
//     array: JSON by structure: the same keys in every object, the same
//     type at every place (object, array, string, number, boolean, null),
//     the same length for every array; strings, numbers and booleans may
//     differ;
//   - anything else (or a side that does not parse): line by line, the
//     same number of lines and each line the same once every number is
//     replaced by # and every quoted string by "…".
func Structure(a, b []byte, name string) string {
	if bytes.Equal(a, b) {
		return ""
	}
	switch ext := strings.ToLower(path.Ext(name)); {
	case ext == ".yaml" || ext == ".yml":
		ja, erra := yaml.YAMLToJSON(a)
		jb, errb := yaml.YAMLToJSON(b)
		if erra == nil && errb == nil {
			if d, ok := jsonStructure(ja, jb); ok {
				return d
			}
		}
	case ext == ".json" || (looksJSON(a) && looksJSON(b)):
		if d, ok := jsonStructure(a, b); ok {
			return d
		}
	}
	return lineStructure(a, b)
}

func looksJSON(b []byte) bool {
	t := bytes.TrimSpace(b)
	return len(t) > 0 && (t[0] == '{' || t[0] == '[') && json.Valid(t)
}

// jsonStructure compares two JSON texts; ok is false when either does not
// parse.
func jsonStructure(a, b []byte) (string, bool) {
	va, erra := decode(a)
	vb, errb := decode(b)
	if erra != nil || errb != nil {
		return "", false
	}
	return shape("$", va, vb), true
}

func decode(b []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	if d.More() {
		return nil, fmt.Errorf("more than one JSON value")
	}
	return v, nil
}

func typeName(v any) string {
	switch v.(type) {
	case map[string]any:
		return "object"
	case []any:
		return "array"
	case string:
		return "string"
	case json.Number:
		return "number"
	case bool:
		return "boolean"
	case nil:
		return "null"
	}
	return fmt.Sprintf("%T", v)
}

// shape returns the first structural difference between a (recorded) and
// b (replayed) at JSON path p, "" when none.
func shape(p string, a, b any) string {
	ta, tb := typeName(a), typeName(b)
	if ta != tb {
		return fmt.Sprintf("%s: %s in the recording, %s in the replay", p, ta, tb)
	}
	switch x := a.(type) {
	case map[string]any:
		y := b.(map[string]any)
		keys := make([]string, 0, len(x)+len(y))
		for k := range x {
			keys = append(keys, k)
		}
		for k := range y {
			if _, ok := x[k]; !ok {
				keys = append(keys, k)
			}
		}
		sort.Strings(keys)
		for _, k := range keys {
			vx, inX := x[k]
			vy, inY := y[k]
			kp := p + "." + k
			switch {
			case !inY:
				return fmt.Sprintf("%s: in the recording, missing in the replay", kp)
			case !inX:
				return fmt.Sprintf("%s: in the replay, missing in the recording", kp)
			}
			if d := shape(kp, vx, vy); d != "" {
				return d
			}
		}
	case []any:
		y := b.([]any)
		if len(x) != len(y) {
			return fmt.Sprintf("%s: %d elements in the recording, %d in the replay", p, len(x), len(y))
		}
		for i := range x {
			if d := shape(fmt.Sprintf("%s[%d]", p, i), x[i], y[i]); d != "" {
				return d
			}
		}
	}
	return ""
}

var (
	quoted = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'`) })
	number = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`[-+]?[0-9]+(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?`) })
)

// maskLine is a line's structure: quoted strings and numbers masked.
func maskLine(l string) string {
	return number().ReplaceAllString(quoted().ReplaceAllString(l, `"…"`), "#")
}

func lineStructure(a, b []byte) string {
	la, lb := lines(a), lines(b)
	for i := 0; i < len(la) && i < len(lb); i++ {
		if ma, mb := maskLine(la[i]), maskLine(lb[i]); ma != mb {
			return fmt.Sprintf("line %d: %q in the recording, %q in the replay (numbers and quoted strings masked)", i+1, clip(ma), clip(mb))
		}
	}
	if len(la) != len(lb) {
		return fmt.Sprintf("%d lines in the recording, %d in the replay", len(la), len(lb))
	}
	return ""
}

func lines(b []byte) []string {
	s := strings.TrimSuffix(string(b), "\n")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

func clip(s string) string {
	if r := []rune(s); len(r) > 120 {
		return string(r[:120]) + "…"
	}
	return s
}
