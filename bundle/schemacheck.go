package bundle

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// The binary validates manifests with this small validator of the JSON
// Schema 2020-12 keywords the shipped schema uses, compiled from the schema
// file itself the first time a bundle is read. A general validator
// compiles every draft's metaschema at program start (3 ms on every
// dal-exec invocation); this one costs nothing until then. It refuses to
// load a schema that uses any other keyword, so a keyword can never be
// skipped silently, and the tests check it against a full validator
// (santhosh-tekuri/jsonschema) on the same documents.

var annotations = map[string]bool{"$schema": true, "$id": true, "$comment": true, "title": true,
	"description": true, "default": true, "examples": true, "$defs": true}

var assertions = map[string]bool{"$ref": true, "type": true, "enum": true, "required": true, "properties": true,
	"additionalProperties": true, "propertyNames": true, "items": true, "pattern": true, "minLength": true,
	"minimum": true, "maximum": true, "format": true}

type schemaDoc struct {
	root     map[string]any
	patterns map[string]*regexp.Regexp
	nodes    map[string]*node // compiled schemas by reference ("#", "#/$defs/x")
}

// node is one compiled schema: its keywords as fields, $ref resolved.
type node struct {
	ref           *node
	types         []string // nil: any
	enum          []any
	required      []string
	props         map[string]*node
	additional    *node
	closed        bool // additionalProperties: false
	propertyNames *node
	items         *node
	pattern       *regexp.Regexp
	patternText   string
	minLength     int64 // -1: none
	format        string
	minimum       *big.Float
	maximum       *big.Float
	minText       string
	maxText       string
}

