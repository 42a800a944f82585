package e2e

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/websocket"
)

// artifactDir is where a test keeps its screenshots: $DAL_TEST_ARTIFACTS
// when set, else the test's artifact directory (kept under -outputdir
// with go test -artifacts).
func artifactDir(t *testing.T) string {
	if d := os.Getenv("DAL_TEST_ARTIFACTS"); d != "" {
		d = filepath.Join(d, t.Name())
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		return d
	}
	return t.ArtifactDir()
}

// screenshot sizes the page to width × 1000 CSS px, saves a PNG of it to
// the artifacts and checks that nothing is wider than the viewport.
func (b *browser) screenshot(dir, name string, width int) {
	b.t.Helper()
	b.call("Emulation.setDeviceMetricsOverride", map[string]any{"width": width, "height": 1000, "deviceScaleFactor": 1, "mobile": width < 600})
	// Wait for the page's resize handler to draw the plots at the width.
	var r struct {
		Result struct {
			Value json.RawMessage `json:"value"`
		} `json:"result"`
	}
	json.Unmarshal(b.call("Runtime.evaluate", map[string]any{"awaitPromise": true, "returnByValue": true,
		"expression": `new Promise(r => setTimeout(() => r(document.documentElement.clientWidth), 400))`}), &r)
	if string(r.Result.Value) != strconv.Itoa(width) {
		b.t.Fatalf("%s: the page is %s px wide, not %d", name, r.Result.Value, width)
	}
	if got := b.eval(`document.documentElement.scrollWidth <= document.documentElement.clientWidth`); got != "true" {
		b.t.Errorf("%s at %d px: the page is wider than the viewport (%s px)", name, width, b.eval(`document.documentElement.scrollWidth`))
	}
	var shot struct {
		Data string `json:"data"`
	}
	json.Unmarshal(b.call("Page.captureScreenshot", map[string]any{"format": "png", "captureBeyondViewport": true}), &shot)
	png, err := base64.StdEncoding.DecodeString(shot.Data)
	if err != nil || len(png) < 1000 {
		b.t.Fatalf("screenshot %s: %d bytes (%v)", name, len(png), err)
	}
	p := filepath.Join(dir, fmt.Sprintf("%s-%d.png", name, width))
	if err := os.WriteFile(p, png, 0o644); err != nil {
		b.t.Fatal(err)
	}
	b.t.Logf("screenshot: %s", p)
}

// key presses a key in the page.
func (b *browser) key(key string, code int) {
	b.t.Helper()
	for _, typ := range []string{"rawKeyDown", "keyUp"} {
		b.call("Input.dispatchKeyEvent", map[string]any{"type": typ, "key": key, "code": key, "windowsVirtualKeyCode": code})
	}
}

// waitAfterNavigation is waitEval for a page still loading: an answer
// that the page's context is gone (it was replaced) is tried again.
func (b *browser) waitAfterNavigation(expr, want string) {
	b.t.Helper()
	got := ""
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		b.next++
		id := b.next
		if err := websocket.JSON.Send(b.ws, map[string]any{"id": id, "method": "Runtime.evaluate",
			"params": map[string]any{"expression": expr, "returnByValue": true}}); err != nil {
			b.t.Fatal(err)
		}
		for {
			var m struct {
				ID     int `json:"id"`
				Result struct {
					Result struct {
						Value json.RawMessage `json:"value"`
					} `json:"result"`
				} `json:"result"`
				Error json.RawMessage `json:"error"`
			}
			b.ws.SetReadDeadline(time.Now().Add(30 * time.Second))
			if err := websocket.JSON.Receive(b.ws, &m); err != nil {
				b.t.Fatal(err)
			}
			if m.ID != id {
				continue
			}
			if m.Error == nil {
				got = string(m.Result.Result.Value)
			}
			break
		}
		if got == want {
			return
		}
	}
	b.t.Fatalf("%s: %s, want %s", expr, got, want)
}

// navigate opens url in the page.
func (b *browser) navigate(url string) {
	b.t.Helper()
	b.call("Page.enable", nil)
	b.call("Page.navigate", map[string]any{"url": url})
}

