package show_test

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/dal-runtime/dal/bundle"
	"github.com/dal-runtime/dal/internal/show"
)

// page runs dal-exec show with args (the bundles last) writing into a
// fresh directory, and returns the HTML.
func page(t *testing.T, bundles ...string) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "page.html")
	code, so, se := dalExec(append([]string{"show", "--out", out}, bundles...)...)
	if code != 0 {
		t.Fatalf("show: exit %d\n%s\n%s", code, so, se)
	}
	if !strings.Contains(se, "dal: wrote "+out) {
		t.Errorf("show said %q", se)
	}
	html, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return string(html)
}

var (
	scriptRE = regexp.MustCompile(`(?s)<script([^>]*)>(.*?)</script>`)
	styleRE  = regexp.MustCompile(`(?s)<style>(.*?)</style>`)
	cspRE    = regexp.MustCompile(`<meta http-equiv="Content-Security-Policy" content="([^"]*)">`)
)

// parsePage checks the page's structure and returns its data: exactly one
// JSON data element and one script, allowed by hash with the style, and
// nothing that loads anything.
func parsePage(t *testing.T, html string) *show.Page {
	t.Helper()
	scripts := scriptRE.FindAllStringSubmatch(html, -1)
	if len(scripts) != 2 || scripts[0][1] != ` type="application/json" id="dal-data"` || scripts[1][1] != "" {
		t.Fatalf("the page has %d script elements, want the data and the viewer", len(scripts))
	}
	if n := strings.Count(strings.ToLower(html), "<script"); n != 2 {
		t.Errorf("%d <script tags in the page, want 2", n)
	}
	if n := strings.Count(strings.ToLower(html), "</script"); n != 2 {
		t.Errorf("%d </script in the page, want 2: bundle text ended an element", n)
	}
	csp := cspRE.FindStringSubmatch(html)
	style := styleRE.FindStringSubmatch(html)
	if csp == nil || style == nil {
		t.Fatal("the page has no Content-Security-Policy or no style")
	}
	hash := func(s string) string {
		sum := sha256.Sum256([]byte(s))
		return "'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"
	}
	for _, want := range []string{"default-src 'none'", "script-src " + hash(scripts[1][2]) + ";", "style-src " + hash(style[1]) + ";", "connect-src 'none'", "img-src 'none'"} {
		if !strings.Contains(csp[1], want) {
			t.Errorf("the policy %q lacks %q", csp[1], want)
		}
	}
	lower := strings.ToLower(strings.Replace(html, scripts[0][2], "", 1)) // the data is text, not markup
	for _, external := range []string{"<link", "<img", "<iframe", " src=", "@import", "url(", "<base"} {
		if strings.Contains(lower, external) {
			t.Errorf("the page holds %q: it must not load anything", external)
		}
	}
	var p show.Page
	if err := json.Unmarshal([]byte(scripts[0][2]), &p); err != nil {
		t.Fatalf("the page data is not JSON: %v", err)
	}
	if p.Version != show.PageVersion {
		t.Errorf("page version %d", p.Version)
	}
	return &p
}

