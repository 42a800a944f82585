package rego

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dal-runtime/dal/internal/policy/engine"
)

// TestSchemaCopy: the embedded schema is docs/schema's.
func TestSchemaCopy(t *testing.T) {
	docs, err := os.ReadFile(filepath.Join("..", "..", "..", SchemaName))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(docs, inputSchema) {
		t.Fatalf("%s differs from internal/policy/rego/policy-input.schema.json: cp %s internal/policy/rego/", SchemaName, SchemaName)
	}
}

func compile(t *testing.T, src string) error {
	t.Helper()
	_, err := Engine{}.Compile(context.Background(), []engine.Source{{Name: "p.rego", Data: []byte("package dal\n\n" + src + "\n")}})
	return err
}

// TestUnknownInputField: a policy naming a field the input schema does
// not define is refused at compile time with one sentence naming the
// field, its line and the schema; every field the schema defines
// compiles.
func TestUnknownInputField(t *testing.T) {
	for _, ref := range []string{
		"input.request.path",     // issue 38: for input.path
		"input.argvs[0]",         // a typo
		"input.llm.temperature",  // not in llm
		"input.destination.addr", // not in destination
		"input.headers_",
	} {
		err := compile(t, `decision := {"action": "deny"} if `+ref+` == "x"`)
		want := "the policy does not compile: p.rego:3: " + ref + " is not a field of the policy input defined in docs/schema/policy-input.schema.json, so it would never match: use a field the schema defines"
		if err == nil || err.Error() != want {
			t.Errorf("%s: %v\nwant %s", ref, err, want)
		}
	}
	for _, ref := range []string{
		"input.kind", "input.method", "input.url", "input.scheme", "input.host", "input.port", "input.path",
		"input.query.q[0]", "input.headers.authorization[0]", "input.body.model", "input.body.messages[0].content",
		"input.body_size", "input.llm.provider", "input.llm.api", "input.llm.model", "input.llm.max_tokens",
		"input.llm.tokens_so_far", "input.destination.host", "input.destination.port",
		"input.argv[0]", "input.cwd", "input.stream", "input.truncated", "input.operation", "input.address",
	} {
		if err := compile(t, `decision := {"action": "deny"} if `+ref+` == `+ref); err != nil {
			t.Errorf("%s: %v", ref, err)
		}
	}
	// A comparison that can never hold is refused too, saying why.
	err := compile(t, `decision := {"action": "deny"} if input.port == "443"`)
	if err == nil || !strings.Contains(err.Error(), "match error (left: number; right: string)") {
		t.Errorf("input.port == \"443\": %v", err)
	}
	// Whole objects and dynamic keys stay usable.
	if err := compile(t, "decision := {\"action\": \"deny\"} if {\n\tsome k, v in input.headers\n\tk == \"x\"\n\tv[0] == input[\"path\"]\n}"); err != nil {
		t.Errorf("dynamic access: %v", err)
	}
}

// TestExamplesCompile: the shipped policies name only fields of the
// schema.
func TestExamplesCompile(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "..", "..", "examples", "policies", "*.rego"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no example policies: %v", err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := (Engine{}).Compile(context.Background(), []engine.Source{{Name: filepath.Base(f), Data: b}}); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
}
