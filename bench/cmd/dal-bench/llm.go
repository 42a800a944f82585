package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/dal-runtime/dal/bench"
)

// llmCalls is how many chat completions the agent of the replay benchmark makes.
const llmCalls = 100

// llmRounds is how many times each server's runs are repeated, interleaved.
const llmRounds = 7

// errReplay marks a replay that did not exit 0.
var errReplay = errors.New("replay did not exit 0")

// llmServer is e2e/testdata/llm_server.py, a local OpenAI-compatible
// server; it prints its port once listening.
type llmServer struct {
	cmd     *exec.Cmd
	port    int
	stopped bool
}

func startLLMServer(script, key string) (*llmServer, error) {
	cmd := exec.Command("python3", script, "--key-value", key)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start the test LLM server: %w", err)
	}
	s := &llmServer{cmd: cmd}
	line := make(chan string, 1)
	go func() {
		l, _ := bufio.NewReader(out).ReadString('\n')
		line <- l
	}()
	select {
	case l := <-line:
		if s.port, err = strconv.Atoi(strings.TrimSpace(l)); err != nil {
			s.stop()
			return nil, fmt.Errorf("the test LLM server printed %q instead of its port", l)
		}
	case <-time.After(10 * time.Second):
		s.stop()
		return nil, errors.New("the test LLM server did not print its port within 10 s")
	}
	return s, nil
}

func (s *llmServer) stop() {
	if !s.stopped {
		s.stopped = true
		s.cmd.Process.Kill()
		s.cmd.Wait()
	}
}

// llmServers are the servers the replay benchmark runs against: the
// test server as it is, and with TCP_NODELAY (see bench/llm_server_nodelay.py).
var llmServers = []struct{ label, script string }{
	{"llm_server.py", "e2e/testdata/llm_server.py"},
	{"llm_server.py with TCP_NODELAY", "bench/llm_server_nodelay.py"},
}

// llmReplay runs an agent making llmCalls chat completions against a
// local server: bare, recorded (through dal's proxy), and replayed with the
// server stopped. The figure is replay wall time over record wall time;
// the detail gives record against the bare agent.
func llmReplay() []bench.Figure {
	if _, err := exec.LookPath("python3"); err != nil {
		return []bench.Figure{missingTool("replay of an agent making LLM calls", "python3")}
	}
	agent, _ := filepath.Abs("bench/agents/llm_calls.py")
	var figs []bench.Figure
	for _, srv := range llmServers {
		name := fmt.Sprintf("replay of an agent making %d LLM calls (network offline), server %s", llmCalls, srv.label)
		var bare, rec, rep, bare1, rec1, after, after1, recU bench.Sample
		var err error
		for i := range llmRounds {
			var r round
			if r, err = llmRound(srv.script, agent, i); err != nil {
				break
			}
			bare, rec, rep = append(bare, r.bare), append(rec, r.rec), append(rep, r.rep)
			bare1, rec1 = append(bare1, r.bare1), append(rec1, r.rec1)
			after, after1 = append(after, r.after), append(after1, r.after1)
			recU = append(recU, r.recU)
		}
		if err != nil {
			f := notMeasured(name, err)
			if errors.Is(err, errReplay) {
				f.Value, f.Target, f.Verdict = err.Error(), "replay exits 0 (exact) every time", "misses"
			}
			figs = append(figs, f)
			continue
		}
		perCall := float64(rec.Median()-bare.Median()) / 1e6 / llmCalls
		f := bench.Figure{Name: name, Cost: bench.CostTime,
			Baseline: "its record against the live server", Target: "replay exits 0 (exact) every time", Verdict: "meets",
			Detail: fmt.Sprintf("n=%d; %d calls, every third streamed, urllib through HTTP_PROXY; record %s; replay %s; the agent without dal %s (min / median / max); record adds %.1f ms per call to the agent without dal",
				len(rec), llmCalls, rec.Spread(), rep.Spread(), bare.Spread(), perCall)}
		f.SetRatios(bench.Ratios(rep, rec))
		f.Value = fmt.Sprintf("%.2fx record", f.Ratio)
		r := bench.Figure{Name: fmt.Sprintf("record of an agent making %d LLM calls, server %s", llmCalls, srv.label), Cost: bench.CostTime,
			Baseline: "the same agent without dal, straight to the server",
			Detail:   fmt.Sprintf("n=%d, interleaved; record %s; without dal %s (min / median / max); %+.1f ms per call", len(rec), rec.Spread(), bare.Spread(), perCall)}
		r.SetRatios(bench.Ratios(rec, bare))
		r.Value = fmt.Sprintf("%.2fx the agent without dal", r.Ratio)
		figs = append(figs, f, r, marginalPerCall(srv.label, bare, rec, bare1, rec1, after, after1), orderPerCall(srv.label, rec, recU))
	}
	return figs
}

