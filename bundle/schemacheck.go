package bundle

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/big"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// The binary validates manifests with this small interpreter of the JSON
// Schema 2020-12 keywords the shipped schema uses, driven by the schema file
// itself. A general validator compiles every draft's metaschema at program
// start (3 ms on every dal-exec invocation); this one costs nothing until a
// bundle is read. It refuses to load a schema that uses any other keyword,
// so a keyword can never be skipped silently, and the tests check it against
// a full validator (santhosh-tekuri/jsonschema) on the same documents.

var annotations = map[string]bool{"$schema": true, "$id": true, "$comment": true, "title": true,
	"description": true, "default": true, "examples": true, "$defs": true}

var assertions = map[string]bool{"$ref": true, "type": true, "enum": true, "required": true, "properties": true,
	"additionalProperties": true, "propertyNames": true, "items": true, "pattern": true, "minLength": true,
	"minimum": true, "maximum": true, "format": true}

type schemaDoc struct {
	root     map[string]any
	patterns map[string]*regexp.Regexp
}

var loadSchema = sync.OnceValues(func() (*schemaDoc, error) {
	var root map[string]any
	dec := json.NewDecoder(bytes.NewReader(schemaJSON))
	dec.UseNumber()
	if err := dec.Decode(&root); err != nil {
		return nil, fmt.Errorf("embedded schema: %w", err)
	}
	d := &schemaDoc{root: root, patterns: map[string]*regexp.Regexp{}}
	if err := d.prepare(root, "#"); err != nil {
		return nil, fmt.Errorf("embedded schema: %w", err)
	}
	return d, nil
})

// prepare checks every keyword is known and compiles the patterns.
func (d *schemaDoc) prepare(s map[string]any, at string) error {
	for k, v := range s {
		switch {
		case k == "$defs" || k == "properties":
			for name, sub := range v.(map[string]any) {
				if err := d.prepare(sub.(map[string]any), at+"/"+k+"/"+name); err != nil {
					return err
				}
			}
		case k == "items" || k == "propertyNames" || (k == "additionalProperties" && isObject(v)):
			if err := d.prepare(v.(map[string]any), at+"/"+k); err != nil {
				return err
			}
		case k == "pattern":
			re, err := regexp.Compile(v.(string))
			if err != nil {
				return fmt.Errorf("%s: pattern: %w", at, err)
			}
			d.patterns[v.(string)] = re
		case k == "format":
			if f := v.(string); f != "uuid" && f != "date-time" {
				return fmt.Errorf("%s: format %q is not supported", at, f)
			}
		case annotations[k] || assertions[k]:
		default:
			return fmt.Errorf("%s: keyword %q is not supported by dal's validator", at, k)
		}
	}
	return nil
}

func isObject(v any) bool { _, ok := v.(map[string]any); return ok }

// validateJSON checks data against the schema at ref ("#" or "#/$defs/x").
func validateJSON(data []byte, ref string) error {
	d, err := loadSchema()
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var inst any
	if err := dec.Decode(&inst); err != nil {
		return fmt.Errorf("not JSON: %w", err)
	}
	s, err := d.resolve(ref)
	if err != nil {
		return err
	}
	return d.check(s, inst, "")
}

func (d *schemaDoc) resolve(ref string) (map[string]any, error) {
	cur := d.root
	for _, part := range strings.Split(strings.TrimPrefix(ref, "#"), "/")[1:] {
		next, ok := cur[part].(map[string]any)
		if !ok {
			return nil, fmt.Errorf("schema reference %s does not resolve", ref)
		}
		cur = next
	}
	return cur, nil
}

func fail(at, format string, args ...any) error {
	if at == "" {
		at = "/"
	}
	return fmt.Errorf("at %s: %s", at, fmt.Sprintf(format, args...))
}

