package record

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dal-runtime/dal/bundle"
	"github.com/dal-runtime/dal/internal/boundary"
	"github.com/dal-runtime/dal/internal/digest"
	"github.com/dal-runtime/dal/internal/iterate"
	"github.com/dal-runtime/dal/internal/marks"
	"github.com/dal-runtime/dal/internal/provtest"
	"github.com/dal-runtime/dal/internal/runner"
	"github.com/dal-runtime/dal/internal/sandbox"
	"github.com/dal-runtime/dal/internal/usage"
	"github.com/dal-runtime/dal/vclock"
)

// prepareRecording refuses what the user got wrong with one sentence (a
// usage error, exit 2) and leaves nothing behind: no bundle staging
// beside --out, no signing key.
func TestPrepareRecordingRefusesBadOptions(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ws := filepath.Join(dir, "ws")
	os.Mkdir(ws, 0o755)
	file := filepath.Join(dir, "file")
	os.WriteFile(file, []byte("x"), 0o644)
	existing := filepath.Join(dir, "existing")
	os.Mkdir(existing, 0o755)
	for _, c := range []struct {
		name      string
		workspace string
		out       string
		want      string
	}{
		{"out exists", ws, existing, "already exists: choose another --out or remove it"},
		{"no workspace", filepath.Join(dir, "missing"), filepath.Join(dir, "b1"), "does not exist: pass an existing directory to --workspace"},
		{"workspace is a file", file, filepath.Join(dir, "b2"), "is not a directory"},
	} {
		key := filepath.Join(dir, c.name+".key")
		_, err := prepareRecording(Options{Spec: runner.Spec{Log: &bytes.Buffer{}}, Workspace: c.workspace, Out: c.out, KeyPath: key})
		if _, ok := usage.As(err); !ok || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want a usage error saying %q", c.name, err, c.want)
		}
		if _, err := os.Lstat(key); err == nil {
			t.Errorf("%s: a signing key was created", c.name)
		}
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 3 {
		t.Errorf("the refused recordings left %d entries in %s, want the 3 the test made", len(ents), dir)
	}
}

// On good options it creates the signing key (saying so), the bundle's
// staging and dal's own staging directory; cleanup removes both.
func TestPrepareRecordingCreatesKeyAndStage(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var log bytes.Buffer
	key := filepath.Join(dir, "keys", "dal.key")
	r, err := prepareRecording(Options{Spec: runner.Spec{Log: &log}, Workspace: dir, Out: filepath.Join(dir, "b"), KeyPath: key})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(key); err != nil || !strings.Contains(log.String(), "created a signing key at "+key) {
		t.Errorf("key %v, log %q", err, log.String())
	}
	if r.ws != dir || r.cwd != "." {
		t.Errorf("workspace %q cwd %q", r.ws, r.cwd)
	}
	staging, stage := r.w.Dir(), r.stage
	for _, d := range []string{staging, stage} {
		if fi, err := os.Stat(d); err != nil || !fi.IsDir() {
			t.Fatalf("%s: %v", d, err)
		}
	}
	r.cleanup()
	for _, d := range []string{staging, stage, filepath.Join(dir, "b")} {
		if _, err := os.Lstat(d); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s is left after cleanup: %v", d, err)
		}
	}
}

// ArgMounts shows the agent's own files named on its command line under
// the system's temporary directory (which the sandbox replaces), read-only
// and once per directory; nothing in the workspace, nothing that is not a
// regular file, and a file right in the temporary directory alone.
func TestArgMounts(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	ws := filepath.Join(tmp, "ws")
	scripts := filepath.Join(tmp, "scripts")
	for _, d := range []string{ws, scripts, filepath.Join(tmp, "adir")} {
		os.MkdirAll(d, 0o755)
	}
	for _, f := range []string{filepath.Join(scripts, "agent.py"), filepath.Join(scripts, "lib.py"), filepath.Join(tmp, "one.py"), filepath.Join(ws, "in.py")} {
		os.WriteFile(f, []byte("print(1)\n"), 0o644)
	}
	argv := []string{"python3", filepath.Join(scripts, "agent.py"), "../scripts/lib.py", filepath.Join(tmp, "one.py"),
		"in.py", filepath.Join(tmp, "adir"), filepath.Join(tmp, "missing.py"), "/etc/hostname", "--flag"}
	got := ArgMounts(argv, ws, ws)
	want := []sandbox.Mount{
		{Source: scripts, Target: scripts, ReadOnly: true},
		{Source: filepath.Join(tmp, "one.py"), Target: filepath.Join(tmp, "one.py"), ReadOnly: true},
	}
	if !slices.Equal(got, want) {
		t.Errorf("ArgMounts = %+v, want %+v", got, want)
	}
}

