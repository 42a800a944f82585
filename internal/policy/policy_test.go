package policy

import (
	"context"
	"net"
	"net/http"
	neturl "net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dal-runtime/dal/internal/netcap/har"
)

const examples = "../../examples/policies"

func load(t testing.TB, name string) *Policy {
	t.Helper()
	p, err := Load(context.Background(), filepath.Join(examples, name), Allow)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// exchange is a request as the proxy hands it to the gate.
func exchange(method, url, body string, h http.Header) *har.Exchange {
	if h == nil {
		h = http.Header{}
	}
	if body != "" {
		h.Set("Content-Type", "application/json")
	}
	x := &har.Exchange{Request: har.Request{Method: method, URL: url, Proto: "HTTP/1.1", Header: h, Body: []byte(body)}}
	// An absolute-URL request: the proxy dials the URL's host.
	if u, err := neturl.Parse(url); err == nil {
		port := u.Port()
		if port == "" {
			port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
		}
		x.Dest = net.JoinHostPort(u.Hostname(), port)
	}
	return x
}

func httpIn(t testing.TB, x *har.Exchange, tokens int) *Input {
	t.Helper()
	in, err := HTTP(x, har.NewRedactor(nil, nil), tokens)
	if err != nil {
		t.Fatal(err)
	}
	return in
}

func decide(t testing.TB, p *Policy, in *Input) Decision {
	t.Helper()
	v, err := p.input(in)
	if err != nil {
		t.Fatal(err)
	}
	return p.Decide(context.Background(), v)
}

const chat = `{"model":"gpt-4o","max_tokens":300,"messages":[{"role":"user","content":"hi"}]}`

// TestExamples: each example policy decides as its comment says.
func TestExamples(t *testing.T) {
	llm := exchange("POST", "https://api.openai.com/v1/chat/completions", chat, nil)
	other := exchange("POST", "https://hooks.example.com/notify", `{"text":"done"}`, nil)
	get := exchange("GET", "https://example.com/page?q=1", "", nil)
	for _, c := range []struct {
		file string
		in   *Input
		want Action
		why  string
	}{
		{"allow-llm-hosts.rego", httpIn(t, llm, 0), Allow, "LLM provider"},
		{"allow-llm-hosts.rego", httpIn(t, get, 0), Deny, "example.com is not an LLM provider"},
		{"allow-llm-hosts.rego", Exec("/usr/bin/git", []string{"git", "push"}, "/w", "0", false), Allow, ""},
		{"ask-post.rego", httpIn(t, other, 0), Ask, "POST to hooks.example.com, which is not an LLM provider"},
		{"ask-post.rego", httpIn(t, llm, 0), Allow, ""},
		{"ask-post.rego", httpIn(t, get, 0), Allow, ""},
		{"token-budget.rego", httpIn(t, llm, 1000), Allow, ""},
		{"token-budget.rego", httpIn(t, llm, 1800), Deny, "token budget of 2000: 1800 used, this call may add 300"},
		{"token-budget.rego", httpIn(t, get, 5000), Allow, ""},
	} {
		d := decide(t, load(t, c.file), c.in)
		if d.Action != c.want || d.Reason != c.why {
			t.Errorf("%s on %s %s: %+v, want %s %q", c.file, c.in.Kind, c.in.Subject, d, c.want, c.why)
		}
	}
}

// TestHTTPInput: the input carries the request's parts, credentials
// redacted, the JSON body parsed and the LLM figures.
func TestHTTPInput(t *testing.T) {
	h := http.Header{"Authorization": {"Bearer sk-secret-123456"}, "X-Trace": {"a"}}
	in := httpIn(t, exchange("POST", "https://api.openai.com:8443/v1/chat/completions?api_key=sk-q-999&x=1", chat, h), 42)
	d := in.Doc
	if d["kind"] != "http" || d["host"] != "api.openai.com" || d["port"] != 8443 || d["path"] != "/v1/chat/completions" || d["scheme"] != "https" {
		t.Fatalf("url parts: %v", d)
	}
	for _, secret := range []string{"sk-secret-123456", "sk-q-999"} {
		if strings.Contains(strings.ReplaceAll(in.Subject+renderAny(d), " ", ""), secret) {
			t.Fatalf("a credential reached the input: %v", d)
		}
	}
	if h := d["headers"].(map[string]any); h["x-trace"].([]any)[0] != "a" {
		t.Fatalf("headers: %v", h)
	}
	llm, _ := d["llm"].(map[string]any)
	if llm["provider"] != "openai" || llm["model"] != "gpt-4o" || llm["max_tokens"] != 300 || llm["tokens_so_far"] != 42 {
		t.Fatalf("llm: %v", llm)
	}
	if b := d["body"].(map[string]any); b["model"] != "gpt-4o" {
		t.Fatalf("body: %v", b)
	}
}

func renderAny(v any) string {
	var b strings.Builder
	var walk func(any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, y := range x {
				b.WriteString(k + "=")
				walk(y)
			}
		case []any:
			for _, y := range x {
				walk(y)
			}
		case string:
			b.WriteString(x + ";")
		}
	}
	walk(v)
	return b.String()
}

