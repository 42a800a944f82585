package checkpoint

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dal-runtime/dal/internal/marks"
)

func TestIngestListGet(t *testing.T) {
	t.Parallel()
	c := &clock{t0}
	s := newStore(t, c)
	ws := workspace(t, map[string]string{"out/a.md": "alpha", "notes.txt": "n"}, nil)
	seed := uint64(42)
	run := Run{ID: "20260301-120000-aaaa", Command: []string{"python3", "agent.py"}, Mode: "strict", Seed: &seed,
		Started: t0, Finished: t0.Add(time.Minute)}
	ms := writeMarks(t, ws,
		mark{name: "phase-plan", paths: []string{"out"}, state: `{"step": 1}`, note: "planned"},
		mark{name: "phase-build", tag: "good", paths: []string{"out/a.md", "notes.txt"}, state: `{"step": 2}`},
		mark{name: "Phase Ship!", paths: []string{"."}})
	run.Workspace = ws
	res, err := s.Ingest(run, ms)
	if err != nil {
		t.Fatal(err)
	}
	if got := ids(res.Stored); got != "20260301-120000-aaaa/1 20260301-120000-aaaa/2 20260301-120000-aaaa/3" {
		t.Fatalf("stored %s", got)
	}
	// A second run later, in another workspace.
	c.t = t0.Add(time.Hour)
	ws2 := workspace(t, map[string]string{"x": "x"}, nil)
	ingest(t, s, Run{ID: "20260301-130000-bbbb"}, ws2, "only")

	if got := ids(mustList(t, s, Filter{})); got != "20260301-130000-bbbb/1 20260301-120000-aaaa/3 20260301-120000-aaaa/2 20260301-120000-aaaa/1" {
		t.Errorf("list: %s", got)
	}
	if got := ids(mustList(t, s, Filter{Workspace: ws})); got != "20260301-120000-aaaa/3 20260301-120000-aaaa/2 20260301-120000-aaaa/1" {
		t.Errorf("list --workspace: %s", got)
	}
	if got := ids(mustList(t, s, Filter{Tag: "good"})); got != "20260301-120000-aaaa/2" {
		t.Errorf("list --tag: %s", got)
	}

	cp, err := s.Get("20260301-120000-aaaa/2")
	if err != nil {
		t.Fatal(err)
	}
	wantArts := []Artifact{
		{Path: "out/a.md", SHA256: sha256Hex([]byte("alpha")), Size: 5, Mode: 0o644},
		{Path: "notes.txt", SHA256: sha256Hex([]byte("n")), Size: 1, Mode: 0o644},
	}
	if cp.Name != "phase-build" || cp.Tag != "good" || !reflect.DeepEqual(cp.Artifacts, wantArts) ||
		cp.Run.Mode != "strict" || *cp.Run.Seed != 42 || cp.Run.Workspace != ws || !cp.Stored.Equal(t0) ||
		cp.StateSHA256 != sha256Hex([]byte(`{"step":2}`)) || cp.AtNS != 2 || cp.Archive != "0002-phase-build.tar.zst" {
		t.Errorf("Get: %+v", cp)
	}
	if cp3, _ := s.Get("20260301-120000-aaaa/3"); cp3.Archive != "0003-phase-ship.tar.zst" {
		t.Errorf("archive name of %q: %s", "Phase Ship!", cp3.Archive)
	}

	tests := []struct {
		id, want string
		err      error
	}{
		{"20260301-120000-aaaa/1", "20260301-120000-aaaa/1", nil},
		{"20260301-12/0001", "20260301-120000-aaaa/1", nil},
		{"20260301-120000-aaaa", "20260301-120000-aaaa/3", nil},
		{"20260301-12/latest", "20260301-120000-aaaa/3", nil},
		{"latest", "20260301-130000-bbbb/1", nil},
		{"2026/1", "", ErrAmbiguous},
		{"nope/1", "", ErrNotFound},
		{"20260301-120000-aaaa/9", "", ErrNotFound},
		{"20260301-120000-aaaa/x", "", nil},
		{"/1", "", nil},
	}
	for _, tt := range tests {
		got, err := s.Get(tt.id)
		switch {
		case tt.want != "" && (err != nil || got.ID != tt.want):
			t.Errorf("Get(%q) = %s, %v; want %s", tt.id, got.ID, err, tt.want)
		case tt.want == "" && err == nil:
			t.Errorf("Get(%q) = %s; want an error", tt.id, got.ID)
		case tt.err != nil && !errors.Is(err, tt.err):
			t.Errorf("Get(%q) error %v; want %v", tt.id, err, tt.err)
		}
	}
	st, err := s.State("20260301-120000-aaaa/1")
	if err != nil || string(st) != `{"step":1}` {
		t.Errorf("State = %s, %v", st, err)
	}
	if st, _ := s.State("20260301-120000-aaaa/3"); string(st) != "null" {
		t.Errorf("State without state = %s", st)
	}
}

