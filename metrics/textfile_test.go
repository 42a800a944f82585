package metrics

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

func TestWriteTextfile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "dal.prom")
	// Go and process collectors on: the textfile must still leave them out,
	// since node_exporter exports its own and refuses duplicates.
	m := New(Options{GoCollector: true, ProcessCollector: true, BPFStats: sampleBPF})
	exercise(t, m)
	if err := os.WriteFile(path, []byte("stale\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := m.WriteTextfile(path); err != nil {
		t.Fatal(err)
	}

	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if perm := info.Mode().Perm(); perm != 0o644 {
		t.Errorf("textfile mode %v, want 0644 so node_exporter can read it", perm)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	parser := expfmt.NewTextParser(model.LegacyValidation)
	families, err := parser.TextToMetricFamilies(f)
	if err != nil {
		t.Fatalf("textfile does not parse: %v", err)
	}
	for name := range families {
		if !strings.HasPrefix(name, "dal_") {
			t.Errorf("textfile holds %s; only dal_* families belong there", name)
		}
	}
	if got := families["dal_sessions_total"].GetMetric()[0].GetCounter().GetValue(); got != 3 {
		t.Errorf("dal_sessions_total = %v in the textfile, want 3", got)
	}
	if _, ok := families["dal_bpf_program_runs_total"]; !ok {
		t.Error("textfile lacks dal_bpf_program_runs_total")
	}

	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 {
		t.Errorf("directory holds %v after the write, want only dal.prom (a temporary file was left)", entries)
	}
}

func TestTextfileErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "taken.prom"), 0o755); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		path string
		want string
		is   error
	}{
		{"wrong suffix", filepath.Join(dir, "dal.txt"), "must be named NAME.prom", nil},
		{"bare suffix", filepath.Join(dir, ".prom"), "must be named NAME.prom", nil},
		{"missing directory", filepath.Join(dir, "nope", "dal.prom"), "directory " + filepath.Join(dir, "nope") + " does not exist", fs.ErrNotExist},
		{"directory is a file", filepath.Join(file, "dal.prom"), "is not a directory", syscall.ENOTDIR},
		// sysfs refuses new files even to root: a real unwritable directory.
		{"unwritable directory", "/sys/kernel/dal.prom", "directory /sys/kernel is not writable", fs.ErrPermission},
		{"target is a directory", filepath.Join(dir, "taken.prom"), "is a directory: name a file inside it", syscall.EISDIR},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := New(Options{}).WriteTextfile(tt.path)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("WriteTextfile(%s) = %v, want an error containing %q", tt.path, err, tt.want)
			}
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Errorf("errors.Is(%v, %v) is false", err, tt.is)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("error is not one line: %q", err)
			}
			cerr := CheckTextfilePath(tt.path)
			if cerr == nil || cerr.Error() != err.Error() {
				t.Errorf("CheckTextfilePath = %v, want %v", cerr, err)
			}
		})
	}
}

func TestCheckTextfilePathLeavesNothing(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := CheckTextfilePath(filepath.Join(dir, "dal.prom")); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 0 {
		t.Errorf("CheckTextfilePath left %v behind", entries)
	}
}
