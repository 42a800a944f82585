package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/dal-runtime/dal/bench"
)

// parallelCalls is how many calls the overlap benchmark's agent makes at
// once, and parallelLatency how long its server takes to answer each.
const (
	parallelCalls   = 4
	parallelLatency = 50 * time.Millisecond
)

// delayServer is an OpenAI-compatible chat completions server that answers
// every request after delay, with a reply that depends only on the
// request. Closing the returned listener stops it.
func delayServer(delay time.Duration) (net.Listener, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	go http.Serve(l, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Model    string `json:"model"`
			Messages []struct {
				Content string `json:"content"`
			} `json:"messages"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || len(req.Messages) == 0 {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		time.Sleep(delay)
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{
			"id": "c", "object": "chat.completion", "model": req.Model,
			"choices": []any{map[string]any{"index": 0, "finish_reason": "stop",
				"message": map[string]any{"role": "assistant", "content": "echo: " + req.Messages[len(req.Messages)-1].Content}}},
		})
	}))
	return l, nil
}

// lineClock keeps when each line written to it arrived.
type lineClock struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	lines []string
	at    []time.Time
}

func (w *lineClock) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := time.Now()
	w.buf.Write(p)
	for {
		line, err := w.buf.ReadString('\n')
		if err != nil {
			w.buf.WriteString(line) // an unfinished line: kept for the next write
			break
		}
		w.lines, w.at = append(w.lines, line), append(w.at, now)
	}
	return len(p), nil
}

// span is the time between the line "start" and the line that begins
// with "calls ".
func (w *lineClock) span() (time.Duration, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	var start, end time.Time
	for i, l := range w.lines {
		switch {
		case l == "start\n":
			start = w.at[i]
		case strings.HasPrefix(l, "calls "):
			end = w.at[i]
		}
	}
	if start.IsZero() || end.IsZero() {
		return 0, fmt.Errorf("the agent printed %q", strings.Join(w.lines, ""))
	}
	return end.Sub(start), nil
}

// parallelOverlap measures whether concurrent calls still overlap
// upstream while record hands their responses over one at a time: an
// agent makes parallelCalls calls at once against a server answering each
// after parallelLatency, bare and recorded with the delivery order
// (record's default) and without it. The batch is timed from the agent's
// line before it to its line after, as they reach dal-bench through
// dal-exec's stdout: about parallelLatency when the calls overlap,
// parallelCalls times it when they are serialized.
func parallelOverlap() []bench.Figure {
	name := fmt.Sprintf("%d concurrent LLM calls answered after %d ms each, recorded (with the delivery order)", parallelCalls, parallelLatency.Milliseconds())
	if _, err := exec.LookPath("python3"); err != nil {
		return []bench.Figure{missingTool(name, "python3")}
	}
	agent, _ := filepath.Abs("bench/agents/parallel_calls.py")
	ws, err := os.MkdirTemp("", "dal-bench-parallel-")
	if err != nil {
		return []bench.Figure{notMeasured(name, err)}
	}
	defer os.RemoveAll(ws)
	srv, err := delayServer(parallelLatency)
	if err != nil {
		return []bench.Figure{notMeasured(name, err)}
	}
	defer srv.Close()
	const key = "sk-bench-7f3e"
	addr := srv.Addr().String()
	env := []string{"OPENAI_API_KEY=" + key, "LLM_BASE=http://" + addr + "/v1"}
	argv := []string{"python3", agent, strconv.Itoa(parallelCalls)}
	run := func(args ...string) (time.Duration, error) {
		var cmd *exec.Cmd
		if len(args) == 0 {
			cmd = exec.Command(argv[0], argv[1:]...)
			cmd.Env = append(append(os.Environ(), env...), "no_proxy=127.0.0.1", "NO_PROXY=127.0.0.1")
		} else {
			out, err := os.MkdirTemp("", "dal-bench-parallel-bundle-")
			if err != nil {
				return 0, err
			}
			os.RemoveAll(out)
			defer os.RemoveAll(out)
			args = append(append(args, "--out", out, "--keep-env", "OPENAI_API_KEY", "--keep-env", "LLM_BASE", "--allow-loopback", addr, "--"), argv...)
			cmd = exec.Command(*dal, args...)
			cmd.Env = append(append(os.Environ(), "DAL_KEY="+filepath.Join(os.TempDir(), "dal-bench.key")), env...)
		}
		cmd.Dir = ws
		lines := &lineClock{}
		var stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = lines, &stderr
		if err := cmd.Run(); err != nil {
			return 0, fmt.Errorf("%s: %v: %s", strings.Join(args, " "), err, lastLines(stderr.Bytes(), 4))
		}
		return lines.span()
	}
	var bare, ordered, unordered bench.Sample
	for range llmRounds {
		for _, r := range []struct {
			s    *bench.Sample
			args []string
		}{{&bare, nil}, {&ordered, []string{"record"}}, {&unordered, []string{"record", "--order-responses=false"}}} {
			d, err := run(r.args...)
			if err != nil {
				return []bench.Figure{notMeasured(name, err)}
			}
			*r.s = append(*r.s, d)
		}
	}
	serial := time.Duration(parallelCalls) * parallelLatency
	f := bench.Figure{Name: name, Cost: bench.CostTime,
		Value:    fmt.Sprintf("%.0f ms (serialized: %.0f ms)", float64(ordered.Median())/1e6, float64(serial)/1e6),
		Baseline: "the same agent without dal",
		Target:   fmt.Sprintf("about %d ms (the calls overlap upstream), not %.0f ms", parallelLatency.Milliseconds(), float64(serial)/1e6),
		Detail: fmt.Sprintf("n=%d, interleaved; the batch, from the agent's line before it to its line after as they reach dal-bench: recorded with the order %s, with --order-responses=false %s, without dal %s (min / median / max)",
			len(ordered), ordered.Spread(), unordered.Spread(), bare.Spread())}
	f.SetRatios(bench.Ratios(ordered, bare))
	f.Verdict = "meets"
	if ordered.Median() >= serial/2 {
		f.Verdict = "misses"
	}
	return []bench.Figure{f}
}
