package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// answerAgent prints a run id (different in every run) and a JSON answer:
// 42 mostly, 41 for some seeds.
const answerAgent = `import random
print("run id", random.random())
print('{"final": {"answer": %d}}' % (41 if random.random() < 0.2 else 42))`

// TestConsistencyShardsMerge: an evaluation recorded as three shards
// (--shard K/N) and merged gives the report, byte for byte, that one
// machine writes for the same runs; runs vote on --answer-json although
// their stdout differs; a tampered bundle makes merge refuse in one
// sentence and write nothing.
func TestConsistencyShardsMerge(t *testing.T) {
	t.Parallel()
	env := []string{"DAL_KEY=" + filepath.Join(t.TempDir(), "k")}
	ws := t.TempDir()
	eval := []string{"--runs", "7", "--seed", "11", "--answer-json", "$.final.answer", "--", "python3", "-c", answerAgent}
	root := t.TempDir()
	var shards []string
	for _, k := range []string{"1", "2", "3"} {
		dir := filepath.Join(root, "shard"+k)
		r := dalExec(t, env, append([]string{"consistency", "--workspace", ws, "--report", dir, "--shard", k + "/3"}, eval...)...)
		if r.code != 0 || !strings.Contains(r.stdout, "shard "+k+"/3:") {
			t.Fatalf("shard %s: exit %d\n%s\n%s", k, r.code, r.stdout, r.stderr)
		}
		if _, err := os.Stat(filepath.Join(dir, "report.json")); err == nil {
			t.Fatalf("shard %s wrote a report of its share", k)
		}
		shards = append(shards, dir)
	}
	if n, _ := filepath.Glob(filepath.Join(shards[0], "runs", "*")); len(n) != 3 {
		t.Fatalf("shard 1/3 of 7 runs recorded %v, want runs 1, 4, 7", n)
	}

	merged := filepath.Join(root, "merged")
	r := dalExec(t, env, append([]string{"consistency", "merge", "--report", merged}, shards...)...)
	if r.code > 1 || !strings.Contains(r.stdout, "merged 7 runs from 3 shards") || !strings.Contains(r.stdout, "tally (stdout at $.final.answer):") {
		t.Fatalf("merge: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	_, rep := consistencyReportOf(t, merged)
	if rep.Runs != 7 || (r.code == 0) != (rep.Consensus.Verdict == "decided") {
		t.Fatalf("merged report: exit %d, %+v", r.code, rep.Consensus)
	}

	// One machine's evaluation of the same runs: every bundle in one
	// directory, kept (not recorded again) by dal-exec consistency.
	one := filepath.Join(root, "one")
	if err := os.MkdirAll(filepath.Join(one, "runs"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, s := range shards {
		runs, _ := filepath.Glob(filepath.Join(s, "runs", "*"))
		for _, run := range runs {
			if out, err := exec.Command("cp", "-a", run, filepath.Join(one, "runs")).CombinedOutput(); err != nil {
				t.Fatalf("cp: %v %s", err, out)
			}
		}
	}
	r1 := dalExec(t, env, append([]string{"consistency", "--workspace", ws, "--report", one}, eval...)...)
	if r1.code != r.code || strings.Count(r1.stderr, "kept from an earlier evaluation") != 7 {
		t.Fatalf("one machine: exit %d (merge %d)\n%s", r1.code, r.code, r1.stderr)
	}
	for _, f := range []string{"report.json", "report.md", "report.html"} {
		a, err1 := os.ReadFile(filepath.Join(one, f))
		b, err2 := os.ReadFile(filepath.Join(merged, f))
		if err1 != nil || err2 != nil || !bytes.Equal(a, b) {
			t.Errorf("%s of the merge differs from one machine's (%v, %v)", f, err1, err2)
		}
	}

	// A tampered run: refused, one sentence naming shard and run, nothing written.
	stdout := filepath.Join(shards[1], "runs", "005", "logs", "stdout")
	if err := os.WriteFile(stdout, []byte("run id 0\n{\"final\": {\"answer\": 41}}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	again := filepath.Join(root, "again")
	r = dalExec(t, env, append([]string{"consistency", "merge", "--report", again}, shards...)...)
	msg := strings.TrimSpace(r.stderr)
	if r.code != 2 || strings.Contains(msg, "\n") || !strings.Contains(msg, "shard 2/3") || !strings.Contains(msg, "run 5") {
		t.Fatalf("merge of a tampered shard: exit %d, stderr %q", r.code, r.stderr)
	}
	if _, err := os.Stat(again); !os.IsNotExist(err) {
		t.Fatalf("a refused merge wrote %s", again)
	}
}

// consistencyReportOf reads dir/report.json.
func consistencyReportOf(t *testing.T, dir string) ([]byte, consistencyReport) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rep consistencyReport
	if err := json.Unmarshal(data, &rep); err != nil {
		t.Fatal(err)
	}
	return data, rep
}

// TestConsistencyCompareGate: compare exits 1 when the new evaluation's
// success rate is significantly lower, 0 against itself, and writes the
// comparison with --report.
func TestConsistencyCompareGate(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	base, next := filepath.Join(root, "base"), filepath.Join(root, "new")
	if r, _ := consistency(t, base, "--runs", "8", "--", "sh", "-c", "echo 42"); r.code != 0 {
		t.Fatalf("base: exit %d\n%s", r.code, r.stderr)
	}
	if r, _ := consistency(t, next, "--runs", "8", "--", "sh", "-c", "echo 42; exit 1"); r.code != 1 {
		t.Fatalf("new: exit %d\n%s", r.code, r.stderr)
	}
	cmp := filepath.Join(root, "cmp")
	r := dalExec(t, nil, "consistency", "compare", "--report", cmp, base, next)
	if r.code != 1 || !strings.Contains(r.stdout, "**Regression** in success rate") {
		t.Fatalf("compare: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	file, err := os.ReadFile(filepath.Join(cmp, "comparison.json"))
	if err != nil {
		t.Fatal(err)
	}
	r = dalExec(t, nil, "consistency", "compare", "--json", base, next)
	c := checkSchema(t, "consistency-comparison.schema.json", r.stdout)
	if r.code != 1 || r.stdout != string(file) || fmt.Sprint(c["regressions"]) != "[success_rate]" || !strings.Contains(r.stderr, "**Regression** in success rate") {
		t.Fatalf("compare --json: exit %d, regressions %v, stdout the file: %v\n%s", r.code, c["regressions"], r.stdout == string(file), r.stderr)
	}
	if r := dalExec(t, nil, "consistency", "compare", base, base); r.code != 0 || !strings.Contains(r.stdout, "No significant regression") {
		t.Fatalf("compare with itself: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if r := dalExec(t, nil, "consistency", "compare", base, root); r.code != 2 || !strings.Contains(r.stderr, "holds no report.json") {
		t.Fatalf("compare with a directory without a report: exit %d\n%s", r.code, r.stderr)
	}
}
