package match

import (
	"bytes"
	"fmt"
	"strings"
)

// FirstLineDiff describes the first line where got (replayed) differs
// from want (recorded), with up to two lines of context before it, or ""
// when they are equal: the sentence replay.json keeps for stdout and
// stderr, and dal-exec show for its side-by-side views.
func FirstLineDiff(want, got []byte) string {
	if bytes.Equal(want, got) {
		return ""
	}
	wl, gl := diffLines(want), diffLines(got)
	i := 0
	for i < len(wl) && i < len(gl) && wl[i] == gl[i] {
		i++
	}
	var b strings.Builder
	fmt.Fprintf(&b, "first difference at line %d:\n", i+1)
	for j := max(0, i-2); j < i; j++ {
		fmt.Fprintf(&b, "    %s\n", clipLine(wl[j]))
	}
	if i < len(wl) {
		fmt.Fprintf(&b, "  - %s\n", clipLine(wl[i]))
	} else {
		b.WriteString("  - (end of recorded output)\n")
	}
	if i < len(gl) {
		fmt.Fprintf(&b, "  + %s", clipLine(gl[i]))
	} else {
		b.WriteString("  + (end of replayed output)")
	}
	return b.String()
}

func diffLines(b []byte) []string {
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

func clipLine(s string) string {
	if len(s) > 200 {
		return s[:200] + "..."
	}
	return s
}
