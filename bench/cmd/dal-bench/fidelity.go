package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/dal-runtime/dal/bench"
)

// fidelityAgent is an example agent of the fidelity suite. Every one is
// deterministic under strict mode: any replay that is not exact fails the
// suite.
type fidelityAgent struct {
	name  string            // short, a label in the report and the metrics
	about string            // what it exercises
	argv  []string          // the command; script paths relative to the repository
	tools []string          // what must be on PATH
	files map[string]string // the workspace before the run
	llm   bool              // runs against a local OpenAI-compatible server
}

var fidelityAgents = []fidelityAgent{
	{name: "python", about: "examples/python/agent.py: clocks, randomness, asyncio timers, 68 s of sleeps",
		argv: []string{"python3", "examples/python/agent.py"}, tools: []string{"python3"}},
	{name: "node", about: "examples/node/agent.js: clocks, randomness, timer order, a 2.5 s sleep",
		argv: []string{"node", "examples/node/agent.js"}, tools: []string{"node"}},
	{name: "multi-process", about: "examples/multiproc/parent.py: a Python parent with a Python and a Node child",
		argv: []string{"python3", "examples/multiproc/parent.py"}, tools: []string{"python3", "node"}},
	{name: "llm", about: "e2e/testdata/llm_agent_urllib.py: 5 chat completions (one streamed) against e2e/testdata/llm_server.py, replayed with the server stopped",
		argv: []string{"python3", "e2e/testdata/llm_agent_urllib.py"}, tools: []string{"python3"}, llm: true},
	{name: "file-editing", about: "e2e/testdata/fsagent.py: creates, appends to and deletes files, and tries to write outside its workspace",
		argv: []string{"python3", "e2e/testdata/fsagent.py"}, tools: []string{"python3"},
		files: map[string]string{"input.txt": "alpha\n", "log.txt": "first\n", "obsolete.txt": "old\n"}},
}

// fidelityRun is one record, replay and revert of an agent with a seed.
type fidelityRun struct {
	Agent    string   `json:"agent"`
	Seed     uint64   `json:"seed"`
	Exact    bool     `json:"exact"`
	Fidelity float64  `json:"replay_fidelity"` // -1: no verdict
	Drifted  []string `json:"drifted,omitempty"`
	// Coverage is syscalls.json's boundary coverage; -1 when the
	// bundle says it was not observed (CoverageWhy says why).
	Coverage    float64 `json:"boundary_coverage"`
	CoverageWhy string  `json:"boundary_coverage_missing,omitempty"`
	RecordS     float64 `json:"record_seconds"`
	ReplayS     float64 `json:"replay_seconds"`
	RevertS     float64 `json:"revert_seconds"`  // dal-exec revert, wall
	RestoreS    float64 `json:"restore_seconds"` // its dal_revert_duration_seconds; -1 when not reported
	Reverted    bool    `json:"reverted"`        // the workspace equals its pre-run state afterwards
	BundleBytes int64   `json:"bundle_bytes"`
	Error       string  `json:"error,omitempty"`
}

// fidelityRuns are this run's outcomes, in order; fidelityAbout the
// agents measured.
var (
	fidelityRuns  []fidelityRun
	fidelityAbout = map[string]string{}
)

// inexactReplays counts the fidelity runs that did not replay exactly.
func inexactReplays() int {
	n := 0
	for _, r := range fidelityRuns {
		if !r.Exact {
			n++
		}
	}
	return n
}

// fidelitySuite records every example agent with *seeds random seeds,
// replays each bundle and reverts each run. Its outcomes go to
// fidelityRuns; the figures it returns are the agents it could not run.
func fidelitySuite(tmp string) []bench.Figure {
	var figs []bench.Figure
	for _, a := range fidelityAgents {
		missing := ""
		for _, t := range a.tools {
			if _, err := lookTool(t); err != nil && missing == "" {
				missing = t
			}
		}
		if missing != "" {
			figs = append(figs, missingTool("replay fidelity: "+a.name+" agent", missing))
			continue
		}
		fidelityAbout[a.name] = a.about
		runs, err := fidelityAgentRuns(tmp, a)
		if err != nil {
			figs = append(figs, notMeasured("replay fidelity: "+a.name+" agent", err))
		}
		fidelityRuns = append(fidelityRuns, runs...)
	}
	return figs
}

