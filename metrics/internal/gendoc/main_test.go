package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// TestPageIsCurrent fails when docs/metrics.md no longer matches the
// registry: a family, label or help text changed without regenerating it.
func TestPageIsCurrent(t *testing.T) {
	t.Parallel()
	var want bytes.Buffer
	if err := render(&want); err != nil {
		t.Fatal(err)
	}
	page := filepath.Join("..", "..", "..", "docs", "metrics.md")
	got, err := os.ReadFile(page)
	if err != nil {
		t.Fatalf("%v: generate it with: go run ./metrics/internal/gendoc", err)
	}
	if !bytes.Equal(got, want.Bytes()) {
		t.Error("docs/metrics.md is stale: regenerate it with: go run ./metrics/internal/gendoc")
	}
}

// TestPageCoversRegistry checks the generator against things it must never
// lose, whatever the rest of the page says.
func TestPageCoversRegistry(t *testing.T) {
	t.Parallel()
	var page bytes.Buffer
	if err := render(&page); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"| `dal_syscalls_total` | counter | `category` |",
		"| `dal_network_requests_total` | counter | `outcome` |",
		"| `dal_build_info` | gauge | `goversion`, `version` |",
		"| `dal_bpf_program_runs_total` | counter | `program` |",
		"| `dal_revert_duration_seconds` | histogram | none |",
		"- `dal_revert_duration_seconds`: 0.001, ",
	} {
		if !bytes.Contains(page.Bytes(), []byte(want)) {
			t.Errorf("the page lacks %q", want)
		}
	}
}
