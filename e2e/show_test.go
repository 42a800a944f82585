package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// showFrame is the test's page around the viewer (as reportFrame is
// around report.html): the viewer in an iframe of the width under test,
// and a script that waits for its timeline, clicks the first LLM call and
// writes what the page then shows into <pre id="result">.
const showFrame = `<!DOCTYPE html>
<html><head><meta charset="utf-8"><style>body{margin:0}iframe{border:0;display:block}</style></head><body>
<iframe id="f" src="%s" width="%d" height="%d"></iframe><pre id="result"></pre>
<script>
const report = r => { document.getElementById("result").textContent = JSON.stringify(r); };
document.getElementById("f").addEventListener("load", () => {
  const w = document.getElementById("f").contentWindow, d = w.document;
  const box = e => { if (!e) return null; const r = e.getBoundingClientRect(); return {left: r.left, top: r.top, right: r.right, bottom: r.bottom}; };
  let tries = 0;
  (function poll() {
    const row = d.querySelector('.row[data-kind="llm"]');
    if (!row) { if (++tries < 250) setTimeout(poll, 20); else report({error: "no LLM call in the timeline"}); return; }
    row.click();
    let overflow = [];
    for (const e of d.body.querySelectorAll("*")) {
      const r = e.getBoundingClientRect();
      if (r.width > 0 && (r.right > w.innerWidth + 0.5 || r.left < -0.5) && !e.closest(".vlist,.diff,.chunks,nav")) overflow.push(e.tagName + "." + e.className + " " + Math.round(r.left) + "-" + Math.round(r.right));
    }
    const prompt = {width: w.innerWidth, scrollWidth: d.documentElement.scrollWidth,
      title: (d.querySelector("#detail h2") || {}).textContent,
      messages: Array.from(d.querySelectorAll("#prompt .msg")).map(m => ({role: m.dataset.role, text: m.querySelector(".msg-text").textContent})),
      response: (d.querySelector("#response .msg-text") || {}).textContent,
      images: d.querySelectorAll("img").length, renderMs: +d.documentElement.dataset.renderMs,
      list: box(d.querySelector(".vlist")), detail: box(d.getElementById("detail")), overflow: overflow.slice(0, 5)};
    // Every tab, and the page's comparison with itself, fit the width too.
    prompt.tabs = {};
    for (const id of Array.from(d.querySelectorAll("nav.tabs button")).map(b => b.id)) {
      d.getElementById(id).click();
      prompt.tabs[id] = d.documentElement.scrollWidth;
    }
    report(prompt);
  })();
});
</script></body></html>`

type showResult struct {
	Error        string
	Width        int
	ScrollWidth  int
	Title        string
	Messages     []struct{ Role, Text string }
	Response     string
	Images       int
	RenderMs     int
	List, Detail *rect
	Overflow     []string
	Tabs         map[string]int // tab id: the page's width with it open
}

