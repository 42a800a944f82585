package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/websocket"
)

// startGateDald runs dald with env (its XDG_RUNTIME_DIR names the gate
// directory) and returns its HTTP base URL.
func startGateDald(t *testing.T, env []string) string {
	t.Helper()
	d := exec.Command(bin.dald, "--socket", filepath.Join(t.TempDir(), "dald.sock"), "--metrics-addr", "127.0.0.1:0", "--no-trace")
	d.Env = append(os.Environ(), env...)
	stderr, _ := d.StderrPipe()
	if err := d.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Process.Signal(os.Interrupt); d.Wait() })
	re := regexp.MustCompile(`url=(http://\S+)/metrics`)
	sc := bufio.NewScanner(stderr)
	base := ""
	for sc.Scan() {
		if m := re.FindStringSubmatch(sc.Text()); m != nil {
			base = m[1]
		}
		if strings.Contains(sc.Text(), "dald listening") {
			break
		}
	}
	if base == "" {
		t.Fatal("dald did not start its HTTP endpoint")
	}
	go io.Copy(io.Discard, stderr)
	return base
}

// browser is headless Chromium driven over the DevTools protocol.
type browser struct {
	t    *testing.T
	ws   *websocket.Conn
	next int
}

func startBrowser(t *testing.T) *browser {
	t.Helper()
	cmd := exec.Command(chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--remote-debugging-port=0", "--remote-allow-origins=*",
		"--user-data-dir="+t.TempDir(), "about:blank")
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	re := regexp.MustCompile(`DevTools listening on ws://([^/]+)/`)
	sc := bufio.NewScanner(stderr)
	addr := ""
	for sc.Scan() {
		if m := re.FindStringSubmatch(sc.Text()); m != nil {
			addr = m[1]
			break
		}
	}
	if addr == "" {
		t.Fatal("chromium did not open its DevTools endpoint")
	}
	go io.Copy(io.Discard, stderr)
	var targets []struct {
		Type string `json:"type"`
		WS   string `json:"webSocketDebuggerUrl"`
	}
	resp, err := http.Get("http://" + addr + "/json/list")
	if err != nil {
		t.Fatal(err)
	}
	json.NewDecoder(resp.Body).Decode(&targets)
	resp.Body.Close()
	for _, tg := range targets {
		if tg.Type == "page" {
			ws, err := websocket.Dial(tg.WS, "", "http://127.0.0.1/")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { ws.Close() })
			return &browser{t: t, ws: ws}
		}
	}
	t.Fatalf("no page among chromium's targets: %+v", targets)
	return nil
}

// call sends a DevTools command and returns its result.
func (b *browser) call(method string, params any) json.RawMessage {
	b.t.Helper()
	b.next++
	id := b.next
	if err := websocket.JSON.Send(b.ws, map[string]any{"id": id, "method": method, "params": params}); err != nil {
		b.t.Fatal(err)
	}
	b.ws.SetReadDeadline(time.Now().Add(30 * time.Second))
	for {
		var m struct {
			ID     int             `json:"id"`
			Result json.RawMessage `json:"result"`
			Error  json.RawMessage `json:"error"`
		}
		if err := websocket.JSON.Receive(b.ws, &m); err != nil {
			b.t.Fatalf("%s: %v", method, err)
		}
		if m.ID == id {
			if m.Error != nil {
				b.t.Fatalf("%s: %s", method, m.Error)
			}
			return m.Result
		}
	}
}

// eval evaluates a JavaScript expression in the page and returns its
// value as JSON text.
func (b *browser) eval(expr string) string {
	b.t.Helper()
	var r struct {
		Result struct {
			Value json.RawMessage `json:"value"`
		} `json:"result"`
	}
	json.Unmarshal(b.call("Runtime.evaluate", map[string]any{"expression": expr, "returnByValue": true}), &r)
	return string(r.Result.Value)
}