// check validates inst at location at against schema s.
func (d *schemaDoc) check(s map[string]any, inst any, at string) error {
	if ref, ok := s["$ref"].(string); ok {
		target, err := d.resolve(ref)
		if err != nil {
			return err
		}
		if err := d.check(target, inst, at); err != nil {
			return err
		}
	}
	if t, ok := s["type"]; ok && !typeMatches(t, inst) {
		return fail(at, "got %s, want %v", typeName(inst), t)
	}
	if e, ok := s["enum"].([]any); ok && !slices.ContainsFunc(e, func(v any) bool { return jsonEqual(v, inst) }) {
		return fail(at, "value must be one of %v", e)
	}
	switch v := inst.(type) {
	case map[string]any:
		return d.checkObject(s, v, at)
	case []any:
		if items, ok := s["items"].(map[string]any); ok {
			for i, x := range v {
				if err := d.check(items, x, fmt.Sprintf("%s/%d", at, i)); err != nil {
					return err
				}
			}
		}
	case string:
		if p, ok := s["pattern"].(string); ok && !d.patterns[p].MatchString(v) {
			return fail(at, "%q does not match %s", v, p)
		}
		if n, ok := s["minLength"].(json.Number); ok {
			if min, _ := n.Int64(); int64(utf8.RuneCountInString(v)) < min {
				return fail(at, "%q is shorter than %d characters", v, min)
			}
		}
		switch s["format"] {
		case "uuid":
			if !uuidRE().MatchString(v) {
				return fail(at, "%q is not a uuid", v)
			}
		case "date-time":
			if _, err := time.Parse(time.RFC3339Nano, v); err != nil {
				return fail(at, "%q is not a date-time", v)
			}
		}
	case json.Number:
		x, _ := new(big.Float).SetString(v.String())
		if m, ok := s["minimum"].(json.Number); ok {
			if lim, _ := new(big.Float).SetString(m.String()); x.Cmp(lim) < 0 {
				return fail(at, "%s is less than %s", v, m)
			}
		}
		if m, ok := s["maximum"].(json.Number); ok {
			if lim, _ := new(big.Float).SetString(m.String()); x.Cmp(lim) > 0 {
				return fail(at, "%s is greater than %s", v, m)
			}
		}
	}
	return nil
}

func (d *schemaDoc) checkObject(s map[string]any, obj map[string]any, at string) error {
	if req, ok := s["required"].([]any); ok {
		for _, r := range req {
			if _, ok := obj[r.(string)]; !ok {
				return fail(at, "missing property %q", r)
			}
		}
	}
	props, _ := s["properties"].(map[string]any)
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		loc := at + "/" + k
		if pn, ok := s["propertyNames"].(map[string]any); ok {
			if err := d.check(pn, k, loc); err != nil {
				return fail(loc, "property name %q: %v", k, err)
			}
		}
		if sub, ok := props[k].(map[string]any); ok {
			if err := d.check(sub, obj[k], loc); err != nil {
				return err
			}
			continue
		}
		switch ap := s["additionalProperties"].(type) {
		case bool:
			if !ap {
				return fail(loc, "property %q is not allowed", k)
			}
		case map[string]any:
			if err := d.check(ap, obj[k], loc); err != nil {
				return err
			}
		}
	}
	return nil
}

var uuidRE = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)
})

func typeName(v any) string {
	switch x := v.(type) {
	case map[string]any:
		return "object"
	case []any:
		return "array"
	case string:
		return "string"
	case bool:
		return "boolean"
	case nil:
		return "null"
	case json.Number:
		if f, ok := new(big.Float).SetString(x.String()); ok && f.IsInt() {
			return "integer"
		}
		return "number"
	}
	return fmt.Sprintf("%T", v)
}

func typeMatches(t any, v any) bool {
	name := typeName(v)
	ok := func(want string) bool { return want == name || (want == "number" && name == "integer") }
	switch tt := t.(type) {
	case string:
		return ok(tt)
	case []any:
		return slices.ContainsFunc(tt, func(x any) bool { return ok(x.(string)) })
	}
	return false
}

func jsonEqual(a, b any) bool {
	an, aok := a.(json.Number)
	bn, bok := b.(json.Number)
	if aok && bok {
		x, _ := new(big.Float).SetString(an.String())
		y, _ := new(big.Float).SetString(bn.String())
		return x != nil && y != nil && x.Cmp(y) == 0
	}
	return a == b
}
