"use strict";
// dal show: renders the bundle data of #dal-data. Every string from the
// bundle reaches the DOM through text nodes (h() and text()), never as
// markup. Lists render only their visible rows (VList).
(function () {
  const t0 = performance.now();
  const P = JSON.parse(document.getElementById("dal-data").textContent);
  const app = document.getElementById("app");
  const REDACTED = "[REDACTED]";

  // h builds an element: attrs are properties or attributes; children
  // are nodes or strings (as text).
  function h(tag, attrs, ...kids) {
    const e = document.createElement(tag);
    for (const k in attrs || {}) {
      const v = attrs[k];
      if (v === undefined || v === null || v === false) continue;
      if (k === "class") e.className = v;
      else if (k === "text") e.textContent = v;
      else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
      else if (k === "dataset") Object.assign(e.dataset, v);
      else e.setAttribute(k, v === true ? "" : String(v));
    }
    for (const c of kids.flat(Infinity)) if (c !== null && c !== undefined && c !== false) e.append(c instanceof Node ? c : String(c));
    return e;
  }
  // marked is text with [REDACTED] and the search query marked.
  function marked(s, q) {
    const f = document.createDocumentFragment();
    s = String(s);
    const parts = s.split(REDACTED);
    parts.forEach((p, i) => {
      if (i > 0) f.append(h("mark", { class: "redacted", title: "redacted by dal: the bundle never held this value" }, REDACTED));
      if (q && p) {
        const lp = p.toLowerCase();
        let at = 0, j;
        while ((j = lp.indexOf(q, at)) >= 0) {
          f.append(p.slice(at, j), h("mark", { class: "hit" }, p.slice(j, j + q.length)));
          at = j + q.length;
        }
        f.append(p.slice(at));
      } else f.append(p);
    });
    return f;
  }
  const fmtMS = ms => ms == null ? "" : ms < 1 ? ms.toFixed(2) + " ms" : ms < 1000 ? Math.round(ms) + " ms" : (ms / 1000).toFixed(2) + " s";
  const fmtB = n => n == null || n < 0 ? "?" : n < 1024 ? n + " B" : n < 1 << 20 ? (n / 1024).toFixed(1) + " KiB" : (n / 1048576).toFixed(1) + " MiB";
  const kv = pairs => h("div", { class: "kv" }, pairs.filter(p => p && p[1] !== undefined && p[1] !== null && p[1] !== "").map(([k, v]) => [h("div", null, k), h("div", null, v instanceof Node ? v : marked(v))]));

  // ---- state
  const S = { run: 0, tab: P.runs.length > 1 ? "compare" : "timeline", q: "", sel: {}, hide: {}, log: "stdout", place: null };
  try { const th = localStorage.getItem("dal-show-theme"); if (th) document.documentElement.dataset.theme = th; } catch (e) { }
  const run = () => P.runs[S.run];

  // ---- virtual list: fixed-height rows, only the visible ones exist.
  function VList(cls, count, render, onPick, rowVar) {
    const box = h("div", { class: "vlist " + (cls || ""), tabindex: "0", role: "listbox" });
    const spacer = h("div", { class: "spacer" });
    box.append(spacer);
    const L = { box, count, sel: -1 };
    let rh = 30;
    function paint() {
      const top = box.scrollTop, hgt = box.clientHeight || 600;
      const from = Math.max(0, Math.floor(top / rh) - 8), to = Math.min(L.count, Math.ceil((top + hgt) / rh) + 8);
      spacer.textContent = "";
      for (let i = from; i < to; i++) {
        const r = render(i);
        r.classList.add("row");
        r.style.top = (i * rh) + "px";
        if (i === L.sel) r.classList.add("sel");
        r.dataset.i = i;
        spacer.append(r);
      }
    }
    L.measure = () => {
      const v = parseFloat(getComputedStyle(box).getPropertyValue(rowVar || "--row-h"));
      rh = v > 0 ? v : 30;
      spacer.style.height = (L.count * rh) + "px";
      paint();
    };
    L.select = (i, scroll) => {
      if (i < 0 || i >= L.count) return;
      L.sel = i;
      if (scroll) {
        if (i * rh < box.scrollTop) box.scrollTop = i * rh;
        else if ((i + 1) * rh > box.scrollTop + box.clientHeight) box.scrollTop = (i + 1) * rh - box.clientHeight;
      }
      paint();
      if (onPick) onPick(i);
    };
    L.center = i => { box.scrollTop = Math.max(0, i * rh - box.clientHeight / 2); };
    box.addEventListener("scroll", paint, { passive: true });
    box.addEventListener("click", e => { const r = e.target.closest(".row"); if (r && r.dataset.i !== undefined) L.select(+r.dataset.i, false); });
    L.paint = paint;
    requestAnimationFrame(L.measure);
    return L;
  }
  let current = null; // the list the keyboard moves in
  // reveal brings a detail into view on a narrow screen, where it sits
  // under its list.
  const reveal = el => { if (innerWidth < 900 && el.isConnected) el.scrollIntoView({ block: "start" }); };

  // ---- header, notices, cards, tabs
  function header() {
    const names = P.runs.map(r => r.name);
    const top = h("div", { class: "top" },
      h("h1", null, "dal show · " + names.join("  vs  ")),
      P.runs.length > 1 ? h("div", { class: "runsw", role: "group", "aria-label": "run" },
        P.runs.map((r, i) => h("button", { "aria-pressed": String(S.run === i), title: r.name, onclick: () => { S.run = i; render(); } }, i === 0 ? "A" : "B"))) : null,
      h("input", { id: "q", type: "search", placeholder: "Search  ( / )", "aria-label": "search", value: S.q, oninput: e => { S.q = e.target.value.toLowerCase(); renderPanel(); } }),
      h("button", { id: "theme", title: "light or dark (t)", onclick: toggleTheme }, "◐ theme"));
    return top;
  }
  function toggleTheme() {
    const d = document.documentElement;
    const dark = d.dataset.theme ? d.dataset.theme === "dark" : matchMedia("(prefers-color-scheme: dark)").matches;
    d.dataset.theme = dark ? "light" : "dark";
    try { localStorage.setItem("dal-show-theme", d.dataset.theme); } catch (e) { }
  }
  function notices() {
    const out = [];
    P.runs.forEach((r, i) => (r.notices || []).forEach(n => out.push(h("div", { class: "notice", role: "note" }, (P.runs.length > 1 ? (i ? "B: " : "A: ") : "") + n))));
    return out;
  }
  function cards() {
    const r = run(), s = r.summary, rep = r.replay.latest, b = r.boundary;
    const card = (k, v, cls, title) => h("div", { class: "card", title }, h("div", { class: "k" }, k), h("div", { class: "v " + (cls || "") }, v));
    return h("section", { class: "cards", id: "summary" },
      card("command", (s.command || []).join(" ") || "?"),
      card("exit code", String(s.exit_code) + (s.timed_out ? " (timed out)" : ""), s.exit_code === 0 ? "ok" : "bad"),
      card("mode · seed", (s.mode || "?") + " · " + s.seed),
      card("model", s.model || "—"),
      card("LLM calls · tokens", r.llm.length + " · " + s.tokens_in + " in / " + s.tokens_out + " out"),
      card("HTTP · files", r.http.length + " exchanges · " + r.files.length + " changes"),
      card("duration", fmtMS(s.duration_ms)),
      card("latest replay", rep ? rep.status + " (" + Math.round(rep.fidelity * 100) + "%)" : "not replayed", rep ? (rep.fidelity === 1 ? "ok" : "bad") : ""),
      card("coverage", b && b.coverage != null ? Math.round(b.coverage * 100) + "% · " + (b.escapes || []).length + " escapes" : "not observed", b && b.coverage === 1 ? "ok" : ""),
      card("signer", (r.signer.trusted ? "trusted · " : "NOT trusted · ") + r.signer.fingerprint.slice(0, 20) + "…", r.signer.trusted ? "ok" : "bad", r.signer.fingerprint));
  }
  const TABS = [["compare", "Compare"], ["timeline", "Timeline"], ["files", "Files"], ["output", "Output"], ["replay", "Replay"], ["coverage", "Coverage"], ["env", "Environment"]];
  function tabs() {
    return h("nav", { class: "tabs", role: "tablist" }, TABS.filter(([id]) => id !== "compare" || P.runs.length > 1).map(([id, name], i) =>
      h("button", { role: "tab", id: "tab-" + id, "aria-selected": String(S.tab === id), title: "key " + (i + 1), onclick: () => { S.tab = id; render(); } }, name)));
  }

  // ---- timeline
  function timelineRows(r) {
    const rows = [], q = S.q;
    const add = (group, items) => {
      if (!items.length) return;
      rows.push({ group: true, kind: group.kind, label: group.label + " (" + items.length + ")" });
      if (!S.hide[group.kind]) for (const it of items) if (!q || it.text.toLowerCase().includes(q)) rows.push(it);
    };
    const span = Math.max(1, r.summary.duration_ms || 0, ...r.http.map(x => x.start_ms + x.time_ms));
    const div = divergences(r);
    add({ kind: "proc", label: "Processes" }, r.streams.map((s, i) => ({ kind: "proc", i, label: "  ".repeat(s.depth) + "stream " + s.id, meta: s.runtime || "", text: s.id + " " + s.runtime })));
    add({ kind: "net", label: "LLM calls and HTTP" }, r.http.map((x, i) => {
      const c = x.llm >= 0 ? r.llm[x.llm] : null;
      const label = c ? c.model + "  " + (c.messages.length ? lastUser(c.messages) : "") : x.method + " " + x.url;
      const meta = c ? (c.tokens_in + "→" + c.tokens_out + " tok · " + fmtMS(x.time_ms)) : ((x.status || "ERR") + " · " + fmtB(x.resp_size) + " · " + fmtMS(x.time_ms));
      return { kind: c ? "llm" : "http", i, ref: c ? x.llm : i, label, meta, start: x.start_ms / span, dur: x.time_ms / span, text: x.method + " " + x.url + " " + (c ? c.model + " " + c.messages.map(m => m.text).join(" ") + " " + c.response.text : ""), div: div.has((c ? "llm:" + x.llm : "http:" + i)) || div.has("http:" + i) };
    }).concat(r.http.length ? [] : r.llm.map((c, i) => ({ kind: "llm", i: -1, ref: i, label: c.model + "  " + lastUser(c.messages), meta: c.tokens_in + "→" + c.tokens_out + " tok", text: c.model + " " + c.messages.map(m => m.text).join(" "), div: div.has("llm:" + i) }))));
    const its = r.iterations ? r.iterations.items : [];
    add({ kind: "iter", label: "Iterations" }, its.map((it, i) => ({ kind: "iter", i, label: "iteration " + it.seq + (it.seq === r.iterations.selected ? "  (selected)" : "") + (it.note ? "  " + it.note : ""), meta: it.score == null ? "no score" : "score " + it.score.toFixed(3), text: "iteration " + it.seq + " " + (it.note || "") })));
    add({ kind: "cp", label: "Checkpoints" }, r.checkpoints.map((c, i) => ({ kind: "cp", i, label: c.id + "  " + c.name, meta: c.files + " files · " + fmtB(c.bytes), text: c.id + " " + c.name + " " + (c.tag || "") })));
    add({ kind: "exec", label: "Execs and crossings" }, r.events.map((e, i) => ({ kind: e.kind === "exec" ? "exec" : e.kind, i, label: e.detail, meta: "pid " + e.pid, text: e.kind + " " + e.detail })));
    return rows;
  }
  const lastUser = ms => { for (let i = ms.length - 1; i >= 0; i--) if (ms[i].role === "user") return ms[i].text.slice(0, 200); return ms.length ? ms[ms.length - 1].text.slice(0, 200) : ""; };
  // divergences: the places of the latest replay's first divergences.
  function divergences(r) {
    const set = new Set();
    const v = r.replay.latest;
    if (v) for (const c of v.components) if (c.at) {
      if (c.at.kind === "llm") set.add("llm:" + c.at.index);
      if (c.at.kind === "http") set.add("http:" + c.at.index);
      if (c.at.tab === "files") set.add("file:" + c.at.item);
      if (c.at.tab === "output") set.add("log:" + c.at.item + ":" + c.at.line);
    }
    return set;
  }
  const BADGE = { llm: ["LLM", "b-llm"], http: ["HTTP", "b-http"], proc: ["proc", "b-proc"], exec: ["exec", "b-exec"], connect: ["connect", "b-connect"], open: ["open", "b-open"], iter: ["iter", "b-iter"], cp: ["ckpt", "b-cp"] };
  function timeline() {
    const r = run(), rows = timelineRows(r);
    const detail = h("section", { class: "detail", id: "detail", "aria-live": "polite" }, h("p", { class: "muted" }, "Select a row (click, or j/k and the arrow keys) to see it here."));
    const groups = [["proc", "Processes"], ["net", "LLM + HTTP"], ["iter", "Iterations"], ["cp", "Checkpoints"], ["exec", "Execs"]];
    const chips = h("div", { class: "chips", role: "group", "aria-label": "show" }, groups.map(([k, n]) =>
      h("button", { "aria-pressed": String(!S.hide[k]), onclick: () => { S.hide[k] = !S.hide[k]; renderPanel(); } }, n)));
    const L = VList("", rows.length, i => {
      const x = rows[i];
      if (x.group) return h("div", { class: "group", role: "presentation" }, x.label);
      const [bt, bc] = BADGE[x.kind] || [x.kind, "b-exec"];
      const el = h("div", { class: "k-" + x.kind + (x.div ? " divergent" : ""), role: "option", dataset: { kind: x.kind, index: String(x.ref !== undefined ? x.ref : x.i) } },
        h("span", { class: "badge " + bc }, bt), h("span", { class: "lbl" }, marked(x.label, S.q)),
        x.div ? h("span", { class: "badge b-bad", title: "the latest replay's first divergence" }, "diverged") : null,
        h("span", { class: "meta" }, x.meta || ""));
      if (x.start !== undefined) {
        const bar = h("span", { class: "bar" });
        bar.style.left = (Math.min(1, x.start) * 100) + "%";
        bar.style.width = (Math.min(1, x.dur) * 100) + "%";
        el.append(h("span", { class: "track", title: fmtMS(x.start * 1) }, bar));
      }
      return el;
    }, i => {
      const x = rows[i];
      if (x.group) return;
      S.sel.timeline = key(x);
      detail.replaceChildren(...detailOf(r, x));
      reveal(detail);
    });
    L.skip = i => rows[i].group;
    current = L;
    const want = S.sel.timeline;
    if (want) { const i = rows.findIndex(x => !x.group && key(x) === want); if (i >= 0) requestAnimationFrame(() => { L.center(i); L.select(i, false); }); }
    return [chips, h("div", { class: "split" }, L.box, detail)];
  }
  const key = x => x.kind + ":" + x.i + ":" + x.ref;
  function detailOf(r, x) {
    switch (x.kind) {
      case "llm": return llmDetail(r, x.ref);
      case "http": return httpDetail(r, x.i);
      case "proc": { const s = r.streams[x.i]; return [h("h2", null, "process stream " + s.id), kv([["parent", s.parent || "(root)"], ["runtime", s.runtime || "not shimmed"], ["reported", String(s.reported)], ["clock reads", String(s.reads)], ["slept (virtual)", fmtMS(s.sleep_ns / 1e6)], ["virtual now", fmtMS(s.now_ns / 1e6)], ["timers fired", String(s.timers)], ["random draws", s.draws ? Object.entries(s.draws).map(([k, v]) => k + ": " + v + " B").join(", ") : ""]])]; }
      case "iter": { const it = r.iterations.items[x.i]; return [h("h2", null, "iteration " + it.seq), kv([["score", it.score == null ? "none" : String(it.score)], ["source", it.source], ["accepted", String(it.accepted)], ["change", it.delta == null ? "" : String(it.delta)], ["note", it.note], ["dimensions", it.dims ? JSON.stringify(it.dims) : ""], ["artifacts", it.artifacts.join(", ")], ["selected", it.seq === r.iterations.selected ? "yes" : "no"]]), r.iterations.rationale && r.iterations.rationale.length ? [h("h3", null, "rationale"), h("pre", null, r.iterations.rationale.join("\n"))] : null]; }
      case "cp": { const c = r.checkpoints[x.i]; return [h("h2", null, "checkpoint " + c.id), kv([["name", c.name], ["tag", c.tag], ["note", c.note], ["files", String(c.files)], ["size", fmtB(c.bytes)], ["restore", "dal-exec checkpoint restore " + c.id]])]; }
      default: { const e = r.events[x.i]; return [h("h2", null, e.kind), kv([["pid", String(e.pid)], ["detail", e.detail]])]; }
    }
  }
  function llmDetail(r, i) {
    const c = r.llm[i];
    const place = placeFor(r, "llm", i);
    const out = [h("h2", null, "LLM call " + (i + 1) + " · " + c.model),
    kv([["file", c.file], ["provider · api", c.provider + " · " + c.api], ["url", c.url], ["status", String(c.status)], ["tokens", c.tokens_in + " in, " + c.tokens_out + " out"], ["latency", fmtMS(c.latency_ms)], ["first chunk", c.first_chunk_ms ? fmtMS(c.first_chunk_ms) : ""], ["finish", c.finish], ["error", c.error], ["parameters", c.params ? JSON.stringify(c.params) : ""]])];
    if (place) out.push(h("p", { class: "bad" }, "The latest replay diverged here first: " + place.first));
    out.push(h("h3", null, "prompt"));
    out.push(h("div", { class: "chat", id: "prompt" }, c.messages.map((m, j) => h("div", { class: "msg" + (place && place.at.msg === j ? " divergent" : ""), dataset: { role: m.role, index: String(j) } }, h("div", { class: "role" }, m.role), h("div", { class: "msg-text" }, marked(m.text, S.q))))));
    out.push(h("h3", null, "response"));
    out.push(h("div", { class: "chat", id: "response" }, h("div", { class: "msg", dataset: { role: "assistant" } }, h("div", { class: "role" }, "assistant" + (c.stream ? " · streamed, " + c.chunks + " events" : "")), h("div", { class: "msg-text" }, marked(c.response.text, S.q)))));
    if (c.http >= 0) {
      const x = r.http[c.http];
      if (x.chunks && x.chunks.length) out.push(chunks(x));
      out.push(h("p", null, h("button", { onclick: () => { const d = document.getElementById("detail"); d.replaceChildren(...httpDetail(r, c.http)); } }, "the HTTP exchange")));
    }
    return out;
  }
  function chunks(x) {
    return h("details", { open: true }, h("summary", null, "streamed chunks (" + x.chunks.length + (x.chunks_left ? ", " + x.chunks_left + " more in network.har" : "") + ")"),
      h("div", { class: "chunks mono" }, x.chunks.map(c => h("div", null, h("span", { class: "at" }, fmtMS(c.at_ms)), h("span", null, marked(c.text))))));
  }
  function httpDetail(r, i) {
    const x = r.http[i];
    const place = placeFor(r, "http", i);
    const hdrs = hs => h("table", null, h("tbody", null, (hs || []).map(([n, v]) => h("tr", null, h("td", { class: "mono" }, n), h("td", { class: "mono" }, marked(v))))));
    const body = (name, b) => b ? [h("h3", null, name + " body · " + fmtB(b.size) + (b.base64 ? " · base64 (not UTF-8)" : "") + (b.cut ? " · cut: the rest is in network.har" : "")), h("pre", { class: "diff" }, marked(b.text, S.q))] : null;
    return [h("h2", null, x.method + " " + x.url),
    place ? h("p", { class: "bad" }, "The latest replay diverged here first: " + place.first) : null,
    kv([["status", x.status ? x.status + " " + (x.status_text || "") : "no response"], ["seq", String(x.seq)], ["started", "+" + fmtMS(x.start_ms)], ["time", fmtMS(x.time_ms) + " (wait " + fmtMS(x.wait_ms) + ", receive " + fmtMS(x.receive_ms) + ")"], ["sizes", "request " + fmtB(x.req_size) + ", response " + fmtB(x.resp_size)], ["type", x.mime], ["via", x.via], ["error", x.error], ["refused", x.refused], ["answered by", x.answered], ["redacted", (x.redactions || []).join(", ")]]),
    x.llm >= 0 ? h("p", null, h("button", { onclick: () => document.getElementById("detail").replaceChildren(...llmDetail(r, x.llm)) }, "the LLM call")) : null,
    h("h3", null, "request headers"), hdrs(x.req_headers), body("request", x.req_body),
    h("h3", null, "response headers"), hdrs(x.resp_headers), body("response", x.resp_body),
    x.chunks && x.chunks.length ? chunks(x) : null];
  }
  function placeFor(r, kind, i) {
    const v = r.replay.latest;
    if (!v) return null;
    for (const c of v.components) if (c.at && c.at.kind === kind && c.at.index === i) return c;
    return null;
  }

  // ---- files
  function diffView(text) {
    const box = h("div", { class: "diff mono" });
    for (const l of text.split("\n")) {
      const c = l.startsWith("@@") ? "hunk" : l.startsWith("+++") || l.startsWith("---") ? "hunk" : l[0] === "+" ? "add" : l[0] === "-" ? "del" : "";
      box.append(h("div", { class: c }, l));
    }
    return box;
  }
  function files() {
    const r = run(), div = divergences(r);
    const fs = r.files.filter(f => !S.q || f.path.toLowerCase().includes(S.q));
    const detail = h("section", { class: "detail", id: "detail" }, h("p", { class: "muted" }, r.files.length ? "Select a file." : "The run changed no file."));
    const L = VList("", fs.length, i => {
      const f = fs[i], d = div.has("file:" + f.path);
      return h("div", { class: d ? "divergent" : "", role: "option", dataset: { kind: "file" } }, h("span", { class: "badge " + (f.op === "deleted" ? "b-bad" : f.op === "created" ? "b-ok" : "b-warn") }, f.op),
        h("span", { class: "lbl mono" }, marked(f.path, S.q)), d ? h("span", { class: "badge b-bad" }, "diverged") : null,
        h("span", { class: "meta" }, f.kind === "dir" ? "dir" : f.op === "deleted" ? fmtB(f.pre_size) : f.op === "modified" ? fmtB(f.pre_size) + " → " + fmtB(f.size) : fmtB(f.size)));
    }, i => {
      const f = fs[i];
      S.sel.files = f.path;
      const place = (r.replay.latest ? r.replay.latest.components : []).find(c => c.at && c.at.tab === "files" && c.at.item === f.path);
      detail.replaceChildren(h("h2", { class: "mono" }, f.path), place ? h("p", { class: "bad" }, "The latest replay diverged here first: " + place.first) : null,
        kv([["change", f.op + " " + f.kind], ["mode", f.mode], ["size", f.op === "modified" ? fmtB(f.pre_size) + " → " + fmtB(f.size) : fmtB(f.op === "deleted" ? f.pre_size : f.size)], ["link target", f.link_target], ["renamed from", f.renamed_from], ["hash", f.hash]]),
        f.binary ? h("p", { class: "muted" }, "Binary file: sizes only.") : f.no_diff ? h("p", { class: "muted" }, "No diff: " + f.no_diff + ".") : f.diff ? diffView(f.diff) : f.kind === "file" ? h("p", { class: "muted" }, "Empty, or the same text.") : null);
    });
    current = L;
    const want = S.sel.files;
    const i = want ? fs.findIndex(f => f.path === want) : -1;
    if (i >= 0) requestAnimationFrame(() => { L.center(i); L.select(i, false); });
    return h("div", { class: "split" }, L.box, detail);
  }

  // ---- output: logs, virtualized by line
  function output() {
    const r = run();
    if (!r.logs.length) return h("p", { class: "muted" }, "The bundle has no logs.");
    if (!r.logs.find(l => l.name === S.log)) S.log = r.logs[0].name;
    const lg = r.logs.find(l => l.name === S.log);
    const head = lg.head ? lg.head.replace(/\n$/, "").split("\n") : [];
    let lines = head.map((t, i) => ({ n: i + 1, t }));
    if (lg.omitted) {
      lines.push({ n: "", t: "… " + fmtB(lg.omitted) + " not shown here: read logs/" + lg.name + " in the bundle …", gap: true });
      lines = lines.concat(lg.tail.replace(/\n$/, "").split("\n").map(t => ({ n: "", t })));
    }
    const all = lines.length;
    if (S.q) lines = lines.filter(l => l.gap || l.t.toLowerCase().includes(S.q));
    const div = divergences(r);
    const sw = h("div", { class: "chips", role: "group", "aria-label": "log" }, r.logs.map(l => h("button", { "aria-pressed": String(l.name === S.log), onclick: () => { S.log = l.name; renderPanel(); } }, l.name + " · " + fmtB(l.size))));
    const L = VList("log", lines.length, i => {
      const l = lines[i];
      return h("div", { class: (l.gap ? "gap " : "") + (div.has("log:" + lg.name + ":" + l.n) ? "divergent" : "") }, h("span", { class: "n" }, String(l.n)), h("span", { class: "t" }, marked(l.t, S.q)));
    }, null);
    current = L;
    if (S.place && S.place.tab === "output") { const j = lines.findIndex(l => l.n === S.place.line); if (j >= 0) requestAnimationFrame(() => { L.center(j); L.select(j, false); }); S.place = null; }
    return [sw, h("p", { class: "muted" }, S.q ? lines.length + " of " + all + " lines match" : all + " lines" + (lg.omitted ? " (head and tail)" : "")), L.box];
  }

  // ---- replay
  function replay() {
    const r = run(), rep = r.replay, v = rep.latest;
    const out = [];
    if (!v) out.push(h("p", null, "No trusted replay of this bundle: run dal-exec replay " + r.name + "."));
    else {
      out.push(h("h2", null, "Latest replay: " + v.status + " · fidelity " + (v.fidelity * 100).toFixed(1) + "%"));
      out.push(kv([["outcome", v.file], ["at", v.at], ["signed by", v.signed_by], ["trusted replays", String(rep.count)]]));
      out.push(h("table", { id: "verdict" }, h("thead", null, h("tr", null, h("th", null, "component"), h("th", null, "verdict"), h("th", null, "first divergence"))),
        h("tbody", null, v.components.map(c => h("tr", null, h("td", null, c.name), h("td", { class: c.match ? "ok" : "bad" }, c.match ? "same" : "DIVERGED"),
          h("td", null, c.first ? h("pre", null, marked(c.first)) : "", c.at ? h("button", { onclick: () => goTo(c.at) }, "show in place") : null))))));
    }
    if (rep.unverified && rep.unverified.length) {
      out.push(h("h3", null, "not counted"));
      out.push(h("table", null, h("tbody", null, rep.unverified.map(u => h("tr", null, h("td", { class: "mono" }, u.file), h("td", null, u.reason))))));
    }
    return h("section", { class: "detail" }, out);
  }
  function goTo(at) {
    S.place = at;
    if (at.tab === "output") { S.tab = "output"; S.log = at.item; }
    else if (at.tab === "files") { S.tab = "files"; S.sel.files = at.item; }
    else { S.tab = "timeline"; S.hide = {}; S.sel.timeline = at.kind === "llm" ? "llm:" + run().llm[at.index].http + ":" + at.index : "http:" + at.index + ":" + at.index; if (at.kind === "llm" && run().llm[at.index].http < 0) S.sel.timeline = "llm:-1:" + at.index; }
    S.q = "";
    render();
  }

  // ---- coverage
  function coverage() {
    const b = run().boundary;
    if (!b) return h("p", { class: "muted" }, "The bundle has no syscalls.json.");
    const cats = Object.keys(b.categories || {}).sort();
    const top = Object.entries(b.syscalls || {}).sort((x, y) => y[1] - x[1]).slice(0, 30);
    return h("section", { class: "detail" },
      h("h2", null, "Boundary coverage: " + (b.coverage == null ? "not measured" : (b.coverage * 100).toFixed(1) + "%")),
      b.observed ? null : h("p", { class: "bad" }, "Not observed: " + (b.reason || "")),
      h("table", { id: "categories" }, h("thead", null, h("tr", null, ["category", "touched", "captured", "syscalls", "shim", "record"].map(c => h("th", null, c)))),
        h("tbody", null, cats.map(c => { const x = b.categories[c]; return h("tr", null, h("td", null, c), h("td", null, x.touched ? "yes" : "no"), h("td", { class: x.touched && !x.captured ? "bad" : "" }, x.captured ? "yes" : "no"), h("td", null, String(x.syscalls)), h("td", null, String(x.shim)), h("td", { class: "mono" }, x.record || "")); }))),
      h("h3", null, "escapes (" + (b.escapes || []).length + ")"),
      (b.escapes || []).length ? h("table", { id: "escapes" }, h("tbody", null, b.escapes.map(e => h("tr", null, h("td", { class: "bad" }, e.category), h("td", null, marked(e.detail, S.q)), h("td", { class: "muted" }, e.pid ? "pid " + e.pid : ""))))) : h("p", { class: "ok" }, "None: every crossing the run made is in the bundle."),
      (b.not_observable || []).length ? [h("h3", null, "not observable by syscall"), h("ul", null, b.not_observable.map(n => h("li", null, n)))] : null,
      b.dropped_events ? h("p", { class: "bad" }, b.dropped_events + " events were dropped by the tracer.") : null,
      top.length ? [h("h3", null, "syscalls (most frequent)"), h("table", null, h("tbody", null, top.map(([n, c]) => h("tr", null, h("td", { class: "mono" }, n), h("td", null, String(c))))))] : null);
  }

  // ---- environment
  function env() {
    const r = run(), s = r.summary, e = r.env;
    const table = (title, m) => m && Object.keys(m).length ? [h("h3", null, title), h("table", null, h("tbody", null, Object.keys(m).sort().filter(k => !S.q || (k + m[k]).toLowerCase().includes(S.q)).map(k => h("tr", null, h("td", { class: "mono" }, k), h("td", { class: "mono" }, marked(m[k], S.q))))))] : null;
    return h("section", { class: "detail" }, h("h2", null, r.name),
      kv([["command", (s.command || []).join(" ")], ["workspace", s.workspace], ["cwd", s.cwd], ["mode", s.mode], ["seed", String(s.seed)], ["epoch", s.epoch], ["started", s.started_at], ["duration", fmtMS(s.duration_ms)], ["host", s.host], ["dal", s.dal_version], ["snapshot", s.snapshot_id], ["captured", s.captured_at], ["self-contained", String(s.self_contained)], ["signer", r.signer.fingerprint + (r.signer.trusted ? " (trusted: " + r.signer.source + ")" : " (not a key you trust)")]]),
      (e.secrets || []).length ? [h("h3", null, "secrets (names only: their values were never stored)"), h("p", { class: "mono" }, e.secrets.join(", "))] : null,
      (e.scrubbed || []).length ? [h("h3", null, "files where a secret's value was replaced by " + REDACTED), h("p", { class: "mono" }, e.scrubbed.join(", "))] : null,
      table("guard rails", e.guard_rails), table("inherited", e.inherited), table("kept", e.kept), table("runtimes", e.runtimes),
      (e.denied_writes || []).length ? [h("h3", null, "writes refused"), h("pre", null, e.denied_writes.join("\n"))] : null,
      (e.blocked || []).length ? [h("h3", null, "connections blocked"), h("pre", null, e.blocked.join("\n"))] : null);
  }

  // ---- compare
  function compare() {
    const C = P.compare, A = P.runs[0], B = P.runs[1];
    const st = s => h("span", { class: "st s-" + s }, s.replace("_", " "));
    const label = (r, i) => { if (i < 0) return "—"; const x = r.http[i]; return x.llm >= 0 ? "LLM " + r.llm[x.llm].model + " · " + lastUser(r.llm[x.llm].messages) : x.method + " " + x.url + " · " + (x.status || "ERR"); };
    const pairs = C.timeline.filter(p => !S.q || (label(A, p.a) + " " + label(B, p.b)).toLowerCase().includes(S.q));
    const detail = h("section", { class: "detail", id: "detail" }, h("p", { class: "muted" }, "Select a row to see both sides."));
    const L = VList("pairs", pairs.length, i => {
      const p = pairs[i];
      return h("div", { class: "pair", role: "option", dataset: { kind: p.kind } }, h("span", null, marked(label(A, p.a), S.q)), st(p.state), h("span", null, marked(label(B, p.b), S.q)));
    }, i => {
      const p = pairs[i];
      const side = (r, j) => j < 0 ? [h("p", { class: "muted" }, "—")] : r.http[j].llm >= 0 ? llmDetail(r, r.http[j].llm) : httpDetail(r, j);
      const lp = p.kind === "llm" && p.a >= 0 && p.b >= 0 ? C.llm[A.http[p.a].llm] : null;
      detail.replaceChildren(lp && A.http[p.a].llm === B.http[p.b].llm ? llmPair(lp) : "", h("div", { class: "sbs" }, h("div", null, h("h3", null, "A"), side(A, p.a)), h("div", null, h("h3", null, "B"), side(B, p.b))));
    }, "--pair-h");
    current = L;
    return [
      h("h2", null, "A: " + A.name + " · B: " + B.name),
      h("table", { id: "cmp-summary" }, h("thead", null, h("tr", null, h("th", null, ""), h("th", null, "A"), h("th", null, "B"))),
        h("tbody", null, C.summary.map(d => h("tr", { class: d.same ? "" : "s-changed" }, h("td", null, d.name), h("td", null, d.a), h("td", null, d.b))))),
      h("h3", null, "timelines, aligned (" + C.timeline.filter(p => p.state !== "same").length + " rows differ)"),
      h("div", { class: "split" }, L.box, detail),
      h("h3", null, "LLM calls in order"),
      h("div", { id: "cmp-llm" }, C.llm.length ? C.llm.map((p, i) => h("details", { open: !p.same && i < 20 }, h("summary", null, "call " + (i + 1) + ": ", h("span", { class: p.same ? "s-same" : "s-changed" }, p.same ? "same" : p.a < 0 ? "only in B" : p.b < 0 ? "only in A" : "different")), llmPair(p))) : h("p", { class: "muted" }, "Neither run called an LLM.")),
      h("h3", null, "file changes"),
      h("table", { id: "cmp-files" }, h("tbody", null, C.files.map(f => h("tr", null, h("td", { class: "mono" }, marked(f.path, S.q)), h("td", null, f.a || "—"), st(f.state), h("td", null, f.b || "—"), h("td", null, f.diff ? h("details", null, h("summary", null, "diff A → B"), diffView(f.diff)) : ""))))),
      h("h3", null, "output"),
      h("table", null, h("tbody", null, C.logs.map(l => h("tr", null, h("td", null, l.name), h("td", { class: l.same ? "s-same" : "s-changed" }, l.same ? "same" : "different"), h("td", null, l.first ? h("pre", null, marked(l.first)) : "")))))];
  }
  function llmPair(p) {
    return h("div", { class: "llmpair" }, p.model ? h("p", { class: "s-changed" }, "model " + p.model) : null,
      p.messages.map(m => h("div", { class: "msg", dataset: { role: m.index < 0 ? "assistant" : m.role } }, h("div", { class: "role" }, (m.index < 0 ? "response" : "message " + (m.index + 1)) + " · " + m.role + " · ", h("span", { class: "s-" + m.state }, m.state.replace("_", " "))), m.diff ? diffView(m.diff) : null)));
  }

  // ---- render
  let panel;
  function renderPanel() {
    const f = { compare, timeline, files, output, replay, coverage, env }[S.tab] || timeline;
    current = null;
    const kids = f();
    panel.replaceChildren(...[].concat(kids));
  }
  function render() {
    panel = h("main", { id: "panel", role: "tabpanel" });
    app.replaceChildren(header(), ...notices(), cards(), tabs(), h("p", { class: "keys" }, "keys: / search · j k ↑ ↓ move · 1–7 tabs · t theme" + (P.runs.length > 1 ? " · a b run" : "") + " · Esc clear"), panel);
    renderPanel();
  }

  document.addEventListener("keydown", e => {
    const inInput = e.target && e.target.tagName === "INPUT";
    if (e.key === "Escape") { if (inInput) { e.target.value = ""; S.q = ""; e.target.blur(); renderPanel(); } return; }
    if (inInput || e.ctrlKey || e.metaKey || e.altKey) return;
    const tabs = TABS.filter(([id]) => id !== "compare" || P.runs.length > 1);
    if (e.key === "/") { e.preventDefault(); document.getElementById("q").focus(); }
    else if (e.key === "t") toggleTheme();
    else if (e.key >= "1" && e.key <= String(tabs.length)) { S.tab = tabs[+e.key - 1][0]; render(); }
    else if ((e.key === "a" || e.key === "b") && P.runs.length > 1) { S.run = e.key === "a" ? 0 : 1; render(); }
    else if (current && (e.key === "j" || e.key === "ArrowDown" || e.key === "k" || e.key === "ArrowUp")) {
      e.preventDefault();
      const d = e.key === "j" || e.key === "ArrowDown" ? 1 : -1;
      let i = current.sel + d;
      while (current.skip && i >= 0 && i < current.count && current.skip(i)) i += d;
      current.select(Math.max(0, Math.min(current.count - 1, i)), true);
    }
  });
  try { render(); } catch (e) {
    app.replaceChildren(h("p", { class: "notice" }, "This page could not show the bundle (" + e + "): its data is in the element #dal-data."));
    throw e;
  }
  document.documentElement.dataset.readyMs = String(Math.round(performance.now())); // since navigation start
  requestAnimationFrame(() => { document.documentElement.dataset.renderMs = String(Math.round(performance.now() - t0)); });
})();
