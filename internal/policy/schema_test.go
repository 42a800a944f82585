package policy

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/dal-runtime/dal/internal/policy/gate"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

func compileSchema(t *testing.T, name string) *jsonschema.Schema {
	t.Helper()
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	// The audit refers to the input schema by its $id.
	f, err := os.Open(filepath.Join("..", "..", "docs", "schema", "policy-input.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	doc, err := jsonschema.UnmarshalJSON(f)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.AddResource("https://github.com/dal-runtime/dal/docs/schema/policy-input.schema.json", doc); err != nil {
		t.Fatal(err)
	}
	abs, err := filepath.Abs(filepath.Join("..", "..", "docs", "schema", name))
	if err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile(abs)
	if err != nil {
		t.Fatalf("%s does not compile as JSON Schema 2020-12: %v", name, err)
	}
	return s
}

func asDoc(t *testing.T, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	return doc
}

// TestSchemas: the inputs dal builds and the audit it writes are valid
// against docs/schema/policy-input.schema.json and
// policy-audit.schema.json.
func TestSchemas(t *testing.T) {
	in := compileSchema(t, "policy-input.schema.json")
	inputs := []*Input{
		httpIn(t, exchange("POST", "https://api.openai.com/v1/chat/completions?x=1", chat, nil), 12),
		httpIn(t, exchange("GET", "http://example.com/", "", nil), 0),
		Exec("/usr/bin/git", []string{"git", "push"}, "/w", "0.1", true),
		Write("/etc/passwd", "openat"),
		Connect("127.0.0.1:8080", "0"),
	}
	for _, i := range inputs {
		if err := in.Validate(asDoc(t, i.Doc)); err != nil {
			t.Errorf("%s input: %v", i.Kind, err)
		}
	}
	if err := in.Validate(asDoc(t, map[string]any{"kind": "exec", "argv": "git push"})); err == nil {
		t.Error("the input schema accepts an exec without its fields")
	}

	audit := compileSchema(t, "policy-audit.schema.json")
	g := newGate(load(t, "deny-git-push.rego"), Options{AskTimeout: time.Minute})
	for _, i := range inputs {
		g.Check(context.Background(), i)
	}
	g.Observe(context.Background(), Write("/etc/x", "mkdirat"))
	a := g.Audit()
	a.Decisions[0].Approval = &gate.Verdict{Approve: true, By: "uid 0 (root) via dal-exec approve", At: time.Now().UTC()}
	a.Decisions[0].ID = "1.1"
	if err := audit.Validate(asDoc(t, a)); err != nil {
		t.Fatalf("audit: %v", err)
	}
}
