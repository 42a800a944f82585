package e2e

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/dal-runtime/dal/internal/provtest"
)

// The answers of the validation tests' LLM: the recorded one, a slightly
// different one (one word: similarity 0.963971 by dal's built-in measure,
// above 0.95) and another one altogether.
const (
	answerBase  = "The capital of France is Paris. It sits on the Seine and is known for the Eiffel Tower, the Louvre museum and its cafes."
	answerClose = "The capital of France is Paris. It sits on the Seine and is famous for the Eiffel Tower, the Louvre museum and its cafes."
	answerFar   = "Bonjour! I would rather talk about the weather today: sunny with a light breeze."
)

// validationAgent asks the LLM at $LLM_URL once (temperature $TEMP,
// seed 1; the Python shim's dal.phase and dal.iteration mark its phase
// and its artifact), prints the answer and writes out/answer.json.
const validationAgent = `import json, os, sys, urllib.request, urllib.error
import dal
dal.phase("ask")
body = {"model": "m-test", "messages": [{"role": "user", "content": "Tell me about Paris"}], "seed": 1}
if os.environ.get("TEMP"):
    body["temperature"] = float(os.environ["TEMP"])
req = urllib.request.Request(os.environ["LLM_URL"], data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
try:
    text = json.load(urllib.request.urlopen(req))["choices"][0]["message"]["content"]
except urllib.error.HTTPError as e:
    print("refused:", e.code, e.read().decode(), file=sys.stderr)
    sys.exit(3)
print(text)
os.makedirs("out", exist_ok=True)
with open("out/answer.json", "w") as f:
    json.dump({"answer": text, "words": len(text.split())}, f)
dal.iteration(score=0.9, artifacts=["out/answer.json"])
`

// llm is an in-test OpenAI-compatible chat completions server that gives
// its answers in turn (the last one again once they run out).
type llm struct {
	mu      sync.Mutex
	answers []string
	calls   int
	srv     *httptest.Server
}

func newLLM(t *testing.T, answers ...string) *llm {
	l := &llm{answers: answers}
	l.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		l.mu.Lock()
		text := l.answers[min(l.calls, len(l.answers)-1)]
		l.calls++
		l.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"id": "chatcmpl-1", "object": "chat.completion", "model": "m-test",
			"choices": []any{map[string]any{"index": 0, "message": map[string]any{"role": "assistant", "content": text}, "finish_reason": "stop"}},
			"usage":   map[string]any{"prompt_tokens": 5, "completion_tokens": 20, "total_tokens": 25}})
	}))
	t.Cleanup(l.srv.Close)
	return l
}

func (l *llm) hostPort() string {
	u, _ := url.Parse(l.srv.URL)
	return u.Host
}

// validationRun records the agent against l in a fresh workspace and
// returns the workspace, the bundle and the environment to reuse.
func validationRun(t *testing.T, l *llm, extraEnv []string, recordArgs ...string) (ws, bundlePath string, env []string) {
	t.Helper()
	ws = t.TempDir()
	agent := filepath.Join(ws, "agent.py")
	if err := os.WriteFile(agent, []byte(validationAgent), 0o644); err != nil {
		t.Fatal(err)
	}
	bundlePath = filepath.Join(t.TempDir(), "run1")
	env = append([]string{"DAL_KEY=" + filepath.Join(t.TempDir(), "k"), "LLM_URL=" + l.srv.URL + "/v1/chat/completions", "TEMP=0",
		"DAL_CHECKPOINTS=" + filepath.Join(t.TempDir(), "store")}, extraEnv...)
	args := append([]string{"record", "--no-apply", "--allow-loopback", l.hostPort(), "--keep-env", "LLM_URL", "--keep-env", "TEMP", "--out", bundlePath}, recordArgs...)
	rec := dalIn(t, ws, env, append(args, "--", "python3", "agent.py")...)
	if rec.code != 0 {
		t.Fatalf("record: exit %d\n%s", rec.code, rec.stderr)
	}
	return ws, bundlePath, env
}

type liveVerdict struct {
	MatchStatus string `json:"match_status"`
	Live        bool   `json:"live"`
	NewBundle   string `json:"new_bundle"`
	Components  []struct {
		Name       string   `json:"name"`
		Match      bool     `json:"match"`
		Strategy   string   `json:"strategy"`
		Status     string   `json:"match_status"`
		Similarity *float64 `json:"similarity"`
		First      string   `json:"first"`
	} `json:"components"`
}

func liveReplay(t *testing.T, ws string, env []string, l *llm, b string, args ...string) (result, liveVerdict) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "live")
	r := dalIn(t, ws, env, append(append([]string{"replay", "--live", "--json", "--out", out, "--allow-loopback", l.hostPort()}, args...), b)...)
	var v liveVerdict
	if r.code == 0 || r.code == 1 {
		if err := json.Unmarshal([]byte(r.stdout), &v); err != nil {
			t.Fatalf("replay --live --json: %v\n%s\n%s", err, r.stdout, r.stderr)
		}
	}
	return r, v
}

