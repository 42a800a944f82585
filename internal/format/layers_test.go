package format

import (
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/dal-runtime/dal/"

// formats are the format packages: each may import the others, nothing
// else of dal.
var formats = []string{
	"internal/format/fsdiff",
	"internal/format/runenv",
	"internal/boundary",
	"internal/netcap/har",
	"internal/netcap/prompts",
}

// mechanisms are what a reader of bundles must not import, directly or
// not.
var mechanisms = []string{
	"internal/runner", "internal/sandbox", "internal/daemon", "ebpf", "internal/sysvirt",
	"internal/netcap", "internal/record", "internal/replay",
}

// deps is go list -deps of pkg: every dal package it imports, itself
// included.
func deps(t *testing.T, pkg string) []string {
	t.Helper()
	out, err := exec.Command("go", "list", "-deps", module+pkg).Output()
	if err != nil {
		t.Fatalf("go list -deps %s: %v", pkg, err)
	}
	var ds []string
	for _, d := range strings.Fields(string(out)) {
		if rel, ok := strings.CutPrefix(d, module); ok && rel != pkg {
			ds = append(ds, rel)
		}
	}
	return ds
}

func isFormat(p string) bool {
	for _, f := range formats {
		if p == f {
			return true
		}
	}
	return false
}

// TestFormatsImportNothingOfDal: a format package imports only other
// format packages.
func TestFormatsImportNothingOfDal(t *testing.T) {
	for _, f := range formats {
		for _, d := range deps(t, f) {
			if !isFormat(d) {
				t.Errorf("%s imports %s: a format imports nothing of dal but other formats (move what it needs into a format, or convert in the mechanism that writes it)", f, d)
			}
		}
	}
}

// TestReadersImportNoMechanism: dal-exec show (an HTML viewer of
// bundles) and the formats reach no mechanism, directly or through
// another package.
func TestReadersImportNoMechanism(t *testing.T) {
	for _, p := range append([]string{"internal/show"}, formats...) {
		for _, d := range deps(t, p) {
			for _, m := range mechanisms {
				if d == m {
					t.Errorf("%s imports %s (go list -deps): readers of bundles import formats and bundle, not mechanisms", p, d)
				}
			}
		}
	}
}