func TestMissingStore(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "none")
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if cs, err := s.List(Filter{}); err != nil || len(cs) != 0 {
		t.Errorf("List of a missing store = %v, %v", cs, err)
	}
	if _, err := s.Get("latest"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Get latest: %v", err)
	}
	if _, err := s.Restore("x/1", "", RestoreOptions{}); !errors.Is(err, ErrNotFound) {
		t.Errorf("Restore: %v", err)
	}
	if rep, err := s.Check(); err != nil || rep.Checked != 0 || len(rep.Damaged) != 0 {
		t.Errorf("Check: %+v %v", rep, err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("reading created the store: %v", err)
	}
	f := filepath.Join(t.TempDir(), "file")
	os.WriteFile(f, nil, 0o644)
	if _, err := Open(f); err == nil || !strings.Contains(err.Error(), "not a directory") {
		t.Errorf("Open(file): %v", err)
	}
}

func TestValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		damage func(t *testing.T, s *Store, c Checkpoint)
		want   string // "" = valid
	}{
		{"intact", func(*testing.T, *Store, Checkpoint) {}, ""},
		{"flipped byte in the archive", func(t *testing.T, s *Store, c Checkpoint) {
			flipByte(t, c.ArchivePath, int(c.ArchiveSize/2))
		}, "archive 0001-build.tar.zst has sha256 "},
		{"truncated archive", func(t *testing.T, s *Store, c Checkpoint) {
			os.Truncate(c.ArchivePath, c.ArchiveSize-3)
		}, "bytes), the manifest says"},
		{"missing archive", func(t *testing.T, s *Store, c Checkpoint) {
			os.Remove(c.ArchivePath)
		}, "its archive 0001-build.tar.zst is missing"},
		{"flipped byte in the manifest's name", func(t *testing.T, s *Store, c Checkpoint) {
			flipAt(t, filepath.Join(s.Dir, c.Run.ID, ManifestFile), `"build"`, 2)
		}, "the manifest of run r1 is damaged: its content has checksum"},
		{"flipped byte in the manifest's artifact hash", func(t *testing.T, s *Store, c Checkpoint) {
			flipAt(t, filepath.Join(s.Dir, c.Run.ID, ManifestFile), c.Artifacts[0].SHA256, 3)
		}, "the manifest of run r1 is damaged"},
		{"flipped byte in the manifest's syntax", func(t *testing.T, s *Store, c Checkpoint) {
			flipAt(t, filepath.Join(s.Dir, c.Run.ID, ManifestFile), `"checkpoints":`, 0)
		}, "is not valid JSON"},
		{"artifact differs from a consistent manifest", func(t *testing.T, s *Store, c Checkpoint) {
			rewrite(t, s, c.Run.ID, func(e *Entry) { e.Artifacts[0].SHA256 = sha256Hex([]byte("other")) })
		}, "checkpoint r1/1 is damaged: artifact out/a.md has sha256 " + short(sha256Hex([]byte("alpha"))) + ", the manifest says " + short(sha256Hex([]byte("other"))) + "; restore an earlier checkpoint"},
		{"state differs", func(t *testing.T, s *Store, c Checkpoint) {
			rewrite(t, s, c.Run.ID, func(e *Entry) { e.StateSHA256 = sha256Hex([]byte("{}")) })
		}, "the state has sha256"},
		{"artifact size differs", func(t *testing.T, s *Store, c Checkpoint) {
			rewrite(t, s, c.Run.ID, func(e *Entry) { e.Artifacts[1].Size = 99 })
		}, "artifact out/b.md is 4 bytes, the manifest says 99"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := newStore(t, &clock{t0})
			ws := workspace(t, map[string]string{"out/a.md": "alpha", "out/b.md": "beta"}, nil)
			cs := ingest(t, s, Run{ID: "r1"}, ws, "build").Stored
			tt.damage(t, s, cs[0])
			err := s.Validate("r1/1")
			rep, cerr := s.Check()
			if cerr != nil {
				t.Fatal(cerr)
			}
			if tt.want == "" {
				if err != nil || len(rep.Damaged) != 0 || rep.Checked != 1 {
					t.Fatalf("Validate = %v, Check = %+v", err, rep)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) || !errors.Is(err, ErrDamaged) {
				t.Fatalf("Validate = %v; want %q", err, tt.want)
			}
			if len(rep.Damaged) != 1 || rep.Damaged[0].Error() != err.Error() {
				t.Errorf("Check = %+v", rep)
			}
			// Nothing was lost: the archive is still there (unless removed
			// by the test itself), and Restore refuses.
			if _, err := s.Restore("r1/1", t.TempDir(), RestoreOptions{}); err == nil {
				t.Errorf("Restore of a damaged checkpoint succeeded")
			}
		})
	}
}

