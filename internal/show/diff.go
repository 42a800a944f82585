package show

import (
	"fmt"
	"strings"
)

// maxEdits bounds the Myers search: two texts further apart than this many
// inserted and deleted lines are shown as one replacement (the search's
// memory grows with its square).
const maxEdits = 4000

// op is one line of an edit script.
type op struct {
	kind byte // ' ', '-', '+'
	a, b int  // line indexes in a and b (of the line kept, deleted or added)
}

// editScript returns a shortest edit script from a to b (Myers' O(ND)
// algorithm), after stripping their common prefix and suffix.
func editScript(a, b []string) []op {
	pre := 0
	for pre < len(a) && pre < len(b) && a[pre] == b[pre] {
		pre++
	}
	suf := 0
	for suf < len(a)-pre && suf < len(b)-pre && a[len(a)-1-suf] == b[len(b)-1-suf] {
		suf++
	}
	var ops []op
	for i := range pre {
		ops = append(ops, op{' ', i, i})
	}
	mid := myers(a[pre:len(a)-suf], b[pre:len(b)-suf])
	for _, o := range mid {
		ops = append(ops, op{o.kind, o.a + pre, o.b + pre})
	}
	for i := range suf {
		ops = append(ops, op{' ', len(a) - suf + i, len(b) - suf + i})
	}
	return ops
}

func myers(a, b []string) []op {
	n, m := len(a), len(b)
	replace := func() []op {
		ops := make([]op, 0, n+m)
		for i := range n {
			ops = append(ops, op{'-', i, 0})
		}
		for j := range m {
			ops = append(ops, op{'+', n, j})
		}
		return ops
	}
	if n == 0 || m == 0 {
		return replace()
	}
	max := n + m
	if max > maxEdits {
		max = maxEdits
	}
	off := max + 1
	v := make([]int, 2*max+3)
	var trace [][]int
	found := -1
	for d := 0; d <= max && found < 0; d++ {
		trace = append(trace, append([]int(nil), v[off-d-1:off+d+2]...))
		for k := -d; k <= d; k += 2 {
			var x int
			if k == -d || (k != d && v[off+k-1] < v[off+k+1]) {
				x = v[off+k+1]
			} else {
				x = v[off+k-1] + 1
			}
			y := x - k
			for x < n && y < m && a[x] == b[y] {
				x, y = x+1, y+1
			}
			v[off+k] = x
			if x >= n && y >= m {
				found = d
				break
			}
		}
	}
	if found < 0 {
		return replace()
	}
	// Walk back through the saved frontiers.
	var rev []op
	x, y := n, m
	for d := found; d > 0; d-- {
		vd := trace[d] // v before round d, indexed from k = -d-1
		at := func(k int) int { return vd[k+d+1] }
		k := x - y
		var pk int
		if k == -d || (k != d && at(k-1) < at(k+1)) {
			pk = k + 1
		} else {
			pk = k - 1
		}
		px := at(pk)
		py := px - pk
		for x > px && y > py { // the diagonal after the move
			x, y = x-1, y-1
			rev = append(rev, op{' ', x, y})
		}
		if pk == k+1 {
			rev = append(rev, op{'+', px, py})
		} else {
			rev = append(rev, op{'-', px, py})
		}
		x, y = px, py
	}
	for x > 0 && y > 0 {
		x, y = x-1, y-1
		rev = append(rev, op{' ', x, y})
	}
	ops := make([]op, len(rev))
	for i, o := range rev {
		ops[len(rev)-1-i] = o
	}
	return ops
}

// lines splits s into lines without their "\n"; a last line without one
// is marked as unified diffs do.
func lines(s string) []string {
	if s == "" {
		return nil
	}
	ls := strings.SplitAfter(s, "\n")
	if ls[len(ls)-1] == "" {
		ls = ls[:len(ls)-1]
	}
	for i, l := range ls {
		if t, ok := strings.CutSuffix(l, "\n"); ok {
			ls[i] = t
		} else {
			ls[i] = l + "\n\\ No newline at end of file"
		}
	}
	return ls
}

// maxDiffLines bounds a unified diff's length in the page.
const maxDiffLines = 5000

// unified is the unified diff from a to b with three lines of context,
// headed by names; "" when they are equal.
func unified(a, b, nameA, nameB string) string {
	if a == b {
		return ""
	}
	la, lb := lines(a), lines(b)
	ops := editScript(la, lb)
	var out strings.Builder
	fmt.Fprintf(&out, "--- %s\n+++ %s\n", nameA, nameB)
	const ctx = 3
	written := 0
	for i := 0; i < len(ops); {
		if ops[i].kind == ' ' {
			i++
			continue
		}
		// A hunk: from ctx lines before this change to ctx lines after
		// the last change that is within 2*ctx of the previous one.
		start := max(0, i-ctx)
		end := i
		for j := i; j < len(ops); j++ {
			if ops[j].kind != ' ' {
				end = j
			} else if j-end > 2*ctx {
				break
			}
		}
		stop := min(len(ops), end+ctx+1)
		na, nb := 0, 0
		for _, o := range ops[start:stop] {
			if o.kind != '+' {
				na++
			}
			if o.kind != '-' {
				nb++
			}
		}
		fmt.Fprintf(&out, "@@ -%s +%s @@\n", hunkRange(ops[start].a, na), hunkRange(ops[start].b, nb))
		for _, o := range ops[start:stop] {
			if written == maxDiffLines {
				fmt.Fprintf(&out, "... the diff goes on (%d lines shown)\n", maxDiffLines)
				return out.String()
			}
			written++
			switch o.kind {
			case '-':
				out.WriteString("-" + la[o.a] + "\n")
			case '+':
				out.WriteString("+" + lb[o.b] + "\n")
			default:
				out.WriteString(" " + la[o.a] + "\n")
			}
		}
		i = stop
	}
	return out.String()
}

func hunkRange(start, n int) string {
	if n == 0 {
		return fmt.Sprintf("%d,0", start)
	}
	if n == 1 {
		return fmt.Sprintf("%d", start+1)
	}
	return fmt.Sprintf("%d,%d", start+1, n)
}
