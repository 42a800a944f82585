package show_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dal-runtime/dal/internal/cli"
	"github.com/dal-runtime/dal/internal/sandbox"
)

// The bundles the tests show, recorded once by TestMain with dal-exec
// (in this process, as cmd/dal-exec runs it) from testdata/agent.py
// against llmServer.
var fixture struct {
	dir    string // holds the key, the store, the workspaces and the bundles
	a, b   string // variants a and b of the agent; a was replayed once, with a drift
	pub    string // the signing key's public half
	stdout map[string]string
}

// hostile is the markup testdata/agent.py puts in its prompt, output,
// notes and file names.
const hostile = "</script><img src=x onerror=alert(1)>"

const apiKey = "sk-show-test-0b9c77e1"

func TestMain(m *testing.M) {
	sandbox.Init() // the sandbox's re-executed init never returns from here
	dir, err := os.MkdirTemp("", "dal-show-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := func() int {
		defer os.RemoveAll(dir)
		if err := recordFixtures(dir); err != nil {
			fmt.Fprintf(os.Stderr, "record the test bundles: %v\n", err)
			return 1
		}
		code := m.Run()
		if large.path != "" {
			os.RemoveAll(filepath.Dir(large.path))
		}
		return code
	}()
	os.Exit(code)
}

// llmServer answers OpenAI chat completions, plain and streamed (each SSE
// event its own chunk).
func llmServer() *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Model    string `json:"model"`
			Stream   bool   `json:"stream"`
			Messages []struct {
				Content string `json:"content"`
			} `json:"messages"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || len(req.Messages) == 0 {
			http.Error(w, "bad request", 400)
			return
		}
		const id = 1
		text := "reply to: " + req.Messages[len(req.Messages)-1].Content
		usage := map[string]int{"prompt_tokens": 11, "completion_tokens": len(strings.Fields(text)), "total_tokens": 11 + len(strings.Fields(text))}
		if !req.Stream {
			w.Header().Set("Content-Type", "application/json")
			json.NewEncoder(w).Encode(map[string]any{"id": fmt.Sprintf("chatcmpl-%d", id), "object": "chat.completion", "model": req.Model,
				"choices": []any{map[string]any{"index": 0, "message": map[string]string{"role": "assistant", "content": text}, "finish_reason": "stop"}},
				"usage":   usage})
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		fl := w.(http.Flusher)
		send := func(v any) {
			b, _ := json.Marshal(v)
			fmt.Fprintf(w, "data: %s\n\n", b)
			fl.Flush()
		}
		for i, word := range strings.Fields(text) {
			if i > 0 {
				word = " " + word
			}
			send(map[string]any{"id": fmt.Sprintf("chatcmpl-%d", id), "object": "chat.completion.chunk", "model": req.Model,
				"choices": []any{map[string]any{"index": 0, "delta": map[string]string{"content": word}, "finish_reason": nil}}})
		}
		send(map[string]any{"id": fmt.Sprintf("chatcmpl-%d", id), "object": "chat.completion.chunk", "model": req.Model,
			"choices": []any{map[string]any{"index": 0, "delta": map[string]string{}, "finish_reason": "stop"}}})
		send(map[string]any{"id": fmt.Sprintf("chatcmpl-%d", id), "object": "chat.completion.chunk", "model": req.Model, "choices": []any{}, "usage": usage})
		fmt.Fprint(w, "data: [DONE]\n\n")
	}))
}

// dalExec runs dal-exec's command line in this process.
func dalExec(args ...string) (code int, stdout, stderr string) {
	var so, se bytes.Buffer
	code = cli.Main(append([]string{"dal-exec"}, args...), &so, &se)
	return code, so.String(), se.String()
}

// recordFixtures records variants a and b (each in its own workspace,
// without applying: the workspace stays as it was), then replays a after
// changing the note it prints, so its stored verdict drifts in stdout.
func recordFixtures(dir string) error {
	srv := llmServer()
	defer srv.Close()
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(srv.URL, "http://"))
	for k, v := range map[string]string{
		"DAL_KEY": filepath.Join(dir, "signing.key"), "DAL_TRUSTED_KEYS": filepath.Join(dir, "trusted_keys"),
		"DAL_CHECKPOINTS": filepath.Join(dir, "checkpoints"), "LLM_BASE": srv.URL + "/v1", "OPENAI_API_KEY": apiKey,
	} {
		os.Setenv(k, v)
	}
	agent, err := os.ReadFile("testdata/agent.py")
	if err != nil {
		return err
	}
	fixture.dir, fixture.stdout = dir, map[string]string{}
	for _, variant := range []string{"a", "b"} {
		ws := filepath.Join(dir, "ws-"+variant)
		files := map[string]string{"agent.py": string(agent), "input.txt": "alpha\nbeta\n", "obsolete.txt": "old\n", "note.txt": "note one\n"}
		if err := os.Mkdir(ws, 0o755); err != nil {
			return err
		}
		for name, body := range files {
			if err := os.WriteFile(filepath.Join(ws, name), []byte(body), 0o644); err != nil {
				return err
			}
		}
		out := filepath.Join(dir, "run-"+variant)
		code, so, se := dalExec("record", "--no-apply", "--workspace", ws, "--allow-loopback", "127.0.0.1:"+port,
			"--keep-env", "LLM_BASE", "--keep-env", "OPENAI_API_KEY", "--out", out, "--", "python3", "agent.py", variant)
		if code != 0 {
			return fmt.Errorf("record %s: exit %d\n%s\n%s", variant, code, so, se)
		}
		fixture.stdout[variant] = so
	}
	fixture.a, fixture.b = filepath.Join(dir, "run-a"), filepath.Join(dir, "run-b")
	fixture.pub = os.Getenv("DAL_KEY") + ".pub"
	if err := os.WriteFile(filepath.Join(dir, "ws-a", "note.txt"), []byte("note two\n"), 0o644); err != nil {
		return err
	}
	if code, so, se := dalExec("replay", "--workspace", filepath.Join(dir, "ws-a"), fixture.a); code != 1 {
		return fmt.Errorf("replay: exit %d, want 1 (a drift)\n%s\n%s", code, so, se)
	}
	return nil
}
