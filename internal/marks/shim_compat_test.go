package marks

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// TestShimsWriteWhatReadAccepts has the Python and Node shims
// (internal/shim) write marks next to this package's writer into one
// directory, then reads them back with Read: the numbers interleave, and
// every writer records the same artifacts for the same paths.
func TestShimsWriteWhatReadAccepts(t *testing.T) {
	t.Parallel()
	shimDir, err := filepath.Abs(filepath.Join("..", "shim"))
	if err != nil {
		t.Fatal(err)
	}
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Fatalf("python3 is needed to test the Python shim: %v", err)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("node is needed to test the Node shim: %v", err)
	}

	tmp := t.TempDir()
	ws := filepath.Join(tmp, "ws")
	dir := filepath.Join(tmp, "marks")
	files := map[string]string{
		"report.md":         "# report\n",
		"site/index.html":   "<p>hi</p>\n",
		"site/a-b/x.css":    "p{}\n",
		"site/a/deep/y.js":  "1\n",
		"site/\uFF21.txt":   "fullwidth A\n",
		"site/\U0001F600.t": "emoji\n",
		"site/B.txt":        "capital\n",
	}
	for rel, data := range files {
		p := filepath.Join(ws, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o640); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(filepath.Join(ws, "report.md"), filepath.Join(ws, "site", "link.md")); err != nil {
		t.Fatal(err)
	}
	outside := filepath.Join(tmp, "outside.txt")
	if err := os.WriteFile(outside, []byte("outside\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	// iteration 1 by this package, 2 by Python, 3 by Node; checkpoints 1
	// by Python, 2 by Node. Paths are relative to the workspace (the cwd).
	score := 0.25
	if _, err := Write(dir, Input{Kind: Iteration, Score: &score, Paths: []string{"report.md", "site", outside},
		Cwd: ws, Workspace: ws, Runtime: "shell", PID: os.Getpid(), AtNS: 1}); err != nil {
		t.Fatal(err)
	}
	py := func(code string) []string { return []string{python, "-c", "import dal\n" + code} }
	js := func(code string) []string {
		return []string{node, "-e", "const dal = require(" + strconv.Quote(filepath.Join(shimDir, "node", "dal.js")) + ");\n" + code}
	}
	steps := [][]string{
		py(`dal.iteration(0.5, ["report.md", "site", ` + strconv.Quote(outside) + `], {"validation": 1, "completeness": 0.75}, note="py")`),
		js(`dal.iteration({ score: 0.75, artifacts: ["report.md", "site", ` + strconv.Quote(outside) + `], dimensions: { validation: 1, completeness: 0.75 }, note: "js" });`),
		py(`dal.checkpoint("phase-build", ["report.md"], state={"step": 3, "todo": ["a", "b"], "big": 2**60}, tag="keep")`),
		js(`dal.checkpoint("phase-test", { artifacts: "report.md", state: { step: 4, todo: [], ok: true }, note: "js" });`),
	}
	env := []string{"DAL_MARKS=" + dir, "DAL_WORKSPACE=" + ws, "PYTHONPATH=" + filepath.Join(shimDir, "python"), "PYTHONDONTWRITEBYTECODE=1"}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "DAL_") && !strings.HasPrefix(kv, "NODE_OPTIONS=") && !strings.HasPrefix(kv, "PYTHONPATH=") {
			env = append(env, kv)
		}
	}
	for _, argv := range steps {
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Dir, cmd.Env = ws, env
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", argv[len(argv)-1], err, out)
		}
	}

	its, inc, err := Read(dir, Iteration)
	if err != nil {
		t.Fatal(err)
	}
	if len(its) != 3 || len(inc) != 0 {
		t.Fatalf("Read: %d iterations and %d incomplete, want 3 and 0", len(its), len(inc))
	}
	wantArtifacts := its[0].Artifacts // this package's
	if len(wantArtifacts) != 8 {
		t.Fatalf("the Go writer recorded %d artifacts, want 8: %+v", len(wantArtifacts), wantArtifacts)
	}
	for i, want := range []struct {
		runtime string
		score   float64
		dims    map[string]float64
		note    string
	}{
		{"shell", 0.25, nil, ""},
		{"python", 0.5, map[string]float64{"validation": 1, "completeness": 0.75}, "py"},
		{"node", 0.75, map[string]float64{"validation": 1, "completeness": 0.75}, "js"},
	} {
		m := its[i]
		if m.Seq != i+1 || m.Runtime != want.runtime || m.Score == nil || *m.Score != want.score ||
			!reflect.DeepEqual(m.Dimensions, want.dims) || m.Note != want.note || m.AtNS <= 0 || m.PID <= 0 {
			t.Errorf("iteration %d = seq %d runtime %q score %v dimensions %v note %q at_ns %d pid %d; want %d %q %v %v %q, at_ns and pid > 0",
				i+1, m.Seq, m.Runtime, m.Score, m.Dimensions, m.Note, m.AtNS, m.PID, i+1, want.runtime, want.score, want.dims, want.note)
		}
		if len(m.State) > 0 && string(m.State) != "null" {
			t.Errorf("iteration %d has state %s", m.Seq, m.State)
		}
		if !reflect.DeepEqual(m.Artifacts, wantArtifacts) {
			t.Errorf("iteration %d (%s) artifacts differ from the Go writer's:\n got %+v\nwant %+v", m.Seq, m.Runtime, m.Artifacts, wantArtifacts)
		}
		checkCopies(t, m, ws)
	}
	if got := wantArtifacts[len(wantArtifacts)-1].Path; got != outside {
		t.Errorf("an artifact outside the workspace is stored as %q, want %q", got, outside)
	}

	cps, inc, err := Read(dir, Checkpoint)
	if err != nil {
		t.Fatal(err)
	}
	if len(cps) != 2 || len(inc) != 0 {
		t.Fatalf("Read: %d checkpoints and %d incomplete, want 2 and 0", len(cps), len(inc))
	}
	for i, want := range []struct {
		runtime, name, tag, note, state string
	}{
		{"python", "phase-build", "keep", "", `{"step": 3, "todo": ["a", "b"], "big": 1152921504606846976}`},
		{"node", "phase-test", "", "js", `{"step": 4, "todo": [], "ok": true}`},
	} {
		m := cps[i]
		if m.Seq != i+1 || m.Runtime != want.runtime || m.Name != want.name || m.Tag != want.tag || m.Note != want.note ||
			m.Score != nil || m.AtNS <= 0 {
			t.Errorf("checkpoint %d = seq %d runtime %q name %q tag %q note %q score %v at_ns %d; want %d %q %q %q %q, no score, at_ns > 0",
				i+1, m.Seq, m.Runtime, m.Name, m.Tag, m.Note, m.Score, m.AtNS, i+1, want.runtime, want.name, want.tag, want.note)
		}
		if !sameJSON(t, m.State, want.state) {
			t.Errorf("checkpoint %d state = %s, want %s", m.Seq, m.State, want.state)
		}
		if len(m.Artifacts) != 1 || m.Artifacts[0] != wantArtifacts[0] {
			t.Errorf("checkpoint %d artifacts = %+v, want [%+v]", m.Seq, m.Artifacts, wantArtifacts[0])
		}
		checkCopies(t, m, ws)
	}
}

