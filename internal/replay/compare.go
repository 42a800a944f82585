package replay

import (
	"bytes"
	"fmt"
	"strings"
)

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

// FirstLineDiff describes the first line where got differs from want, with
// up to two lines of context before it, or "" when they are equal.
func FirstLineDiff(want, got []byte) string {
	if bytes.Equal(want, got) {
		return ""
	}
	wl, gl := splitLines(want), splitLines(got)
	i := 0
	for i < len(wl) && i < len(gl) && wl[i] == gl[i] {
		i++
	}
	var b strings.Builder
	fmt.Fprintf(&b, "first difference at line %d:\n", i+1)
	for j := max(0, i-2); j < i; j++ {
		fmt.Fprintf(&b, "    %s\n", clip(wl[j]))
	}
	if i < len(wl) {
		fmt.Fprintf(&b, "  - %s\n", clip(wl[i]))
	} else {
		b.WriteString("  - (end of recorded output)\n")
	}
	if i < len(gl) {
		fmt.Fprintf(&b, "  + %s", clip(gl[i]))
	} else {
		b.WriteString("  + (end of replayed output)")
	}
	return b.String()
}

func splitLines(b []byte) []string {
	s := string(b)
	if s == "" {
		return nil
	}
	lines := strings.SplitAfter(s, "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	for i, l := range lines {
		if !strings.HasSuffix(l, "\n") {
			lines[i] = l + " (no newline at end)"
		} else {
			lines[i] = strings.TrimSuffix(l, "\n")
		}
	}
	return lines
}

func clip(s string) string {
	if len(s) > 200 {
		return s[:200] + "..."
	}
	return s
}