// TestBadPolicies: what cannot be used is refused with OPA's message and
// the file and line.
func TestBadPolicies(t *testing.T) {
	for _, c := range []struct{ name, src, want string }{
		{"syntax", "package dal\n\ndecision := {\"action\": \"deny\" if {\n", "syntax.rego:3: rego_parse_error"},
		{"shape", "package dal\n\ndecision := \"deny\"\n", `shape.rego:3: decision is "deny": it must be an object`},
		{"action", "package dal\n\ndecision := {\"action\": \"block\", \"reason\": \"x\"} if { input.kind == \"exec\" }\n", `action.rego:3: decision's action "block" is unknown`},
		{"key", "package dal\n\ndecision := {\"action\": \"deny\", \"why\": \"x\"}\n", `key.rego:3: decision has the key "why"`},
		{"noaction", "package dal\n\ndecision := {\"reason\": \"x\"}\n", "noaction.rego:3: decision has no action"},
		{"set", "package dal\n\ndecision contains \"deny\" if { true }\n", "set.rego:3: decision must be a single object"},
		{"none", "package dal\n\nallow := true\n", "the policy defines no decision"},
		{"other", "package other\n\ndecision := {\"action\": \"deny\"}\n", "the policy defines no decision"},
		{"http", "package dal\n\ndecision := {\"action\": \"deny\"} if { http.send({\"method\": \"get\", \"url\": \"http://x\"}) }\n", "http.rego:3: rego_type_error: undefined function http.send"},
		{"unsafe", "package dal\n\ndecision := {\"action\": \"deny\"} if { x == 1 }\n", "unsafe.rego:3: rego_unsafe_var_error"},
	} {
		dir := t.TempDir()
		p := filepath.Join(dir, c.name+".rego")
		os.WriteFile(p, []byte(c.src), 0o644)
		_, err := Load(context.Background(), p, Allow)
		var pe *Error
		if err == nil || !strings.Contains(err.Error(), c.want) || !errorsAs(err, &pe) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
	if _, err := Load(context.Background(), filepath.Join(t.TempDir(), "none.rego"), Allow); err == nil || !strings.Contains(err.Error(), "no such file") {
		t.Errorf("missing file: %v", err)
	}
	if _, err := Load(context.Background(), t.TempDir(), Allow); err == nil || !strings.Contains(err.Error(), "holds no .rego file") {
		t.Errorf("empty directory: %v", err)
	}
}

func errorsAs(err error, pe **Error) bool {
	e, ok := err.(*Error)
	*pe = e
	return ok
}

// TestRuntimeShapeDenies: a computed decision of the wrong shape, or a
// conflict between rules, denies and says why; undefined is the default.
func TestRuntimeShapeDenies(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "p.rego"), []byte(`package dal

d := {"action": input.argv[0]}

decision := d if input.kind == "exec"

decision := {"action": "deny"} if input.kind == "connect"
decision := {"action": "allow"} if input.port == 1
`), 0o644)
	p, err := Load(context.Background(), dir, Deny)
	if err != nil {
		t.Fatal(err)
	}
	if d := decide(t, p, Exec("/x", []string{"maybe"}, "/", "", false)); d.Action != Deny || !strings.Contains(d.Reason, "unknown action") {
		t.Fatalf("wrong action: %+v", d)
	}
	if d := decide(t, p, Exec("/x", []string{"ask"}, "/", "", false)); d.Action != Ask {
		t.Fatalf("computed ask: %+v", d)
	}
	if d := decide(t, p, Connect("127.0.0.1:1", "")); d.Action != Deny || !strings.Contains(d.Reason, "the policy failed") {
		t.Fatalf("conflict: %+v", d)
	}
	if d := decide(t, p, Write("/etc/x", "openat")); d.Action != Deny || d.Defined {
		t.Fatalf("undefined with --policy-default deny: %+v", d)
	}
}

