package e2e

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// toolServer is an OpenAI-compatible chat completions server for a ReAct
// agent, answering each request after 0-50 ms at random: a request whose
// conversation has no tool results yet gets two tool calls at once (date
// and ls), one with tool results gets an answer naming a digest of them.
// What varies between runs is latency alone.
func toolServer(t *testing.T) string {
	t.Helper()
	return jitterServe(t, func(body []byte) any {
		var req struct {
			Model    string `json:"model"`
			Messages []struct {
				Role    string `json:"role"`
				Content any    `json:"content"`
			} `json:"messages"`
		}
		if err := json.Unmarshal(body, &req); err != nil || len(req.Messages) == 0 {
			return nil
		}
		var results []string
		for _, m := range req.Messages {
			if m.Role == "tool" {
				results = append(results, fmt.Sprint(m.Content))
			}
		}
		msg := map[string]any{"role": "assistant"}
		finish := "stop"
		if len(results) == 0 {
			finish = "tool_calls"
			msg["content"] = nil
			msg["tool_calls"] = []any{
				map[string]any{"id": "call_date", "type": "function", "function": map[string]any{"name": "date", "arguments": "{}"}},
				map[string]any{"id": "call_ls", "type": "function", "function": map[string]any{"name": "ls", "arguments": "{}"}},
			}
		} else {
			sum := sha256.Sum256([]byte(strings.Join(results, "\x00")))
			msg["content"] = fmt.Sprintf("saw %d results, digest %s", len(results), hex.EncodeToString(sum[:6]))
		}
		return map[string]any{
			"id": fmt.Sprintf("c%d", len(results)), "object": "chat.completion", "created": 1767225600, "model": req.Model,
			"choices": []any{map[string]any{"index": 0, "finish_reason": finish, "message": msg}},
			"usage":   map[string]int{"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5},
		}
	})
}

// TestLangGraphParallelToolsRepeatAndReplay: a LangGraph ReAct agent whose
// model calls two tools at once, each running a child process (date,
// ls -la) concurrently, against a server with random latency: every
// recording prints the same bytes (the tools' output reaches the model
// and so its answer), and each replays exactly with the server gone.
// Issue 42 measured this agent replaying 1 time in 3.
func TestLangGraphParallelToolsRepeatAndReplay(t *testing.T) {
	t.Parallel()
	agent, err := filepath.Abs("testdata/node-openai/langgraph_agent.mjs")
	if err != nil {
		t.Fatal(err)
	}
	addr := toolServer(t)
	env := []string{"LLM_BASE=http://" + addr + "/v1"}
	var first string
	var bundles, workspaces []string
	for i := range 3 {
		ws, out := t.TempDir(), filepath.Join(t.TempDir(), fmt.Sprintf("b%d", i))
		workspaces = append(workspaces, ws)
		r := dalExec(t, env, "record", "--seed", "7", "--keep-env", "LLM_BASE",
			"--allow-loopback", addr, "--workspace", ws, "--out", out, "--", "node", agent)
		if r.code != 0 {
			t.Fatalf("record %d: exit %d\nstdout %s\nstderr %s", i, r.code, r.stdout, r.stderr)
		}
		if !strings.Contains(r.stdout, "ai date,ls") || !strings.Contains(r.stdout, "saw 2 results") {
			t.Fatalf("record %d: the agent did not call both tools and answer:\n%s\n%s", i, r.stdout, r.stderr)
		}
		if i == 0 {
			first = r.stdout
		} else if r.stdout != first {
			t.Errorf("recording %d differs from recording 0:\n%s", i, lineDiff(first, r.stdout))
		}
		bundles = append(bundles, out)
	}
	for i, b := range bundles {
		if r := dalExec(t, nil, "replay", "--workspace", workspaces[i], b); r.code != 0 {
			t.Errorf("replay of recording %d: exit %d\n%s\n%s", i, r.code, r.stdout, r.stderr)
		}
	}
}
