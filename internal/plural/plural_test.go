package plural

import "testing"

func TestCount(t *testing.T) {
	for _, tc := range []struct {
		n         int
		one, many string
		want      string
	}{
		{0, "file", "files", "0 files"},
		{1, "file", "files", "1 file"},
		{2, "entry", "entries", "2 entries"},
		{-1, "run", "runs", "-1 runs"},
	} {
		if got := Count(tc.n, tc.one, tc.many); got != tc.want {
			t.Errorf("Count(%d, %q, %q) = %q, want %q", tc.n, tc.one, tc.many, got, tc.want)
		}
	}
	if Verb(1, "was", "were") != "was" || Verb(2, "was", "were") != "were" {
		t.Error("Verb does not agree with its count")
	}
}
