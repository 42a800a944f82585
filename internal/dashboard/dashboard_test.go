package dashboard

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dal-runtime/dal/internal/consistency"
	"github.com/dal-runtime/dal/internal/consistency/consensus"
)

var t0 = time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC)

// TestProblemsListedRestShown: a report cut short, one another tool
// wrote, one of a newer format, one whose runs do not add up and one
// that is a symbolic link are each listed with one sentence; the good
// evaluations are all in the model.
func TestProblemsListedRestShown(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	writeEval(t, evalSpec{dir: filepath.Join(root, "good1"), framework: "langgraph", task: "codegen", runs: 10, rate: 0.9, dur: 500, at: t0, seed: 1})
	writeEval(t, evalSpec{dir: filepath.Join(root, "deep", "er", "good2"), framework: "crewai", task: "codegen", runs: 10, rate: 0.5, dur: 500, at: t0, seed: 2})
	good, _ := os.ReadFile(filepath.Join(root, "good1", "report.json"))
	bad := map[string][]byte{
		"cut":     good[:len(good)/2],
		"foreign": []byte(`{"name": "pytest", "results": []}`),
		"newer":   bytes.Replace(good, []byte(`"schema_version": 2`), []byte(`"schema_version": 9`), 1),
		"fewer":   bytes.Replace(good, []byte(`"runs": 10`), []byte(`"runs": 12`), 1),
	}
	want := map[string]string{"cut": "not valid JSON", "foreign": "not a dal consistency report", "newer": "format 9", "fewer": "says 12 runs but lists 10",
		"link": "symbolic link"}
	for name, data := range bad {
		os.MkdirAll(filepath.Join(root, name), 0o755)
		if err := os.WriteFile(filepath.Join(root, name, "report.json"), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	os.MkdirAll(filepath.Join(root, "link"), 0o755)
	os.Symlink(filepath.Join(root, "good1", "report.json"), filepath.Join(root, "link", "report.json"))
	// A directory link is not followed: good1 is not shown twice.
	os.Symlink(filepath.Join(root, "good1"), filepath.Join(root, "again"))

	m := Build(Options{Roots: []string{root}}, root)
	if len(m.Evaluations) != 2 {
		t.Fatalf("%d evaluations, want the 2 good ones: %+v", len(m.Evaluations), m.Evaluations)
	}
	if len(m.Problems) != len(want) {
		t.Fatalf("problems %+v, want one for each of %v", m.Problems, want)
	}
	for _, p := range m.Problems {
		name := filepath.Base(filepath.Dir(p.Path))
		if !strings.Contains(p.Problem, want[name]) {
			t.Errorf("%s: %q does not say %q", p.Path, p.Problem, want[name])
		}
		if strings.Count(strings.TrimSuffix(p.Problem, "."), ". ") > 0 || strings.Contains(p.Problem, "\n") {
			t.Errorf("%s: %q is more than one sentence", p.Path, p.Problem)
		}
	}
	if e := m.Evaluations[0]; e.Framework != "crewai" || e.Task != "codegen" || e.State != "done" || e.N != 10 || e.CI == nil || e.Reliability == nil {
		t.Fatalf("first evaluation %+v", e)
	}
	// A written page links each report.html relative to itself.
	if r := m.Evaluations[0].Report; r != "deep/er/good2/report.html" {
		t.Fatalf("report link %q", r)
	}
}

// TestRegressionIsCompares: within a framework and task each evaluation
// carries what consistency.Compare reports against the one before; other
// frameworks are not compared with it.
func TestRegressionIsCompares(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	a := writeEval(t, evalSpec{dir: filepath.Join(root, "a"), framework: "lg", task: "fix", runs: 60, rate: 0.97, dur: 500, at: t0, seed: 1})
	b := writeEval(t, evalSpec{dir: filepath.Join(root, "b"), framework: "lg", task: "fix", runs: 60, rate: 0.4, dur: 2000, at: t0.Add(time.Hour), seed: 2})
	writeEval(t, evalSpec{dir: filepath.Join(root, "c"), framework: "other", task: "fix", runs: 60, rate: 0.1, dur: 9000, at: t0.Add(2 * time.Hour), seed: 3})
	cmp, err := consistency.Compare("a", a, "b", b, 0.05)
	if err != nil {
		t.Fatal(err)
	}
	if len(cmp.Regressions) < 2 {
		t.Fatalf("the test's data should regress in success rate and duration: %v", cmp.Regressions)
	}
	m := Build(Options{Roots: []string{root}}, root)
	got := map[string]*Eval{}
	for _, e := range m.Evaluations {
		got[filepath.Base(e.Dir)] = e
	}
	if e := got["b"]; fmt.Sprint(e.Regressions) != fmt.Sprint(cmp.Regressions) || e.Previous != got["a"].Key || e.Comparison.SuccessP != cmp.SuccessRate.P {
		t.Fatalf("b: regressions %v against %q, compare says %v", e.Regressions, e.Previous, cmp.Regressions)
	}
	if len(got["a"].Regressions) != 0 || len(got["c"].Regressions) != 0 || got["c"].Previous != "" {
		t.Fatalf("a or c compared: %v %v %q", got["a"].Regressions, got["c"].Regressions, got["c"].Previous)
	}
}

// TestPageSelfContained: the written page fetches nothing, allows its own
// script and style only, and a label holding markup cannot end the data
// element.
func TestPageSelfContained(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	writeEval(t, evalSpec{dir: filepath.Join(root, "x"), framework: "</script><img src=x onerror=alert(1)>", task: "t", runs: 5, rate: 1, dur: 100, at: t0, seed: 1})
	var b bytes.Buffer
	if err := Write(&b, Build(Options{Roots: []string{root}}, root)); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	// The only URL is the SVG namespace, which names, not fetches.
	rest := strings.ReplaceAll(page, "'http://www.w3.org/2000/svg'", "")
	for _, bad := range []string{"<img", "http://", "https://", "src=\"", "src='"} {
		if strings.Contains(rest, bad) {
			t.Errorf("the page holds %q", bad)
		}
	}
	if !strings.Contains(page, "connect-src 'none'") || !strings.Contains(page, "default-src 'none'") {
		t.Error("the written page's policy allows connections")
	}
	if strings.Count(page, "</script>") != 2 {
		t.Errorf("%d </script> in the page, want the data's and the script's", strings.Count(page, "</script>"))
	}
}

// fakeBundle publishes a finished run's bundle at dir, as record does:
// written aside, then renamed into place.
func fakeBundle(dir string, r consistency.RunSpec, exit int, out string) error {
	tmp := dir + ".tmp"
	os.MkdirAll(filepath.Join(tmp, "logs"), 0o755)
	env, _ := json.Marshal(map[string]any{"command": []string{"agent"}, "mode": "strict", "seed": r.Seed, "exit_code": exit,
		"started_at": t0.Add(time.Duration(r.Index) * time.Minute)})
	os.WriteFile(filepath.Join(tmp, "env.json"), env, 0o644)
	os.WriteFile(filepath.Join(tmp, "manifest.json"), []byte(`{"metrics": {"duration_ms": 700, "tokens_input": 10, "tokens_output": 5}}`), 0o644)
	os.WriteFile(filepath.Join(tmp, "logs", "stdout"), []byte(out), 0o644)
	return os.Rename(tmp, dir)
}

// sseReader reads server-sent events.
type sseReader struct{ sc *bufio.Scanner }

func (r sseReader) next() (event, data string, err error) {
	for r.sc.Scan() {
		line := r.sc.Text()
		switch {
		case line == "" && event != "":
			return event, data, nil
		case strings.HasPrefix(line, "event: "):
			event = line[7:]
		case strings.HasPrefix(line, "data: "):
			data = line[6:]
		}
	}
	return "", "", fmt.Errorf("stream ended: %v", r.sc.Err())
}

// TestLiveRunsAppear: an evaluation runs in a directory under the
// dashboard; after each run finishes and the directories are scanned, the
// page's event stream brings the evaluation with that run; at the end it
// is a finished evaluation with its report.
func TestLiveRunsAppear(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	dir := filepath.Join(root, "live")
	s := NewServer(Options{Roots: []string{root}, Interval: time.Hour})
	ts := httptest.NewServer(s.Handler(""))
	defer ts.Close()
	var model Model
	res, err := http.Get(ts.URL + "/model.json")
	if err != nil {
		t.Fatal(err)
	}
	json.NewDecoder(res.Body).Decode(&model)
	res.Body.Close()
	if len(model.Evaluations) != 0 || !model.Live {
		t.Fatalf("model before the evaluation: %+v", model)
	}
	// A hang (an event that never comes) fails the test instead of
	// waiting for go test's timeout.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", fmt.Sprintf("%s/events?since=%d", ts.URL, model.Seq), nil)
	res, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	events := sseReader{bufio.NewScanner(res.Body)}
	events.sc.Buffer(nil, 8<<20)

	const n = 3
	step := make(chan struct{})
	recorded := make(chan int)
	o := consistency.Options{Dir: dir, Command: []string{"agent"}, Mode: "strict", Seeds: consistency.Seeds(1, n), Strategy: consensus.Majority,
		Labels: consistency.Labels{"framework": "lg", "task": "live"},
		Record: func(ctx context.Context, r consistency.RunSpec) error {
			<-step
			err := fakeBundle(r.Bundle, r, 0, "42\n")
			recorded <- r.Index
			return err
		}}
	var wg sync.WaitGroup
	finished := make(chan error, 1)
	wg.Go(func() {
		_, err := consistency.Evaluate(ctx, o)
		finished <- err
	})
	// waitEval reads events until the evaluation comes with want runs in
	// state.
	waitEval := func(state string, want int) *Eval {
		t.Helper()
		for {
			ev, data, err := events.next()
			if err != nil {
				t.Fatal(err)
			}
			if ev != "eval" {
				continue
			}
			var e Eval
			if err := json.Unmarshal([]byte(data), &e); err != nil {
				t.Fatal(err)
			}
			if e.State == state && e.N == want {
				return &e
			}
		}
	}
	for i := 1; i <= n; i++ {
		select {
		case step <- struct{}{}:
		case err := <-finished:
			t.Fatalf("the evaluation ended before run %d: %v", i, err)
		}
		if got := <-recorded; got != i {
			t.Fatalf("recorded run %d, want %d", got, i)
		}
		s.Rescan()
		e := waitEval("running", i)
		if e.Framework != "lg" || e.Task != "live" || e.Total != n || e.Runs.Index[i-1] != i || e.Successes != i {
			t.Fatalf("after run %d: %+v", i, e)
		}
	}
	wg.Wait()
	if err := <-finished; err != nil {
		t.Fatal(err)
	}
	s.Rescan()
	e := waitEval("done", n)
	if e.Verdict != "decided" || e.Report != "report/"+e.Key {
		t.Fatalf("finished: %+v", e)
	}
	// The running evaluation is gone: the finished one stands for it.
	for {
		ev, data, err := events.next()
		if err != nil {
			t.Fatal(err)
		}
		if ev == "gone" && strings.Contains(data, "live-") {
			break
		}
	}
}

// TestForeignHostRefused: a request naming another host (a page
// elsewhere reaching the dashboard by DNS rebinding) is refused.
func TestForeignHostRefused(t *testing.T) {
	t.Parallel()
	s := NewServer(Options{Roots: []string{t.TempDir()}})
	h := s.Handler("127.0.0.1:8460")
	for host, want := range map[string]int{"127.0.0.1:8460": 200, "localhost:8460": 200, "evil.example:8460": http.StatusMisdirectedRequest} {
		req := httptest.NewRequest("GET", "/", nil)
		req.Host = host
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != want {
			t.Errorf("Host %s: %d, want %d", host, w.Code, want)
		}
	}
}

// TestStoppedEvaluation: an evaluation that stops before its report
// (its recorder fails at run 2) is shown as stopped, with why and the run
// it finished, not as running.
func TestStoppedEvaluation(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	o := consistency.Options{Dir: filepath.Join(root, "stopped"), Command: []string{"agent"}, Seeds: consistency.Seeds(1, 3),
		Strategy: consensus.Majority, Labels: consistency.Labels{"framework": "lg", "task": "t"},
		Record: func(ctx context.Context, r consistency.RunSpec) error {
			if r.Index == 2 {
				return fmt.Errorf("the disk is full")
			}
			return fakeBundle(r.Bundle, r, 0, "42\n")
		}}
	if _, err := consistency.Evaluate(context.Background(), o); err == nil {
		t.Fatal("the evaluation did not stop")
	}
	m := Build(Options{Roots: []string{root}}, root)
	if len(m.Evaluations) != 1 {
		t.Fatalf("evaluations %+v", m.Evaluations)
	}
	e := m.Evaluations[0]
	if e.State != "stopped" || e.N != 1 || !strings.Contains(e.Stopped, "the disk is full") || e.Framework != "lg" {
		t.Fatalf("stopped evaluation: %+v", e)
	}
}
