package dald

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strings"
	"time"

	"github.com/dal-runtime/dal/internal/policy/gate"
	"github.com/dal-runtime/dal/internal/procnet"
)

// gatePage is dald's Gate page at its HTTP address (/gate): the calls
// its user's running agents' policies ask about, live, with Approve and
// Deny buttons (docs/policy.md).
//
// Who may use it: a request must come over loopback from a process of
// dald's own user (or root), found by its socket in /proc/net/tcp, and
// name a loopback host (no DNS rebinding); a decision is a POST with the
// page's token in a header (X-Dal-Gate-Token), JSON, and same-origin, so
// another site cannot make the user's browser decide (CSRF). The page
// builds every element with textContent: nothing a request carries is
// ever markup.
type gatePage struct {
	dir   string
	token string
	poll  time.Duration
}

func newGatePage() *gatePage {
	b := make([]byte, 32)
	rand.Read(b)
	return &gatePage{dir: gate.Dir(), token: hex.EncodeToString(b), poll: 250 * time.Millisecond}
}

// Register adds the page's routes.
func (g *gatePage) Register(mux *http.ServeMux) {
	mux.HandleFunc("GET /gate", g.guard(g.page))
	mux.HandleFunc("GET /gate/pending", g.guard(g.pending))
	mux.HandleFunc("GET /gate/events", g.guard(g.events))
	mux.HandleFunc("POST /gate/decide", g.guard(g.decide))
}

// guard lets through requests of dald's own user on this machine.
func (g *gatePage) guard(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("Cache-Control", "no-store")
		if !loopbackHost(r.Host) {
			http.Error(w, "the Gate page answers at a loopback address only (127.0.0.1, [::1] or localhost)", http.StatusForbidden)
			return
		}
		if err := sameUser(r); err != nil {
			http.Error(w, err.Error(), http.StatusForbidden)
			return
		}
		h(w, r)
	}
}

func loopbackHost(hostport string) bool {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		host = hostport
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && ip.IsLoopback()
}

// sameUser checks that the request's peer is a socket of dald's user (or
// root) on this machine.
func sameUser(r *http.Request) error {
	remote, err := netipAddrPort(r.RemoteAddr)
	if err != nil || !remote.IP.IsLoopback() {
		return errors.New("the Gate page decides from this machine only")
	}
	local, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if !ok {
		return errors.New("the Gate page could not tell who is asking")
	}
	la, err := netipAddrPort(local.String())
	if err != nil {
		return errors.New("the Gate page could not tell who is asking")
	}
	uid, ok := socketOwner(remote, la)
	if !ok {
		return errors.New("the Gate page could not tell who is asking")
	}
	if uid != os.Getuid() && uid != 0 {
		return fmt.Errorf("only uid %d (dald's user) or root may use the Gate page", os.Getuid())
	}
	return nil
}

func netipAddrPort(s string) (*net.TCPAddr, error) {
	return net.ResolveTCPAddr("tcp", s)
}

// socketOwner finds the uid owning the TCP socket whose local address is
// peer and remote address is ours, in /proc/net/tcp or tcp6.
func socketOwner(peer, ours *net.TCPAddr) (int, bool) {
	p, ok1 := netip.AddrFromSlice(peer.IP)
	o, ok2 := netip.AddrFromSlice(ours.IP)
	if !ok1 || !ok2 {
		return 0, false
	}
	pa, oa := netip.AddrPortFrom(p.Unmap(), uint16(peer.Port)), netip.AddrPortFrom(o.Unmap(), uint16(ours.Port))
	for _, sk := range procnet.TCP() {
		if sk.Local == pa && sk.Remote == oa {
			return sk.UID, true
		}
	}
	return 0, false
}

func (g *gatePage) list(ctx context.Context) []gate.Listing {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	ls := gate.List(ctx, g.dir)
	for i := range ls {
		ls[i].Socket = "" // no paths on the page
	}
	if ls == nil {
		ls = []gate.Listing{}
	}
	return ls
}

func (g *gatePage) pending(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(g.list(r.Context()))
}

// events streams the listing (server-sent events) whenever it changes.
func (g *gatePage) events(w http.ResponseWriter, r *http.Request) {
	fl, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming is not supported here", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	last := ""
	t := time.NewTicker(g.poll)
	defer t.Stop()
	for {
		b, _ := json.Marshal(g.list(r.Context()))
		if s := string(b); s != last {
			last = s
			if _, err := fmt.Fprintf(w, "data: %s\n\n", b); err != nil {
				return
			}
			fl.Flush()
		}
		select {
		case <-r.Context().Done():
			return
		case <-t.C:
		}
	}
}

