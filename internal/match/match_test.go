package match

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    string // Spec.String
		wantErr string
	}{
		{"", "exact", ""},
		{"semantic", "semantic", ""},
		{"stdout=semantic,fs_diff=structural", "exact,fs_diff=structural,stdout=semantic", ""},
		{"structural, stdout=semantic", "structural,stdout=semantic", ""},
		{"exit_code=exact", "exact,exit_code=exact", ""},
		{"fuzzy", "", `unknown strategy "fuzzy"`},
		{"stdout=fuzzy", "", `unknown strategy "fuzzy"`},
		{"stdin=semantic", "", `unknown component "stdin"`},
		{"exit_code=semantic", "", "exit_code is compared exactly only"},
		{"semantic,exact", "", "two strategies"},
		{"stdout=semantic,stdout=exact", "", "names stdout twice"},
	} {
		s, err := Parse(tc.in)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("Parse(%q) = %v, want an error with %q", tc.in, err, tc.wantErr)
			}
			continue
		}
		if err != nil || s.String() != tc.want {
			t.Errorf("Parse(%q) = %q, %v; want %q", tc.in, s.String(), err, tc.want)
		}
	}
	s, _ := Parse("semantic,fs_diff=exact")
	if s.For("stdout") != Semantic || s.For("fs_diff") != Exact || s.For("clock") != Exact || s.IsExact() {
		t.Errorf("For: %v", s)
	}
	for _, bad := range []float64{-0.1, 1.01} {
		if CheckThreshold(bad) == nil {
			t.Errorf("CheckThreshold(%v) accepted", bad)
		}
	}
}

// TestSimilarityFigures pins the built-in similarity: docs/validation.md
// quotes these figures.
func TestSimilarityFigures(t *testing.T) {
	base := "The capital of France is Paris. It sits on the Seine and is known for the Eiffel Tower, the Louvre museum and its cafes."
	for _, tc := range []struct {
		a, b string
		want float64
	}{
		{base, base, 1},
		{"", "", 1},
		{"{}", "{ }", 0},
		{"...", "...\n", 1},
		{"hello", "", 0},
		{base, strings.ToUpper(base), 1},
		{base, strings.Replace(base, "known", "famous", 1), 0.963971},
		{base, strings.Replace(base, "cafes", "cafés", 1), 0.97912},
		{base, "Bonjour. Paris is the capital.", 0.514829},
		{"a b c", "c b a", 0.8},
	} {
		if got := Similarity([]byte(tc.a), []byte(tc.b)); got != tc.want {
			t.Errorf("Similarity(%q, %q) = %v, want %v", clip(tc.a), clip(tc.b), got, tc.want)
		}
	}
}

func TestStructure(t *testing.T) {
	for _, tc := range []struct {
		name, a, b string
		want       string // "" same structure, else a substring of the difference
	}{
		{"r.json", `{"a": 1, "b": ["x", "y"], "c": {"d": true}}`, `{"c": {"d": false}, "b": ["z", "w"], "a": 2.5}`, ""},
		{"r.json", `{"a": 1}`, `{"a": "1"}`, "$.a: number in the recording, string in the replay"},
		{"r.json", `{"a": [1, 2]}`, `{"a": [1]}`, "$.a: 2 elements in the recording, 1 in the replay"},
		{"r.json", `{"a": 1, "b": 2}`, `{"a": 1}`, "$.b: in the recording, missing in the replay"},
		{"r.json", `{"a": null}`, `{"a": 0}`, "null in the recording, number"},
		{"", `{"n": 1}`, `{"n": 2}`, ""},
		{"c.yaml", "name: alpha\nitems:\n  - 1\n  - 2\n", "name: beta\nitems:\n  - 3\n  - 4\n", ""},
		{"c.yml", "name: x\nitems: [1, 2]\n", "name: x\nitems: [1]\n", "$.items: 2 elements"},
		{"log.txt", "took 1.5s\nstatus \"ok\"\n", "took 23s\nstatus \"fine\"\n", ""},
		{"log.txt", "took 1.5s\n", "took 1.5 s\n", "line 1:"},
		{"log.txt", "a\nb\n", "a\n", "2 lines in the recording, 1 in the replay"},
		{"r.json", `not json`, `not json either`, "line 1:"},
	} {
		got := Structure([]byte(tc.a), []byte(tc.b), tc.name)
		if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("Structure(%s: %q, %q) = %q, want %q", tc.name, tc.a, tc.b, got, tc.want)
		}
	}
}

