package checkpoint

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dal-runtime/dal/internal/marks"
)

// t0 is the tests' real-time origin.
var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// workspace makes a directory with files (path -> content), each 0644
// unless modes says otherwise.
func workspace(t *testing.T, files map[string]string, modes map[string]os.FileMode) string {
	t.Helper()
	ws := t.TempDir()
	for p, content := range files {
		full := filepath.Join(ws, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		mode := os.FileMode(0o644)
		if m, ok := modes[p]; ok {
			mode = m
		}
		if err := os.WriteFile(full, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(full, mode); err != nil {
			t.Fatal(err)
		}
	}
	return ws
}

// mark is one checkpoint to write with marks.Write.
type mark struct {
	name, tag, note string
	state           string
	paths           []string
}

// writeMarks writes ms as the agent would, into a fresh marks directory,
// and reads them back as dal-exec does.
func writeMarks(t *testing.T, ws string, ms ...mark) []*marks.Mark {
	t.Helper()
	dir := t.TempDir()
	for i, m := range ms {
		var state json.RawMessage
		if m.state != "" {
			state = json.RawMessage(m.state)
		}
		if _, err := marks.Write(dir, marks.Input{Kind: marks.Checkpoint, Name: m.name, Tag: m.tag, Note: m.note,
			State: state, Paths: m.paths, Cwd: ws, Workspace: ws, Runtime: "shell", AtNS: int64(i + 1)}); err != nil {
			t.Fatalf("marks.Write %s: %v", m.name, err)
		}
	}
	got, inc, err := marks.Read(dir, marks.Checkpoint)
	if err != nil || len(inc) > 0 {
		t.Fatalf("marks.Read: %v %v", err, inc)
	}
	return got
}

// writeMarksF writes one checkpoint of ws/out into dir, for fuzz seeds.
func writeMarksF(f *testing.F, dir, ws string) []*marks.Mark {
	if _, err := marks.Write(dir, marks.Input{Kind: marks.Checkpoint, Name: "cp", State: json.RawMessage(`{"a":1}`),
		Paths: []string{"out"}, Cwd: ws, Workspace: ws}); err != nil {
		f.Fatal(err)
	}
	ms, _, err := marks.Read(dir, marks.Checkpoint)
	if err != nil {
		f.Fatal(err)
	}
	return ms
}

// clock is an injectable real clock.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

// newStore is an empty store keeping everything, on clock c.
func newStore(t *testing.T, c *clock) *Store {
	t.Helper()
	s, err := Open(filepath.Join(t.TempDir(), "store"))
	if err != nil {
		t.Fatal(err)
	}
	s.Policy = Policy{}
	s.Now = c.now
	return s
}

// ingest stores n checkpoints named prefix-1.. of one run in ws.
func ingest(t *testing.T, s *Store, run Run, ws string, names ...string) *IngestResult {
	t.Helper()
	var ms []mark
	for _, n := range names {
		ms = append(ms, mark{name: n, paths: []string{"."}})
	}
	if run.Workspace == "" {
		run.Workspace = ws
	}
	res, err := s.Ingest(run, writeMarks(t, ws, ms...))
	if err != nil {
		t.Fatalf("Ingest %s: %v", run.ID, err)
	}
	if len(res.Skipped) > 0 || res.PruneErr != nil {
		t.Fatalf("Ingest %s: skipped %v, prune %v", run.ID, res.Skipped, res.PruneErr)
	}
	return res
}

func ids(cs []Checkpoint) string {
	var out []string
	for _, c := range cs {
		out = append(out, c.ID)
	}
	return strings.Join(out, " ")
}

func mustList(t *testing.T, s *Store, f Filter) []Checkpoint {
	t.Helper()
	cs, err := s.List(f)
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	return cs
}

// flipByte flips one bit of the byte at off (negative: from the end).
func flipByte(t *testing.T, path string, off int) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if off < 0 {
		off += len(b)
	}
	b[off] ^= 0x04
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// snapshot maps every file below dir to its content.
func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			t.Fatal(err)
		}
		if d.Type().IsRegular() {
			b, _ := os.ReadFile(p)
			rel, _ := filepath.Rel(dir, p)
			out[rel] = string(b)
		}
		return nil
	})
	return out
}