// orderPerCall is what the delivery order (record's default) adds to one
// LLM call: the records of llmCalls calls with it and with
// --order-responses=false, taken in alternation, over llmCalls.
func orderPerCall(label string, rec, recU bench.Sample) bench.Figure {
	var spread bench.Values
	for i := range min(len(rec), len(recU)) {
		spread = append(spread, float64(rec[i]-recU[i])/1e6/llmCalls)
	}
	med := float64(rec.Median()-recU.Median()) / 1e6 / llmCalls
	f := bench.Figure{Name: fmt.Sprintf("the delivery order's cost per LLM call (%d calls), server %s", llmCalls, label),
		Value:    fmt.Sprintf("%+.2f ms per call", med),
		Baseline: "the same record with --order-responses=false",
		Target:   "at most 0.3 ms per call",
		Detail: fmt.Sprintf("n=%d, interleaved; per round %s ms; record with the order %s, without %s (min / median / max): each delivery waits for the agent's tree to settle (two looks at /proc over the sandbox's gate)",
			len(spread), spread.Spread("%.2f"), rec.Spread(), recU.Spread())}
	f.SetRatios(bench.Ratios(rec, recU))
	f.Cost = bench.CostTime
	f.Verdict = "meets"
	if med > 0.3 {
		f.Verdict = "misses"
	}
	return f
}

// marginalPerCall is what recording adds to one LLM call once the costs
// paid once per run (sandbox, capture, signing the bundle) are taken out:
// the difference between the 100-call and the 1-call runs, recorded
// against bare, over the 99 calls between them. after and after1 are the
// records' time from the agent's last output (its exit) to dal-exec's:
// their difference is the part paid after the agent has exited (writing
// and committing the bundle), the rest is paid while it runs.
func marginalPerCall(label string, bare, rec, bare1, rec1, after, after1 bench.Sample) bench.Figure {
	const extra = llmCalls - 1
	perCall := func(b, r, b1, r1 time.Duration) float64 {
		return float64((r-r1)-(b-b1)) / 1e6 / extra
	}
	var spread, post bench.Values
	for i := range rec {
		spread = append(spread, perCall(bare[i], rec[i], bare1[i], rec1[i]))
		post = append(post, float64(after[i]-after1[i])/1e6/extra)
	}
	med := perCall(bare.Median(), rec.Median(), bare1.Median(), rec1.Median())
	f := bench.Figure{Name: fmt.Sprintf("record cost per LLM call (%d calls against 1), server %s", llmCalls, label),
		Value:    fmt.Sprintf("%+.2f ms per call", med),
		Baseline: "the same agent without dal, at 1 and at 100 calls",
		Target:   "at most 0.3 ms per call",
		Detail: fmt.Sprintf("n=%d, interleaved; per round %s ms, of which after the agent's exit (writing the bundle) %s ms, the rest while it runs (the proxy, the sandbox); record of 1 call %s, without dal %s (min / median / max): paid once per run, not per call",
			len(rec), spread.Spread("%.2f"), post.Spread("%.2f"), rec1.Spread(), bare1.Spread())}
	f.Verdict = "meets"
	if med > 0.3 {
		f.Verdict = "misses"
	}
	return f
}

// round is one llmRound's wall times: the agent making llmCalls calls
// bare, recorded and replayed, and making one call bare and recorded;
// after and after1 are the records' time from the agent's last output to
// dal-exec's exit.
// recU is the llmCalls record with --order-responses=false.
type round struct{ bare, rec, rep, bare1, rec1, after, after1, recU time.Duration }