func TestCompare(t *testing.T) {
	ctx := context.Background()
	spec, _ := Parse("stdout=semantic,fs_diff=structural")
	spec.Threshold = 0.9
	a := []byte("The answer is forty two, as computed by the deep thought machine over many years.")
	b := []byte("The answer is forty two, as computed by the Deep Thought machine over many long years.")
	r := spec.Compare(ctx, "stdout", "", a, b)
	if r.Status != SemanticMatch || r.Similarity == nil || *r.Similarity < 0.9 {
		t.Errorf("semantic above threshold: %+v", r)
	}
	spec.Threshold = 0.99
	if r := spec.Compare(ctx, "stdout", "", a, b); r.Status != NoMatch || !strings.Contains(r.First, "below the threshold 0.99") {
		t.Errorf("semantic below threshold: %+v", r)
	}
	if r := spec.Compare(ctx, "stderr", "", a, b); r.Status != NoMatch || r.Strategy != Exact {
		t.Errorf("exact: %+v", r)
	}
	if r := spec.Compare(ctx, "stderr", "", a, a); r.Status != ExactMatch {
		t.Errorf("exact equal: %+v", r)
	}
	if r := spec.Compare(ctx, "fs_diff", "out.json", []byte(`{"v": 1}`), []byte(`{"v": 2}`)); r.Status != SemanticMatch {
		t.Errorf("structural: %+v", r)
	}
}

func TestOverall(t *testing.T) {
	for _, tc := range []struct {
		in     []string
		failed bool
		want   string
	}{
		{nil, false, NotReplayed},
		{[]string{ExactMatch, ExactMatch, NotReplayed}, false, ExactMatch},
		{[]string{ExactMatch, SemanticMatch}, false, SemanticMatch},
		{[]string{ExactMatch, NoMatch}, false, PartialMatch},
		{[]string{NoMatch, NoMatch}, false, NoMatch},
		{[]string{ExactMatch, NotReplayed}, true, PartialMatch},
		{[]string{NotReplayed}, true, NoMatch},
	} {
		if got := Overall(tc.in, tc.failed); got != tc.want {
			t.Errorf("Overall(%v, %v) = %s, want %s", tc.in, tc.failed, got, tc.want)
		}
	}
}

// TestScorer runs real commands: one that works, and the ways one fails;
// a failing scorer makes the comparison not_replayed, never a match.
func TestScorer(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	script := filepath.Join(dir, "score.sh")
	// Prints 1 when the files are equal, else 0.25.
	os.WriteFile(script, []byte("#!/bin/sh\nif cmp -s \"$1\" \"$2\"; then echo 1; else echo 0.25; fi\n"), 0o755)
	s, err := NewScorer(ctx, script)
	if err != nil {
		t.Fatal(err)
	}
	spec := Spec{Default: Semantic, Threshold: 0.2, Scorer: s}
	if r := spec.Compare(ctx, "stdout", "", []byte("a"), []byte("b")); r.Status != SemanticMatch || *r.Similarity != 0.25 {
		t.Errorf("scorer result: %+v", r)
	}
	for _, tc := range []struct{ cmd, want string }{
		{"false", "exit status 1"},
		{"echo hello;:", `printed "hello", not a number`},
		{"echo 1.5;:", "outside [0, 1]"},
		{"echo nan;:", "not a number"},
		{"echo oops >&2; exit 3", "oops"},
		{"  ", "empty"},
	} {
		_, err := NewScorer(ctx, tc.cmd)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("NewScorer(%q) = %v, want an error with %q", tc.cmd, err, tc.want)
		}
	}
	// A scorer that works on the probe and fails later.
	flaky := filepath.Join(dir, "flaky.sh")
	os.WriteFile(flaky, []byte("#!/bin/sh\ncmp -s \"$1\" \"$2\" && echo 1 || echo garbage\n"), 0o755)
	s, err = NewScorer(ctx, flaky)
	if err != nil {
		t.Fatal(err)
	}
	spec.Scorer = s
	r := spec.Compare(ctx, "stdout", "", []byte("a"), []byte("b"))
	if r.Status != NotReplayed || r.Matched() || !strings.Contains(r.Err, "garbage") {
		t.Errorf("failing scorer: %+v", r)
	}
}
