package show

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
)

// apply rebuilds b from a and an edit script, checking the script's
// indexes on the way.
func apply(t *testing.T, a, b []string, ops []op) []string {
	t.Helper()
	var out []string
	ia, ib := 0, 0
	for _, o := range ops {
		switch o.kind {
		case ' ':
			if o.a != ia || o.b != ib || a[o.a] != b[o.b] {
				t.Fatalf("keep %+v at a %d, b %d", o, ia, ib)
			}
			out = append(out, a[o.a])
			ia, ib = ia+1, ib+1
		case '-':
			if o.a != ia {
				t.Fatalf("delete %+v at a %d", o, ia)
			}
			ia++
		case '+':
			if o.b != ib {
				t.Fatalf("insert %+v at b %d", o, ib)
			}
			out = append(out, b[o.b])
			ib++
		}
	}
	if ia != len(a) || ib != len(b) {
		t.Fatalf("the script stops at a %d/%d, b %d/%d", ia, len(a), ib, len(b))
	}
	return out
}

// lcs is the length of a longest common subsequence, by dynamic
// programming: a shortest edit script keeps exactly that many lines.
func lcs(a, b []string) int {
	prev := make([]int, len(b)+1)
	for i := range a {
		cur := make([]int, len(b)+1)
		for j := range b {
			if a[i] == b[j] {
				cur[j+1] = prev[j] + 1
			} else {
				cur[j+1] = max(prev[j+1], cur[j])
			}
		}
		prev = cur
	}
	return prev[len(b)]
}

func TestEditScriptIsShortestAndCorrect(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for n := range 2000 {
		gen := func() []string {
			xs := make([]string, r.IntN(12))
			for i := range xs {
				xs[i] = string(rune('a' + r.IntN(4)))
			}
			return xs
		}
		a, b := gen(), gen()
		ops := editScript(a, b)
		if got := apply(t, a, b, ops); strings.Join(got, "") != strings.Join(b, "") {
			t.Fatalf("case %d: %q -> %q rebuilt %q", n, a, b, got)
		}
		kept := 0
		for _, o := range ops {
			if o.kind == ' ' {
				kept++
			}
		}
		if want := lcs(a, b); kept != want {
			t.Fatalf("case %d: %q -> %q keeps %d lines, the longest common subsequence has %d", n, a, b, kept, want)
		}
	}
}

func TestUnified(t *testing.T) {
	a := "1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n11\n12\n"
	b := "1\n2\nthree\n4\n5\n6\n7\n8\n9\n10\n11\n12\n13"
	want := `--- a/f
+++ b/f
@@ -1,6 +1,6 @@
 1
 2
-3
+three
 4
 5
 6
@@ -10,3 +10,4 @@
 10
 11
 12
+13
\ No newline at end of file
`
	if got := unified(a, b, "a/f", "b/f"); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	if unified(a, a, "a", "b") != "" {
		t.Error("equal texts have a diff")
	}
	if got := unified("", "x\n", "/dev/null", "b/x"); got != "--- /dev/null\n+++ b/x\n@@ -0,0 +1 @@\n+x\n" {
		t.Errorf("creation: %q", got)
	}
}

// TestUnifiedIsBounded: texts far apart (beyond maxEdits) still diff, as
// one replacement, and a long diff stops at maxDiffLines.
func TestUnifiedIsBounded(t *testing.T) {
	var a, b strings.Builder
	for i := range 20000 {
		a.WriteString("a" + strings.Repeat("x", i%7) + "\n")
		b.WriteString("b" + strings.Repeat("y", i%5) + "\n")
	}
	d := unified(a.String(), b.String(), "a", "b")
	if n := strings.Count(d, "\n"); n > maxDiffLines+5 || !strings.Contains(d, "the diff goes on") {
		t.Errorf("%d lines", n)
	}
}

// TestWriteKeepsBundleTextAsData: whatever the strings, the page has
// exactly its two script elements and the data decodes back unchanged.
func TestWriteKeepsBundleTextAsData(t *testing.T) {
	for _, s := range []string{"</script><img src=x onerror=alert(1)>", "</SCRIPT >", "<!--<script>", "\u2028\u2029", "]]>&amp;", "\x00\x1b[31m"} {
		p := &Page{Runs: []*View{{Name: s, Notices: []string{s}, Summary: Summary{Command: []string{s}},
			LLM:   []LLMCall{{Model: s, Messages: []Message{{Role: s, Text: s}}, Response: Message{Text: s}}},
			Files: []File{{Path: s, Diff: s}}, Logs: []Log{{Name: "stdout", Head: s}}}}}
		var buf bytes.Buffer
		if err := Write(&buf, p); err != nil {
			t.Fatal(err)
		}
		html := buf.String()
		if n := strings.Count(strings.ToLower(html), "</script"); n != 2 {
			t.Errorf("%q: %d </script in the page", s, n)
		}
		if n := strings.Count(strings.ToLower(html), "<script"); n != 2 {
			t.Errorf("%q: %d <script in the page", s, n)
		}
		start := strings.Index(html, `id="dal-data">`) + len(`id="dal-data">`)
		end := strings.Index(html[start:], "</script>")
		var back Page
		if err := json.Unmarshal([]byte(html[start:start+end]), &back); err != nil || back.Runs[0].LLM[0].Messages[0].Text != s || back.Runs[0].Files[0].Path != s {
			t.Errorf("%q: the data does not decode back: %v", s, err)
		}
		if strings.Contains(html, "<title>dal show — "+s) && strings.ContainsAny(s, "<>&") {
			t.Errorf("%q: the title is not escaped", s)
		}
	}
}

// FuzzChat: any messages JSON a bundle's prompts/ may hold flattens
// without a panic.
func FuzzChat(f *testing.F) {
	for _, s := range []string{`[{"role":"user","content":"hi"}]`, `"text"`, `null`, `[{"role":"user","content":[{"type":"text","text":"a"},{"type":"tool_result","tool_use_id":"x","content":[{"type":"text","text":"r"}]}]}]`,
		`[{"role":"assistant","tool_calls":[{"id":"1","function":{"name":"f","arguments":"{}"}}]}]`, `[{"type":"function_call","name":"f"}]`, `[1,2]`, `{}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		_ = chat(raw)
		_ = flatten(raw)
	})
}
