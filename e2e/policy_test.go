package e2e

import (
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// The policy gate (docs/policy.md) with each example of
// examples/policies, on real agents: git and sh, curl, python.

func examplePolicy(t *testing.T, name string) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join("..", "examples", "policies", name))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// policyDir is a policy directory: an example and a file of the test's
// own (package dal), e.g. naming the local test server an LLM host.
func policyDir(t *testing.T, example, extra string) string {
	t.Helper()
	dir := t.TempDir()
	src := mustRead(t, examplePolicy(t, example))
	if err := os.WriteFile(filepath.Join(dir, example), src, 0o644); err != nil {
		t.Fatal(err)
	}
	if extra != "" {
		if err := os.WriteFile(filepath.Join(dir, "local.rego"), []byte("package dal\n\n"+extra+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// policyAudit is the part of policy.json the tests read.
type policyAudit struct {
	OPAVersion string `json:"opa_version"`
	Files      []struct {
		Name   string `json:"name"`
		SHA256 string `json:"sha256"`
	} `json:"files"`
	Decisions []struct {
		Kind     string `json:"kind"`
		Subject  string `json:"subject"`
		Action   string `json:"action"`
		Reason   string `json:"reason"`
		Allowed  bool   `json:"allowed"`
		ID       string `json:"id"`
		Approval *struct {
			Approve bool   `json:"approve"`
			By      string `json:"by"`
		} `json:"approval"`
	} `json:"decisions"`
}

func readAudit(t *testing.T, bundle string) policyAudit {
	t.Helper()
	var a policyAudit
	if err := json.Unmarshal(mustRead(t, filepath.Join(bundle, "policy.json")), &a); err != nil {
		t.Fatal(err)
	}
	var m struct {
		Config struct {
			Agent struct {
				RulesActive []string `json:"rules_active"`
			} `json:"agent"`
		} `json:"config"`
	}
	if err := json.Unmarshal(mustRead(t, filepath.Join(bundle, "manifest.json")), &m); err != nil || len(m.Config.Agent.RulesActive) == 0 {
		t.Fatalf("manifest: %v, rules_active %v", err, m.Config.Agent.RulesActive)
	}
	return a
}

// TestPolicyDeniesGitPush: deny-git-push.rego against a real git and
// shell: the push and rm -rf / fail with EACCES, the agent goes on, the
// bundle lists the decisions under its signature, replay re-applies them
// exactly, and a replay under another policy reports drift (exit 1).
func TestPolicyDeniesGitPush(t *testing.T) {
	t.Parallel()
	const rmDenied = "rm -r of / or of a directory at its top is not allowed"
	ws := t.TempDir()
	script := `set -u
git init -q -b main remote.git --bare
git init -q -b main work && cd work
git -c user.email=a@example.com -c user.name=agent commit -q --allow-empty -m one
git remote add origin ../remote.git
git status --short; echo "status=$?"
git push -q origin main; echo "push=$?"
git send-pack ../remote.git main 2>/dev/null; echo "send-pack=$?"
git -c x.y=z push -q origin main 2>/dev/null; echo "c-push=$?"
rm -rf / 2>/dev/null; echo "rm=$?"
rm -r -f / 2>/dev/null; echo "rm-r-f=$?"
rm --recursive --force / 2>/dev/null; echo "rm-long=$?"
touch /etc/dal-policy-probe 2>/dev/null; echo "etc=$?"
`
	if err := os.WriteFile(filepath.Join(ws, "agent.sh"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "bundle")
	env := []string{"DAL_KEY=" + filepath.Join(t.TempDir(), "k"), "XDG_RUNTIME_DIR=" + t.TempDir()}
	rec := dalIn(t, ws, env, "record", "--no-apply", "--policy", examplePolicy(t, "deny-git-push.rego"), "--out", out, "--", "sh", "agent.sh")
	if rec.code != 0 || rec.stdout != "status=0\npush=126\nsend-pack=126\nc-push=126\nrm=126\nrm-r-f=126\nrm-long=126\netc=1\n" {
		t.Fatalf("record: exit %d\nstdout %q\nstderr %s", rec.code, rec.stdout, rec.stderr)
	}
	if !strings.Contains(rec.stderr, "dal: policy denies exec git push -q origin main (git push is not allowed for agents)") {
		t.Fatalf("the log does not list the denial:\n%s", rec.stderr)
	}
	a := readAudit(t, out)
	denied := map[string]string{}
	for _, d := range a.Decisions {
		if d.Kind == "write" {
			denied[d.Subject] = "after the fact: " + d.Action
		}
		if d.Kind == "exec" && !d.Allowed {
			denied[d.Subject] = d.Reason
		}
	}
	if denied["git push -q origin main"] != "git push is not allowed for agents" || denied["git send-pack ../remote.git main"] != "git push is not allowed for agents" ||
		denied["git -c x.y=z push -q origin main"] != "git push is not allowed for agents" ||
		denied["rm -rf /"] != rmDenied || denied["rm -r -f /"] != rmDenied || denied["rm --recursive --force /"] != rmDenied ||
		!strings.HasPrefix(denied["openat /etc/dal-policy-probe"]+denied["utimensat /etc/dal-policy-probe"], "after the fact: allow") ||
		a.OPAVersion == "" || len(a.Files) != 1 || len(a.Files[0].SHA256) != 64 {
		t.Fatalf("policy.json: denied %v, %+v", denied, a)
	}
	if r := dalIn(t, ws, env, "verify", out); r.code != 0 {
		t.Fatalf("verify: %d %s", r.code, r.stderr)
	}

	rep := dalIn(t, ws, env, "replay", out)
	if rep.code != 0 || !strings.Contains(rep.stdout+rep.stderr, "ok     policy") {
		t.Fatalf("replay: exit %d\n%s%s", rep.code, rep.stdout, rep.stderr)
	}
	lax := filepath.Join(t.TempDir(), "lax.rego")
	os.WriteFile(lax, []byte("package dal\n\ndecision := {\"action\": \"allow\", \"reason\": \"anything goes\"} if input.kind == \"exec\"\n"), 0o644)
	drift := dalIn(t, ws, env, "replay", "--policy", lax, out)
	all := drift.stdout + drift.stderr
	if drift.code != 1 || !strings.Contains(all, "DRIFT  policy") ||
		!strings.Contains(all, "the recording's policy said deny (git push is not allowed for agents), the current one says allow (anything goes)") {
		t.Fatalf("replay under another policy: exit %d\n%s", drift.code, all)
	}
}

// TestPolicyBadInputExit2: a policy that does not compile or decides in
// the wrong shape is refused before the agent starts, with OPA's message
// and the file and line.
func TestPolicyBadInputExit2(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	marker := filepath.Join(dir, "ran")
	for _, c := range []struct{ src, want string }{
		{"package dal\n\ndecision := {\"action\": \"deny\" if {\n", "bad.rego:3: rego_parse_error"},
		{"package dal\n\ndecision := {\"action\": \"block\"}\n", `bad.rego:3: decision's action "block" is unknown`},
		{"package dal\n\ndecision := [\"deny\"]\n", "bad.rego:3: decision is [\"deny\"]"},
		// issue 38: input.request.path for input.path allowed everything.
		{"package dal\n\ndecision := {\"action\": \"deny\"} if input.request.path == \"/admin\"\n",
			"bad.rego:3: input.request.path is not a field of the policy input defined in docs/schema/policy-input.schema.json, so it would never match: use a field the schema defines"},
	} {
		p := filepath.Join(dir, "bad.rego")
		os.WriteFile(p, []byte(c.src), 0o644)
		r := dalExec(t, []string{"DAL_KEY=" + filepath.Join(dir, "k")}, "record", "--policy", p, "--out", filepath.Join(dir, "b"), "--", "touch", marker)
		if r.code != 2 || !strings.Contains(r.stderr, c.want) || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
			t.Errorf("exit %d, stderr %q, want %q on one line", r.code, r.stderr, c.want)
		}
	}
	r := dalExec(t, nil, "run", "--policy", examplePolicy(t, "deny-git-push.rego"), "--", "touch", marker)
	if r.code != 2 || !strings.Contains(r.stderr, "dal-exec run has no proxy or sandbox for --policy to gate: use dal-exec record --no-apply --policy") {
		t.Errorf("run --policy: exit %d, stderr %q", r.code, r.stderr)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the agent ran although the policy was refused")
	}
}

// TestPolicyAllowsLLMHostsOnly: allow-llm-hosts.rego (the test server
// named an LLM host by a file of its own beside it) against curl: the
// LLM call goes through, a request to another host gets 403 naming the
// reason and never reaches it.
func TestPolicyAllowsLLMHostsOnly(t *testing.T) {
	t.Parallel()
	srv := startLLMServer(t, false)
	var other atomic.Int32
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { other.Add(1) }))
	t.Cleanup(ts.Close)
	otherPort := ts.Listener.Addr().(*net.TCPAddr).Port
	pol := policyDir(t, "allow-llm-hosts.rego", `llm_hosts contains "127.0.0.1"`)
	ws := t.TempDir()
	script := `curl -s -o /dev/null -w "llm=%{http_code}\n" -H "Authorization: Bearer $OPENAI_API_KEY" -H "Content-Type: application/json" \
  -d '{"model":"m","messages":[{"role":"user","content":"hello"}]}' "$LLM_BASE/chat/completions"
curl -s -w "\nother=%{http_code}\n" "http://localhost:` + itoa(otherPort) + `/upload"
`
	os.WriteFile(filepath.Join(ws, "agent.sh"), []byte(script), 0o755)
	out := filepath.Join(t.TempDir(), "bundle")
	env := []string{"DAL_KEY=" + filepath.Join(t.TempDir(), "k"), "XDG_RUNTIME_DIR=" + t.TempDir(), "OPENAI_API_KEY=" + apiKey, "LLM_BASE=" + srv.base()}
	rec := dalIn(t, ws, env, "record", "--no-apply", "--policy", pol, "--allow-loopback", "127.0.0.1:"+itoa(srv.port),
		"--allow-loopback", "localhost:"+itoa(otherPort), "--keep-env", "OPENAI_API_KEY", "--keep-env", "LLM_BASE", "--out", out, "--", "sh", "agent.sh")
	if rec.code != 0 || !strings.Contains(rec.stdout, "llm=200\n") || !strings.Contains(rec.stdout, "other=403\n") ||
		!strings.Contains(rec.stdout, `dal policy: denied: localhost is not an LLM provider`) || !strings.Contains(rec.stdout, `"dal_policy_denied"`) {
		t.Fatalf("record: exit %d\nstdout %s\nstderr %s", rec.code, rec.stdout, rec.stderr)
	}
	if n := other.Load(); n != 0 {
		t.Fatalf("the denied host got %d requests", n)
	}
	if f := grepTree(t, out, apiKey); len(f) > 0 {
		t.Fatalf("the API key reached the bundle: %v", f)
	}
	srv.stop()
	rep := dalIn(t, ws, env, "replay", out)
	if rep.code != 0 || !strings.Contains(rep.stdout+rep.stderr, "ok     policy") {
		t.Fatalf("replay: exit %d\n%s%s", rep.code, rep.stdout, rep.stderr)
	}
}

// TestPolicyTokenBudget: token-budget.rego against a Python agent: the
// second call would pass the budget with its max tokens and gets 403.
func TestPolicyTokenBudget(t *testing.T) {
	t.Parallel()
	srv := startLLMServer(t, false)
	ws := t.TempDir()
	agent := `import json, os, urllib.request, urllib.error
words = " ".join(["word"] * 120)
for i in range(3):
    body = json.dumps({"model": "m", "max_tokens": 1900, "messages": [{"role": "user", "content": words}]}).encode()
    req = urllib.request.Request(os.environ["LLM_BASE"] + "/chat/completions", data=body,
        headers={"Authorization": "Bearer " + os.environ["OPENAI_API_KEY"], "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req) as r:
            print(i, r.status, json.load(r)["usage"]["total_tokens"] > 100)
    except urllib.error.HTTPError as e:
        print(i, e.code, json.load(e)["error"]["message"])
`
	os.WriteFile(filepath.Join(ws, "agent.py"), []byte(agent), 0o644)
	out := filepath.Join(t.TempDir(), "bundle")
	env := []string{"DAL_KEY=" + filepath.Join(t.TempDir(), "k"), "XDG_RUNTIME_DIR=" + t.TempDir(), "OPENAI_API_KEY=" + apiKey, "LLM_BASE=" + srv.base()}
	rec := dalIn(t, ws, env, "record", "--no-apply", "--policy", examplePolicy(t, "token-budget.rego"), "--allow-loopback", "127.0.0.1:"+itoa(srv.port),
		"--keep-env", "OPENAI_API_KEY", "--keep-env", "LLM_BASE", "--out", out, "--", "python3", "agent.py")
	lines := strings.Split(strings.TrimSpace(rec.stdout), "\n")
	if rec.code != 0 || len(lines) != 3 || lines[0] != "0 200 True" || !strings.HasPrefix(lines[1], "1 403 dal policy: denied: token budget of 2000: ") ||
		!strings.HasPrefix(lines[2], "2 403 ") {
		t.Fatalf("record: exit %d\nstdout %s\nstderr %s", rec.code, rec.stdout, rec.stderr)
	}
}

// pendingAsk waits until `dal-exec approve --list` shows a pending call
// whose line holds marker, and returns its ID.
func pendingAsk(t *testing.T, env []string, marker string) string {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		r := dalExec(t, env, "approve", "--list")
		for _, l := range strings.Split(r.stdout, "\n") {
			if strings.Contains(l, marker) {
				return strings.Fields(l)[0]
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("no pending call for %s", marker)
	return ""
}

// TestPolicyAskApprovedAndDenied: ask-post.rego against a Python agent
// that POSTs twice to a host that is not an LLM provider: the first call
// waits until dal-exec approve ID from another process lets it through,
// the second until dal-exec deny ID refuses it; the bundle keeps who
// decided each.
func TestPolicyAskApprovedAndDenied(t *testing.T) {
	t.Parallel()
	var got atomic.Int32
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { got.Add(1); w.Write([]byte("ok")) }))
	t.Cleanup(ts.Close)
	port := ts.Listener.Addr().(*net.TCPAddr).Port
	ws := t.TempDir()
	agent := `import urllib.request, urllib.error
for path in ("/first", "/second"):
    req = urllib.request.Request("http://localhost:` + itoa(port) + `" + path, data=b"{}", headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req) as r:
            print(path, r.status)
    except urllib.error.HTTPError as e:
        print(path, e.code)
`
	os.WriteFile(filepath.Join(ws, "agent.py"), []byte(agent), 0o644)
	out := filepath.Join(t.TempDir(), "bundle")
	env := []string{"DAL_KEY=" + filepath.Join(t.TempDir(), "k"), "XDG_RUNTIME_DIR=" + t.TempDir()}
	cmd := exec.Command(bin.exec, "record", "--no-apply", "--policy", examplePolicy(t, "ask-post.rego"), "--allow-loopback", "localhost:"+itoa(port),
		"--out", out, "--", "python3", "agent.py")
	cmd.Dir, cmd.Env = ws, append(os.Environ(), env...)
	var so, se strings.Builder
	cmd.Stdout, cmd.Stderr = &so, &se
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	id := pendingAsk(t, env, "/first")
	if r := dalExec(t, env, "approve", "--reason", "looked fine", id); r.code != 0 || r.stdout != "approved "+id+"\n" {
		t.Fatalf("approve: %d %q %s", r.code, r.stdout, r.stderr)
	}
	id2 := pendingAsk(t, env, "/second")
	if r := dalExec(t, env, "deny", id2); r.code != 0 {
		t.Fatalf("deny: %d %s", r.code, r.stderr)
	}
	if r := dalExec(t, env, "deny", id2); r.code != 2 || !strings.Contains(r.stderr, "no running dal-exec holds request") && !strings.Contains(r.stderr, "no pending call") {
		t.Fatalf("deny again: %d %s", r.code, r.stderr)
	}
	if err := cmd.Wait(); err != nil || so.String() != "/first 200\n/second 403\n" {
		t.Fatalf("record: %v\nstdout %s\nstderr %s", err, so.String(), se.String())
	}
	if n := got.Load(); n != 1 {
		t.Fatalf("the server got %d requests, want the approved one", n)
	}
	a := readAudit(t, out)
	var asks []string
	for _, d := range a.Decisions {
		if d.Action == "ask" && d.Approval != nil {
			asks = append(asks, d.ID+" "+d.Subject+" "+strings.Fields(d.Approval.By)[0]+" "+boolWord(d.Approval.Approve))
		}
	}
	if len(asks) != 2 || !strings.HasSuffix(asks[0], "uid approve") || !strings.HasSuffix(asks[1], "uid deny") ||
		!strings.Contains(asks[0], "/first") {
		t.Fatalf("asks in policy.json: %q", asks)
	}
}

func boolWord(b bool) string {
	if b {
		return "approve"
	}
	return "deny"
}

// TestPolicyAskTimesOut: nobody answers, --ask-timeout denies.
func TestPolicyAskTimesOut(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	out := filepath.Join(t.TempDir(), "bundle")
	env := []string{"DAL_KEY=" + filepath.Join(t.TempDir(), "k"), "XDG_RUNTIME_DIR=" + t.TempDir()}
	pol := filepath.Join(t.TempDir(), "ask.rego")
	os.WriteFile(pol, []byte("package dal\n\ndecision := {\"action\": \"ask\", \"reason\": \"touching files\"} if input.argv[0] == \"touch\"\n"), 0o644)
	rec := dalIn(t, ws, env, "record", "--policy", pol, "--ask-timeout", "300ms", "--out", out, "--", "sh", "-c", "touch made; echo touch=$?")
	if rec.code != 0 || rec.stdout != "touch=126\n" || !strings.Contains(rec.stderr, "denied by timeout") {
		t.Fatalf("record: exit %d\nstdout %q\nstderr %s", rec.code, rec.stdout, rec.stderr)
	}
}
