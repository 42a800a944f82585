package record

import (
	"strings"
	"testing"

	"github.com/dal-runtime/dal/internal/marks"
)

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
