package replay

import "github.com/dal-runtime/dal/internal/match"

// Component is one compared part of a run (docs/design.md §9).
type Component struct {
	Name     string `json:"name"`
	Compared bool   `json:"compared"` // false: the recording has nothing to compare (e.g. no network yet)
	Match    bool   `json:"match"`
	// First describes the first divergence, readable on a terminal.
	First string `json:"first,omitempty"`
	// Strategy, Status and Similarity say how the component was matched
	// (internal/match): the strategy, the schema's match_status for it,
	// and the semantic score. Error is why it could not be compared (a
	// failing --similarity-cmd): then it is not compared, never a match.
	Strategy   string   `json:"strategy,omitempty"`
	Status     string   `json:"match_status,omitempty"`
	Similarity *float64 `json:"similarity,omitempty"`
	Error      string   `json:"error,omitempty"`
}

// Fidelity is matching components over compared components (1 when
// nothing was compared).
func Fidelity(cs []Component) float64 {
	n, m := 0, 0
	for _, c := range cs {
		if c.Compared {
			n++
			if c.Match {
				m++
			}
		}
	}
	if n == 0 {
		return 1
	}
	return float64(m) / float64(n)
}

// FirstLineDiff is match.FirstLineDiff: the sentence a verdict gives for
// a stream that differs.
func FirstLineDiff(want, got []byte) string { return match.FirstLineDiff(want, got) }
