package record

import (
	"strings"
	"testing"
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