// flipAt flips a byte at offset i of the first occurrence of needle.
func flipAt(t *testing.T, path, needle string, i int) {
	t.Helper()
	b, _ := os.ReadFile(path)
	off := strings.Index(string(b), needle)
	if off < 0 {
		t.Fatalf("%q not in %s", needle, b)
	}
	flipByte(t, path, off+i)
}

// rewrite changes checkpoint 1 of run id with a consistent checksum.
func rewrite(t *testing.T, s *Store, id string, f func(*Entry)) {
	t.Helper()
	dir := filepath.Join(s.Dir, id)
	m, err := readManifest(dir, id)
	if err != nil {
		t.Fatal(err)
	}
	f(&m.Checkpoints[0])
	if err := writeManifest(dir, m); err != nil {
		t.Fatal(err)
	}
}

func TestRestoreRoundTrip(t *testing.T) {
	t.Parallel()
	s := newStore(t, &clock{t0})
	files := map[string]string{"a/b/c/deep.txt": "deep", "run.sh": "#!/bin/sh\necho hi\n", "secret": "s", "empty": ""}
	modes := map[string]os.FileMode{"run.sh": 0o755, "secret": 0o600}
	ws := workspace(t, files, modes)
	ms := writeMarks(t, ws, mark{name: "all", paths: []string{"."}, state: `{"phase": "build", "n": [1, 2]}`})
	if _, err := s.Ingest(Run{ID: "r", Workspace: ws}, ms); err != nil {
		t.Fatal(err)
	}

	// Into a fresh directory.
	to := filepath.Join(t.TempDir(), "restored")
	res, err := s.Restore("r/1", to, RestoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := snapshot(t, to); !reflect.DeepEqual(got, map[string]string{"a/b/c/deep.txt": "deep", "run.sh": files["run.sh"], "secret": "s", "empty": ""}) {
		t.Errorf("restored %v", got)
	}
	for p, want := range map[string]os.FileMode{"run.sh": 0o755, "secret": 0o600, "empty": 0o644, "a/b/c/deep.txt": 0o644} {
		fi, err := os.Stat(filepath.Join(to, p))
		if err != nil || fi.Mode().Perm() != want {
			t.Errorf("%s mode %v, %v; want %v", p, fi.Mode().Perm(), err, want)
		}
	}
	if string(res.State) != `{"phase":"build","n":[1,2]}` || len(res.Artifacts) != 4 || res.Dir != to {
		t.Errorf("Restored = %+v", res)
	}
	if ents, _ := os.ReadDir(to); len(ents) != 4 {
		t.Errorf("staging left behind: %v", ents)
	}

	// Into the run's workspace (the default), over changed files; files
	// not in the checkpoint stay.
	os.WriteFile(filepath.Join(ws, "secret"), []byte("changed"), 0o644)
	os.RemoveAll(filepath.Join(ws, "a"))
	os.WriteFile(filepath.Join(ws, "new.txt"), []byte("mine"), 0o644)
	if _, err := s.Restore("latest", "", RestoreOptions{}); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"a/b/c/deep.txt": "deep", "run.sh": files["run.sh"], "secret": "s", "empty": "", "new.txt": "mine"}
	if got := snapshot(t, ws); !reflect.DeepEqual(got, want) {
		t.Errorf("workspace after restore %v", got)
	}
	if fi, _ := os.Stat(filepath.Join(ws, "secret")); fi.Mode().Perm() != 0o600 {
		t.Errorf("secret mode %v", fi.Mode().Perm())
	}

	// Only some paths.
	to2 := t.TempDir()
	res, err = s.Restore("r/1", to2, RestoreOptions{Paths: []string{"a/b", "run.sh"}})
	if err != nil || len(res.Artifacts) != 2 {
		t.Fatalf("Restore paths: %+v %v", res, err)
	}
	if got := snapshot(t, to2); !reflect.DeepEqual(got, map[string]string{"a/b/c/deep.txt": "deep", "run.sh": files["run.sh"]}) {
		t.Errorf("restored paths %v", got)
	}
	if _, err := s.Restore("r/1", to2, RestoreOptions{Paths: []string{"nope"}}); !errors.Is(err, ErrNotFound) {
		t.Errorf("unknown path: %v", err)
	}
}

