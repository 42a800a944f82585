package e2e

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// checkSchema fails t unless out, a command's --json output, is one JSON
// document valid against docs/schema/<name>, and returns it decoded.
func checkSchema(t *testing.T, name, out string) map[string]any {
	t.Helper()
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	abs, err := filepath.Abs(filepath.Join("..", "docs", "schema", name))
	if err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile(abs)
	if err != nil {
		t.Fatalf("%s does not compile as JSON Schema 2020-12: %v", name, err)
	}
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(out))
	if err != nil {
		t.Fatalf("the output is not one JSON document (%v):\n%s", err, out)
	}
	if err := s.Validate(doc); err != nil {
		t.Fatalf("the output does not match %s: %v\n%s", name, err, out)
	}
	var v map[string]any
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		return nil // an array (checkpoint list); the schema checked it
	}
	return v
}

// TestJSONVerdicts: verify, diff and consistency with --json print one
// JSON document on stdout, valid against its schema in docs/schema/, and
// their text on stderr; exit codes stay those of the text output.
func TestJSONVerdicts(t *testing.T) {
	t.Parallel()
	ws := workspace(t)
	dir := t.TempDir()
	key := []string{"DAL_KEY=" + filepath.Join(dir, "k")}
	for _, seed := range []string{"7", "8"} {
		if r := dalIn(t, ws, key, "record", "--no-apply", "--seed", seed, "--out", filepath.Join(dir, seed), "--", "python3", "agent.py"); r.code != 0 {
			t.Fatalf("record: %q", r.stderr)
		}
	}
	a, b := filepath.Join(dir, "7"), filepath.Join(dir, "8")

	r := dalIn(t, ws, key, "verify", "--json", "--key", filepath.Join(dir, "k.pub"), a)
	v := checkSchema(t, "verify.schema.json", r.stdout)
	if r.code != 0 || v["ok"] != true || !strings.Contains(r.stderr, ": ok — format 1") {
		t.Errorf("verify --json: exit %d, ok %v, stderr %q", r.code, v["ok"], r.stderr)
	}
	if s, _ := v["signer"].(map[string]any); s["trusted"] != true {
		t.Errorf("verify --json --key names the signer untrusted: %v", v["signer"])
	}

	if err := os.WriteFile(filepath.Join(b, "logs", "stdout"), []byte("changed\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r = dalIn(t, ws, key, "verify", "--json", b)
	v = checkSchema(t, "verify.schema.json", r.stdout)
	e, _ := v["error"].(map[string]any)
	if r.code != 2 || v["ok"] != false || e["kind"] != "corrupt" || e["file"] != "logs/stdout" || !strings.Contains(r.stderr, "logs/stdout") {
		t.Errorf("verify --json of a changed bundle: exit %d, %v, stderr %q", r.code, v, r.stderr)
	}
	if r := dalIn(t, ws, key, "verify", "--json"); r.code != 2 || r.stdout != "" {
		t.Errorf("verify --json without a bundle: exit %d, stdout %q (a usage mistake prints no JSON)", r.code, r.stdout)
	}

	if err := os.RemoveAll(b); err != nil {
		t.Fatal(err)
	}
	if r := dalIn(t, ws, key, "record", "--no-apply", "--seed", "8", "--out", b, "--", "python3", "agent.py"); r.code != 0 {
		t.Fatalf("record: %q", r.stderr)
	}
	r = dalIn(t, ws, key, "diff", "--json", a, b)
	d := checkSchema(t, "diff.schema.json", r.stdout)
	differ := map[string]bool{}
	for _, c := range d["components"].([]any) {
		c := c.(map[string]any)
		if c["same"] == false {
			differ[c["name"].(string)] = true
		}
	}
	if r.code != 1 || d["same"] != false || !differ["seed"] || !differ["stdout"] || differ["command"] || !strings.Contains(r.stderr, "DIFFERENT  seed") {
		t.Errorf("diff --json of two seeds: exit %d, differing %v, stderr %q", r.code, differ, r.stderr)
	}
	r = dalIn(t, ws, key, "diff", "--json", a, a)
	if d := checkSchema(t, "diff.schema.json", r.stdout); r.code != 0 || d["same"] != true {
		t.Errorf("diff --json of a bundle with itself: exit %d, %v", r.code, d)
	}

	report := filepath.Join(t.TempDir(), "eval")
	r = dalExec(t, key, "consistency", "--json", "--workspace", t.TempDir(), "--runs", "2", "--report", report, "--", "sh", "-c", "echo 42")
	c := checkSchema(t, "consistency-report.schema.json", r.stdout)
	if cs, _ := c["consensus"].(map[string]any); r.code != 0 || cs["verdict"] != "decided" || !strings.Contains(r.stderr, "consensus: decided") {
		t.Errorf("consistency --json: exit %d, consensus %v, stderr %q", r.code, c["consensus"], r.stderr)
	}
	if file, err := os.ReadFile(filepath.Join(report, "report.json")); err != nil || !bytes.Equal(file, []byte(r.stdout)) {
		t.Errorf("consistency --json prints another report than report.json (%v)", err)
	}
	r = dalExec(t, key, "consistency", "--json", "--shard", "1/2", "--runs", "2", "--report", t.TempDir(), "--", "true")
	if r.code != 2 || r.stdout != "" || !strings.Contains(r.stderr, "--json prints the report, which a shard does not write") {
		t.Errorf("consistency --json --shard: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
}
