// Package golden is the -update flag of dal's golden-file tests, declared
// once for every package that imports it: `go test ./pkg -update` rewrites
// the package's golden files (testdata/...) from the current output instead
// of comparing with them; review the change with git diff, then commit it.
//
// Import it from _test.go files only: importing it registers -update on the
// command line of the binary, which for a test binary is what is wanted. A
// package that imports it must not declare its own -update flag (the flag
// package panics on a second definition).
package golden

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dal-runtime/dal/internal/atomicfile"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/ from the current output instead of comparing")

// Update reports whether the test binary runs with -update. For golden data
// that is not compared byte for byte (decoded and checked field by field,
// say): write it when Update is true, then check it as always.
func Update() bool { return *update }

// Check compares got with the golden file at path. With -update it writes got
// there first (creating its directory), so the comparison passes and git
// diff shows the change. A missing file fails t at once; a difference fails
// it with the lines only one side has.
func Check(t testing.TB, path string, got []byte) {
	t.Helper()
	check(t, path, got, *update)
}

func check(t testing.TB, path string, got []byte, update bool) {
	t.Helper()
	if update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatalf("golden: %v", err)
			return
		}
		// Whole or not at all: a parallel test may be reading the file.
		if err := atomicfile.WriteFile(path, got, 0o644); err != nil {
			t.Fatalf("golden: %v", err)
			return
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("golden: %v (go test -update creates it from the current output)", err)
		return
	}
	if !bytes.Equal(got, want) {
		t.Errorf("the output differs from %s (go test -update rewrites it; review with git diff):\n%s",
			path, Diff(string(want), string(got)))
	}
}

// maxDiffLines bounds what Diff prints.
const maxDiffLines = 40

// Diff lists the lines that only one side has (as a multiset: a line that
// appears twice in want and once in got is listed once), want's marked "-"
// and got's "+", each side in its own order, at most 40 lines. Equal inputs
// whose only difference is where lines sit (a reordering) are said to be so.
func Diff(want, got string) string {
	count := map[string]int{}
	for _, l := range strings.Split(got, "\n") {
		count[l]++
	}
	for _, l := range strings.Split(want, "\n") {
		count[l]--
	}
	var out []string
	for _, side := range []struct {
		text, mark string
		sign       int
	}{{want, "-", -1}, {got, "+", 1}} {
		left := map[string]int{}
		for l, n := range count {
			if n*side.sign > 0 {
				left[l] = n * side.sign
			}
		}
		for _, l := range strings.Split(side.text, "\n") {
			if left[l] > 0 {
				left[l]--
				out = append(out, side.mark+" "+l)
			}
		}
	}
	if len(out) == 0 {
		return "(the same lines in another order)\n"
	}
	more := ""
	if len(out) > maxDiffLines {
		more = fmt.Sprintf("... and %d more lines\n", len(out)-maxDiffLines)
		out = out[:maxDiffLines]
	}
	return strings.Join(out, "\n") + "\n" + more
}