func TestRestoreRefuses(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		path    string                          // the artifact's path in the manifest
		prepare func(t *testing.T, dest string) // the destination before
		want    error
		msg     string
	}{
		{"dot-dot", "../evil", nil, ErrOutside, "would be written outside"},
		{"absolute", "/tmp/evil", nil, ErrOutside, "would be written outside"},
		{"nested dot-dot", "out/../../evil", nil, ErrOutside, "would be written outside"},
		{"symlink out", "link/evil", func(t *testing.T, dest string) {
			os.Symlink(t.TempDir(), filepath.Join(dest, "link"))
		}, ErrOutside, "symlink that leaves it"},
		{"directory in the way", "out", func(t *testing.T, dest string) {
			os.MkdirAll(filepath.Join(dest, "out", "x"), 0o755)
		}, nil, "a directory is in the way"},
		{"file as parent", "f/x", func(t *testing.T, dest string) {
			os.WriteFile(filepath.Join(dest, "f"), []byte("file"), 0o644)
		}, nil, "f is not a directory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := newStore(t, &clock{t0})
			ws := workspace(t, map[string]string{"good.txt": "good", "x": "evil"}, nil)
			ingest(t, s, Run{ID: "r"}, ws, "cp")
			rewrite(t, s, "r", func(e *Entry) { e.Artifacts[1].Path = tt.path })
			dest := t.TempDir()
			if tt.prepare != nil {
				tt.prepare(t, dest)
			}
			before := snapshot(t, dest)
			_, err := s.Restore("r/1", dest, RestoreOptions{})
			if err == nil || (tt.want != nil && !errors.Is(err, tt.want)) || !strings.Contains(err.Error(), tt.msg) {
				t.Fatalf("Restore = %v; want %v %q", err, tt.want, tt.msg)
			}
			if got := snapshot(t, dest); !reflect.DeepEqual(got, before) {
				t.Errorf("destination changed: %v", got)
			}
			if ents, _ := os.ReadDir(dest); len(ents) > 0 && strings.HasPrefix(ents[0].Name(), ".dal-restore") {
				t.Errorf("staging left: %v", ents)
			}
			// The other artifact alone restores.
			if _, err := s.Restore("r/1", dest, RestoreOptions{Paths: []string{"good.txt"}}); err != nil {
				t.Errorf("restoring the good artifact: %v", err)
			}
		})
	}
	t.Run("destination is a file", func(t *testing.T) {
		t.Parallel()
		s := newStore(t, &clock{t0})
		ingest(t, s, Run{ID: "r"}, workspace(t, map[string]string{"a": "a"}, nil), "cp")
		f := filepath.Join(t.TempDir(), "file")
		os.WriteFile(f, nil, 0o644)
		_, err := s.Restore("r/1", f, RestoreOptions{})
		if err == nil || !strings.Contains(err.Error(), "cannot restore into "+f) {
			t.Fatalf("Restore = %v", err)
		}
	})
}

func TestIngestSkipsChangedCopies(t *testing.T) {
	t.Parallel()
	s := newStore(t, &clock{t0})
	ws := workspace(t, map[string]string{"a": "a"}, nil)
	ms := writeMarks(t, ws, mark{name: "one", paths: []string{"a"}}, mark{name: "two", paths: []string{"a"}})
	os.WriteFile(filepath.Join(ms[0].Dir, "files", "0"), []byte("b"), 0o644)
	res, err := s.Ingest(Run{ID: "r", Workspace: ws}, ms)
	if err != nil {
		t.Fatal(err)
	}
	if ids(res.Stored) != "r/2" || len(res.Skipped) != 1 || !strings.Contains(res.Skipped[0].Error(), "checkpoint mark 1 (one) was not stored: the copy of artifact a does not match its sha256") {
		t.Fatalf("stored %s, skipped %v", ids(res.Stored), res.Skipped)
	}
	if err := s.Validate("r/2"); err != nil {
		t.Error(err)
	}
	// Only temporary files were left: none.
	ents, _ := os.ReadDir(filepath.Join(s.Dir, "r"))
	if len(ents) != 2 {
		t.Errorf("run dir holds %v", ents)
	}
}

