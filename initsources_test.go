package dal

import (
	"bytes"
	"embed"
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
	t.Parallel()
	sourcesComplete(t, "./cmd/dal-sandbox-init", initSources, "initSources (initsources.go)", "go.mod")
}

// TestBuildSourcesComplete: so are dal-exec-full's in buildSources, for
// BuildSum.
func TestBuildSourcesComplete(t *testing.T) {
	t.Parallel()
	sourcesComplete(t, "./cmd/dal-exec-full", buildSources, "buildSources (buildsources.go)", "go.mod", "go.sum")
	if BuildSum() == InitSum() || BuildSum() != sumOf(&buildSources) {
		t.Errorf("BuildSum %q, InitSum %q: want a sum of its own files", BuildSum(), InitSum())
	}
}

// sourcesComplete checks that fsys, named var in messages, holds every
// file of this module that pkg is built from, and also.
func sourcesComplete(t *testing.T, pkg string, fsys embed.FS, name string, also ...string) {
	root, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "list", "-deps", "-json=Dir,Standard,GoFiles,EmbedFiles,Module", pkg)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	dec := json.NewDecoder(bytes.NewReader(out))
	want := also
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
		files := p.GoFiles
		if rel != "." {
			// This package's embedded files are these lists
			// themselves, both of them.
			files = append(files, p.EmbedFiles...)
		}
		for _, f := range files {
			want = append(want, filepath.ToSlash(filepath.Join(rel, f)))
		}
	}
	if len(want) < 20 {
		t.Fatalf("go list found %d files of %s, fewer than it has", len(want), pkg)
	}
	for _, f := range want {
		if _, err := fs.Stat(fsys, f); err != nil {
			t.Errorf("%s is part of %s but not embedded in %s: add its directory", f, pkg, name)
		}
	}
}

// TestInitSum: the checksum counts the embedded files but their tests
// (package embedfs checks the compiler's layout it reads).
func TestInitSum(t *testing.T) {
	total, tests := 0, 0
	err := fs.WalkDir(initSources, ".", func(p string, d fs.DirEntry, err error) error {
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
	if err != nil {
		t.Fatal(err)
	}
	sum := InitSum()
	if tests == 0 || !strings.HasSuffix(sum, "-"+strconv.Itoa(total)) || sum != initSum() {
		t.Errorf("InitSum is %q, want the CRC and %d bytes (%d test files left out)", sum, total, tests)
	}
}