// startDashboard runs dal-exec dashboard on root and returns its URL.
func startDashboard(t *testing.T, env []string, root string) string {
	t.Helper()
	cmd := exec.Command(bin.exec, "dashboard", "--listen", "127.0.0.1:0", "--interval", "100ms", root)
	cmd.Env = append(os.Environ(), env...)
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Signal(os.Interrupt); cmd.Wait() })
	re := regexp.MustCompile(`dashboard at (http://\S+/)`)
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		if m := re.FindStringSubmatch(sc.Text()); m != nil {
			go io.Copy(io.Discard, stderr)
			return m[1]
		}
	}
	t.Fatalf("dal-exec dashboard did not start: %v", sc.Err())
	return ""
}

// TestDashboardInChromium: two labelled evaluations and a report cut
// short under one directory; dal-exec dashboard serves them and headless
// Chromium shows a cell per framework × task, the skipped report with its
// sentence, and the violin plots; the arrow keys move between cells and
// Enter opens one (its trends). Then a third evaluation runs: the page
// shows its runs as they finish, without a reload (its --verify command
// holds run 2 until the test has seen it), and once it ends its report,
// from which a run's dal-exec show page opens. Screenshots at 420 and
// 1440 px are kept (artifactDir).
func TestDashboardInChromium(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat(chromium); err != nil {
		t.Fatalf("%s is missing: install it with apt-get install -y chromium (%v)", chromium, err)
	}
	shots := artifactDir(t)
	root := t.TempDir()
	key := filepath.Join(t.TempDir(), "k")
	env := []string{"DAL_KEY=" + key}
	eval := func(dir string, args ...string) {
		t.Helper()
		r := dalExec(t, env, append([]string{"consistency", "--workspace", t.TempDir(), "--report", filepath.Join(root, dir)}, args...)...)
		if r.code != 0 {
			t.Fatalf("consistency %s: exit %d\n%s", dir, r.code, r.stderr)
		}
	}
	eval("alpha-t1", "--runs", "4", "--label", "framework=alpha", "--label", "task=t1", "--", "sh", "-c", "echo 42")
	eval("beta-t1", "--runs", "5", "--label", "framework=beta", "--label", "task=t1", "--verify", `test "$DAL_RUN_INDEX" != 2`, "--", "sh", "-c", "echo 42")
	os.MkdirAll(filepath.Join(root, "broken"), 0o755)
	os.WriteFile(filepath.Join(root, "broken", "report.json"), []byte(`{"schema_version": 2, "runs": 3, "consensus": {`), 0o644)

	url := startDashboard(t, env, root)
	b := startBrowser(t)
	b.navigate(url)
	b.waitEval(`document.getElementById('app') && document.getElementById('app').dataset.ready`, `"true"`)
	b.waitEval(`document.getElementById('app').dataset.connected`, `"true"`)
	if got := b.eval(`[...document.querySelectorAll('#matrix .cell')].map(c => c.dataset.framework + '/' + c.dataset.task + ' ' + c.querySelector('.rate').textContent).join(', ')`); got != `"alpha/t1 100%, beta/t1 80.0%"` {
		t.Fatalf("cells: %s", got)
	}
	if got := b.eval(`document.querySelector('#matrix .cell[data-framework=beta] .rel').textContent`); !strings.Contains(got, "reliability 0.") {
		t.Errorf("beta's reliability: %s", got)
	}
	if got := b.eval(`document.querySelector('#problems').textContent`); !strings.Contains(got, "broken/report.json") || !strings.Contains(got, "not valid JSON") {
		t.Errorf("the broken report is not listed: %s", got)
	}
	if got := b.eval(`[...document.querySelectorAll('svg[data-plot^=violin]')].map(s => s.dataset.plot + ':' + s.querySelectorAll('.group').length).join(' ')`); got != `"violin-duration:2 violin-tokens:2 violin-score:0"` {
		t.Errorf("violin plots: %s", got)
	}
	b.screenshot(shots, "overview", 1440)
	b.screenshot(shots, "overview", 420)

	// Keyboard: from alpha's cell down to beta's, Enter opens it.
	b.eval(`document.querySelector('.cell[data-r="0"][data-c="0"]').focus()`)
	b.key("ArrowDown", 40)
	if got := b.eval(`document.activeElement.dataset.framework`); got != `"beta"` {
		t.Fatalf("ArrowDown from alpha's cell focused %s", got)
	}
	b.key("Enter", 13)
	b.waitEval(`location.hash`, `"#/cell/beta/t1"`)
	b.waitEval(`document.querySelectorAll('#trends svg[data-plot^=trend]').length`, "5")
	b.key("Escape", 27)
	b.waitEval(`location.hash`, `"#/"`)

	// Live: run 2's --verify waits for the release file.
	release := filepath.Join(t.TempDir(), "release")
	done := make(chan result, 1)
	go func() {
		cmd := exec.Command(bin.exec, "consistency", "--workspace", t.TempDir(), "--report", filepath.Join(root, "live"), "--runs", "3",
			"--label", "framework=alpha", "--label", "task=t2",
			"--verify", `if [ "$DAL_RUN_INDEX" = 2 ]; then while [ ! -e `+release+` ]; do sleep 0.05; done; fi`, "--", "sh", "-c", "echo 42")
		cmd.Env = append(os.Environ(), env...)
		done <- runCmd(t, cmd)
	}()
	b.waitEval(`(document.querySelector('.cell[data-framework=alpha][data-task=t2] .badge.running') || {}).textContent`, `"running: 2 of 3 runs"`)
	b.eval(`document.querySelector('#running a').click()`)
	b.waitEval(`document.querySelectorAll('#runs tbody tr').length`, "2")
	b.screenshot(shots, "running", 1440)
	b.screenshot(shots, "running", 420)
	if err := os.WriteFile(release, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-done:
		if r.code != 0 {
			t.Fatalf("the live evaluation: exit %d\n%s", r.code, r.stderr)
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("the live evaluation did not end")
	}
	// The page follows the evaluation to its report, still without a
	// reload.
	b.waitEval(`document.querySelector('#facts dd').textContent`, `"done"`)
	b.waitEval(`document.querySelectorAll('#runs tbody tr').length`, "3")
	if got := b.eval(`performance.getEntriesByType('navigation').length`); got != "1" {
		t.Errorf("the page was reloaded: %s navigations", got)
	}
	// Follow the run's link (navigating in Runtime.evaluate would race
	// the evaluation's answer).
	var href string
	json.Unmarshal([]byte(b.eval(`document.querySelector('#runs a.rowlink').href`)), &href)
	if !strings.HasPrefix(href, url+"run/") {
		t.Fatalf("the run's link is %q", href)
	}
	b.navigate(href)
	b.waitAfterNavigation(`document.title.startsWith('dal show')`, "true")
	if got := b.eval(`document.querySelector('#dal-data') !== null`); got != "true" {
		t.Errorf("the run's page is not dal-exec show's")
	}
}

// TestDashboardBadInput: no directory, a file, a bad --alpha or an --out
// in a missing directory is a usage error in one sentence, nothing
// written.
func TestDashboardBadInput(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "f")
	os.WriteFile(file, nil, 0o644)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"dashboard"}, "no directories given"},
		{[]string{"dashboard", file}, "is not a directory"},
		{[]string{"dashboard", filepath.Join(t.TempDir(), "missing")}, "cannot be read"},
		{[]string{"dashboard", "--alpha", "2", t.TempDir()}, "alpha 2 must be in (0, 1)"},
		{[]string{"dashboard", "--out", filepath.Join(t.TempDir(), "no", "d.html"), t.TempDir()}, "no"},
	} {
		r := dalExec(t, nil, c.args...)
		msg := strings.TrimSpace(r.stderr)
		if r.code != 2 || !strings.Contains(msg, c.want) || strings.Contains(msg, "\n") {
			t.Errorf("%v: exit %d, %q; want exit 2 and one line saying %q", c.args, r.code, msg, c.want)
		}
	}
}
