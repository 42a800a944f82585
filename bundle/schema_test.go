package bundle

import (
	"bytes"
	"crypto/ed25519"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

const docsSchema = "../docs/schema/execution-snapshot.schema.json"

// TestSchemaShipped: the schema in docs/ is the one dal embeds.
func TestSchemaShipped(t *testing.T) {
	t.Parallel()
	docs, err := os.ReadFile(docsSchema)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(docs, SchemaJSON()) {
		t.Fatalf("%s differs from bundle/execution-snapshot.schema.json: cp bundle/execution-snapshot.schema.json docs/schema/", docsSchema)
	}
}

// compileDocsSchema compiles the shipped file with the validator, from
// disk, independently of the embedded copy.
func compileDocsSchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	abs, err := filepath.Abs(docsSchema)
	if err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile(abs)
	if err != nil {
		t.Fatalf("the shipped schema does not compile as JSON Schema 2020-12: %v", err)
	}
	return s
}

func manifestDoc(t *testing.T, m *Manifest) map[string]any {
	t.Helper()
	m.Dal.FormatVersion = FormatVersion
	m.Dal.PublicKey = EncodePublicKey(testKey(1).Public().(ed25519.PublicKey))
	m.Dal.Files = map[string]string{"env.json": digestOf([]byte("x")), "fs-diff/a.txt": digestOf(nil)}
	m.Dal.Symlinks = map[string]string{"fs-diff/link": digestOf([]byte("a.txt"))}
	m.Dal.EmptyDirs = []string{"fs-diff/empty"}
	m.ReplayStatus = &ReplayStatus{MatchStatus: NotReplayed}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	return doc.(map[string]any)
}

// set changes the value at a slash path of doc; a nil value deletes it.
func set(doc map[string]any, path string, v any) {
	keys := strings.Split(path, "/")
	cur := doc
	for _, k := range keys[:len(keys)-1] {
		cur = cur[k].(map[string]any)
	}
	last := keys[len(keys)-1]
	if v == nil {
		delete(cur, last)
	} else {
		cur[last] = v
	}
}

