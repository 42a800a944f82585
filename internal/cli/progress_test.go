package cli

import (
	"bytes"
	"strings"
	"testing"
)

func TestProgressBar(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	bar := newProgressBar(&out, "runs", 4)
	bar.Write([]byte("run 1 ok"))
	if strings.Contains(out.String(), "run 1 ok") {
		t.Fatalf("a partial line was printed: %q", out.String())
	}
	bar.Write([]byte("\n"))
	bar.Update(1, 0, 4)
	bar.Update(2, 1, 4)
	bar.Finish()
	got := out.String()
	for _, want := range []string{"[" + strings.Repeat(".", 30) + "] 0/4 runs", "\r\x1b[2Krun 1 ok\n", "[#######", "2/4 runs, 1 failed, about"} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%q", want, got)
		}
	}
	if !strings.HasSuffix(got, "\r\x1b[2K") {
		t.Errorf("Finish did not clear the bar: %q", got)
	}
	if isTerminal(&out) {
		t.Errorf("a buffer is not a terminal")
	}
}
