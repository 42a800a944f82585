package e2e

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/dal-runtime/dal/bundle"
)

// resign writes a copy of the bundle src at dst, after edit has changed
// the copy's files, signed with the key at keyPath: what someone holding
// that key (a stolen one, say) can make.
func resign(t *testing.T, src, dst, keyPath string, edit func(dir string)) {
	t.Helper()
	var m bundle.Manifest
	if err := json.Unmarshal(mustRead(t, filepath.Join(src, bundle.ManifestFile)), &m); err != nil {
		t.Fatal(err)
	}
	w, err := bundle.Create(dst)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Abort()
	err = filepath.Walk(src, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		switch {
		case rel == "." || rel == bundle.ManifestFile || rel == bundle.SignatureFile:
			return nil
		case rel == bundle.ReplaysDir:
			return filepath.SkipDir
		case fi.IsDir():
			return os.MkdirAll(filepath.Join(w.Dir(), rel), 0o755)
		case fi.Mode()&os.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return os.Symlink(target, filepath.Join(w.Dir(), rel))
		}
		return os.WriteFile(filepath.Join(w.Dir(), rel), mustRead(t, p), fi.Mode().Perm())
	})
	if err != nil {
		t.Fatal(err)
	}
	edit(w.Dir())
	key, err := bundle.LoadKey(keyPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Commit(&m, key); err != nil {
		t.Fatal(err)
	}
}

