package replay

import (
	"strings"
	"testing"

	"github.com/dal-runtime/dal/internal/marks"
)

func TestFirstLineDiff(t *testing.T) {
	for _, tc := range []struct{ want, got, has string }{
		{"a\nb\nc\n", "a\nb\nc\n", ""},
		{"a\nb\nc\n", "a\nB\nc\n", "first difference at line 2:\n    a\n  - b\n  + B"},
		{"a\n", "a\nmore\n", "line 2:\n    a\n  - (end of recorded output)\n  + more"},
		{"a\nb", "a\nb\n", "  - b (no newline at end)\n  + b"},
	} {
		got := FirstLineDiff([]byte(tc.want), []byte(tc.got))
		if (tc.has == "") != (got == "") || !strings.Contains(got, tc.has) {
			t.Errorf("FirstLineDiff(%q, %q) = %q, want it to contain %q", tc.want, tc.got, got, tc.has)
		}
	}
}

func TestFidelity(t *testing.T) {
	cs := []Component{{Compared: true, Match: true}, {Compared: true}, {Compared: false}, {Compared: true, Match: true}}
	if f := Fidelity(cs); f < 0.66 || f > 0.67 {
		t.Fatalf("fidelity %v", f)
	}
	if Fidelity(nil) != 1 {
		t.Fatal("nothing compared is not a divergence")
	}
}

func TestCompareIterations(t *testing.T) {
	t.Parallel()
	score := func(v float64) *float64 { return &v }
	mk := func(s *float64, hash string) *marks.Mark {
		return &marks.Mark{Seq: 1, Score: s, Artifacts: []marks.Artifact{{Path: "out.md", SHA256: hash}}}
	}
	for _, c := range []struct {
		name      string
		want, got []*marks.Mark
		first     string
	}{
		{"same", []*marks.Mark{mk(score(.5), "aa")}, []*marks.Mark{mk(score(.5), "aa")}, ""},
		{"score", []*marks.Mark{mk(score(.5), "aa")}, []*marks.Mark{mk(score(.6), "aa")}, "iteration 1: recording score 0.5 out.md:aa, replay score 0.6 out.md:aa"},
		{"content", []*marks.Mark{mk(nil, "aa")}, []*marks.Mark{mk(nil, "bb")}, "recording no score out.md:aa, replay no score out.md:bb"},
		{"count", []*marks.Mark{mk(nil, "aa")}, nil, "the replay marked 0 iterations, the recording 1"},
	} {
		got := compareIterations(c.want, c.got, "recording", "replay")
		if got.Match != (c.first == "") || !strings.Contains(got.First, c.first) {
			t.Errorf("%s: %+v, want first difference %q", c.name, got, c.first)
		}
	}
}