// fidelityAgentRuns records the agent once per seed, then (with the LLM
// server stopped) replays and reverts each recording.
func fidelityAgentRuns(tmp string, a fidelityAgent) ([]fidelityRun, error) {
	argv := make([]string, len(a.argv))
	for i, s := range a.argv {
		argv[i] = s
		if strings.Contains(s, "/") {
			argv[i], _ = filepath.Abs(s)
		}
	}
	var env, keep []string
	var srv *llmServer
	if a.llm {
		const key = "sk-bench-fidelity-5c1a"
		var err error
		if srv, err = startLLMServer("e2e/testdata/llm_server.py", key); err != nil {
			return nil, err
		}
		defer srv.stop()
		env = []string{"OPENAI_API_KEY=" + key, "LLM_BASE=http://127.0.0.1:" + strconv.Itoa(srv.port) + "/v1"}
		keep = []string{"--keep-env", "OPENAI_API_KEY", "--keep-env", "LLM_BASE", "--allow-loopback", "127.0.0.1:" + strconv.Itoa(srv.port)}
	}
	type recorded struct {
		run        *fidelityRun
		ws, bundle string
		pre        string // tree hash of the workspace before the run
	}
	var recs []recorded
	var runs []fidelityRun
	for range *seeds {
		r := &fidelityRun{Agent: a.name, Seed: uint64(rand.Uint32()), Fidelity: -1, Coverage: -1, RestoreS: -1}
		dir := filepath.Join(tmp, "fidelity", fmt.Sprintf("%s-%d", strings.ReplaceAll(a.name, " ", "-"), r.Seed))
		ws, bundleDir := filepath.Join(dir, "ws"), filepath.Join(dir, "bundle")
		pre, err := makeWorkspace(ws, a.files)
		if err != nil {
			return nil, err
		}
		args := append([]string{"record", "--mode", "strict", "--seed", strconv.FormatUint(r.Seed, 10), "--out", bundleDir}, keep...)
		res := dalCmd(ws, env, append(append(args, "--"), argv...)...)
		r.RecordS = res.wall.Seconds()
		if res.err != nil || res.code != 0 {
			r.Error = "record: " + res.describe()
			recs = append(recs, recorded{r, ws, "", pre})
			continue
		}
		r.BundleBytes = dirSize(bundleDir)
		r.Coverage, r.CoverageWhy = readCoverage(filepath.Join(bundleDir, "syscalls.json"))
		recs = append(recs, recorded{r, ws, bundleDir, pre})
	}
	if srv != nil {
		srv.stop() // the replays run offline: only the bundle answers
	}
	for _, rc := range recs {
		r := rc.run
		if rc.bundle != "" {
			replayRun(r, rc.ws, rc.bundle, env)
			revertRun(r, rc.ws, rc.bundle, rc.pre)
		}
		runs = append(runs, *r)
	}
	return runs, nil
}

// replayRun replays the bundle and reads its verdict; env is the
// record's (the API key the bundle holds redacted).
func replayRun(r *fidelityRun, ws, bundleDir string, env []string) {
	verdict := bundleDir + ".verdict.json"
	res := dalCmd(ws, env, "replay", "--json-out", verdict, bundleDir)
	r.ReplayS = res.wall.Seconds()
	var v struct {
		Fidelity   float64 `json:"fidelity"`
		Exact      bool    `json:"exact"`
		Components []struct {
			Name     string `json:"name"`
			Compared bool   `json:"compared"`
			Match    bool   `json:"match"`
		} `json:"components"`
	}
	b, err := os.ReadFile(verdict)
	if err == nil {
		err = json.Unmarshal(b, &v)
	}
	if err != nil {
		r.Error = "replay: " + res.describe()
		return
	}
	r.Fidelity, r.Exact = v.Fidelity, v.Exact && res.code == 0
	for _, c := range v.Components {
		if c.Compared && !c.Match {
			r.Drifted = append(r.Drifted, c.Name)
		}
	}
	if !r.Exact && len(r.Drifted) == 0 {
		r.Error = "replay: " + res.describe()
	}
}

// revertRun times dal-exec revert of the applied run and checks that the
// workspace is back to its pre-run state.
func revertRun(r *fidelityRun, ws, bundleDir, pre string) {
	prom := bundleDir + ".revert.prom"
	res := dalCmd(ws, nil, "revert", "--metrics-textfile", prom, bundleDir)
	r.RevertS = res.wall.Seconds()
	if res.err != nil || res.code != 0 {
		r.Error = strings.TrimPrefix(r.Error+"; ", "; ") + "revert: " + res.describe()
		return
	}
	if b, err := os.ReadFile(prom); err == nil && bytes.Contains(b, []byte("dal_revert_duration_seconds_count 1")) {
		r.RestoreS = sumMetric(b, "dal_revert_duration_seconds_sum")
	}
	post, err := treeHash(ws)
	r.Reverted = err == nil && post == pre
	if !r.Reverted {
		r.Error = strings.TrimPrefix(r.Error+"; ", "; ") + "revert: the workspace differs from its pre-run state"
	}
}

