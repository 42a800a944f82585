package marks

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

func TestWriteReadConcurrentIncomplete(t *testing.T) {
	t.Parallel()
	dir, ws := t.TempDir(), t.TempDir()
	if err := os.MkdirAll(filepath.Join(ws, "out", "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(ws, "out", "b.txt"), []byte("b"), 0o600)
	os.WriteFile(filepath.Join(ws, "out", "sub", "a.txt"), []byte("a"), 0o644)
	os.Symlink(filepath.Join(ws, "out"), filepath.Join(ws, "link"))
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := 0.5
			if _, err := Write(dir, Input{Kind: Iteration, Score: &s, Paths: []string{"link"}, Cwd: ws, Workspace: ws}); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	// A writer that died before its mark.json.
	os.Mkdir(filepath.Join(dir, "iterations", "0009"), 0o755)
	ms, inc, err := Read(dir, Iteration)
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 8 || len(inc) != 1 || inc[0].Seq != 9 || !strings.Contains(inc[0].String(), "iteration 9 was not completed") {
		t.Fatalf("%d marks, incomplete %v", len(ms), inc)
	}
	for i, m := range ms {
		if m.Seq != i+1 || len(m.Artifacts) != 2 || m.Artifacts[0].Path != "link/b.txt" || m.Artifacts[1].Path != "link/sub/a.txt" || m.Artifacts[0].Mode != 0o600 {
			t.Errorf("mark %d: seq %d artifacts %+v", i, m.Seq, m.Artifacts)
		}
	}
	f, err := ms[0].Open(ms[0].Artifacts[1])
	if err != nil {
		t.Fatal(err)
	}
	f.Close()

	os.WriteFile(filepath.Join(dir, "iterations", "0009", "mark.json"), []byte("{"), 0o644)
	if _, _, err := Read(dir, Iteration); err == nil || !strings.Contains(err.Error(), "iteration 9: mark.json is not valid") {
		t.Errorf("a broken mark.json: %v", err)
	}
	os.WriteFile(filepath.Join(dir, "iterations", "0009", "mark.json"), []byte(`{"v":1,"kind":"iteration","seq":9,"artifacts":[{"path":"x","file":"../../etc/passwd"}]}`), 0o644)
	if _, _, err := Read(dir, Iteration); err == nil || !strings.Contains(err.Error(), "invalid file") {
		t.Errorf("an artifact file outside the mark: %v", err)
	}
}

func TestWriteRefusesBadInput(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	big, nan := 1.5, -0.1
	for _, in := range []Input{
		{Kind: "other"},
		{Kind: Iteration, Score: &big},
		{Kind: Iteration, Score: &nan},
		{Kind: Iteration, Dimensions: map[string]float64{"x": 2}},
		{Kind: Checkpoint, State: []byte("{nope")},
		{Kind: Iteration, Paths: []string{"/does/not/exist"}},
		{Kind: Iteration, Paths: []string{"/dev/null"}},
	} {
		if _, err := Write(dir, in); err == nil {
			t.Errorf("%+v was accepted", in)
		}
	}
	if ents, _ := os.ReadDir(filepath.Join(dir, "iterations")); len(ents) != 0 {
		t.Errorf("bad input left %d directories", len(ents))
	}
}