func TestPageShowsTheRun(t *testing.T) {
	t.Parallel()
	html := page(t, fixture.a)
	p := parsePage(t, html)
	if len(p.Runs) != 1 || p.Compare != nil {
		t.Fatalf("%d runs, compare %v", len(p.Runs), p.Compare != nil)
	}
	if strings.Contains(html, apiKey) {
		t.Error("the API key reached the page")
	}
	v := p.Runs[0]
	if !v.Signer.Trusted || len(v.Notices) != 0 {
		t.Errorf("signer %+v, notices %q", v.Signer, v.Notices)
	}
	if s := v.Summary; s.Model != "test-model" || s.TokensIn == 0 || s.Mode != "strict" || s.ExitCode != 0 || len(s.Command) != 3 {
		t.Errorf("summary %+v", s)
	}

	// LLM calls: the prompt as a chat, the stream's chunks, the timing.
	if len(v.LLM) != 2 || len(v.HTTP) != 2 {
		t.Fatalf("%d LLM calls, %d exchanges", len(v.LLM), len(v.HTTP))
	}
	c := v.LLM[0]
	if len(c.Messages) != 2 || c.Messages[0] != (show.Message{Role: "system", Text: "be brief"}) ||
		c.Messages[1] != (show.Message{Role: "user", Text: "hi " + hostile}) || c.Response.Text != "reply to: hi "+hostile {
		t.Errorf("first call: %+v", c)
	}
	if c.HTTP != 0 || v.HTTP[0].LLM != 0 || c.LatencyMS <= 0 || c.TokensIn != 11 {
		t.Errorf("first call: http %d, latency %v, tokens %d", c.HTTP, c.LatencyMS, c.TokensIn)
	}
	s := v.LLM[1]
	if !s.Stream || s.Response.Text != "reply to: stream please" || len(v.HTTP[1].Chunks) < 5 || s.FirstChunk <= 0 {
		t.Errorf("streamed call: %+v, %d chunks", s, len(v.HTTP[1].Chunks))
	}
	redacted := false
	for _, h := range v.HTTP[0].ReqHeaders {
		redacted = redacted || (strings.EqualFold(h[0], "authorization") && h[1] == "[REDACTED]")
	}
	if !redacted {
		t.Errorf("the Authorization header is not shown redacted: %q", v.HTTP[0].ReqHeaders)
	}

	// Files: a text diff, a binary's sizes, a deletion, a symlink's
	// target (never followed), the hostile name as a name.
	files := map[string]show.File{}
	for _, f := range v.Files {
		files[f.Path] = f
	}
	if f := files["input.txt"]; f.Op != "modified" || !strings.Contains(f.Diff, "+gamma\n") || !strings.Contains(f.Diff, "@@ -1,2 +1,3 @@") || f.PreSize != 11 {
		t.Errorf("input.txt: %+v", f)
	}
	if f := files["blob.bin"]; !f.Binary || f.Diff != "" || f.Size != 256 {
		t.Errorf("blob.bin: %+v", f)
	}
	if f := files["obsolete.txt"]; f.Op != "deleted" || !strings.Contains(f.Diff, "-old\n") {
		t.Errorf("obsolete.txt: %+v", f)
	}
	if f := files["passwd-link"]; f.Kind != "symlink" || f.LinkTarget != "/etc/passwd" || f.Diff != "" {
		t.Errorf("passwd-link: %+v", f)
	}
	if strings.Contains(html, "root:x:0:0") {
		t.Error("the page holds /etc/passwd: a symlink was followed")
	}
	if f, ok := files["x"+strings.ReplaceAll(hostile, "(1)", "(2)")+".txt"]; !ok || f.Diff != "--- /dev/null\n+++ b/"+f.Path+"\n@@ -0,0 +1 @@\n+planted\n" {
		t.Errorf("the hostile file name: %+v (present %v)", f, ok)
	}

	// Logs, iterations, checkpoints, processes, crossings, coverage.
	logs := map[string]show.Log{}
	for _, l := range v.Logs {
		logs[l.Name] = l
	}
	if logs["stdout"].Head != fixture.stdout["a"] || logs["stderr"].Head != "err "+hostile+"\n" {
		t.Errorf("logs: %+v", logs)
	}
	if its := v.Iterations; its == nil || len(its.Items) != 2 || its.Selected != 2 || *its.Items[1].Score != 0.9 || its.Items[0].Note != "first "+hostile {
		t.Errorf("iterations: %+v", its)
	}
	if len(v.Checkpoints) != 1 || v.Checkpoints[0].Name != "phase-1" || v.Checkpoints[0].Note != hostile || v.Checkpoints[0].Files != 1 {
		t.Errorf("checkpoints: %+v", v.Checkpoints)
	}
	if len(v.Streams) == 0 || v.Streams[0].ID != "0" || !strings.HasPrefix(v.Streams[0].Runtime, "python") {
		t.Errorf("streams: %+v", v.Streams)
	}
	execs := 0
	for _, e := range v.Events {
		if e.Kind == "exec" {
			execs++
		}
	}
	if b := v.Boundary; b == nil || b.Coverage == nil || len(b.Categories) == 0 || execs == 0 {
		t.Errorf("boundary %+v, %d execs", b, execs)
	}

	// The replay drifted in stdout: the verdict points at the line.
	r := v.Replay
	if r.Count != 1 || r.Latest == nil || r.Latest.Status != "partial_match" {
		t.Fatalf("replay: %+v", r)
	}
	var out *show.Component
	for i, c := range r.Latest.Components {
		if c.Name == "stdout" {
			out = &r.Latest.Components[i]
		}
		if c.Name != "stdout" && !c.Match {
			t.Errorf("component %s diverged: %s", c.Name, c.First)
		}
	}
	lines := strings.Split(fixture.stdout["a"], "\n")
	if out == nil || out.Match || out.At == nil || out.At.Tab != "output" || out.At.Item != "stdout" || lines[out.At.Line-1] != "note one" {
		t.Errorf("stdout verdict %+v, place %+v", out, out.At)
	}
}