// readCoverage reads a bundle's boundary coverage.
func readCoverage(path string) (float64, string) {
	var s struct {
		Observed bool     `json:"observed"`
		Reason   string   `json:"reason"`
		Coverage *float64 `json:"coverage"`
	}
	b, err := os.ReadFile(path)
	if err == nil {
		err = json.Unmarshal(b, &s)
	}
	switch {
	case err != nil:
		return -1, "syscalls.json: " + err.Error()
	case s.Coverage == nil:
		return -1, s.Reason
	}
	return *s.Coverage, ""
}

// makeWorkspace creates dir with files and returns its tree hash.
func makeWorkspace(dir string, files map[string]string) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			return "", err
		}
	}
	return treeHash(dir)
}

// treeHash hashes a directory tree: every path, its type and permissions,
// and each file's content or link's target.
func treeHash(dir string) (string, error) {
	h := sha256.New()
	var paths []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		paths = append(paths, p)
		return nil
	})
	if err != nil {
		return "", err
	}
	sort.Strings(paths)
	for _, p := range paths {
		fi, err := os.Lstat(p)
		if err != nil {
			return "", err
		}
		rel, _ := filepath.Rel(dir, p)
		fmt.Fprintf(h, "%s\x00%v\x00", rel, fi.Mode())
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			t, _ := os.Readlink(p)
			io.WriteString(h, t)
		case fi.Mode().IsRegular():
			f, err := os.Open(p)
			if err != nil {
				return "", err
			}
			_, err = io.Copy(h, f)
			f.Close()
			if err != nil {
				return "", err
			}
		}
		h.Write([]byte{0})
	}
	return fmt.Sprintf("%x", h.Sum(nil)), nil
}

// cmdResult is how a dal-exec command went.
type cmdResult struct {
	wall   time.Duration
	code   int // exit status; -1 when it did not run or was killed
	stderr []byte
	err    error // it could not be started or did not exit
}

func (r cmdResult) describe() string {
	if r.err != nil {
		return r.err.Error()
	}
	return fmt.Sprintf("exit %d: %s", r.code, lastLines(r.stderr, 4))
}

// dalCmd runs dal-exec args in dir with env added (signing with
// dal-bench's own key) and times it; a non-zero exit is not an error.
func dalCmd(dir string, env []string, args ...string) cmdResult {
	cmd := exec.Command(*dal, args...)
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), "DAL_KEY="+filepath.Join(os.TempDir(), "dal-bench.key")), env...)
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = io.Discard, &stderr
	t := time.Now()
	err := cmd.Run()
	res := cmdResult{wall: time.Since(t), stderr: stderr.Bytes()}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee) && ee.ExitCode() >= 0:
		res.code = ee.ExitCode()
	default:
		res.code, res.err = -1, err
	}
	return res
}

// fidelityAgg is one agent's runs summarized.
type fidelityAgg struct {
	agent                               string
	runs, exact                         int
	fidelity, coverage                  bench.Values
	record, replay, revert, restore, kb bench.Values
	coverageWhy                         string
}

// aggregateFidelity summarizes fidelityRuns per agent, in suite order.
func aggregateFidelity() []fidelityAgg {
	var aggs []fidelityAgg
	idx := map[string]int{}
	for _, r := range fidelityRuns {
		i, ok := idx[r.Agent]
		if !ok {
			i = len(aggs)
			idx[r.Agent] = i
			aggs = append(aggs, fidelityAgg{agent: r.Agent})
		}
		a := &aggs[i]
		a.runs++
		if r.Exact {
			a.exact++
		}
		if r.Fidelity >= 0 {
			a.fidelity = append(a.fidelity, r.Fidelity)
		}
		if r.Coverage >= 0 {
			a.coverage = append(a.coverage, r.Coverage)
		} else if a.coverageWhy == "" {
			a.coverageWhy = r.CoverageWhy
		}
		if r.Error == "" || r.ReplayS > 0 {
			a.record = append(a.record, r.RecordS*1e3)
			a.kb = append(a.kb, float64(r.BundleBytes)/1024)
		}
		if r.ReplayS > 0 {
			a.replay = append(a.replay, r.ReplayS*1e3)
		}
		if r.RevertS > 0 {
			a.revert = append(a.revert, r.RevertS*1e3)
		}
		if r.RestoreS >= 0 {
			a.restore = append(a.restore, r.RestoreS*1e3)
		}
	}
	return aggs
}