// checkCopies checks that every artifact's copy in m has the recorded hash
// and size, and that the original matches it.
func checkCopies(t *testing.T, m *Mark, ws string) {
	t.Helper()
	for _, a := range m.Artifacts {
		f, err := m.Open(a)
		if err != nil {
			t.Errorf("%s %d: %v", m.Kind, m.Seq, err)
			continue
		}
		h := sha256.New()
		n, err := io.Copy(h, f)
		f.Close()
		if err != nil || hex.EncodeToString(h.Sum(nil)) != a.SHA256 || n != a.Size {
			t.Errorf("%s %d: copy of %s: %d bytes, sha256 %x (%v); recorded %d, %s", m.Kind, m.Seq, a.Path, n, h.Sum(nil), err, a.Size, a.SHA256)
		}
		orig := a.Path
		if !filepath.IsAbs(orig) {
			orig = filepath.Join(ws, filepath.FromSlash(orig))
		}
		if orig != a.Abs {
			t.Errorf("%s %d: path %q resolves to %q, abs is %q", m.Kind, m.Seq, a.Path, orig, a.Abs)
		}
		b, err := os.ReadFile(orig)
		if err != nil {
			t.Errorf("%s %d: %v", m.Kind, m.Seq, err)
			continue
		}
		if sum := sha256.Sum256(b); hex.EncodeToString(sum[:]) != a.SHA256 {
			t.Errorf("%s %d: %s: sha256 %x, recorded %s", m.Kind, m.Seq, a.Path, sum, a.SHA256)
		}
		if fi, err := os.Stat(orig); err != nil {
			t.Errorf("%s %d: %v", m.Kind, m.Seq, err)
		} else if uint32(fi.Mode().Perm()) != a.Mode {
			t.Errorf("%s %d: %s: mode %v, recorded %o", m.Kind, m.Seq, a.Path, fi.Mode().Perm(), a.Mode)
		}
	}
}

func sameJSON(t *testing.T, got json.RawMessage, want string) bool {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Errorf("state %s: %v", got, err)
		return false
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatal(err)
	}
	return reflect.DeepEqual(g, w)
}
