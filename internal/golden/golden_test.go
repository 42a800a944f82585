package golden

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// recorder is a testing.TB that keeps what Check reports instead of failing
// the test that runs it.
type recorder struct {
	testing.TB
	errors, fatals []string
}

func (r *recorder) Helper() {}
func (r *recorder) Errorf(format string, args ...any) {
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}
func (r *recorder) Fatalf(format string, args ...any) {
	r.fatals = append(r.fatals, fmt.Sprintf(format, args...))
}

func TestCheck(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name      string
		file      *string // nil: no golden file
		got       string
		update    bool
		wantError string // substring of the one Errorf, "" for none
		wantFatal string // substring of the one Fatalf, "" for none
	}{
		{name: "equal", file: ptr("a\nb\n"), got: "a\nb\n"},
		{name: "differs", file: ptr("a\nb\n"), got: "a\nc\n", wantError: "- b\n+ c\n"},
		{name: "missing", got: "a\n", wantFatal: "go test -update creates it"},
		{name: "update writes", file: ptr("old\n"), got: "new\n", update: true},
		{name: "update creates", got: "new\n", update: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(t.TempDir(), "testdata", "x.golden")
			if c.file != nil {
				os.MkdirAll(filepath.Dir(path), 0o755)
				if err := os.WriteFile(path, []byte(*c.file), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			r := &recorder{TB: t}
			check(r, path, []byte(c.got), c.update)
			expectOne(t, "Errorf", r.errors, c.wantError)
			expectOne(t, "Fatalf", r.fatals, c.wantFatal)
			if c.update {
				if b, err := os.ReadFile(path); err != nil || string(b) != c.got {
					t.Errorf("after -update the file holds %q (%v), want %q", b, err, c.got)
				}
			}
		})
	}
}

func ptr(s string) *string { return &s }

func expectOne(t *testing.T, what string, got []string, want string) {
	t.Helper()
	switch {
	case want == "" && len(got) > 0:
		t.Errorf("%s called: %q", what, got)
	case want != "" && (len(got) != 1 || !strings.Contains(got[0], want)):
		t.Errorf("%s calls %q, want one containing %q", what, got, want)
	}
}

func TestDiff(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x\n", 50)
	for _, c := range []struct{ name, want, got, diff string }{
		{"changed line", "a\nb\nc\n", "a\nB\nc\n", "- b\n+ B\n"},
		{"added line", "a\n", "a\nb\n", "+ b\n"},
		{"one of two duplicates gone", "a\na\nb\n", "a\nb\n", "- a\n"},
		{"reordered", "a\nb\n", "b\na\n", "(the same lines in another order)\n"},
		{"capped", "", long, strings.Repeat("+ x\n", 40) + "... and 10 more lines\n"},
	} {
		if d := Diff(c.want, c.got); d != c.diff {
			t.Errorf("%s: Diff = %q, want %q", c.name, d, c.diff)
		}
	}
}