func TestManifestSchema(t *testing.T) {
	t.Parallel()
	s := compileDocsSchema(t)
	cases := []struct {
		name string
		path string
		v    any // nil: delete
		ok   bool
		want string // in the error
	}{
		{name: "full manifest", ok: true},
		{name: "optional metrics absent", path: "metrics", ok: true},
		{name: "unknown field allowed", path: "dal/network_entries", v: json.Number("3"), ok: true},
		{name: "missing snapshot_id", path: "snapshot_id", want: "snapshot_id"},
		{name: "missing workflow_id", path: "workflow_id", want: "workflow_id"},
		{name: "missing captured_at", path: "captured_at", want: "captured_at"},
		{name: "missing config", path: "config", want: "config"},
		{name: "missing inputs", path: "inputs", want: "inputs"},
		{name: "missing outputs", path: "outputs", want: "outputs"},
		{name: "missing model id", path: "config/model/id", want: "id"},
		{name: "missing execution_mode", path: "config/execution_mode", want: "execution_mode"},
		{name: "missing dal", path: "dal", want: "dal"},
		{name: "missing dal files", path: "dal/files", want: "files"},
		{name: "missing dal public_key", path: "dal/public_key", want: "public_key"},
		{name: "bad execution_mode", path: "config/execution_mode", v: "fast", want: "execution_mode"},
		{name: "bad match_status", path: "replay_status/match_status", v: "mostly", want: "match_status"},
		{name: "bad operation", path: "outputs/artifacts_created", v: []any{map[string]any{"path": "x", "operation": "renamed"}}, want: "operation"},
		{name: "temperature above 2", path: "config/temperature", v: json.Number("2.5"), want: "temperature"},
		{name: "seed not an integer", path: "config/seed", v: json.Number("1.5"), want: "seed"},
		{name: "snapshot_id not a uuid", path: "snapshot_id", v: "snap-001", want: "snapshot_id"},
		{name: "captured_at not a date-time", path: "captured_at", v: "yesterday", want: "captured_at"},
		{name: "format_version 0", path: "dal/format_version", v: json.Number("0"), want: "format_version"},
		{name: "bad digest", path: "dal/files", v: map[string]any{"env.json": "md5:00"}, want: "env.json"},
		{name: "path escaping", path: "dal/files", v: map[string]any{"../etc/passwd": digestOf(nil)}, want: "../etc/passwd"},
		{name: "absolute path", path: "dal/files", v: map[string]any{"/etc/passwd": digestOf(nil)}, want: "/etc/passwd"},
		{name: "dot segment", path: "dal/symlinks", v: map[string]any{"fs-diff/./x": digestOf(nil)}, want: "fs-diff/./x"},
		{name: "dotfile allowed", path: "dal/files", v: map[string]any{"fs-diff/.env": digestOf(nil), "fs-diff/..x": digestOf(nil)}, ok: true},
		{name: "bad public key", path: "dal/public_key", v: "abc", want: "public_key"},
		{name: "environment not strings", path: "inputs/environment", v: map[string]any{"N": json.Number("1")}, want: "environment"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			doc := manifestDoc(t, fullManifest())
			if c.path != "" {
				set(doc, c.path, c.v)
			}
			err := s.Validate(doc)
			// dal's own validator (the one the binary uses) must agree
			// with the full one, and name the same thing.
			raw, _ := json.Marshal(doc)
			ours := ValidateManifest(raw)
			if (ours == nil) != (err == nil) {
				t.Fatalf("dal's validator says %v, the full validator %v", ours, err)
			}
			if ours != nil && !strings.Contains(ours.Error(), c.want) {
				t.Fatalf("dal's validator error %q does not mention %q", ours, c.want)
			}
			if c.ok {
				if err != nil {
					t.Fatalf("valid manifest refused: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("invalid manifest accepted")
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %q does not mention %q", err, c.want)
			}
		})
	}
}

// TestSchemaExamples: the schema's own examples and the manifests Commit
// writes validate.
func TestSchemaExamples(t *testing.T) {
	t.Parallel()
	s := compileDocsSchema(t)
	var schema struct {
		Examples []json.RawMessage `json:"examples"`
	}
	if err := json.Unmarshal(SchemaJSON(), &schema); err != nil {
		t.Fatal(err)
	}
	if len(schema.Examples) == 0 {
		t.Fatal("the schema has no example")
	}
	for i, ex := range schema.Examples {
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(ex))
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Validate(doc); err != nil {
			t.Errorf("example %d: %v", i, err)
		}
		if err := ValidateManifest(ex); err != nil {
			t.Errorf("example %d, dal's validator: %v", i, err)
		}
	}
	out := filepath.Join(t.TempDir(), "b")
	makeBundle(t, out)
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(must(os.ReadFile(filepath.Join(out, ManifestFile)))))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Validate(doc); err != nil {
		t.Fatalf("a committed manifest does not validate: %v", err)
	}
}

// TestReplayOutcomeSchema: replay outcomes have their own definition.
func TestReplayOutcomeSchema(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		doc string
		ok  bool
	}{
		{`{"at":"2026-01-25T15:00:00Z","fidelity":1,"match_status":"exact_match","components":{"stdout":true}}`, true},
		{`{"at":"2026-01-25T15:00:00Z","fidelity":1.5,"match_status":"exact_match"}`, false},
		{`{"at":"2026-01-25T15:00:00Z","fidelity":1,"match_status":"same"}`, false},
		{`{"fidelity":1,"match_status":"exact_match"}`, false},
		{`{"at":"2026-01-25T15:00:00Z","fidelity":0.5,"match_status":"partial_match","components":{"stdout":"yes"}}`, false},
	} {
		err := validateReplay([]byte(c.doc))
		if (err == nil) != c.ok {
			t.Errorf("%s: error %v, want ok=%v", c.doc, err, c.ok)
		}
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// TestValidatorRefusesUnknownKeywords: dal's validator never skips a
// keyword it does not implement.
func TestValidatorRefusesUnknownKeywords(t *testing.T) {
	t.Parallel()
	d := &schemaDoc{patterns: map[string]*regexp.Regexp{}}
	for _, s := range []map[string]any{
		{"oneOf": []any{}},
		{"properties": map[string]any{"a": map[string]any{"const": "x"}}},
		{"format": "email"},
	} {
		if err := d.prepare(s, "#"); err == nil {
			t.Errorf("schema %v accepted", s)
		}
	}
	if _, err := loadSchema(); err != nil {
		t.Fatalf("the shipped schema: %v", err)
	}
}