// decide answers one request: JSON {"id", "approve", "reason"}, with the
// page's token, same-origin.
func (g *gatePage) decide(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("X-Dal-Gate-Token") != g.token {
		http.Error(w, "missing or wrong X-Dal-Gate-Token: decide from the Gate page", http.StatusForbidden)
		return
	}
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" {
		http.Error(w, "cross-site decisions are refused", http.StatusForbidden)
		return
	}
	if o := r.Header.Get("Origin"); o != "" && o != "http://"+r.Host {
		http.Error(w, "cross-origin decisions are refused", http.StatusForbidden)
		return
	}
	if !strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
		http.Error(w, "send JSON", http.StatusUnsupportedMediaType)
		return
	}
	var d struct {
		ID      string `json:"id"`
		Approve bool   `json:"approve"`
		Reason  string `json:"reason"`
	}
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 4096)).Decode(&d); err != nil {
		http.Error(w, "not a decision", http.StatusBadRequest)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
	defer cancel()
	if err := gate.Decide(ctx, g.dir, d.ID, d.Approve, "dald gate page", d.Reason); err != nil {
		http.Error(w, err.Error(), http.StatusConflict)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write([]byte("{}\n"))
}

func (g *gatePage) page(w http.ResponseWriter, r *http.Request) {
	nonce := make([]byte, 16)
	rand.Read(nonce)
	n := hex.EncodeToString(nonce)
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'nonce-"+n+"'; style-src 'nonce-"+n+"'; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	gateTemplate.Execute(w, struct{ Token, Nonce string }{g.token, n})
}

var gateTemplate = template.Must(template.New("gate").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="dal-gate-token" content="{{.Token}}">
<title>dal · Gate</title>
<style nonce="{{.Nonce}}">
body{font:15px/1.45 system-ui,sans-serif;margin:2rem auto;max-width:60rem;padding:0 1rem;color:#1b1f24}
h1{font-size:1.3rem}.req{border:1px solid #d0d7de;border-radius:6px;padding:.8rem 1rem;margin:.8rem 0}
.kind{font-weight:600;text-transform:uppercase;font-size:.8rem;color:#57606a}.summary{font-family:ui-monospace,monospace;word-break:break-all}
.reason{color:#9a6700}.meta{color:#57606a;font-size:.85rem}pre{background:#f6f8fa;padding:.5rem;overflow:auto;max-height:14rem;font-size:.8rem}
button{margin-right:.5rem;padding:.3rem .9rem;border-radius:6px;border:1px solid #d0d7de;cursor:pointer}
.approve{background:#1f883d;color:#fff}.deny{background:#cf222e;color:#fff}#status{color:#57606a}
</style></head><body>
<h1>dal · Gate</h1>
<p id="status">connecting…</p>
<div id="list"></div>
<script nonce="{{.Nonce}}">
"use strict";
const token = document.querySelector('meta[name="dal-gate-token"]').content;
const list = document.getElementById("list"), status = document.getElementById("status");
function el(tag, cls, text) { const e = document.createElement(tag); if (cls) e.className = cls; if (text !== undefined) e.textContent = text; return e; }
async function decide(id, approve) {
  const r = await fetch("/gate/decide", {method: "POST", headers: {"Content-Type": "application/json", "X-Dal-Gate-Token": token},
    body: JSON.stringify({id: id, approve: approve})});
  if (!r.ok) { status.textContent = "could not decide " + id + ": " + (await r.text()); }
}
function render(runs) {
  list.replaceChildren();
  let n = 0;
  for (const run of runs) {
    for (const p of run.pending || []) {
      n++;
      const d = el("div", "req"); d.dataset.id = p.id;
      d.append(el("div", "kind", p.kind + " · " + p.id), el("div", "summary", p.summary));
      if (p.reason) d.append(el("div", "reason", p.reason));
      d.append(el("div", "meta", "run: " + run.run + " · waiting since " + new Date(p.since).toLocaleTimeString()));
      d.append(el("pre", "", JSON.stringify(p.input, null, 2)));
      const a = el("button", "approve", "Approve"), x = el("button", "deny", "Deny");
      a.dataset.act = "approve"; x.dataset.act = "deny";
      a.addEventListener("click", () => decide(p.id, true));
      x.addEventListener("click", () => decide(p.id, false));
      d.append(a, x);
      list.append(d);
    }
  }
  status.textContent = n === 0 ? "No call is waiting for a decision." : n + " call(s) waiting for a decision.";
}
const es = new EventSource("/gate/events");
es.onmessage = (e) => render(JSON.parse(e.data));
es.onerror = () => { status.textContent = "reconnecting…"; };
</script></body></html>
`))