func TestPageComparesTwoRuns(t *testing.T) {
	t.Parallel()
	p := parsePage(t, page(t, fixture.a, fixture.b))
	if len(p.Runs) != 2 || p.Compare == nil {
		t.Fatalf("%d runs, compare %v", len(p.Runs), p.Compare)
	}
	c := p.Compare
	if len(c.LLM) != 2 || c.LLM[0].Same || !c.LLM[1].Same {
		t.Fatalf("LLM pairs: %+v", c.LLM)
	}
	m := c.LLM[0].Messages
	if len(m) != 3 || m[0].State != "same" || m[1].State != "changed" || m[2].Index != -1 || m[2].State != "changed" ||
		!strings.Contains(m[1].Diff, "-hi "+hostile+"\n+hi "+hostile+" again\n") {
		t.Errorf("first call's messages: %+v", m)
	}
	if len(c.Timeline) != 2 || c.Timeline[0].State != "changed" || c.Timeline[0].Kind != "llm" || c.Timeline[1].State != "same" {
		t.Errorf("aligned timeline: %+v", c.Timeline)
	}
	files := map[string]show.FilePair{}
	for _, f := range c.Files {
		files[f.Path] = f
	}
	if f := files["out.txt"]; f.State != "changed" || !strings.Contains(f.Diff, "-draft 2\n+draft 2b\n") {
		t.Errorf("out.txt: %+v", f)
	}
	if f := files["input.txt"]; f.State != "same" {
		t.Errorf("input.txt: %+v", f)
	}
	if c.Logs[0].Name != "stdout" || c.Logs[0].Same || !strings.Contains(c.Logs[0].First, "first difference at line") || !c.Logs[1].Same {
		t.Errorf("logs: %+v", c.Logs)
	}
}

// TestUntrustedSignerIsFlagged: an intact bundle from a key the reader
// does not trust is shown, with the fingerprint and how to trust it at
// the top.
func TestUntrustedSignerIsFlagged(t *testing.T) {
	t.Parallel()
	trust, err := bundle.LoadTrust(bundle.TrustOptions{TrustedKeysFile: filepath.Join(t.TempDir(), "none")})
	if err != nil {
		t.Fatal(err)
	}
	b, err := bundle.Open(fixture.a, bundle.OpenOptions{Trust: trust, AllowUntrusted: true})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	v := show.Load(b, "run-a", show.DefaultLimits)
	if v.Signer.Trusted || len(v.Notices) == 0 || !strings.Contains(v.Notices[0], "a key you do not trust") ||
		!strings.Contains(v.Notices[0], b.Signer.Fingerprint) {
		t.Errorf("signer %+v, notices %q", v.Signer, v.Notices)
	}
	// The replay was signed by the same untrusted key: it does not count.
	if v.Replay.Count != 0 || len(v.Replay.Unverified) != 1 {
		t.Errorf("replay %+v", v.Replay)
	}
}

// TestPlantedSymlinksAreNotFollowed: a bundle signed by its own author
// whose fs-diff file and stdout are symbolic links to /etc/passwd shows
// neither file's content: the reads refuse links.
func TestPlantedSymlinksAreNotFollowed(t *testing.T) {
	t.Parallel()
	out := filepath.Join(t.TempDir(), "planted")
	w, err := bundle.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	changes := `[{"path":"evil.txt","op":"created","kind":"file","mode":"0644","hash":"sha256:` + strings.Repeat("0", 64) + `","size":10}]`
	if err := w.WriteFile("fs-diff/changes.json", []byte(changes)); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(w.Dir(), "fs-diff", "files"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(w.Dir(), "logs"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, rel := range []string{"fs-diff/files/evil.txt", "logs/stdout"} {
		if err := os.Symlink("/etc/passwd", filepath.Join(w.Dir(), rel)); err != nil {
			t.Fatal(err)
		}
	}
	_, key, _ := ed25519.GenerateKey(nil)
	if err := w.Commit(&bundle.Manifest{WorkflowID: "x", Config: bundle.Config{Model: bundle.Model{ID: "none"}, ExecutionMode: "strict"}}, key); err != nil {
		t.Fatal(err)
	}
	b, err := bundle.Open(out, bundle.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	v := show.Load(b, "planted", show.DefaultLimits)
	var buf bytes.Buffer
	if err := show.Write(&buf, &show.Page{Runs: []*show.View{v}}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(buf.String(), "root:x:0:0") {
		t.Fatal("the page holds /etc/passwd")
	}
	if len(v.Files) != 1 || v.Files[0].Diff != "" || !strings.Contains(v.Files[0].NoDiff, "not readable") || len(v.Logs) != 0 {
		t.Errorf("files %+v, logs %+v, notices %q", v.Files, v.Logs, v.Notices)
	}
}