// scrub replaces the secrets' values in every file the bundle holds so far
// and in env.json's values, except fs-pre/ (the user's own pre-run files,
// which revert restores exactly); a symlink is content, never followed.
func TestScrub(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	const secret = "s3cr3t-value-123"
	outside := filepath.Join(dir, "outside")
	os.WriteFile(outside, []byte("host "+secret), 0o644)
	w, err := bundle.Create(filepath.Join(dir, "b"))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Abort()
	files := map[string]string{
		"logs/stdout":        "token " + secret + "\n",
		"logs/stderr":        "nothing here\n",
		"fs-diff/files/a":    secret,
		"fs-pre/files/a":     "pre " + secret,
		"network.har":        `{"x": "` + secret + `"}`,
		"iterations/0001/ok": "fine",
	}
	for rel, content := range files {
		if err := w.WriteFile(rel, []byte(content)); err != nil {
			t.Fatal(err)
		}
	}
	os.Symlink(outside, filepath.Join(w.Dir(), "fs-diff", "files", "link"))
	var log bytes.Buffer
	r := &recording{spec: runner.Spec{Log: &log}, w: w,
		res: &runner.Result{Env: runner.Env{"API_TOKEN": secret, "SHORT_KEY": "abc"}},
		env: &RunEnv{Secrets: []string{"API_TOKEN", "SHORT_KEY"}, KeptValues: map[string]string{"BASE_URL": "http://x/" + secret}, Inherited: map[string]string{"LANG": "C"}}}
	if err := r.scrub(); err != nil {
		t.Fatal(err)
	}
	want := []string{"fs-diff/files/a", "logs/stdout", "network.har", "env.json"}
	if !slices.Equal(r.env.Scrubbed, want) {
		t.Errorf("scrubbed %q, want %q", r.env.Scrubbed, want)
	}
	for rel, content := range files {
		b, _ := os.ReadFile(filepath.Join(w.Dir(), rel))
		wantHere := strings.ReplaceAll(content, secret, Redacted)
		if strings.HasPrefix(rel, "fs-pre/") {
			wantHere = content
		}
		if string(b) != wantHere {
			t.Errorf("%s: %q, want %q", rel, b, wantHere)
		}
	}
	if r.env.KeptValues["BASE_URL"] != "http://x/"+Redacted {
		t.Errorf("env.json's kept value: %q", r.env.KeptValues["BASE_URL"])
	}
	if b, _ := os.ReadFile(outside); string(b) != "host "+secret {
		t.Errorf("the file outside, behind a symlink, was rewritten: %q", b)
	}
	for _, line := range []string{"the secret SHORT_KEY is shorter than 4 bytes", "replaced by [REDACTED] in fs-diff/files/a, logs/stdout, network.har, env.json"} {
		if !strings.Contains(log.String(), line) {
			t.Errorf("log %q lacks %q", log.String(), line)
		}
	}
}