// TestDenyGitPushExample: deny-git-push.rego catches git's pushes and a
// recursive rm of / however they are spelt, and lets their neighbours
// through (its comments list what it does not catch).
func TestDenyGitPushExample(t *testing.T) {
	p := load(t, "deny-git-push.rego")
	const push, rm = "git push is not allowed for agents", "rm -r of / or of a directory at its top is not allowed"
	git := func(path string, args ...string) *Input { return Exec(path, args, "/w", "0.1", false) }
	rmIn := func(cwd string, args ...string) *Input {
		return Exec("/bin/rm", append([]string{"rm"}, args...), cwd, "0", false)
	}
	for _, c := range []struct {
		in  *Input
		why string // "" means allowed
	}{
		{git("/usr/bin/git", "git", "push", "origin", "main"), push},
		{git("/usr/bin/git", "git", "-C", "repo", "push"), push},
		{git("/usr/bin/git", "git", "-c", "x=y", "push"), push},
		{git("/usr/bin/git", "/usr/bin/git", "--git-dir=.git", "--no-pager", "push", "-f"), push},
		{git("/usr/bin/git", "git", "--work-tree", "w", "--git-dir", ".git", "push"), push},
		{git("/usr/bin/git", "git", "send-pack", "../remote.git", "main"), push},
		{git("/usr/bin/git", "git", "-c", "core.x=1", "send-pack", "--all", "r"), push},
		{git("/usr/lib/git-core/git-send-pack", "git-send-pack", "r", "main"), push},
		{git("/usr/lib/git-core/git-push", "git-push", "origin"), push},
		{git("/usr/bin/git", "git", "-c", "alias.p=push", "p"), push},
		{git("/usr/bin/git", "git", "-c", "alias.ship=!git push origin", "ship"), push},
		{git("/usr/bin/ssh", "ssh", "git@example.com", "git-receive-pack 'repo.git'"), push},
		{git("/usr/bin/git", "git", "status"), ""},
		{git("/usr/bin/git", "git", "commit", "-m", "push"), ""},
		{git("/usr/bin/git", "git", "-c", "user.name=push", "commit", "-m", "x"), ""},
		{git("/usr/bin/git", "git", "-C", "push", "status"), ""},
		{git("/usr/bin/git", "git", "fetch", "origin"), ""},
		{httpIn(t, exchange("POST", "https://github.com/o/r.git/git-receive-pack", "", nil), 0), push},
		{httpIn(t, exchange("GET", "https://github.com/o/r.git/info/refs?service=git-receive-pack", "", nil), 0), push},
		{httpIn(t, exchange("GET", "https://github.com/o/r.git/info/refs?service=git-upload-pack", "", nil), 0), ""},
		{rmIn("/w", "-rf", "/"), rm},
		{rmIn("/w", "-fr", "/"), rm},
		{rmIn("/w", "-r", "-f", "/"), rm},
		{rmIn("/w", "-Rf", "/"), rm},
		{rmIn("/w", "--recursive", "--force", "/"), rm},
		{rmIn("/w", "--recursive", "/"), rm},
		{rmIn("/w", "--rec", "-f", "/"), rm},
		{rmIn("/w", "-rf", "--no-preserve-root", "/"), rm},
		{rmIn("/w", "-fr", "/*"), rm},
		{rmIn("/w", "-rf", "//"), rm},
		{rmIn("/w", "-rf", "/."), rm},
		{rmIn("/w", "-rf", "/etc"), rm},
		{rmIn("/w", "-rf", "/home/"), rm},
		{rmIn("/w", "-rf", "build", "/usr"), rm},
		{rmIn("/", "-rf", "bin"), rm},
		{rmIn("/", "-rf", "."), rm},
		{rmIn("/w", "-f", "--", "-r", "/"), ""}, // after --, -r is a file name
		{rmIn("/w", "-r", "--", "/"), rm},
		{rmIn("/w", "-rf", "build"), ""},
		{rmIn("/w", "-rf", "/tmp/x"), ""},
		{rmIn("/w", "-f", "/"), ""}, // not recursive: rm refuses a directory
		{rmIn("/w", "-rf", "."), ""},
	} {
		d := decide(t, p, c.in)
		want := Allow
		if c.why != "" {
			want = Deny
		}
		if d.Action != want || d.Reason != c.why {
			t.Errorf("%s %s: %+v, want %s %q", c.in.Kind, c.in.Subject, d, want, c.why)
		}
	}
}
