package consistency

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dal-runtime/dal/internal/consistency/consensus"
)

func TestJSONPath(t *testing.T) {
	t.Parallel()
	doc := `{"final": {"answer": "Paris", "n": 1.50, "list": [1, {"b": true}, null]}, "a.b": {"c": 3}, "x": {"z": 1, "y": [2]}}`
	for _, tc := range []struct{ path, want, err string }{
		{"$.final.answer", "Paris", ""},
		{"$.final.n", "1.50", ""},
		{"$.final.list[1]", `{"b":true}`, ""},
		{"$.final.list[-1]", "null", ""},
		{"$['a.b'].c", "3", ""},
		{`$["a.b"]["c"]`, "3", ""},
		{"$.x", `{"y":[2],"z":1}`, ""},
		{"$", "", ""}, // the whole document, compact
		{"$.final.missing", "", `$"final" has no member "missing"`},
		{"$.final.list[3]", "", "has 3 elements, no [3]"},
		{"$.final.answer.x", "", "is a string, not an object or array"},
		{"$.final[0]", "", "is an object, not an array"},
		{"final.answer", "", "must start with $"},
		{"$..a", "", "empty member name"},
		{"$[x]", "", "neither an index nor a quoted name"},
		{"$['a", "", "unterminated"},
		{"$[1", "", "without ]"},
	} {
		p, err := parseJSONPath(tc.path)
		if err == nil {
			var got string
			got, err = p.find([]byte(doc))
			if err == nil && tc.path != "$" && got != tc.want {
				t.Errorf("%s = %q, want %q", tc.path, got, tc.want)
			}
		}
		if (err != nil) != (tc.err != "") || (err != nil && !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("%s: error %v, want %q", tc.path, err, tc.err)
		}
	}
	p, _ := parseJSONPath("$.answer")
	for in, want := range map[string]string{
		"thinking...\nstill thinking\n{\"answer\": 7}\n": "7", // the last line is the JSON
		"{\n \"answer\": \"multi-line\"\n}\n":            "multi-line",
	} {
		if got, err := p.find([]byte(in)); err != nil || got != want {
			t.Errorf("find in %q = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"", "no json here", "{\"answer\": 1} {\"answer\": 2}"} {
		if _, err := p.find([]byte(in)); err == nil {
			t.Errorf("find in %q did not fail", in)
		}
	}
}

// FuzzJSONPath: --answer-json and the agent's output are outside input;
// neither may panic, and a parsed path evaluates or errs.
func FuzzJSONPath(f *testing.F) {
	f.Add("$.final.answer", `{"final":{"answer":"x"}}`)
	f.Add("$['a'][0]", `{"a":[1]}`)
	f.Add("$[-1]", `[1,2]`)
	f.Fuzz(func(t *testing.T, expr, doc string) {
		p, err := parseJSONPath(expr)
		if err != nil {
			return
		}
		p.find([]byte(doc))
	})
}

// answerRecorder is fakeRecorder that also writes files into fs-diff.
func answerRecorder(agent fakeAgent, files func(i int) map[string]string) Recorder {
	rec := fakeRecorder(agent, nil)
	return func(ctx context.Context, r RunSpec) error {
		if err := rec(ctx, r); err != nil {
			return err
		}
		for name, data := range files(r.Index) {
			p := filepath.Join(r.Bundle, "fs-diff", "files", name)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				return err
			}
			if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
				return err
			}
		}
		return nil
	}
}

// TestAnswerSources: runs whose stdout differs (a timestamp, a run id)
// agree on their answer; a run without an answer fails with a warning.
func TestAnswerSources(t *testing.T) {
	t.Parallel()
	stdout := func(i int, _ uint64) (int, string, int64, int64) {
		return 0, fmt.Sprintf("run id %d at 12:0%d\n{\"final\": {\"answer\": \"Paris\"}}\n", i, i), 100, 10
	}
	files := func(i int) map[string]string {
		if i == 3 {
			return nil
		}
		return map[string]string{"out/answer.txt": "  Paris\n", "out/answer.json": `{"final": {"answer": "Paris"}}`}
	}
	for _, tc := range []struct {
		name     string
		src      AnswerSource
		verdict  consensus.Verdict
		answer   string
		failed   int
		warning  string
		majority int
	}{
		{"stdout differs", AnswerSource{}, consensus.VerdictNoConsensus, "", 0, "", 1},
		{"json in stdout", AnswerSource{JSON: "$.final.answer"}, consensus.VerdictDecided, "Paris", 0, "", 4},
		{"answer file", AnswerSource{File: "out/answer.txt"}, consensus.VerdictDecided, "Paris", 1, "run 3 failed: it has no answer: the agent did not write the answer file out/answer.txt", 3},
		{"json in answer file", AnswerSource{File: "out/answer.json", JSON: "$.final.answer"}, consensus.VerdictDecided, "Paris", 1, "", 3},
		{"answer command", AnswerSource{Command: `tail -n 1 "$DAL_RUN_BUNDLE/logs/stdout"`, JSON: "$.final"}, consensus.VerdictDecided, `{"answer":"Paris"}`, 0, "", 4},
		{"failing answer command", AnswerSource{Command: `test "$DAL_RUN_INDEX" != 2 && echo Paris`}, consensus.VerdictDecided, "Paris", 1, "run 2 failed: it has no answer: the answer command failed", 3},
		{"json path missing", AnswerSource{JSON: "$.final.result"}, consensus.VerdictFailed, "", 4, `stdout at $.final.result: $"final" has no member "result"`, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			o := options(t, 4, stdout)
			o.Record, o.Answer = answerRecorder(stdout, files), tc.src
			rep, err := Evaluate(context.Background(), o)
			if err != nil {
				t.Fatal(err)
			}
			c := rep.Consensus
			if c.Verdict != tc.verdict || c.Answer != tc.answer || 4-rep.Variance.SuccessRate.Successes != tc.failed {
				t.Fatalf("verdict %s, answer %q, %d failed (%s)", c.Verdict, c.Answer, 4-rep.Variance.SuccessRate.Successes, c.Reason)
			}
			if len(c.Tally) > 0 && c.Tally[0].Runs != tc.majority {
				t.Errorf("the leading answer has %d runs, want %d", c.Tally[0].Runs, tc.majority)
			}
			if tc.warning != "" && (len(rep.Warnings) == 0 || !strings.Contains(rep.Warnings[0], tc.warning)) {
				t.Errorf("warnings %q, want %q", rep.Warnings, tc.warning)
			}
			if rep.AnswerSource != tc.src.String() {
				t.Errorf("answer source %q", rep.AnswerSource)
			}
		})
	}
}

func TestAnswerSourceCheck(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		src AnswerSource
		err string
	}{
		{AnswerSource{}, ""},
		{AnswerSource{Command: "cat a", File: "a"}, "not both"},
		{AnswerSource{File: "../a"}, "not a file inside the workspace"},
		{AnswerSource{File: "/etc/passwd"}, "not a file inside the workspace"},
		{AnswerSource{JSON: "answer"}, "must start with $"},
	} {
		err := tc.src.Check()
		if (err != nil) != (tc.err != "") || (err != nil && !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("%+v: %v, want %q", tc.src, err, tc.err)
		}
	}
}

func TestShorten(t *testing.T) {
	t.Parallel()
	if got := shorten("a\n  b\tc", 10); got != "a b c" {
		t.Errorf("%q", got)
	}
	if got := shorten(strings.Repeat("é", 30), 10); got != strings.Repeat("é", 9)+"…" {
		t.Errorf("%q", got)
	}
}
