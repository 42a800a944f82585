package e2e

import (
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// strictTwice runs argv twice under `dal-exec run --mode strict` and
// returns the first run's output, failing unless both runs exit 0 and
// print the same bytes.
func strictTwice(t *testing.T, argv ...string) string {
	t.Helper()
	var first string
	for i := range 2 {
		r := dalIn(t, t.TempDir(), nil, append([]string{"run", "--mode", "strict", "--"}, argv...)...)
		if r.code != 0 {
			t.Fatalf("run %d: exit %d\nstdout %s\nstderr %s", i+1, r.code, r.stdout, r.stderr)
		}
		if i == 0 {
			first = r.stdout
			continue
		}
		if r.stdout != first {
			t.Fatalf("the second run printed another thing:\n%s", lineDiff(first, r.stdout))
		}
	}
	return first
}

// TestStrictBindPortZero: binds to port 0 (TCP and UDP, IPv4 and IPv6, in
// a Python process and its child) get the same ports in two strict runs,
// from the ephemeral range; a port given explicitly is kept.
func TestStrictBindPortZero(t *testing.T) {
	t.Parallel()
	script, _ := filepath.Abs("testdata/sources/port0.py")
	out := strictTwice(t, "python3", script)
	seen := map[string]bool{}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 10 {
		t.Fatalf("printed %d lines, want 10:\n%s", len(lines), out)
	}
	for _, l := range lines {
		f := strings.Fields(l)
		if len(f) == 3 && f[1] == "explicit" {
			if f[2] != "True" {
				t.Errorf("%s: an explicit port was not kept", f[0])
			}
			continue
		}
		if len(f) != 4 {
			t.Fatalf("unexpected line %q", l)
		}
		port, err := strconv.Atoi(f[3])
		if err != nil || port < 32768 || port > 60999 {
			t.Errorf("%q: want a port of the ephemeral range 32768-60999", l)
		}
		if seen[f[3]] {
			t.Errorf("port %s given twice:\n%s", f[3], out)
		}
		seen[f[3]] = true
	}
}