// snapshot builds the manifest from env.json and the changes: files only
// (a symlink the agent planted is not an artifact, and nothing is read
// through it), a deleted file without a hash, the pre-run files as inputs,
// volatile guard rails left out, stdout as the response when it is short
// UTF-8 text.
func TestSnapshot(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	stdout := filepath.Join(dir, "stdout")
	os.WriteFile(stdout, []byte("done\n"), 0o644)
	pre := sandbox.Entry{Hash: "sha256:11", Size: 2}
	changes := []sandbox.Change{
		{Path: "new.txt", Op: sandbox.OpCreated, Kind: sandbox.KindFile, Hash: "sha256:aa"},
		{Path: "edited.txt", Op: sandbox.OpModified, Kind: sandbox.KindFile, Hash: "sha256:bb", Pre: &pre},
		{Path: "gone.txt", Op: sandbox.OpDeleted, Kind: sandbox.KindFile, Hash: "sha256:cc", Pre: &pre},
		{Path: "leak", Op: sandbox.OpCreated, Kind: sandbox.KindSymlink, LinkTarget: "/etc/shadow"},
		{Path: "sub", Op: sandbox.OpCreated, Kind: sandbox.KindDir},
	}
	env := &RunEnv{Command: []string{"/usr/bin/python3", "agent.py"}, Mode: "seeded", Seed: 42, DurationMS: 1200,
		GuardRails: map[string]string{"DAL_MODE": "seeded", "DAL_SOCKET": "/run/x.sock"}, Inherited: map[string]string{"LANG": "C.UTF-8"}}
	m, err := snapshot(env, changes, stdout)
	if err != nil {
		t.Fatal(err)
	}
	var arts []string
	for _, a := range m.Outputs.ArtifactsCreated {
		arts = append(arts, a.Operation+" "+a.Path+" "+a.Hash)
	}
	if want := []string{"created new.txt sha256:aa", "modified edited.txt sha256:bb", "deleted gone.txt "}; !slices.Equal(arts, want) {
		t.Errorf("artifacts %q, want %q", arts, want)
	}
	var inputs []string
	for _, c := range m.Inputs.ContextFiles {
		inputs = append(inputs, c.Path+" "+c.Hash)
	}
	if want := []string{"edited.txt sha256:11", "gone.txt sha256:11"}; !slices.Equal(inputs, want) {
		t.Errorf("context files %q, want %q", inputs, want)
	}
	if _, ok := m.Inputs.Environment["DAL_SOCKET"]; ok || m.Inputs.Environment["DAL_MODE"] != "seeded" || m.Inputs.Environment["LANG"] != "C.UTF-8" {
		t.Errorf("environment %v", m.Inputs.Environment)
	}
	if m.Outputs.Response != "done\n" || m.Outputs.ResponseHash != digest.Bytes([]byte("done\n")) || m.Config.Agent.Name != "python3" ||
		*m.Config.Seed != 42 || m.WorkflowID != "/usr/bin/python3 agent.py" || m.Metrics.DurationMS != 1200 {
		t.Errorf("manifest %+v", m)
	}
	// A long or binary stdout is named by its hash only.
	os.WriteFile(stdout, []byte{0xff, 0xfe}, 0o644)
	if m, err := snapshot(env, nil, stdout); err != nil || m.Outputs.Response != "" {
		t.Errorf("binary stdout: response %q, %v", m.Outputs.Response, err)
	}
}

// selectIterations judges the agent's iterations after it exited and
// places the selected one's artifacts in the capture layer (not the
// workspace), and preserves every mark in the bundle.
func TestSelectIterationsPlacesTheBest(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ws, stage, marksDir := filepath.Join(dir, "ws"), filepath.Join(dir, "stage"), filepath.Join(dir, "marks")
	for _, d := range []string{ws, filepath.Join(stage, "upper"), marksDir} {
		os.MkdirAll(d, 0o755)
	}
	for i, score := range []float64{0.9, 0.4} {
		os.WriteFile(filepath.Join(ws, "report.md"), []byte("draft "+string(rune('1'+i))), 0o644)
		if _, err := marks.Write(marksDir, marks.Input{Kind: marks.Iteration, Score: &score, Paths: []string{"report.md"}, Cwd: ws, Workspace: ws}); err != nil {
			t.Fatal(err)
		}
	}
	w, err := bundle.Create(filepath.Join(dir, "b"))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Abort()
	r := &recording{w: w, marks: marksDir, cfg: sandbox.Config{Workspace: ws, Staging: stage}}
	if err := r.selectIterations(); err != nil {
		t.Fatal(err)
	}
	if r.its == nil || r.its.Selection.Selected != 1 || !slices.Equal(r.its.Selection.Applied, []string{"report.md"}) {
		t.Fatalf("selection %+v", r.its)
	}
	if b, _ := os.ReadFile(filepath.Join(stage, "upper", "report.md")); string(b) != "draft 1" {
		t.Errorf("capture layer holds %q, want the best iteration's draft 1", b)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "report.md")); string(b) != "draft 2" {
		t.Errorf("the workspace was written: %q", b)
	}
	for _, f := range []string{"selection.json", "selection-report.md", "0001/mark.json", "0002/mark.json"} {
		if _, err := os.Stat(filepath.Join(w.Dir(), "iterations", f)); err != nil {
			t.Errorf("iterations/%s: %v", f, err)
		}
	}
	// No marks: nothing selected, nothing written.
	r = &recording{w: w, marks: t.TempDir(), cfg: r.cfg, o: Options{Iterations: iterate.Policy{Use: "best"}}}
	if err := r.selectIterations(); err != nil || r.its != nil {
		t.Errorf("no marks: %+v, %v", r.its, err)
	}
}