// llmRound starts a server, runs the agent bare and recorded against it
// (with llmCalls calls and with one), stops the server, and replays the
// llmCalls recording.
func llmRound(server, agent string, i int) (round, error) {
	const key = "sk-bench-7f3e"
	var r round
	srv, err := startLLMServer(server, key)
	if err != nil {
		return r, err
	}
	defer srv.stop()
	ws, err := os.MkdirTemp("", "dal-bench-llm-")
	if err != nil {
		return r, err
	}
	defer os.RemoveAll(ws)
	out := ws + "-bundle"
	defer os.RemoveAll(out)
	defer os.RemoveAll(out + "-1")
	env := []string{"OPENAI_API_KEY=" + key, "LLM_BASE=http://127.0.0.1:" + strconv.Itoa(srv.port) + "/v1"}

	bareRun := func(calls int) (time.Duration, error) {
		cmd := exec.Command("python3", agent, strconv.Itoa(calls))
		cmd.Dir, cmd.Env = ws, append(append(os.Environ(), env...), "no_proxy=127.0.0.1", "NO_PROXY=127.0.0.1")
		t := time.Now()
		if o, err := cmd.CombinedOutput(); err != nil {
			return 0, fmt.Errorf("the agent without dal: %v: %s", err, lastLines(o, 4))
		}
		return time.Since(t), nil
	}
	recRun := func(calls int, out string, more ...string) (d, after time.Duration, err error) {
		args := append(append([]string{"record"}, more...), "--out", out)
		d, after, stdout, err := timedRecord(ws, env, append(args, "--keep-env", "OPENAI_API_KEY", "--keep-env", "LLM_BASE",
			"--allow-loopback", "127.0.0.1:"+strconv.Itoa(srv.port),
			"--", "python3", agent, strconv.Itoa(calls))...)
		if err != nil {
			return 0, 0, fmt.Errorf("record of %d calls (round %d): %w", calls, i+1, err)
		}
		if want := fmt.Sprintf("calls %d ", calls); !strings.Contains(stdout, want) {
			return 0, 0, fmt.Errorf("record of %d calls (round %d): the agent printed %q", calls, i+1, stdout)
		}
		return d, after, nil
	}
	if r.bare1, err = bareRun(1); err != nil {
		return r, err
	}
	if r.bare, err = bareRun(llmCalls); err != nil {
		return r, err
	}
	if r.rec1, r.after1, err = recRun(1, out+"-1"); err != nil {
		return r, err
	}
	if r.rec, r.after, err = recRun(llmCalls, out); err != nil {
		return r, err
	}
	defer os.RemoveAll(out + "-u")
	if r.recU, _, err = recRun(llmCalls, out+"-u", "--order-responses=false"); err != nil {
		return r, err
	}
	srv.stop()
	if r.rep, _, err = inWorkspaceEnv(ws, env, "replay", out); err != nil {
		return r, fmt.Errorf("%w (round %d): %v", errReplay, i+1, err)
	}
	return r, nil
}

// timedRecord is inWorkspaceEnv that also returns the time from the last
// write to dal-exec's stdout (the agent's last output, which it prints
// as it exits) to dal-exec's exit.
func timedRecord(dir string, env []string, args ...string) (wall, after time.Duration, stdout string, err error) {
	cmd := exec.Command(*dal, args...)
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), "DAL_KEY="+filepath.Join(os.TempDir(), "dal-bench.key")), env...)
	out := &stampedWriter{}
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = out, &stderr
	t := time.Now()
	err = cmd.Run()
	end := time.Now()
	if err != nil {
		return 0, 0, out.buf.String(), fmt.Errorf("%v: %s", err, lastLines(stderr.Bytes(), 6))
	}
	if out.last.IsZero() {
		out.last = end
	}
	return end.Sub(t), end.Sub(out.last), out.buf.String(), nil
}

// stampedWriter keeps what is written and when it last was.
type stampedWriter struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	last time.Time
}

func (w *stampedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.last = time.Now()
	return w.buf.Write(p)
}