var loadSchema = sync.OnceValues(func() (*schemaDoc, error) {
	var root map[string]any
	dec := json.NewDecoder(bytes.NewReader(schemaJSON))
	dec.UseNumber()
	if err := dec.Decode(&root); err != nil {
		return nil, fmt.Errorf("embedded schema: %w", err)
	}
	d := &schemaDoc{root: root, patterns: map[string]*regexp.Regexp{}, nodes: map[string]*node{}}
	if err := d.prepare(root, "#"); err != nil {
		return nil, fmt.Errorf("embedded schema: %w", err)
	}
	// Every definition is compiled here, so that validation only reads
	// d.nodes, from any goroutine.
	refs := []string{"#"}
	for name := range root["$defs"].(map[string]any) {
		refs = append(refs, "#/$defs/"+name)
	}
	for _, ref := range refs {
		if _, err := d.compileRef(ref); err != nil {
			return nil, fmt.Errorf("embedded schema: %w", err)
		}
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

// compileRef compiles the schema at ref once; a reference met again
// while it compiles (a recursive schema) gets the same node.
func (d *schemaDoc) compileRef(ref string) (*node, error) {
	if n, ok := d.nodes[ref]; ok {
		return n, nil
	}
	s, err := d.resolve(ref)
	if err != nil {
		return nil, err
	}
	n := &node{}
	d.nodes[ref] = n
	return n, d.compile(n, s)
}

// compile fills n from the schema object s.
func (d *schemaDoc) compile(n *node, s map[string]any) (err error) {
	sub := func(v any) *node {
		if err != nil {
			return nil
		}
		c := &node{}
		err = d.compile(c, v.(map[string]any))
		return c
	}
	n.minLength = -1
	if ref, ok := s["$ref"].(string); ok {
		if n.ref, err = d.compileRef(ref); err != nil {
			return err
		}
	}
	switch t := s["type"].(type) {
	case string:
		n.types = []string{t}
	case []any:
		n.types = []string{}
		for _, x := range t {
			n.types = append(n.types, x.(string))
		}
	}
	n.enum, _ = s["enum"].([]any)
	for _, r := range asSlice(s["required"]) {
		n.required = append(n.required, r.(string))
	}
	if props, ok := s["properties"].(map[string]any); ok {
		n.props = map[string]*node{}
		for k, v := range props {
			n.props[k] = sub(v)
		}
	}
	switch ap := s["additionalProperties"].(type) {
	case bool:
		n.closed = !ap
	case map[string]any:
		n.additional = sub(ap)
	}
	if pn, ok := s["propertyNames"]; ok {
		n.propertyNames = sub(pn)
	}
	if it, ok := s["items"]; ok {
		n.items = sub(it)
	}
	if p, ok := s["pattern"].(string); ok {
		n.pattern, n.patternText = d.patterns[p], p
	}
	if m, ok := s["minLength"].(json.Number); ok {
		n.minLength, _ = m.Int64()
	}
	n.format, _ = s["format"].(string)
	if m, ok := s["minimum"].(json.Number); ok {
		n.minimum, _ = new(big.Float).SetString(m.String())
		n.minText = m.String()
	}
	if m, ok := s["maximum"].(json.Number); ok {
		n.maximum, _ = new(big.Float).SetString(m.String())
		n.maxText = m.String()
	}
	return err
}

func asSlice(v any) []any { s, _ := v.([]any); return s }

// validateJSON checks data against the schema at ref ("#" or "#/$defs/x").
func validateJSON(data []byte, ref string) error {
	inst, err := decodeInstance(data)
	if err != nil {
		return err
	}
	return validateInstance(inst, ref)
}

// decodeInstance decodes a JSON document for validateInstance.
func decodeInstance(data []byte) (any, error) {
	inst, err := decodeDocument(data)
	if err != nil {
		return nil, fmt.Errorf("not JSON: %w", err)
	}
	return inst, nil
}

// decodeDocument decodes one JSON value, numbers as json.Number, and
// refuses anything after it, as json.Unmarshal does.
func decodeDocument(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var inst any
	if err := dec.Decode(&inst); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("invalid character after top-level value")
	}
	return inst, nil
}

// validateInstance checks a decoded document against the schema at ref.
// The first pass visits an object's properties in map order; only when
// it fails does a second pass, in sorted order, name the first bad
// location, so that the message does not depend on the map.
func validateInstance(inst any, ref string) error {
	d, err := loadSchema()
	if err != nil {
		return err
	}
	n, ok := d.nodes[ref]
	if !ok {
		return fmt.Errorf("schema reference %s does not resolve", ref)
	}
	if (&checker{}).check(n, inst, nil) == nil {
		return nil
	}
	return (&checker{sorted: true}).check(n, inst, nil)
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

// loc is a location in the instance, built only when a message needs it.
type loc struct {
	parent *loc
	key    string
}

func (l *loc) String() string {
	if l == nil {
		return "/"
	}
	var parts []string
	for ; l != nil; l = l.parent {
		parts = append(parts, l.key)
	}
	slices.Reverse(parts)
	return "/" + strings.Join(parts, "/")
}

func fail(at *loc, format string, args ...any) error {
	return fmt.Errorf("at %s: %s", at, fmt.Sprintf(format, args...))
}

type checker struct{ sorted bool }

// check validates inst at location at against n.
func (c *checker) check(n *node, inst any, at *loc) error {
	if n.ref != nil {
		if err := c.check(n.ref, inst, at); err != nil {
			return err
		}
	}
	if n.types != nil && !typeMatches(n.types, inst) {
		return fail(at, "got %s, want %s", typeName(inst), typeText(n.types))
	}
	if n.enum != nil && !slices.ContainsFunc(n.enum, func(v any) bool { return jsonEqual(v, inst) }) {
		return fail(at, "value must be one of %v", n.enum)
	}
	switch v := inst.(type) {
	case map[string]any:
		return c.checkObject(n, v, at)
	case []any:
		if n.items != nil {
			for i, x := range v {
				if err := c.check(n.items, x, &loc{at, strconv.Itoa(i)}); err != nil {
					return err
				}
			}
		}
	case string:
		if n.pattern != nil && !n.pattern.MatchString(v) {
			return fail(at, "%q does not match %s", v, n.patternText)
		}
		if n.minLength >= 0 && int64(utf8.RuneCountInString(v)) < n.minLength {
			return fail(at, "%q is shorter than %d characters", v, n.minLength)
		}
		switch n.format {
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
		if n.minimum == nil && n.maximum == nil {
			return nil
		}
		x, _ := new(big.Float).SetString(v.String())
		if n.minimum != nil && x.Cmp(n.minimum) < 0 {
			return fail(at, "%s is less than %s", v, n.minText)
		}
		if n.maximum != nil && x.Cmp(n.maximum) > 0 {
			return fail(at, "%s is greater than %s", v, n.maxText)
		}
	}
	return nil
}

func (c *checker) checkObject(n *node, obj map[string]any, at *loc) error {
	for _, r := range n.required {
		if _, ok := obj[r]; !ok {
			return fail(at, "missing property %q", r)
		}
	}
	visit := func(k string, v any) error {
		l := &loc{at, k}
		if n.propertyNames != nil {
			if err := c.check(n.propertyNames, k, l); err != nil {
				return fail(l, "property name %q: %v", k, err)
			}
		}
		if sub, ok := n.props[k]; ok {
			return c.check(sub, v, l)
		}
		switch {
		case n.closed:
			return fail(l, "property %q is not allowed", k)
		case n.additional != nil:
			return c.check(n.additional, v, l)
		}
		return nil
	}
	if !c.sorted {
		for k, v := range obj {
			if err := visit(k, v); err != nil {
				return err
			}
		}
		return nil
	}
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if err := visit(k, obj[k]); err != nil {
			return err
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
		if !strings.ContainsAny(x.String(), ".eE") {
			return "integer"
		}
		if f, ok := new(big.Float).SetString(x.String()); ok && f.IsInt() {
			return "integer"
		}
		return "number"
	}
	return fmt.Sprintf("%T", v)
}

func typeMatches(types []string, v any) bool {
	name := typeName(v)
	return slices.ContainsFunc(types, func(want string) bool { return want == name || (want == "number" && name == "integer") })
}

// typeText writes types as the schema does: "string", or [a b].
func typeText(types []string) string {
	if len(types) == 1 {
		return types[0]
	}
	return fmt.Sprintf("%v", types)
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