func (v liveVerdict) component(name string) (c struct {
	Name       string   `json:"name"`
	Match      bool     `json:"match"`
	Strategy   string   `json:"strategy"`
	Status     string   `json:"match_status"`
	Similarity *float64 `json:"similarity"`
	First      string   `json:"first"`
}) {
	for _, x := range v.Components {
		if x.Name == name {
			return x
		}
	}
	return c
}

// TestLiveReplaySemanticMatch re-executes a recording against an LLM
// whose answer changed a little: exact matching finds drift, semantic
// matching of stdout and prompts with a structural fs_diff (the JSON
// artifact holds the answer) finds a semantic match above 0.95 and a
// partial one below a stricter threshold, and an answer of another kind
// is no match for stdout.
func TestLiveReplaySemanticMatch(t *testing.T) {
	t.Parallel()
	l := newLLM(t, answerBase, answerClose, answerClose, answerClose, answerFar)
	ws, b, env := validationRun(t, l, nil)
	relaxed := "stdout=semantic,prompts=semantic,fs_diff=structural,iterations=structural"

	r, v := liveReplay(t, ws, env, l, b, "--match", relaxed)
	if r.code != 0 || v.MatchStatus != "semantic_match" || !v.Live {
		t.Fatalf("close answer, %s: exit %d, %+v\n%s", relaxed, r.code, v, r.stderr)
	}
	so := v.component("stdout")
	if so.Status != "semantic_match" || so.Similarity == nil || *so.Similarity != 0.963971 {
		t.Errorf("stdout: %+v", so)
	}
	if fs := v.component("fs_diff"); fs.Status != "semantic_match" || fs.Strategy != "structural" {
		t.Errorf("fs_diff: %+v", fs)
	}
	if ec := v.component("exit_code"); ec.Status != "exact_match" {
		t.Errorf("exit_code: %+v", ec)
	}
	// The new bundle says what it replayed and how it compared, signed.
	m, err := os.ReadFile(filepath.Join(v.NewBundle, "manifest.json"))
	if err != nil || !bytes.Contains(m, []byte(`"match_status": "semantic_match"`)) {
		t.Errorf("new bundle's replay_status: %v\n%s", err, m)
	}
	if _, err := os.Stat(filepath.Join(v.NewBundle, "replay-of.json")); err != nil {
		t.Error(err)
	}
	if vr := dalIn(t, ws, env, "verify", v.NewBundle); vr.code != 0 {
		t.Errorf("verify the new bundle: exit %d %s", vr.code, vr.stderr)
	}
	// The original's replays/ holds the signed outcome.
	o, err := os.ReadFile(filepath.Join(b, "replays", "0001.json"))
	if err != nil || !bytes.Contains(o, []byte(`"live": true`)) || !bytes.Contains(o, []byte(`"semantic_match"`)) {
		t.Errorf("replays/0001.json: %v\n%s", err, o)
	}

	// The same answer against a threshold it does not reach.
	r, v = liveReplay(t, ws, env, l, b, "--match", relaxed, "--threshold", "0.99")
	if r.code != 1 || v.MatchStatus != "partial_match" || v.component("stdout").Status != "no_match" {
		t.Errorf("threshold 0.99: exit %d, %+v\n%s", r.code, v, r.stderr)
	}
	// Exact matching (the default) reports drift.
	r, v = liveReplay(t, ws, env, l, b)
	if r.code != 1 || v.MatchStatus != "partial_match" || v.component("stdout").Status != "no_match" {
		t.Errorf("exact: exit %d, %+v\n%s", r.code, v, r.stderr)
	}
	// A different answer: below the threshold.
	r, v = liveReplay(t, ws, env, l, b, "--match", relaxed)
	so = v.component("stdout")
	if r.code != 1 || v.MatchStatus != "partial_match" || so.Status != "no_match" || so.Similarity == nil || *so.Similarity >= 0.95 {
		t.Errorf("far answer: exit %d, %+v\n%s", r.code, v, r.stderr)
	}
	if !strings.Contains(r.stderr, "below the threshold 0.95") {
		t.Errorf("the terminal verdict does not say why: %s", r.stderr)
	}
}

