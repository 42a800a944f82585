package iterate

import (
	"fmt"
	"sort"
	"strings"
)

// Markdown is the selection report a person reads (selection-report.md).
func (s *Selection) Markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Output selection report\n\n")
	if len(s.Iterations) == 0 {
		b.WriteString("The agent marked no iteration: nothing was selected.\n")
		return b.String()
	}
	fmt.Fprintf(&b, "- Iterations: %d\n- Selected: iteration %d", len(s.Iterations), s.Selected)
	if s.Override {
		b.WriteString(" (manual override)")
	}
	fmt.Fprintf(&b, "\n- Best by quality: %s\n- Final: iteration %d\n- Policy: --use %s", orNone(s.Best), s.Final, s.Policy.Use)
	if s.Policy.Reason != "" {
		fmt.Fprintf(&b, " (reason: %s)", s.Policy.Reason)
	}
	fmt.Fprintf(&b, ", acceptance threshold %s\n\n", pct(&s.Policy.Threshold))

	b.WriteString("## Quality scores\n\n| Iteration | Quality | Change | Best so far | Source | Status |\n|---|---|---|---|---|---|\n")
	flags := map[int][]string{}
	for _, f := range s.Degradation {
		flags[f.Iteration] = append(flags[f.Iteration], strings.ReplaceAll(f.Kind, "_", " "))
	}
	for _, it := range s.Iterations {
		var status []string
		if it.Seq == s.Selected {
			status = append(status, "✓ SELECTED")
		}
		if it.Seq == s.Best && it.Seq != s.Selected {
			status = append(status, "best")
		}
		if it.Seq == s.Final {
			status = append(status, "(final)")
		}
		if it.Score != nil && !it.Accepted {
			status = append(status, "below threshold")
		}
		for _, f := range flags[it.Seq] {
			status = append(status, "⚠ "+f)
		}
		change := ""
		if it.Delta != nil {
			change = fmt.Sprintf("%+.1f pts", *it.Delta*100)
		}
		best := "-"
		if it.BestSoFar > 0 {
			best = fmt.Sprintf("iteration %d", it.BestSoFar)
		}
		fmt.Fprintf(&b, "| %d | %s | %s | %s | %s | %s |\n", it.Seq, pct(it.Score), change, best, it.Source, strings.Join(status, " "))
	}
	if dims := dimensionNames(s); len(dims) > 0 {
		b.WriteString("\n## Quality dimensions\n\n| Iteration |")
		for _, d := range dims {
			if w, ok := s.Policy.Weights[d]; ok {
				fmt.Fprintf(&b, " %s (%.2f) |", d, w)
			} else {
				fmt.Fprintf(&b, " %s (no weight) |", d)
			}
		}
		b.WriteString("\n|---|" + strings.Repeat("---|", len(dims)) + "\n")
		for _, it := range s.Iterations {
			fmt.Fprintf(&b, "| %d |", it.Seq)
			for _, d := range dims {
				if v, ok := it.Dimensions[d]; ok {
					fmt.Fprintf(&b, " %.2f |", v)
				} else {
					b.WriteString(" |")
				}
			}
			b.WriteString("\n")
		}
	}
	fmt.Fprintf(&b, "\n## Selection rationale\n\nIteration %d selected because:\n", s.Selected)
	for _, r := range s.Rationale {
		fmt.Fprintf(&b, "- %s\n", r)
	}
	if len(s.Degradation) > 0 {
		b.WriteString("\n## Degradation\n\n")
		for _, f := range s.Degradation {
			fmt.Fprintf(&b, "- iteration %d: %s\n", f.Iteration, f.Detail)
		}
	}
	b.WriteString("\n## Artifacts applied\n\n")
	if len(s.Applied) == 0 {
		b.WriteString("None.\n")
	}
	for _, a := range s.Applied {
		fmt.Fprintf(&b, "- %s (from iteration %d)\n", a, s.Selected)
	}
	if len(s.Warnings) > 0 {
		b.WriteString("\n## Warnings\n\n")
		for _, w := range s.Warnings {
			fmt.Fprintf(&b, "- %s\n", w)
		}
	}
	return b.String()
}

func orNone(n int) string {
	if n == 0 {
		return "none (no iteration has a score)"
	}
	return fmt.Sprintf("iteration %d", n)
}

func dimensionNames(s *Selection) []string {
	seen := map[string]bool{}
	var out []string
	for _, it := range s.Iterations {
		for d := range it.Dimensions {
			if !seen[d] {
				seen[d] = true
				out = append(out, d)
			}
		}
	}
	order := map[string]int{"validation": 0, "completeness": 1, "correctness": 2, "readability": 3, "efficiency": 4}
	sort.Slice(out, func(i, j int) bool {
		oi, iok := order[out[i]]
		oj, jok := order[out[j]]
		switch {
		case iok && jok:
			return oi < oj
		case iok != jok:
			return iok
		}
		return out[i] < out[j]
	})
	return out
}
