package replay

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sort"
	"strings"

	"github.com/dal-runtime/dal/internal/iterate"
	"github.com/dal-runtime/dal/internal/marks"
)

// compareIterations compares the iterations two runs marked (the
// recording's and the replay's, or two bundles'): scores, dimensions and
// artifact contents, by number.
func compareIterations(want, got []*marks.Mark, wantName, gotName string) Component {
	c := Component{Name: "iterations", Compared: true, Match: true}
	describe := func(m *marks.Mark) string {
		var b strings.Builder
		if m.Score != nil {
			fmt.Fprintf(&b, "score %v", *m.Score)
		} else {
			b.WriteString("no score")
		}
		keys := make([]string, 0, len(m.Dimensions))
		for k := range m.Dimensions {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			fmt.Fprintf(&b, " %s=%v", k, m.Dimensions[k])
		}
		for _, a := range m.Artifacts {
			fmt.Fprintf(&b, " %s:%s", a.Path, a.SHA256[:min(12, len(a.SHA256))])
		}
		return b.String()
	}
	if len(want) != len(got) {
		c.Match, c.First = false, fmt.Sprintf("the %s marked %d iterations, the %s %d", gotName, len(got), wantName, len(want))
	}
	for i := range min(len(want), len(got)) {
		if a, b := describe(want[i]), describe(got[i]); a != b {
			c.Match, c.First = false, fmt.Sprintf("iteration %d: %s %s, %s %s", want[i].Seq, wantName, a, gotName, b)
			break
		}
	}
	return c
}

// recordedPolicy reads the selection policy a bundle was recorded with.
func recordedPolicy(selectionJSON string) (iterate.Policy, error) {
	var s struct {
		Policy iterate.Policy `json:"policy"`
	}
	b, err := os.ReadFile(selectionJSON)
	if errors.Is(err, fs.ErrNotExist) {
		return iterate.DefaultPolicy(), nil
	}
	if err != nil {
		return iterate.Policy{}, err
	}
	if err := json.Unmarshal(b, &s); err != nil {
		return iterate.Policy{}, fmt.Errorf("iterations/selection.json: %w", err)
	}
	return s.Policy, nil
}