func TestIngestAppendsToRun(t *testing.T) {
	t.Parallel()
	c := &clock{t0}
	s := newStore(t, c)
	ws := workspace(t, map[string]string{"a": "a"}, nil)
	ingest(t, s, Run{ID: "manual-1", Manual: true, Started: t0, Finished: t0}, ws, "first", "second")
	c.t = t0.Add(time.Minute)
	res := ingest(t, s, Run{ID: "manual-1", Manual: true, Started: c.t, Finished: c.t}, ws, "third")
	if ids(res.Stored) != "manual-1/3" || !res.Run.Started.Equal(t0) || !res.Run.Finished.Equal(c.t) {
		t.Errorf("append: %s %+v", ids(res.Stored), res.Run)
	}
	if got := ids(mustList(t, s, Filter{})); got != "manual-1/3 manual-1/2 manual-1/1" {
		t.Errorf("list %s", got)
	}
}

func TestConcurrentIngest(t *testing.T) {
	t.Parallel()
	s := newStore(t, &clock{t0})
	s.Policy = Policy{Keep: 4} // retention runs concurrently with the other ingest
	ws := workspace(t, map[string]string{"a": "a", "b/c": "c"}, nil)
	const runs = 4
	marksOf := make([][]string, runs)
	for i := range marksOf {
		marksOf[i] = []string{"x", "y"}
	}
	var wg sync.WaitGroup
	errs := make([]error, runs)
	for i := range runs {
		ms := writeMarks(t, ws, mark{name: "x", paths: []string{"."}}, mark{name: "y", paths: []string{"."}})
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = s.Ingest(Run{ID: fmt.Sprintf("run-%d", i), Workspace: ws, Failed: i == 0}, ms)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	cs := mustList(t, s, Filter{})
	// All stored at the same instant: the 4 most recent by (time, run,
	// seq) are runs 3 and 2; the failed run 0 keeps both of its.
	if got := ids(cs); got != "run-3/2 run-3/1 run-2/2 run-2/1 run-0/2 run-0/1" {
		t.Errorf("after concurrent ingest: %s", got)
	}
	rep, err := s.Check()
	if err != nil || len(rep.Damaged) != 0 || rep.Checked != 6 {
		t.Errorf("Check = %+v, %v", rep, err)
	}
}

func TestRepair(t *testing.T) {
	t.Parallel()
	s := newStore(t, &clock{t0})
	ws := workspace(t, map[string]string{"a": "a"}, nil)
	ingest(t, s, Run{ID: "r", Failed: true, Mode: "strict"}, ws, "one", "two", "three")
	if _, err := s.Tag("r/2", "keep-me"); err != nil {
		t.Fatal(err)
	}
	// Compact one so the rebuilt manifest must notice.
	if _, err := s.Prune(Policy{MaxAge: time.Hour, Aged: AgedCompress}, t0.Add(2*time.Hour)); err != nil {
		t.Fatal(err)
	}
	before := mustList(t, s, Filter{})
	if _, err := s.Repair("r"); err == nil || !strings.Contains(err.Error(), "nothing to repair") {
		t.Fatalf("Repair of an intact run: %v", err)
	}
	manifest := filepath.Join(s.Dir, "r", ManifestFile)
	flipAt(t, manifest, `"three"`, 2)
	_, err := s.List(Filter{})
	var me *ManifestError
	if !errors.As(err, &me) || !strings.Contains(err.Error(), "checkpoint repair r") {
		t.Fatalf("List with a damaged manifest: %v", err)
	}
	// Prune leaves the damaged run alone.
	rep, err := s.Prune(Policy{Keep: 1}, t0)
	if err != nil || len(rep.Skipped) != 1 || len(rep.Deleted) != 0 {
		t.Fatalf("Prune: %+v %v", rep, err)
	}
	rr, err := s.Repair("r")
	if err != nil {
		t.Fatal(err)
	}
	if len(rr.Recovered) != 3 || len(rr.Lost) != 0 || rr.Backup == "" {
		t.Errorf("Repair = %+v", rr)
	}
	after := mustList(t, s, Filter{})
	for i := range before {
		before[i].Run.Finished, after[i].Run.Finished = time.Time{}, time.Time{}
	}
	if !reflect.DeepEqual(before, after) {
		t.Errorf("after repair:\n%+v\nwant\n%+v", after, before)
	}
	if _, err := os.Stat(rr.Backup); err != nil {
		t.Errorf("backup: %v", err)
	}
}

func TestTag(t *testing.T) {
	t.Parallel()
	s := newStore(t, &clock{t0})
	ingest(t, s, Run{ID: "r"}, workspace(t, map[string]string{"a": "a"}, nil), "one")
	for _, bad := range []string{"", "with space", strings.Repeat("x", 65), "tab\t"} {
		if _, err := s.Tag("r/1", bad); err == nil {
			t.Errorf("Tag(%q) accepted", bad)
		}
	}
	if c, err := s.Tag("r/1", "release-1"); err != nil || c.Tag != "release-1" {
		t.Fatalf("Tag = %+v %v", c, err)
	}
	if c, _ := s.Get("r/1"); c.Tag != "release-1" {
		t.Errorf("tag not stored: %+v", c)
	}
	if c, err := s.Untag("r/1"); err != nil || c.Tag != "" {
		t.Errorf("Untag = %+v %v", c, err)
	}
	if err := s.Validate("r/1"); err != nil {
		t.Error(err)
	}
	if _, err := s.Tag("r/2", "x"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Tag of an unknown id: %v", err)
	}
}

func TestRestoreReplacesSymlink(t *testing.T) {
	t.Parallel()
	s := newStore(t, &clock{t0})
	ingest(t, s, Run{ID: "r"}, workspace(t, map[string]string{"a": "restored"}, nil), "cp")
	dest, outside := t.TempDir(), filepath.Join(t.TempDir(), "target")
	os.WriteFile(outside, []byte("outside"), 0o644)
	os.Symlink(outside, filepath.Join(dest, "a"))
	if _, err := s.Restore("r/1", dest, RestoreOptions{}); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(outside); string(b) != "outside" {
		t.Errorf("the symlink's target was written: %q", b)
	}
	fi, err := os.Lstat(filepath.Join(dest, "a"))
	if b, _ := os.ReadFile(filepath.Join(dest, "a")); err != nil || !fi.Mode().IsRegular() || string(b) != "restored" {
		t.Errorf("a is %v %q", fi.Mode(), b)
	}
}

// TestIngestPlantedLinks: the agent writes the marks directory, and the
// store is filled after it exits, by dal-exec: a copy replaced by a
// symbolic link to a file the agent could not read (its hash planted to
// match) is not followed, and a mark.json replaced by a link is refused;
// no byte of the target reaches the store.
func TestIngestPlantedLinks(t *testing.T) {
	t.Parallel()
	s := newStore(t, &clock{t0})
	secret := filepath.Join(t.TempDir(), "secret")
	os.WriteFile(secret, []byte("TOP-SECRET"), 0o600)
	ws := workspace(t, map[string]string{"a": "TOP-SECRET"}, nil) // same hash as the secret
	ms := writeMarks(t, ws, mark{name: "one", paths: []string{"a"}})
	copyPath := filepath.Join(ms[0].Dir, "files", "0")
	os.Remove(copyPath)
	if err := os.Symlink(secret, copyPath); err != nil {
		t.Fatal(err)
	}
	res, err := s.Ingest(Run{ID: "r", Workspace: ws}, ms)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Stored) != 0 || len(res.Skipped) != 1 || !strings.Contains(res.Skipped[0].Error(), "symlink") {
		t.Fatalf("stored %s, skipped %v", ids(res.Stored), res.Skipped)
	}
	for p, body := range snapshot(t, s.Dir) {
		if strings.Contains(body, "TOP-SECRET") {
			t.Fatalf("the secret reached the store in %s", p)
		}
	}

	// mark.json itself a link: Read refuses the marks, naming the mark.
	dir := filepath.Dir(filepath.Dir(ms[0].Dir))
	mj := filepath.Join(ms[0].Dir, "mark.json")
	b, _ := os.ReadFile(mj)
	planted := filepath.Join(t.TempDir(), "mark.json")
	os.WriteFile(planted, b, 0o600)
	os.Remove(mj)
	os.Symlink(planted, mj)
	if _, _, err := marks.Read(dir, marks.Checkpoint); err == nil || !strings.Contains(err.Error(), "checkpoint 1: mark.json cannot be read") {
		t.Fatalf("Read of a linked mark.json: %v", err)
	}
}