// waitEval waits until expr evaluates to want.
func (b *browser) waitEval(expr, want string) {
	b.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	got := ""
	for time.Now().Before(deadline) {
		if got = b.eval(expr); got == want {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	b.t.Fatalf("%s: %s, want %s", expr, got, want)
}

// TestPolicyGatePage: an agent's POST waits on ask-post.rego; dald's Gate
// page, in headless Chromium, shows it live with its details (markup in
// them shown as text), and its Deny button refuses it: the agent gets
// 403 and the bundle says the page decided. Decisions without the page's
// token, or from another origin, are refused.
func TestPolicyGatePage(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat(chromium); err != nil {
		t.Fatalf("headless Chromium is needed at %s: %v", chromium, err)
	}
	env := []string{"DAL_KEY=" + filepath.Join(t.TempDir(), "k"), "XDG_RUNTIME_DIR=" + t.TempDir()}
	base := startGateDald(t, env)

	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok")) }))
	t.Cleanup(ts.Close)
	port := ts.Listener.Addr().(*net.TCPAddr).Port
	ws := t.TempDir()
	agent := `import urllib.request, urllib.error
req = urllib.request.Request("http://localhost:` + itoa(port) + `/deploy", data=b"{}",
    headers={"Content-Type": "application/json", "X-Note": "<img src=x onerror=\"document.title='pwned'\">"})
try:
    urllib.request.urlopen(req)
    print("sent")
except urllib.error.HTTPError as e:
    print("refused", e.code)
`
	os.WriteFile(filepath.Join(ws, "agent.py"), []byte(agent), 0o644)
	out := filepath.Join(t.TempDir(), "bundle")
	cmd := exec.Command(bin.exec, "record", "--no-apply", "--policy", examplePolicy(t, "ask-post.rego"), "--allow-loopback", "localhost:"+itoa(port),
		"--out", out, "--", "python3", "agent.py")
	cmd.Dir, cmd.Env = ws, append(os.Environ(), env...)
	var so, se strings.Builder
	cmd.Stdout, cmd.Stderr = &so, &se
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	id := pendingAsk(t, env, "/deploy")

	// Without the token, or cross-origin, nothing is decided.
	for _, h := range []map[string]string{
		{"Content-Type": "application/json"},
		{"Content-Type": "application/json", "X-Dal-Gate-Token": "0000", "Origin": "http://evil.example"},
	} {
		req, _ := http.NewRequest("POST", base+"/gate/decide", strings.NewReader(fmt.Sprintf(`{"id":%q,"approve":true}`, id)))
		for k, v := range h {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Fatalf("a decision with %v got %d", h, resp.StatusCode)
		}
	}

	b := startBrowser(t)
	b.call("Page.navigate", map[string]any{"url": base + "/gate"})
	b.waitEval(`document.querySelectorAll(".req").length`, "1")
	if s := b.eval(`document.querySelector(".req .summary").textContent`); s != `"POST http://localhost:`+itoa(port)+`/deploy"` {
		t.Fatalf("summary %s", s)
	}
	if b.eval(`document.querySelector(".req img") === null && document.querySelector(".req pre").textContent.includes("<img src=x")`) != "true" ||
		b.eval(`document.title`) == `"pwned"` {
		t.Fatal("the request's markup reached the page as markup")
	}
	b.eval(`document.querySelector('.req button[data-act="deny"]').click()`)
	b.waitEval(`document.querySelectorAll(".req").length`, "0")
	if err := cmd.Wait(); err != nil || so.String() != "refused 403\n" {
		t.Fatalf("record: %v\nstdout %s\nstderr %s", err, so.String(), se.String())
	}
	a := readAudit(t, out)
	found := false
	for _, d := range a.Decisions {
		if d.ID == id && d.Approval != nil && !d.Approval.Approve && strings.HasSuffix(d.Approval.By, "via dald gate page") {
			found = true
		}
	}
	if !found {
		t.Fatalf("policy.json does not say the page denied %s: %+v", id, a.Decisions)
	}
}