// TestReplayMatchBadInput: bad --match, --threshold and --similarity-cmd
// values are one sentence and exit 2 before anything runs.
func TestReplayMatchBadInput(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	marker := filepath.Join(dir, "ran")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--match", "fuzzy"}, `unknown strategy "fuzzy"`},
		{[]string{"--match", "stdin=semantic"}, `unknown component "stdin"`},
		{[]string{"--match", "exit_code=semantic"}, "exit_code is compared exactly only"},
		{[]string{"--threshold", "1.5"}, "outside [0, 1]"},
		{[]string{"--threshold", "-0.1"}, "outside [0, 1]"},
		{[]string{"--similarity-cmd", "touch " + marker + "; exit 4"}, "does not work"},
		{[]string{"--similarity-cmd", "echo many;:"}, `printed "many", not a number`},
		{[]string{"--live"}, "--live records a new bundle"},
		{[]string{"--out", filepath.Join(dir, "x")}, "--out is for a live re-execution"},
	} {
		r := dalIn(t, dir, nil, append(append([]string{"replay"}, tc.args...), filepath.Join(dir, "no-such-bundle"))...)
		lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
		if r.code != 2 || !strings.Contains(r.stderr, tc.want) || len(lines) != 1 {
			t.Errorf("replay %v: exit %d, stderr %q; want exit 2 and one line with %q", tc.args, r.code, r.stderr, tc.want)
		}
	}
	if r := dalIn(t, dir, nil, "record", "--auto-checkpoint", "phase_end", "--out", filepath.Join(dir, "b"), "--", "true"); r.code != 2 || !strings.Contains(r.stderr, `unknown kind "phase_end"`) {
		t.Errorf("--auto-checkpoint phase_end: exit %d %q", r.code, r.stderr)
	}
}

// TestAutoCheckpointsAndProv records with --auto-checkpoint all: the four
// kinds are in checkpoint list; prov.json validates against PROV-JSON.
func TestAutoCheckpointsAndProv(t *testing.T) {
	t.Parallel()
	l := newLLM(t, answerBase)
	ws, b, env := validationRun(t, l, nil, "--auto-checkpoint", "all")
	r := dalIn(t, ws, env, "checkpoint", "list")
	for _, name := range []string{"phase_start:ask", "before_external_call", "iteration_boundary:1", "artifact_complete:out/answer.json"} {
		if !strings.Contains(r.stdout, name) {
			t.Errorf("checkpoint list lacks %s:\n%s\n%s", name, r.stdout, r.stderr)
		}
	}
	validateProvFile(t, filepath.Join(b, "prov.json"))
	p, _ := os.ReadFile(filepath.Join(b, "prov.json"))
	for _, want := range []string{`"dal:artifact/out/answer.json"`, `"dal:prompt/0001"`, `"dal:execution_mode": "strict"`, `"dal:model": "m-test"`, `"dal:temperature": 0`} {
		if !bytes.Contains(p, []byte(want)) {
			t.Errorf("prov.json lacks %s:\n%s", want, p)
		}
	}
	m, _ := os.ReadFile(filepath.Join(b, "manifest.json"))
	if !bytes.Contains(m, []byte(`"prov.json": "sha256:`)) {
		t.Error("prov.json is not covered by the manifest")
	}
}

// TestStrictLLMLint: a strict-mode call at temperature 0.7 is listed in
// strict-llm.json and on the terminal; --enforce-strict-llm answers it 400.
func TestStrictLLMLint(t *testing.T) {
	t.Parallel()
	l := newLLM(t, answerBase)
	ws := t.TempDir()
	os.WriteFile(filepath.Join(ws, "agent.py"), []byte(validationAgent), 0o644)
	env := []string{"DAL_KEY=" + filepath.Join(t.TempDir(), "k"), "LLM_URL=" + l.srv.URL + "/v1/chat/completions", "TEMP=0.7"}
	args := []string{"record", "--no-apply", "--allow-loopback", l.hostPort(), "--keep-env", "LLM_URL", "--keep-env", "TEMP"}
	out := filepath.Join(t.TempDir(), "loose")
	r := dalIn(t, ws, env, append(args, "--out", out, "--", "python3", "agent.py")...)
	if r.code != 0 || !strings.Contains(r.stderr, "dal: not reproducible live: 1 LLM call at temperature 0.7") {
		t.Fatalf("lint: exit %d\n%s", r.code, r.stderr)
	}
	lint, err := os.ReadFile(filepath.Join(out, "strict-llm.json"))
	if err != nil || !bytes.Contains(lint, []byte(`"temperature 0.7"`)) {
		t.Errorf("strict-llm.json: %v %s", err, lint)
	}
	l.mu.Lock()
	calls := l.calls
	l.mu.Unlock()
	r = dalIn(t, ws, env, append(args, "--enforce-strict-llm", "--out", filepath.Join(t.TempDir(), "refused"), "--", "python3", "agent.py")...)
	if r.code != 3 || !strings.Contains(r.stderr, "refused: 400") || !strings.Contains(r.stderr, "--enforce-strict-llm (temperature 0.7)") {
		t.Errorf("enforced: exit %d\n%s", r.code, r.stderr)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.calls != calls {
		t.Errorf("a refused call reached the server")
	}
}

func validateProvFile(t *testing.T, path string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := provtest.Validate(data); err != nil {
		t.Fatalf("%s does not validate against PROV-JSON: %v", path, err)
	}
}
