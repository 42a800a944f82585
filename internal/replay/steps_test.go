package replay

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dal-runtime/dal/bundle"
	"github.com/dal-runtime/dal/internal/digest"
	"github.com/dal-runtime/dal/internal/golden"
	"github.com/dal-runtime/dal/internal/iterate"
	"github.com/dal-runtime/dal/internal/match"
	"github.com/dal-runtime/dal/internal/record"
	"github.com/dal-runtime/dal/internal/sandbox"
	"github.com/dal-runtime/dal/internal/usage"
	"github.com/dal-runtime/dal/vclock"
)

// recorded is what writeBundle stores: the parts Diff and a replay read.
type recorded struct {
	env     record.RunEnv
	stdout  string
	changes []sandbox.Change
	files   map[string]string // more bundle files by slash path
}

// writeBundle commits a bundle at dir/name as a recording would leave
// it, signed with a fresh key, and returns its path.
func writeBundle(t *testing.T, dir, name string, rec recorded) string {
	t.Helper()
	out := filepath.Join(dir, name)
	w, err := bundle.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Abort()
	rec.env.Version = record.EnvVersion
	if err := w.WriteJSON("env.json", rec.env); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{"logs/stdout": rec.stdout, "logs/stderr": ""}
	for k, v := range rec.files {
		files[k] = v
	}
	for rel, content := range files {
		if err := w.WriteFile(rel, []byte(content)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(w.Dir(), "fs-diff"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := sandbox.WriteChanges(filepath.Join(w.Dir(), "fs-diff", "changes.json"), rec.changes); err != nil {
		t.Fatal(err)
	}
	clock := &vclock.File{Version: 1, Mode: rec.env.Mode, Seed: rec.env.Seed}
	if err := w.WriteJSON("clock.json", clock); err != nil {
		t.Fatal(err)
	}
	_, key, _ := ed25519.GenerateKey(rand.Reader)
	m := &bundle.Manifest{WorkflowID: strings.Join(rec.env.Command, " "), Config: bundle.Config{Model: bundle.Model{ID: bundle.ModelNone}, ExecutionMode: rec.env.Mode}}
	if err := w.Commit(m, key); err != nil {
		t.Fatal(err)
	}
	return out
}

// Diff compares two real bundles component by component and names the
// first difference of each.
func TestDiff(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	env := record.RunEnv{Command: []string{"python3", "agent.py"}, Mode: "strict", Seed: 1, Epoch: time.Unix(0, 0).UTC()}
	hash := digest.Bytes([]byte("out"))
	a := writeBundle(t, dir, "a", recorded{env: env, stdout: "one\ntwo\n",
		changes: []sandbox.Change{{Path: "out.txt", Op: sandbox.OpCreated, Kind: sandbox.KindFile, Mode: 0o644, Hash: hash}}})
	env.Seed = 2
	b := writeBundle(t, dir, "b", recorded{env: env, stdout: "one\nTWO\n",
		changes: []sandbox.Change{{Path: "out.txt", Op: sandbox.OpCreated, Kind: sandbox.KindFile, Mode: 0o600, Hash: hash}}})
	same, err := Diff(a, a, bundle.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if f := Fidelity(same); f != 1 || len(same) != 9 {
		t.Errorf("a bundle against itself: fidelity %v over %d components", f, len(same))
	}
	cs, err := Diff(a, b, bundle.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"seed":    "1 vs 2",
		"stdout":  "first difference at line 2:\n    one\n  - two\n  + TWO",
		"fs_diff": "out.txt: mode 600 after the second bundle, 644 after the first bundle",
	}
	for _, c := range cs {
		if w, differs := want[c.Name]; c.Match == differs || c.First != w {
			t.Errorf("%s: match %v, first %q; want %q", c.Name, c.Match, c.First, w)
		}
	}
	if _, err := Diff(a, filepath.Join(dir, "missing"), bundle.OpenOptions{}); err == nil {
		t.Error("a missing bundle compares")
	}
}

// keptEnv gives the replayed agent the recorded plain settings by value,
// a placeholder for each secret, and the caller's value only for what
// --keep-env names; it says on dal's log what it used.
func TestKeptEnv(t *testing.T) {
	t.Setenv("OLD_SETTING", "changed")
	var log bytes.Buffer
	r := &replaying{o: Options{KeepEnv: []string{"MODEL", "OLD_SETTING"}, Log: &log},
		env: record.RunEnv{KeptValues: map[string]string{"BASE_URL": "http://127.0.0.1:9/v1", "MODEL": "m1"},
			Secrets: []string{"API_KEY", "MODEL_TOKEN"},
			Kept:    map[string]string{"OLD_SETTING": digest.Bytes([]byte("as recorded")), "OLD_OTHER": "sha256:00"}}}
	got := r.keptEnv()
	want := map[string]string{"BASE_URL": "http://127.0.0.1:9/v1", "API_KEY": record.Placeholder("API_KEY"), "MODEL_TOKEN": record.Placeholder("MODEL_TOKEN")}
	if len(got) != len(want) {
		t.Errorf("keptEnv = %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
	if !slices.Equal(r.spec.KeepEnv, []string{"MODEL", "OLD_SETTING"}) {
		t.Errorf("the runner keeps %q", r.spec.KeepEnv)
	}
	golden.Check(t, filepath.Join("testdata", "kept-env.golden"), log.Bytes())
}

// prepareWorkspace never takes the workspace path from a bundle that is
// not the user's own: it asks for --workspace, and creates nothing.
func TestPrepareWorkspaceRefusesAForeignPath(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ws := filepath.Join(dir, "would-be-created")
	b := writeBundle(t, dir, "b", recorded{env: record.RunEnv{Command: []string{"sh"}, Mode: "strict", Workspace: ws}})
	r, err := openReplay(Options{Bundle: b, Log: &bytes.Buffer{}})
	if err != nil {
		t.Fatal(err)
	}
	defer r.close()
	err = r.prepareWorkspace()
	if _, ok := usage.As(err); !ok || !strings.Contains(err.Error(), "not by your own key, so it is not acted on in the current directory without your say: pass --workspace DIR") {
		t.Errorf("%v, want a usage error asking for --workspace", err)
	}
	if _, err := os.Lstat(ws); err == nil || r.stage != "" {
		t.Errorf("the refusal created %s or a stage %q", ws, r.stage)
	}
}

// scrubbedHashes makes a file whose recorded content was scrubbed compare
// equal when the replay wrote the placeholder where the secret was; it
// never follows a symlink the replayed agent left in its capture layer.
func TestScrubbedHashes(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	real := []byte("key=real-secret-value\n")
	stored := "key=" + record.Redacted + "\n"
	b := writeBundle(t, dir, "b", recorded{env: record.RunEnv{Command: []string{"sh"}, Mode: "strict"},
		files: map[string]string{"fs-diff/files/conf.txt": stored, "fs-diff/files/link.txt": stored}})
	stage := filepath.Join(dir, "stage")
	upper := sandbox.Upper(sandbox.Config{Staging: stage})
	os.MkdirAll(upper, 0o755)
	os.WriteFile(filepath.Join(upper, "conf.txt"), []byte("key="+record.Placeholder("API_KEY")+"\n"), 0o644)
	outside := filepath.Join(dir, "outside")
	os.WriteFile(outside, []byte(stored), 0o644)
	os.Symlink(outside, filepath.Join(upper, "link.txt"))
	open := func(paths ...string) *replaying {
		r, err := openReplay(Options{Bundle: b, Log: &bytes.Buffer{}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(r.close)
		r.env.Secrets = []string{"API_KEY"}
		r.cfg = sandbox.Config{Staging: stage}
		for _, p := range paths {
			r.env.Scrubbed = append(r.env.Scrubbed, "fs-diff/files/"+p)
			r.changes = append(r.changes, sandbox.Change{Path: p, Kind: sandbox.KindFile, Hash: digest.Bytes(real)})
			r.got = append(r.got, sandbox.Change{Path: p, Kind: sandbox.KindFile, Hash: "sha256:replayed-raw"})
		}
		return r
	}
	r := open("conf.txt")
	if err := r.scrubbedHashes(); err != nil {
		t.Fatal(err)
	}
	if want := digest.Bytes([]byte(stored)); r.changes[0].Hash != want || r.got[0].Hash != want {
		t.Errorf("recorded %s, replayed %s, want both %s", r.changes[0].Hash, r.got[0].Hash, want)
	}
	r = open("link.txt")
	if err := r.scrubbedHashes(); err == nil {
		t.Errorf("a symlink in the capture layer was followed: replayed hash %s", r.got[0].Hash)
	}
}

// Render is what dal-exec replay prints: one line per component, the
// first difference indented under it.
func TestRenderVerdict(t *testing.T) {
	t.Parallel()
	sim := 0.9312
	v := &Verdict{Bundle: "run1\x1b[31m", State: "pre-run", WallMS: 120, RecordMS: 340, MatchStatus: match.SemanticMatch, Match: "stdout=semantic",
		Components: []Component{
			{Name: "exit_code", Compared: true, Match: true, Strategy: "exact", Status: match.ExactMatch},
			{Name: "stdout", Compared: true, Match: true, Strategy: "semantic", Status: match.SemanticMatch, Similarity: &sim, First: "same meaning, other words"},
			{Name: "fs_diff", Compared: true, Match: false, Strategy: "exact", Status: match.NoMatch, First: "out.txt: different content\nsecond line \x07"},
			{Name: "network"},
			{Name: "prompts", Error: "exit status 3", First: "not compared: the similarity command failed: exit status 3"},
		}}
	v.Fidelity = Fidelity(v.Components)
	var b bytes.Buffer
	v.Render(&b)
	v.Live, v.MatchStatus, v.Exact = true, match.ExactMatch, true
	v.Components = v.Components[:1]
	v.Render(&b)
	golden.Check(t, filepath.Join("testdata", "verdict.golden"), b.Bytes())
}

// recordedPolicy reads the selection policy a bundle was recorded with:
// the default when the bundle has no iterations, an error naming the file
// when it is not JSON.
func TestRecordedPolicy(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p, err := recordedPolicy(filepath.Join(dir, "missing.json"))
	if err != nil || p.Use != iterate.DefaultPolicy().Use || p.Threshold != iterate.DefaultPolicy().Threshold {
		t.Errorf("no file: %+v, %v", p, err)
	}
	good := filepath.Join(dir, "good.json")
	os.WriteFile(good, []byte(`{"policy": {"use": "final", "reason": "the last is reviewed", "threshold": 0.5}}`), 0o644)
	if p, err := recordedPolicy(good); err != nil || p.Use != "final" || p.Reason != "the last is reviewed" || p.Threshold != 0.5 {
		t.Errorf("recorded: %+v, %v", p, err)
	}
	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, []byte(`{"policy": `), 0o644)
	if _, err := recordedPolicy(bad); err == nil || !strings.Contains(err.Error(), "iterations/selection.json") {
		t.Errorf("bad JSON: %v", err)
	}
}

// compareFS names the first path that differs, in path order, and how.
func TestCompareFS(t *testing.T) {
	t.Parallel()
	file := func(p, op string, mode fs.FileMode, hash string) sandbox.Change {
		return sandbox.Change{Path: p, Op: op, Kind: sandbox.KindFile, Mode: mode, Hash: hash}
	}
	a := file("a.txt", sandbox.OpCreated, 0o644, "sha256:1")
	for _, c := range []struct {
		name      string
		want, got []sandbox.Change
		first     string
	}{
		{"same", []sandbox.Change{a}, []sandbox.Change{a}, ""},
		{"only recorded", []sandbox.Change{a}, nil, "a.txt: created by the recording, untouched by the replay"},
		{"only replayed", nil, []sandbox.Change{file("b.txt", sandbox.OpDeleted, 0, "")}, "b.txt: deleted by the replay, untouched by the recording"},
		{"op", []sandbox.Change{a}, []sandbox.Change{file("a.txt", sandbox.OpModified, 0o644, "sha256:1")}, "a.txt: modified by the replay, created by the recording"},
		{"content", []sandbox.Change{a}, []sandbox.Change{file("a.txt", sandbox.OpCreated, 0o644, "sha256:2")}, "a.txt: different content after the replay than after the recording"},
		{"first in path order", []sandbox.Change{file("z.txt", sandbox.OpCreated, 0o644, "sha256:1"), a}, []sandbox.Change{a},
			"z.txt: created by the recording, untouched by the replay"},
	} {
		got := compareFS(c.want, c.got, "recording", "replay")
		if got.Match != (c.first == "") || got.First != c.first {
			t.Errorf("%s: match %v, first %q; want %q", c.name, got.Match, got.First, c.first)
		}
	}
}