// writeRecords and commit, after the agent: the bundle holds env.json,
// clock.json, syscalls.json, prov.json (valid PROV-JSON) and the
// self-contained workspace, all scrubbed, signed; a symlink the agent
// planted in the workspace is stored as a symlink and nothing outside the
// workspace is read.
func TestWriteRecordsAndCommit(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	const secret = "tok-0123456789"
	ws, stage, out := filepath.Join(dir, "ws"), filepath.Join(dir, "stage"), filepath.Join(dir, "b")
	outside := filepath.Join(dir, "host-secret")
	os.WriteFile(outside, []byte("only on the host"), 0o600)
	os.MkdirAll(ws, 0o755)
	os.MkdirAll(stage, 0o755)
	os.WriteFile(filepath.Join(ws, "input.txt"), []byte("in\n"), 0o644)
	os.Symlink(outside, filepath.Join(ws, "leak"))
	_, key, _ := ed25519.GenerateKey(rand.Reader)
	w, err := bundle.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	logs, err := createLogs(filepath.Join(w.Dir(), "logs"))
	if err != nil {
		t.Fatal(err)
	}
	logs.stdout.WriteString("answer with " + secret + "\n")
	var log bytes.Buffer
	r := &recording{o: Options{SelfContained: true, NoApply: true}, ws: ws, cwd: ".", out: out, key: key, w: w, stage: stage, logs: logs,
		spec: runner.Spec{Args: []string{"sh", "agent.sh"}, Mode: "strict", Seed: 9, Log: &log},
		cfg:  sandbox.Config{Workspace: ws, Staging: filepath.Join(stage, "sandbox")}}
	r.res = &runner.Result{Wall: 1500 * time.Millisecond, Env: runner.Env{"DAL_MODE": "strict", "API_TOKEN": secret, "MODEL": "m1"},
		Rails: []string{"DAL_MODE"}, Clock: &vclock.File{Version: 1, Mode: "strict", Seed: 9}}
	r.env = newRunEnv(&r.spec, r.res, ws, ".", time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), nil)
	r.env.SelfContained = true // as capture sets it
	if err := r.writeRecords(); err != nil {
		t.Fatal(err)
	}
	if err := r.commit(); err != nil {
		t.Fatal(err)
	}
	b, err := bundle.Open(out, bundle.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	var env RunEnv
	if err := b.ReadJSON("env.json", &env); err != nil || !slices.Equal(env.Secrets, []string{"API_TOKEN"}) || env.KeptValues["MODEL"] != "m1" ||
		!slices.Contains(env.Scrubbed, "logs/stdout") || !env.SelfContained {
		t.Errorf("env.json %+v, %v", env, err)
	}
	var bd boundary.Boundary
	if err := b.ReadJSON("syscalls.json", &bd); err != nil || bd.Observed || bd.Version != boundary.Version || len(bd.Categories) == 0 {
		t.Errorf("syscalls.json %+v, %v", bd, err)
	}
	if _, err := vclock.ReadFile(b.File("clock.json")); err != nil {
		t.Errorf("clock.json: %v", err)
	}
	prov, err := b.ReadFile(ProvFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := provtest.Validate(prov); err != nil {
		t.Errorf("prov.json: %v\n%s", err, prov)
	}
	if got, _ := b.ReadFile("logs/stdout"); string(got) != "answer with [REDACTED]\n" || b.Manifest.Outputs.Response != string(got) {
		t.Errorf("stdout %q, response %q", got, b.Manifest.Outputs.Response)
	}
	if l, err := os.Readlink(b.File("workspace/leak")); err != nil || l != outside {
		t.Errorf("workspace/leak: %q %v, want the symlink itself", l, err)
	}
	filepath.WalkDir(b.Dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if c, _ := os.ReadFile(p); bytes.Contains(c, []byte("only on the host")) || bytes.Contains(c, []byte(secret)) {
				t.Errorf("%s holds the host's file or the secret", p)
			}
		}
		return err
	})
	if !strings.Contains(log.String(), "boundary coverage not measured") {
		t.Errorf("dal's log %q", log.String())
	}
}