// editJSON rewrites the JSON file p through change.
func editJSON(t *testing.T, p string, change func(map[string]any)) {
	t.Helper()
	var doc map[string]any
	if err := json.Unmarshal(mustRead(t, p), &doc); err != nil {
		t.Fatal(err)
	}
	change(doc)
	b, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestABundleNeverChoosesWhereDalWrites: a bundle signed with the user's
// own key (as an attacker who stole it would sign one) whose env.json
// names ~/.ssh, and whose revert would put back an authorized_keys there:
// revert and replay, run anywhere but in that directory and without
// --workspace, refuse naming --workspace, and nothing is written in ~/.ssh.
func TestABundleNeverChoosesWhereDalWrites(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	ssh := filepath.Join(home, ".ssh")
	if err := os.Mkdir(ssh, 0o700); err != nil {
		t.Fatal(err)
	}
	keyPath := filepath.Join(home, "signing.key")
	env := []string{"DAL_KEY=" + keyPath, "HOME=" + home}
	// The attacker's run: a workspace holding their key, which the
	// agent deletes, so that the bundle's pre-image of it is the key.
	ws := t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "authorized_keys"), []byte("ssh-ed25519 AAAA attacker\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	honest := filepath.Join(dir, "honest")
	if r := dalIn(t, ws, env, "record", "--no-apply", "--out", honest, "--", "rm", "authorized_keys"); r.code != 0 {
		t.Fatalf("record: exit %d\n%s", r.code, r.stderr)
	}
	evil := filepath.Join(dir, "evil")
	resign(t, honest, evil, keyPath, func(d string) {
		editJSON(t, filepath.Join(d, "env.json"), func(doc map[string]any) { doc["workspace"] = ssh })
	})
	if r := dalIn(t, dir, env, "verify", evil); r.code != 0 {
		t.Fatalf("the forged bundle does not verify as the user's own: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	elsewhere := t.TempDir()
	for _, cmd := range []string{"revert", "replay"} {
		r := dalIn(t, elsewhere, env, cmd, evil)
		if r.code != 2 || !strings.Contains(r.stderr, "not in the current directory "+elsewhere) || !strings.Contains(r.stderr, "--workspace") ||
			strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
			t.Errorf("%s of a bundle naming ~/.ssh, from elsewhere: exit %d, %q; want one sentence naming --workspace", cmd, r.code, r.stderr)
		}
	}
	if ents, _ := os.ReadDir(ssh); len(ents) != 0 {
		t.Fatalf("dal wrote into ~/.ssh: %v", ents)
	}
	// Where the user says (--workspace), it acts there.
	if r := dalIn(t, elsewhere, env, "revert", "--workspace", elsewhere, evil); r.code != 0 {
		t.Fatalf("revert --workspace: exit %d\n%s", r.code, r.stderr)
	}
	if ents, _ := os.ReadDir(ssh); len(ents) != 0 {
		t.Fatalf("dal wrote into ~/.ssh: %v", ents)
	}
	if _, err := os.Stat(filepath.Join(elsewhere, "authorized_keys")); err != nil {
		t.Errorf("revert --workspace did not restore into the workspace named: %v", err)
	}
}

// TestSwapAfterVerification: a bundle in a directory its group can write
// is swapped under dal-exec revert, again and again, by a racing writer:
// fs-diff/changes.json and the fs-pre copy of the file alternate between
// the signed ones and an attacker's (whose change list names the
// attacker's file's hash). No revert ever writes the attacker's bytes: each
// either restores the signed pre-image or refuses, changing nothing.
func TestSwapAfterVerification(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	env := []string{"DAL_KEY=" + filepath.Join(dir, "k")}
	ws := filepath.Join(dir, "ws")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	const pre, post, evil = "pre-run content\n", "post-run content\n", "#!/bin/sh\nevil!\n" // evil as long as pre: sizes alone tell nothing
	if err := os.WriteFile(filepath.Join(ws, "f.txt"), []byte(pre), 0o644); err != nil {
		t.Fatal(err)
	}
	shared := filepath.Join(dir, "shared")
	if err := os.Mkdir(shared, 0o775); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(shared, "run")
	if r := dalIn(t, ws, env, "record", "--out", out, "--", "sh", "-c", "printf 'post-run content\\n' > f.txt"); r.code != 0 {
		t.Fatalf("record: exit %d\n%s", r.code, r.stderr)
	}
	// Make the bundle group-writable, as in a shared directory.
	filepath.Walk(out, func(p string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode()&os.ModeSymlink == 0 {
			os.Chmod(p, fi.Mode().Perm()|0o020)
		}
		return err
	})
	// The attacker's versions, beside the bundle (same filesystem).
	spare := filepath.Join(dir, "spare")
	os.Mkdir(spare, 0o755)
	changes := filepath.Join(out, "fs-diff", "changes.json")
	preCopy := filepath.Join(out, "fs-pre", "files", "f.txt")
	good := map[string][]byte{changes: mustRead(t, changes), preCopy: mustRead(t, preCopy)}
	evilHash := "sha256:" + sha256Hex([]byte(evil))
	bad := map[string][]byte{changes: regexp.MustCompile(`"sha256:[0-9a-f]{64}"`).ReplaceAllFunc(good[changes], func(h []byte) []byte {
		if string(h) == `"sha256:`+sha256Hex([]byte(pre))+`"` {
			return []byte(`"` + evilHash + `"`)
		}
		return h
	}), preCopy: []byte(evil)}
	if string(bad[changes]) == string(good[changes]) {
		t.Fatalf("the change list does not name the pre-image's hash:\n%s", good[changes])
	}
	var stop atomic.Bool
	var wg sync.WaitGroup
	var swaps atomic.Int64
	wg.Go(func() {
		for i := 0; !stop.Load(); i++ {
			for target := range good {
				data := good[target]
				if i%2 == 0 {
					data = bad[target]
				}
				tmp := filepath.Join(spare, filepath.Base(target))
				if os.WriteFile(tmp, data, 0o664) == nil && os.Rename(tmp, target) == nil {
					swaps.Add(1)
				}
			}
		}
	})
	reverted := 0
	for attempt := 0; attempt < 40; attempt++ {
		if err := os.WriteFile(filepath.Join(ws, "f.txt"), []byte(post), 0o644); err != nil {
			t.Fatal(err)
		}
		r := dalIn(t, ws, env, "revert", out)
		got := string(mustRead(t, filepath.Join(ws, "f.txt")))
		if got == evil || strings.Contains(got, "evil") {
			stop.Store(true)
			wg.Wait()
			t.Fatalf("attempt %d: revert wrote the swapped bytes into the workspace (exit %d, %s)", attempt, r.code, r.stderr)
		}
		switch {
		case r.code == 0 && got == pre:
			reverted++
		case r.code != 0 && got == post:
		default:
			t.Errorf("attempt %d: exit %d, f.txt %q\n%s", attempt, r.code, got, r.stderr)
		}
	}
	stop.Store(true)
	wg.Wait()
	t.Logf("%d of 40 reverts succeeded, the others refused; %d swaps", reverted, swaps.Load())
	if swaps.Load() < 80 {
		t.Errorf("the racing writer swapped only %d times", swaps.Load())
	}
}

// TestRevertAndReplayHintsWork: record A then B in one workspace; replay
// A's hint is followed literally and works; a second revert of B says
// the workspace is already at its pre-run state and exits 0.
func TestRevertAndReplayHintsWork(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	env := []string{"DAL_KEY=" + filepath.Join(dir, "k")}
	ws := filepath.Join(dir, "ws")
	os.Mkdir(ws, 0o755)
	os.WriteFile(filepath.Join(ws, "f.txt"), []byte("a\n"), 0o644)
	runs := filepath.Join(dir, "runs")
	os.Mkdir(runs, 0o755)
	if r := dalIn(t, ws, env, "record", "--out", "../runs/A", "--", "sh", "-c", "echo b >> f.txt; echo new > n.txt"); r.code != 0 {
		t.Fatalf("record A: %d %s", r.code, r.stderr)
	}
	if r := dalIn(t, ws, env, "record", "--out", "../runs/B", "--", "sh", "-c", "echo c >> f.txt; rm n.txt"); r.code != 0 {
		t.Fatalf("record B: %d %s", r.code, r.stderr)
	}
	r := dalIn(t, ws, env, "replay", "../runs/A")
	m := regexp.MustCompile(`run (dal-exec revert \S+), then replay again`).FindStringSubmatch(r.stderr)
	if r.code != 2 || m == nil {
		t.Fatalf("replay A after B: exit %d, %q; want a hint to revert B", r.code, r.stderr)
	}
	hint := strings.Fields(m[1])[1:]
	if hint[len(hint)-1] != "../runs/B" {
		t.Errorf("the hint names %q, want ../runs/B", hint)
	}
	if r := dalIn(t, ws, env, hint...); r.code != 0 {
		t.Fatalf("following the hint (%q): exit %d\n%s", hint, r.code, r.stderr)
	}
	if r := dalIn(t, ws, env, "replay", "../runs/A"); r.code != 0 || !strings.Contains(r.stdout, "EXACT") {
		t.Fatalf("replay A after the hint: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	// Revert is idempotent.
	r = dalIn(t, ws, env, hint...)
	if r.code != 0 || !strings.Contains(r.stdout, "already at its pre-run state") {
		t.Fatalf("a second %q: exit %d, %q %q", hint, r.code, r.stdout, r.stderr)
	}
	if got := string(mustRead(t, filepath.Join(ws, "f.txt"))); got != "a\nb\n" {
		t.Errorf("f.txt is %q after B was reverted twice, want A's post-run state", got)
	}
}

// TestOutNames: --out takes a name with a dot as a directory, creates
// missing parents, refuses only archives dal cannot write; record --out X
// without a command suggests a command that works as given.
func TestOutNames(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	env := []string{"DAL_KEY=" + filepath.Join(t.TempDir(), "k")}
	for _, out := range []string{"runs/v1.2", "bundle.net", "deep/er/still/run"} {
		if r := dalIn(t, ws, env, "record", "--no-apply", "--out", filepath.Join("..", filepath.Base(ws)+"-out", out), "--", "true"); r.code != 0 {
			t.Errorf("--out %s: exit %d %q", out, r.code, r.stderr)
			continue
		}
		if fi, err := os.Stat(filepath.Join(ws+"-out", out, bundle.ManifestFile)); err != nil || !fi.Mode().IsRegular() {
			t.Errorf("--out %s is not a bundle directory: %v", out, err)
		}
	}
	os.RemoveAll(ws + "-out")
	for _, out := range []string{"x.zip", "x.tar", "x.gz", "x.tar.xz"} {
		r := dalIn(t, ws, env, "record", "--out", filepath.Join(t.TempDir(), out), "--", "true")
		if r.code != 2 || !strings.Contains(r.stderr, "dal does not write") || !strings.Contains(r.stderr, ".tar.zst") {
			t.Errorf("--out %s: exit %d %q, want a refusal", out, r.code, r.stderr)
		}
	}
	out := filepath.Join(t.TempDir(), "my run")
	r := dalIn(t, ws, env, "record", "--no-apply", "--out", out)
	_, hint, ok := strings.Cut(strings.TrimSpace(r.stderr), "e.g. ")
	if r.code != 2 || !ok || !strings.Contains(hint, "--out") {
		t.Fatalf("record --out without a command: exit %d %q", r.code, r.stderr)
	}
	// Follow it, with a command that exists here in place of python3 agent.py.
	cmd := exec.Command("sh", "-c", strings.Replace(strings.Replace(hint, "dal-exec", `"$0"`, 1), "python3 agent.py", "true", 1), bin.exec)
	cmd.Dir, cmd.Env = ws, append(os.Environ(), env...)
	if res := runCmd(t, cmd); res.code != 0 {
		t.Fatalf("the hint %q: exit %d\n%s", hint, res.code, res.stderr)
	}
	if _, err := os.Stat(filepath.Join(out, bundle.ManifestFile)); err != nil {
		t.Errorf("the hint did not record %s: %v", out, err)
	}
}

func sha256Hex(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// bigHAR writes a network.har of n exchanges whose request and response
// bodies are size bytes each.
func bigHAR(t *testing.T, p string, n, size int) {
	t.Helper()
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	body := strings.Repeat("x", size)
	f.WriteString(`{"log":{"version":"1.2","creator":{"name":"dal","version":"test"},"_dal":{"format":1},"entries":[`)
	for i := range n {
		if i > 0 {
			f.WriteString(",")
		}
		f.WriteString(`{"startedDateTime":"2026-01-01T00:00:00Z","time":1,"request":{"method":"POST","url":"https://api.example/v1/x","httpVersion":"HTTP/1.1","cookies":[],"headers":[],"queryString":[],"headersSize":-1,"bodySize":` + itoa(size) +
			`,"postData":{"mimeType":"text/plain","text":"` + body + `"}},"response":{"status":200,"statusText":"OK","httpVersion":"HTTP/1.1","cookies":[],"headers":[],"content":{"size":` + itoa(size) +
			`,"mimeType":"text/plain","text":"` + body + `"},"redirectURL":"","headersSize":-1,"bodySize":` + itoa(size) + `},"cache":{},"timings":{"send":0,"wait":1,"receive":0},"_dal":{"seq":` + itoa(i+1) + `}}`)
	}
	if _, err := f.WriteString("]}}\n"); err != nil {
		t.Fatal(err)
	}
}

// TestShowCapsWhatItLoads: a bundle whose network.har is about 250 MB:
// show loads at most --max-load-bytes of it (default 128 MiB), says so on
// the page, and its memory stays under twice what it loads.
func TestShowCapsWhatItLoads(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	keyPath := filepath.Join(dir, "k")
	env := []string{"DAL_KEY=" + keyPath}
	ws := t.TempDir()
	small := filepath.Join(dir, "small")
	if r := dalIn(t, ws, env, "record", "--no-apply", "--out", small, "--", "true"); r.code != 0 {
		t.Fatalf("record: %d %s", r.code, r.stderr)
	}
	big := filepath.Join(dir, "big")
	resign(t, small, big, keyPath, func(d string) { bigHAR(t, filepath.Join(d, "network.har"), 120, 1<<20) })
	page := filepath.Join(dir, "big.html")
	cmd := exec.Command(bin.exec, "show", "--out", page, big)
	cmd.Env = append(os.Environ(), env...)
	r := runCmd(t, cmd)
	if r.code != 0 {
		t.Fatalf("show: exit %d\n%s", r.code, r.stderr)
	}
	rss := cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss << 10
	html := string(mustRead(t, page))
	if !strings.Contains(html, "more than this page loads") || !strings.Contains(html, "--max-load-bytes") {
		t.Errorf("the page does not say what it left out of network.har")
	}
	t.Logf("show of a %d MB network.har: peak RSS %d MB, page %d MB", 120*2, rss>>20, len(html)>>20)
	const loaded = 128 << 20
	if rss > 2*loaded {
		t.Errorf("show's peak RSS is %d MB, more than twice the %d MB it loads", rss>>20, loaded>>20)
	}
}

// TestShowTwoRunsWithoutHTTP: two bundles without an HTTP exchange are
// compared on a page that renders in headless Chromium without a script
// error; without --out the page goes to dal's cache, not into the current
// directory (the workspace).
func TestShowTwoRunsWithoutHTTP(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat(chromium); err != nil {
		t.Fatalf("%s is missing: install it with apt-get install -y chromium (%v)", chromium, err)
	}
	dir := t.TempDir()
	cache := filepath.Join(dir, "cache")
	env := []string{"DAL_KEY=" + filepath.Join(dir, "k"), "XDG_CACHE_HOME=" + cache}
	ws := t.TempDir()
	for _, name := range []string{"A", "B"} {
		if r := dalIn(t, ws, env, "record", "--out", filepath.Join(dir, name), "--", "sh", "-c", "echo "+name+" > f.txt"); r.code != 0 {
			t.Fatalf("record %s: %d %s", name, r.code, r.stderr)
		}
	}
	r := dalIn(t, ws, env, "show", filepath.Join(dir, "A"), filepath.Join(dir, "B"))
	page := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(r.stderr), "dal: wrote "))
	if r.code != 0 || !strings.HasPrefix(page, filepath.Join(cache, "dal", "show")+"/A-vs-B-") || !strings.HasSuffix(page, ".html") {
		t.Fatalf("show A B: exit %d, %q; want the page in %s", r.code, r.stderr, cache)
	}
	if ents, _ := filepath.Glob(filepath.Join(ws, "*.html")); len(ents) != 0 {
		t.Errorf("show wrote into the current directory: %v", ents)
	}
	dom := string(chromiumRun(t, page, "--dump-dom"))
	_, app, _ := strings.Cut(dom, `id="app"`)
	app, _, _ = strings.Cut(app, "<script")
	if strings.Contains(app, "could not show the bundle") || !strings.Contains(app, "timelines, aligned") {
		t.Fatalf("the two-run page did not render:\n%s", app)
	}
}

// blocksOf is the disk space the file p takes.
func blocksOf(t *testing.T, p string) int64 {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Stat(p, &st); err != nil {
		t.Fatal(err)
	}
	return st.Blocks * 512
}

// TestSparseFilesStaySparse: an agent makes a 4 GiB file with two bytes
// of data in it; the bundle's copy and the applied file take a few blocks,
// not 4 GiB, and hold the same bytes; revert of a run that deleted it
// puts it back as sparse.
func TestSparseFilesStaySparse(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	env := []string{"DAL_KEY=" + filepath.Join(dir, "k")}
	ws := filepath.Join(dir, "ws")
	os.Mkdir(ws, 0o755)
	const size = 4 << 30
	mk := "truncate -s 4G big && printf a | dd of=big bs=1 seek=1000000 conv=notrunc 2>/dev/null && printf z | dd of=big bs=1 seek=3000000000 conv=notrunc 2>/dev/null"
	if r := dalIn(t, ws, env, "record", "--out", filepath.Join(dir, "make"), "--", "sh", "-c", mk); r.code != 0 {
		t.Fatalf("record: exit %d\n%s", r.code, r.stderr)
	}
	for _, p := range []string{filepath.Join(ws, "big"), filepath.Join(dir, "make", "fs-diff", "files", "big")} {
		fi, err := os.Stat(p)
		if err != nil || fi.Size() != size {
			t.Fatalf("%s: %v %v", p, fi, err)
		}
		if b := blocksOf(t, p); b > 1<<20 {
			t.Errorf("%s takes %d bytes on disk, want a sparse file", p, b)
		}
	}
	f, _ := os.Open(filepath.Join(ws, "big"))
	got := make2(f, 1000000, 3000000000)
	f.Close()
	if got != "az" {
		t.Errorf("the applied file holds %q at its data, want \"az\"", got)
	}
	if r := dalIn(t, ws, env, "record", "--out", filepath.Join(dir, "remove"), "--", "rm", "big"); r.code != 0 {
		t.Fatalf("record rm: exit %d\n%s", r.code, r.stderr)
	}
	if r := dalIn(t, ws, env, "revert", filepath.Join(dir, "remove")); r.code != 0 {
		t.Fatalf("revert: exit %d\n%s", r.code, r.stderr)
	}
	if fi, err := os.Stat(filepath.Join(ws, "big")); err != nil || fi.Size() != size || blocksOf(t, filepath.Join(ws, "big")) > 1<<20 {
		t.Errorf("revert put back %v (%v), %d bytes on disk; want the sparse 4 GiB file", fi, err, blocksOf(t, filepath.Join(ws, "big")))
	}
}

// make2 reads the bytes of f at offsets a and b.
func make2(f *os.File, a, b int64) string {
	buf := make([]byte, 1)
	var out []byte
	for _, off := range []int64{a, b} {
		if _, err := f.ReadAt(buf, off); err != nil {
			return err.Error()
		}
		out = append(out, buf[0])
	}
	return string(out)
}

// TestMaxApplyBytes: record whose changes hold more file data than
// --max-apply-bytes keeps them in the bundle only (one sentence naming
// the flag, the workspace untouched, env.json says not applied); revert
// refuses the same way, writing nothing.
func TestMaxApplyBytes(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	env := []string{"DAL_KEY=" + filepath.Join(dir, "k")}
	ws := filepath.Join(dir, "ws")
	os.Mkdir(ws, 0o755)
	out := filepath.Join(dir, "big")
	r := dalIn(t, ws, env, "record", "--max-apply-bytes", "1MiB", "--out", out, "--", "sh", "-c", "head -c 3000000 /dev/zero | tr '\\0' x > a; head -c 10 /dev/zero > b")
	if r.code != 2 || !strings.Contains(r.stderr, "--max-apply-bytes") || !strings.Contains(r.stderr, "kept in the bundle "+out+" only") ||
		strings.Count(strings.TrimSpace(r.stderr[strings.Index(r.stderr, "dal-exec:"):]), "\n") != 0 {
		t.Fatalf("record over --max-apply-bytes: exit %d\n%s", r.code, r.stderr)
	}
	if ents, _ := os.ReadDir(ws); len(ents) != 0 {
		t.Errorf("the workspace was changed: %v", ents)
	}
	var recorded struct{ Applied bool }
	if err := json.Unmarshal(mustRead(t, filepath.Join(out, "env.json")), &recorded); err != nil || recorded.Applied {
		t.Errorf("env.json says applied: %v (%v)", recorded.Applied, err)
	}
	// A run that deletes the 3 MB file: its revert would write it back.
	if err := os.WriteFile(filepath.Join(ws, "a"), []byte(strings.Repeat("x", 3000000)), 0o644); err != nil {
		t.Fatal(err)
	}
	rm := filepath.Join(dir, "rm")
	if r := dalIn(t, ws, env, "record", "--out", rm, "--", "rm", "a"); r.code != 0 {
		t.Fatalf("record rm: exit %d\n%s", r.code, r.stderr)
	}
	r = dalIn(t, ws, env, "revert", "--max-apply-bytes", "2MiB", rm)
	if r.code != 2 || !strings.Contains(r.stderr, "--max-apply-bytes") || !strings.Contains(r.stderr, "not written") {
		t.Fatalf("revert over --max-apply-bytes: exit %d\n%s", r.code, r.stderr)
	}
	if ents, _ := os.ReadDir(ws); len(ents) != 0 {
		t.Errorf("the refused revert wrote %v", ents)
	}
	if r := dalIn(t, ws, env, "revert", rm); r.code != 0 {
		t.Fatalf("revert within the default: exit %d\n%s", r.code, r.stderr)
	}
}

// TestCaptureFailureKeepsTheAuditRecord: an agent calls an API (through
// the proxy, under a policy), then nests directories past PATH_MAX so
// that its file changes cannot be captured. The bundle is still written
// and signed, as incomplete: network.har, policy.json and the logs are
// in it, verify and replay say it is incomplete, and the workspace is
// untouched.
func TestCaptureFailureKeepsTheAuditRecord(t *testing.T) {
	t.Parallel()
	srv := startLLMServer(t, false)
	ws := t.TempDir()
	agent := `import json, os, urllib.request
req = urllib.request.Request(os.environ["LLM_BASE"] + "/chat/completions", method="POST",
    data=json.dumps({"model": "test-model", "messages": [{"role": "user", "content": "the secret plans"}]}).encode(),
    headers={"Authorization": "Bearer " + os.environ["OPENAI_API_KEY"], "Content-Type": "application/json"})
print(json.load(urllib.request.urlopen(req, timeout=30))["choices"][0]["message"]["content"])
open("kept.txt", "w").write("x")
for i in range(30):
    os.mkdir("d" * 200)
    os.chdir("d" * 200)
print("nested past PATH_MAX", flush=True)
`
	if err := os.WriteFile(filepath.Join(ws, "agent.py"), []byte(agent), 0o644); err != nil {
		t.Fatal(err)
	}
	pol := filepath.Join(t.TempDir(), "allow.rego")
	os.WriteFile(pol, []byte("package dal\n\nimport rego.v1\n\ndecision := {\"action\": \"allow\", \"reason\": \"audited\"} if input.kind == \"http\"\n"), 0o644)
	before := treeHash(t, ws)
	dir := t.TempDir()
	out := filepath.Join(dir, "run")
	env := []string{"DAL_KEY=" + filepath.Join(dir, "k"), "OPENAI_API_KEY=" + apiKey, "LLM_BASE=" + srv.base()}
	r := dalIn(t, ws, env, "record", "--policy", pol, "--allow-loopback", "127.0.0.1:"+itoa(srv.port), "--keep-env", "OPENAI_API_KEY",
		"--keep-env", "LLM_BASE", "--out", out, "--", "python3", "agent.py")
	if r.code != 2 || !strings.Contains(r.stderr, "written and signed as incomplete") || !strings.Contains(r.stderr, "the workspace is untouched") {
		t.Fatalf("record: exit %d\nstdout %s\nstderr %s", r.code, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stdout, "nested past PATH_MAX") {
		t.Errorf("the agent did not nest its directories: %q", r.stdout)
	}
	if treeHash(t, ws) != before {
		t.Error("the workspace changed")
	}
	v := dalIn(t, dir, env, "verify", out)
	if v.code != 0 || !strings.Contains(v.stdout, "incomplete: the run's file changes") {
		t.Errorf("verify: exit %d\n%s%s", v.code, v.stdout, v.stderr)
	}
	var m bundle.Manifest
	if err := json.Unmarshal(mustRead(t, filepath.Join(out, bundle.ManifestFile)), &m); err != nil || len(m.Dal.Incomplete) != 1 {
		t.Fatalf("manifest: %v, incomplete %q", err, m.Dal.Incomplete)
	}
	for _, rel := range []string{"network.har", "policy.json", "logs/stdout", "logs/dal.log", "fs-diff/changes.json"} {
		if _, ok := m.Dal.Files[rel]; !ok {
			t.Errorf("the incomplete bundle has no %s", rel)
		}
	}
	if har := string(mustRead(t, filepath.Join(out, "network.har"))); !strings.Contains(har, "the secret plans") {
		t.Error("network.har does not hold the agent's request")
	}
	if pa := string(mustRead(t, filepath.Join(out, "policy.json"))); !strings.Contains(pa, "audited") {
		t.Errorf("policy.json does not hold the decision:\n%s", pa)
	}
	rep := dalIn(t, ws, env, "replay", out)
	if rep.code != 2 || !strings.Contains(rep.stderr, "is incomplete") {
		t.Errorf("replay of an incomplete bundle: exit %d %q", rep.code, rep.stderr)
	}
}
