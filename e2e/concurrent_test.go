package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// jitterServer is an OpenAI-compatible chat completions server that
// answers each request after 0-50 ms at random, with a reply that depends
// only on the request: what varies between runs is latency alone.
func jitterServer(t *testing.T) string {
	t.Helper()
	return jitterServe(t, func(body []byte) any {
		var req struct {
			Model    string `json:"model"`
			Messages []struct {
				Content string `json:"content"`
			} `json:"messages"`
		}
		if err := json.Unmarshal(body, &req); err != nil || len(req.Messages) == 0 {
			return nil
		}
		msg := req.Messages[len(req.Messages)-1].Content
		return map[string]any{
			"id": "c-" + msg, "object": "chat.completion", "model": req.Model,
			"choices": []any{map[string]any{"index": 0, "finish_reason": "stop",
				"message": map[string]any{"role": "assistant", "content": "echo: " + msg}}},
			"usage": map[string]int{"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5},
		}
	})
}

// jitterServe serves, on loopback until the test ends, answer's JSON for
// each request's body after 0-50 ms at random (400 when answer returns
// nil), and returns the address.
func jitterServe(t *testing.T, answer func(body []byte) any) string {
	t.Helper()
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		reply := answer(body)
		if err != nil || reply == nil {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		time.Sleep(time.Duration(rand.IntN(50_000)) * time.Microsecond)
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(reply)
	}))
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv.Listener = l
	srv.Start()
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().String()
}

// TestConcurrentAgentsRepeatAndReplay: agents whose parallel LLM calls
// are answered after random latencies print the same bytes in every
// recording (the proxy delivers responses in an order latency cannot
// change, and waits on outstanding I/O never expire on latency), and each
// recording replays exactly with the server gone.
func TestConcurrentAgentsRepeatAndReplay(t *testing.T) {
	t.Parallel()
	goBin := filepath.Join(t.TempDir(), "goroutines")
	build := exec.Command("go", "build", "-o", goBin, "./testdata/concurrent/goroutines")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the goroutine agent: %v\n%s", err, out)
	}
	threads, err := filepath.Abs("testdata/concurrent/threads_agent.py")
	if err != nil {
		t.Fatal(err)
	}
	promise, _ := filepath.Abs("testdata/concurrent/promise_agent.js")
	react, _ := filepath.Abs("testdata/concurrent/react_agent.py")
	gather, _ := filepath.Abs("testdata/concurrent/gather_agent.py")
	agents := []struct {
		name string
		argv []string
		// replay: the whole output repeats and replays; otherwise (Go,
		// whose runtime draws per-thread random state as its threads hand
		// over) the order of the answers does.
		replay bool
	}{
		{"python-threadpool", []string{"python3", threads}, true},
		{"node-promise-all", []string{"node", promise}, true},
		{"go-goroutines", []string{goBin}, false},
		{"python-react-children", []string{"python3", react}, true},
		// Debian's python3, where test-deps installs httpx and aiohttp.
		{"python-gather-httpx", []string{"/usr/bin/python3", gather, "httpx"}, true},
		{"python-gather-aiohttp", []string{"/usr/bin/python3", gather, "aiohttp"}, true},
	}
	for _, a := range agents {
		t.Run(a.name, func(t *testing.T) {
			t.Parallel()
			addr := jitterServer(t)
			env := []string{"LLM_BASE=http://" + addr + "/v1"}
			var first string
			var bundles, workspaces []string
			for i := range 3 {
				ws, out := t.TempDir(), filepath.Join(t.TempDir(), fmt.Sprintf("b%d", i))
				workspaces = append(workspaces, ws)
				args := append([]string{"record", "--seed", "7", "--keep-env", "LLM_BASE", "--allow-loopback", addr, "--workspace", ws, "--out", out, "--"}, a.argv...)
				r := dalExec(t, env, args...)
				if r.code != 0 {
					t.Fatalf("record %d: exit %d\nstdout %s\nstderr %s", i, r.code, r.stdout, r.stderr)
				}
				if strings.Contains(r.stderr, "before its processes settled") {
					t.Errorf("record %d: a response was delivered before the tree settled:\n%s", i, r.stderr)
				}
				if i == 0 {
					first = r.stdout
				} else if r.stdout != first {
					t.Errorf("recording %d printed\n%s\nrecording 0\n%s", i, r.stdout, first)
				}
				bundles = append(bundles, out)
			}
			if !a.replay {
				return
			}
			for i, b := range bundles {
				if r := dalExec(t, nil, "replay", "--workspace", workspaces[i], b); r.code != 0 {
					t.Errorf("replay of recording %d: exit %d\n%s\n%s", i, r.code, r.stdout, r.stderr)
				}
			}
		})
	}
}
