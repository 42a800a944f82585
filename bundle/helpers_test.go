package bundle

import (
	"crypto/ed25519"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// testKey is a fixed key, so signatures (and golden files) are stable.
func testKey(n byte) ed25519.PrivateKey {
	seed := make([]byte, ed25519.SeedSize)
	for i := range seed {
		seed[i] = n + byte(i)
	}
	return ed25519.NewKeyFromSeed(seed)
}

func ptr[T any](v T) *T { return &v }

// fullManifest fills every field of the execution snapshot.
func fullManifest() *Manifest {
	at := time.Date(2026, 1, 25, 15, 0, 0, 0, time.UTC)
	return &Manifest{
		SnapshotID: "6f1c2a9e-3b4d-4e5f-8a7b-9c0d1e2f3a4b",
		WorkflowID: "python3 agent.py",
		Version:    SnapshotVersion,
		CapturedAt: at,
		Config: Config{
			Model:            Model{ID: "claude-3-opus-20240229", Provider: "anthropic", Version: "20240229"},
			ExecutionMode:    ModeSeeded,
			Temperature:      ptr(0.0),
			Seed:             ptr(uint64(18446744073709551615)),
			MaxTokens:        ptr(int64(4096)),
			TopP:             ptr(1.0),
			StopSequences:    []string{"\n\nHuman:"},
			SystemPromptHash: "sha256:00",
			Agent:            &Agent{Name: "agent.py", Version: "1", Tools: []string{"Read"}, RulesActive: []string{"no-net"}},
		},
		Inputs: Inputs{
			UserPrompt:     "tidy the files",
			UserPromptHash: "sha256:01",
			ContextFiles:   []ContextFile{{Path: "input.txt", Hash: "sha256:02", SizeBytes: 12}},
			Environment:    map[string]string{"LANG": "C.UTF-8"},
		},
		Outputs: Outputs{
			Response:         "done",
			ResponseHash:     "sha256:03",
			ArtifactsCreated: []Artifact{{Path: "out.txt", Hash: "sha256:04", Operation: OpCreated}, {Path: "old.txt", Operation: OpDeleted}},
			ToolCalls:        []ToolCall{{Tool: "Write", InputHash: "sha256:05", OutputHash: "sha256:06", Timestamp: &at}},
		},
		Metrics: &Metrics{DurationMS: 1500, TokensInput: 10, TokensOutput: 20, ToolCallsCount: 1, Iterations: 1},
		Dal:     DalSection{CreatedBy: "dal test"},
	}
}

// smallFiles is the content of the small test bundle, by path.
var smallFiles = map[string]string{
	"env.json":          `{"args":["python3","agent.py"],"mode":"seeded"}` + "\n",
	"clock.json":        `{"version":1}` + "\n",
	"logs/stdout":       "hello\n",
	"logs/stderr":       "",
	"fs-diff/a.txt":     "new a\n",
	"fs-diff/sub/b.txt": "b\n",
	"fs-pre/a.txt":      "old a\n",
}

// writeSmall fills a writer with smallFiles, a symlink and an empty
// directory.
func writeSmall(t testing.TB, w *Writer) {
	t.Helper()
	for rel, data := range smallFiles {
		if err := w.WriteFile(rel, []byte(data)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("a.txt", filepath.Join(w.Dir(), "fs-diff", "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(w.Dir(), "fs-diff", "empty"), 0o755); err != nil {
		t.Fatal(err)
	}
}

// makeBundle commits the small bundle at out (a directory or archive).
func makeBundle(t testing.TB, out string) *Manifest {
	t.Helper()
	w, err := Create(out)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Abort()
	writeSmall(t, w)
	m := fullManifest()
	if err := w.Commit(m, testKey(1)); err != nil {
		t.Fatal(err)
	}
	return m
}

// copyTree copies a bundle directory (files, symlinks, directories).
func copyTree(t testing.TB, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(dst, rel)
		switch {
		case d.IsDir():
			return os.MkdirAll(target, 0o755)
		case d.Type()&fs.ModeSymlink != 0:
			l, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return os.Symlink(l, target)
		default:
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			return os.WriteFile(target, b, 0o644)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
}

// wantBundleErr checks that err is an *Error of kind, naming file in
// both its File field and its message.
func wantBundleErr(t testing.TB, err error, kind error, file string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error; want %v naming %s", kind, file)
	}
	var be *Error
	if !errors.As(err, &be) {
		t.Fatalf("error %q (%T) is not an *Error", err, err)
	}
	if !errors.Is(err, kind) {
		t.Fatalf("error %q is not %v", err, kind)
	}
	if file != "" && !strings.Contains(err.Error(), file) {
		t.Fatalf("error %q does not name %s", err, file)
	}
}

func mkfifo(p string) error { return unix.Mkfifo(p, 0o644) }

func exists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}
