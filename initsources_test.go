package dal

import (
	"bytes"
	"encoding/json"
	"io"
	"io/fs"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestInitSourcesComplete: every file the init is built from (go list
// -deps of cmd/dal-sandbox-init, in this module) is embedded, so that a
// change to any of them changes InitSum.
func TestInitSourcesComplete(t *testing.T) {
	root, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "list", "-deps", "-json=Dir,Standard,GoFiles,EmbedFiles,Module", "./cmd/dal-sandbox-init")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	dec := json.NewDecoder(bytes.NewReader(out))
	want := []string{"go.mod"}
	for {
		var p struct {
			Dir                 string
			Standard            bool
			GoFiles, EmbedFiles []string
			Module              *struct{ Main bool }
		}
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		if p.Standard || p.Module == nil || !p.Module.Main {
			continue
		}
		rel, err := filepath.Rel(root, p.Dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range append(p.GoFiles, p.EmbedFiles...) {
			want = append(want, filepath.ToSlash(filepath.Join(rel, f)))
		}
	}
	if len(want) < 20 {
		t.Fatalf("go list found %d files of the init, fewer than it has", len(want))
	}
	for _, f := range want {
		if _, err := fs.Stat(initSources, f); err != nil {
			t.Errorf("%s is part of dal-sandbox-init but not embedded in initSources (initsources.go): add its directory", f)
		}
	}
}

// TestInitSum: the checksum counts the embedded files but their tests.
func TestInitSum(t *testing.T) {
	total, tests := 0, 0
	fs.WalkDir(initSources, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := initSources.ReadFile(p)
		if strings.HasSuffix(p, "_test.go") {
			tests++
		} else {
			total += len(b)
		}
		return err
	})
	sum := InitSum()
	if tests == 0 || !strings.HasSuffix(sum, "-"+strconv.Itoa(total)) || sum != initSum() {
		t.Errorf("InitSum is %q, want the CRC and %d bytes (%d test files left out)", sum, total, tests)
	}
}