// TestShowPageInChromium records a run whose prompt, output and file
// names hold markup, writes its page with dal-exec show, opens it in
// headless Chromium at 420 and 1440 px, clicks the first LLM call and
// reads the prompt the page renders: the markup is text, nothing sticks
// out of the viewport, and the detail sits beside the timeline on a
// desktop and under it on a phone.
func TestShowPageInChromium(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat(chromium); err != nil {
		t.Fatalf("%s is missing: install it with apt-get install -y chromium (%v)", chromium, err)
	}
	srv := startLLMServer(t, false)
	ws := t.TempDir()
	agent := mustRead(t, "../internal/show/testdata/agent.py")
	for name, body := range map[string][]byte{"agent.py": agent, "input.txt": []byte("alpha\n"), "obsolete.txt": []byte("old\n"), "note.txt": []byte("note\n")} {
		if err := os.WriteFile(filepath.Join(ws, name), body, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	out := filepath.Join(dir, "run")
	env := []string{"DAL_KEY=" + filepath.Join(dir, "k"), "DAL_CHECKPOINTS=" + filepath.Join(dir, "checkpoints"),
		"OPENAI_API_KEY=" + apiKey, "LLM_BASE=" + srv.base()}
	rec := dalIn(t, ws, env, "record", "--allow-loopback", "127.0.0.1:"+itoa(srv.port), "--keep-env", "OPENAI_API_KEY",
		"--keep-env", "LLM_BASE", "--out", out, "--", "python3", "agent.py")
	if rec.code != 0 {
		t.Fatalf("record: exit %d\n%s\n%s", rec.code, rec.stdout, rec.stderr)
	}
	page := filepath.Join(dir, "page.html")
	if r := dalIn(t, dir, env, "show", "--out", page, out); r.code != 0 {
		t.Fatalf("show: exit %d\n%s", r.code, r.stderr)
	}
	html := mustRead(t, page)
	if bytes.Contains(html, []byte(apiKey)) || bytes.Contains(bytes.ToLower(html), []byte("<img")) {
		t.Fatal("the page holds the API key or an <img> tag")
	}

	// The run compared with itself: the comparison's tabs must fit too.
	self := filepath.Join(dir, "self.html")
	if r := dalIn(t, dir, env, "show", "--out", self, out, out); r.code != 0 {
		t.Fatalf("show A B: exit %d\n%s", r.code, r.stderr)
	}
	open := func(page string, width int) showResult {
		t.Helper()
		frame := filepath.Join(dir, fmt.Sprintf("frame-%d.html", width))
		if err := os.WriteFile(frame, []byte(fmt.Sprintf(showFrame, filepath.Base(page), width, 1000)), 0o644); err != nil {
			t.Fatal(err)
		}
		dom := chromiumRun(t, frame, "--window-size="+strconv.Itoa(max(width, 500))+",1100", "--dump-dom")
		_, after, _ := bytes.Cut(dom, []byte(`<pre id="result">`))
		text, _, _ := bytes.Cut(after, []byte("</pre>"))
		text = bytes.ReplaceAll(bytes.ReplaceAll(bytes.ReplaceAll(text, []byte("&lt;"), []byte("<")), []byte("&gt;"), []byte(">")), []byte("&amp;"), []byte("&"))
		var r showResult
		if err := json.Unmarshal(text, &r); err != nil || r.Error != "" {
			t.Fatalf("%d px: no result from %s (%v, %q):\n%s", width, page, err, r.Error, dom)
		}
		return r
	}

	const hostile = "</script><img src=x onerror=alert(1)>"
	for _, width := range []int{420, 1440} {
		c := open(self, width)
		if len(c.Tabs) != 7 || c.Images != 0 {
			t.Errorf("%d px: the comparison's tabs %v, %d images", width, c.Tabs, c.Images)
		}
		for tab, w := range c.Tabs {
			if w > width {
				t.Errorf("%d px: the comparison's %s tab is %d px wide", width, tab, w)
			}
		}
		r := open(page, width)
		t.Logf("%d px: rendered in %d ms; %+v", width, r.RenderMs, r)
		if len(r.Messages) != 2 || r.Messages[0].Role != "system" || r.Messages[0].Text != "be brief" ||
			r.Messages[1].Role != "user" || r.Messages[1].Text != "hi "+hostile || !strings.HasSuffix(r.Response, "to: hi "+hostile) {
			t.Errorf("%d px: the prompt shown is %+v, response %q", width, r.Messages, r.Response)
		}
		if !strings.Contains(r.Title, "LLM call 1") || r.Images != 0 {
			t.Errorf("%d px: detail %q, %d images", width, r.Title, r.Images)
		}
		if r.Width != width || r.ScrollWidth > width || len(r.Overflow) > 0 {
			t.Errorf("%d px: the page is %d px wide in a %d px viewport; sticking out: %q", width, r.ScrollWidth, r.Width, r.Overflow)
		}
		if len(r.Tabs) != 6 {
			t.Errorf("%d px: tabs %v, want 6", width, r.Tabs)
		}
		for tab, w := range r.Tabs {
			if w > width {
				t.Errorf("%d px: the %s tab is %d px wide", width, tab, w)
			}
		}
		if r.List == nil || r.Detail == nil {
			t.Fatalf("%d px: no timeline or no detail", width)
		}
		switch width {
		case 420:
			if !(r.List.Bottom <= r.Detail.Top) {
				t.Errorf("420 px: the detail is not under the timeline: %+v %+v", r.List, r.Detail)
			}
		case 1440:
			if !(r.List.Right <= r.Detail.Left && r.List.Top == r.Detail.Top) {
				t.Errorf("1440 px: the detail is not beside the timeline: %+v %+v", r.List, r.Detail)
			}
		}
	}
}
