(function () {
  'use strict';
  var M = JSON.parse(document.getElementById('dal-data').textContent);
  var app = document.getElementById('app');
  var evals = M.evaluations || [];
  var problems = M.problems || [];
  var seq = M.seq || 0;
  var SVG = 'http://www.w3.org/2000/svg';
  var NONE = '(none)';
  var RUNS_SHOWN = 500;
  var runsShown = RUNS_SHOWN;

  // h builds an element; data is always text, never markup.
  function h(tag, attrs) {
    var el = document.createElement(tag);
    setAttrs(el, attrs);
    for (var i = 2; i < arguments.length; i++) add(el, arguments[i]);
    return el;
  }
  function s(tag, attrs) {
    var el = document.createElementNS(SVG, tag);
    setAttrs(el, attrs);
    for (var i = 2; i < arguments.length; i++) add(el, arguments[i]);
    return el;
  }
  function setAttrs(el, attrs) {
    if (!attrs) return;
    Object.keys(attrs).forEach(function (k) {
      var v = attrs[k];
      if (v === null || v === undefined || v === false) return;
      if (k === 'text') el.textContent = v;
      else if (k.slice(0, 2) === 'on') el.addEventListener(k.slice(2), v);
      else el.setAttribute(k, v === true ? '' : String(v));
    });
  }
  function add(el, c) {
    if (c === null || c === undefined || c === false) return;
    if (Array.isArray(c)) { c.forEach(function (x) { add(el, x); }); return; }
    el.appendChild(typeof c === 'object' ? c : document.createTextNode(String(c)));
  }
  function title(text) { return s('title', { text: text }); }

  // Formatting.
  function pct(x) { return (100 * x).toFixed(x === 1 || x === 0 ? 0 : 1) + '%'; }
  function ms(x) {
    if (x === null || x === undefined) return '–';
    if (x >= 60000) return (x / 60000).toFixed(1) + ' min';
    if (x >= 1000) return (x / 1000).toFixed(2) + ' s';
    return Math.round(x) + ' ms';
  }
  function num(x, d) { return x === null || x === undefined ? '–' : (+x).toFixed(d); }
  function big(x) {
    if (x === null || x === undefined) return '–';
    if (Math.abs(x) >= 1e6) return (x / 1e6).toFixed(2) + 'M';
    if (Math.abs(x) >= 1e4) return (x / 1e3).toFixed(1) + 'k';
    return String(Math.round(x * 10) / 10);
  }
  function date(t) { return t ? t.replace('T', ' ').replace(/:\d\dZ$/, ' UTC').replace(/Z$/, ' UTC') : 'no date'; }
  var MEASURES = [
    { key: 'd', name: 'duration', fmt: ms, mean: 'duration_ms' },
    { key: 't', name: 'tokens', fmt: big, mean: 'tokens' },
    { key: 's', name: 'score', fmt: function (x) { return num(x, 3); }, mean: 'score' }
  ];

  // Grouping.
  function sortEvals() {
    evals.sort(function (a, b) {
      return cmp(a.framework, b.framework) || cmp(a.task, b.task) || cmp(a.time || '', b.time || '') || cmp(a.dir, b.dir);
    });
  }
  function cmp(a, b) { return a < b ? -1 : a > b ? 1 : 0; }
  function uniq(list) { return list.filter(function (x, i) { return list.indexOf(x) === i; }).sort(); }
  function frameworks() { return uniq(evals.map(function (e) { return e.framework; })); }
  function tasks() { return uniq(evals.map(function (e) { return e.task; })); }
  function cellEvals(fw, task) { return evals.filter(function (e) { return e.framework === fw && e.task === task; }); }
  function latestDone(list) {
    for (var i = list.length - 1; i >= 0; i--) if (list[i].state === 'done') return list[i];
    return null;
  }
  function byKey(k) { for (var i = 0; i < evals.length; i++) if (evals[i].key === k) return evals[i]; return null; }
  function values(e, key) {
    var out = [];
    var col = e.runs[key] || [];
    for (var i = 0; i < col.length; i++) if (col[i] !== null && col[i] !== undefined) out.push(col[i]);
    return out;
  }

  // Routing: #/, #/task/T, #/cell/F/T, #/eval/KEY.
  function route() {
    var parts = location.hash.replace(/^#\/?/, '').split('/').map(decodeURIComponent);
    return parts;
  }
  function link(parts) { return '#/' + parts.map(encodeURIComponent).join('/'); }

  // Plots.
  function quantile(sorted, q) {
    if (!sorted.length) return NaN;
    var p = (sorted.length - 1) * q, lo = Math.floor(p), hi = Math.ceil(p);
    return sorted[lo] + (sorted[hi] - sorted[lo]) * (p - lo);
  }
  function plotWidth(el) { return Math.max(280, Math.min(1400, (el && el.clientWidth) || document.documentElement.clientWidth - 40)); }

  // violins draws one horizontal violin (kernel density, mirrored) with
  // its box (quartiles, median) per group: groups [{name, values}].
  function violins(measure, groups, width) {
    groups = groups.filter(function (g) { return g.values.length > 0; });
    var labelW = Math.min(160, Math.max(90, width * 0.25)), pad = 12, rowH = 46, top = 8, axisH = 26;
    var height = top + rowH * Math.max(groups.length, 1) + axisH;
    var svg = s('svg', { width: width, height: height, viewBox: '0 0 ' + width + ' ' + height, role: 'img', 'class': 'violin', 'data-plot': 'violin-' + measure.name,
      'aria-label': measure.name + ' per ' + (groups.length ? 'group: ' + groups.map(function (g) { return g.name; }).join(', ') : 'group: no runs') });
    if (!groups.length) {
      svg.appendChild(s('text', { x: width / 2, y: height / 2, 'text-anchor': 'middle', 'class': 'muted', text: 'no run has a ' + measure.name }));
      return svg;
    }
    var lo = Infinity, hi = -Infinity;
    groups.forEach(function (g) { g.values.forEach(function (v) { lo = Math.min(lo, v); hi = Math.max(hi, v); }); });
    if (hi === lo) { hi = lo + 1; lo = lo - 1; }
    var x0 = labelW, x1 = width - pad;
    function X(v) { return x0 + (v - lo) / (hi - lo) * (x1 - x0); }
    for (var k = 0; k <= 4; k++) {
      var v = lo + (hi - lo) * k / 4, x = X(v);
      svg.appendChild(s('line', { x1: x, x2: x, y1: top, y2: height - axisH, 'class': 'grid' }));
      svg.appendChild(s('text', { x: x, y: height - 8, 'text-anchor': k === 0 ? 'start' : k === 4 ? 'end' : 'middle', 'class': 'tick', text: measure.fmt(v) }));
    }
    groups.forEach(function (g, i) {
      var sorted = g.values.slice().sort(function (a, b) { return a - b; });
      var n = sorted.length, mid = top + rowH * i + rowH / 2, half = rowH / 2 - 5;
      var mean = sorted.reduce(function (a, b) { return a + b; }, 0) / n;
      var sd = Math.sqrt(sorted.reduce(function (a, b) { return a + (b - mean) * (b - mean); }, 0) / Math.max(n - 1, 1));
      var iqr = quantile(sorted, 0.75) - quantile(sorted, 0.25);
      var bw = 0.9 * Math.min(sd || Infinity, (iqr / 1.34) || Infinity) * Math.pow(n, -0.2);
      if (!isFinite(bw) || bw <= 0) bw = (hi - lo) / 50;
      var pts = 48, dens = [], maxD = 0;
      // A density over 10,000 runs is estimated from a binned histogram.
      var bins = new Array(200).fill(0);
      sorted.forEach(function (v) { bins[Math.min(199, Math.floor((v - lo) / (hi - lo) * 200))]++; });
      for (var p = 0; p <= pts; p++) {
        var at = lo + (hi - lo) * p / pts, d = 0;
        for (var b = 0; b < 200; b++) {
          if (!bins[b]) continue;
          var c = lo + (hi - lo) * (b + 0.5) / 200, z = (at - c) / bw;
          d += bins[b] * Math.exp(-0.5 * z * z);
        }
        dens.push(d); maxD = Math.max(maxD, d);
      }
      // The shape spans the runs' range only: [min, max].
      var upper = [], lower = [], xmin = X(sorted[0]), xmax = X(sorted[n - 1]);
      function edge(px, w) {
        upper.push(px.toFixed(1) + ',' + (mid - w).toFixed(1));
        lower.unshift(px.toFixed(1) + ',' + (mid + w).toFixed(1));
      }
      if (xmax - xmin < 2) { // every run measured the same
        edge(xmin - 4, 0); edge(xmin, half); edge(xmax + 4, 0);
      } else {
        edge(xmin, 0);
        for (p = 0; p <= pts; p++) {
          var px = X(lo + (hi - lo) * p / pts);
          if (px > xmin && px < xmax) edge(px, maxD ? dens[p] / maxD * half : 0);
        }
        edge(xmax, 0);
      }
      var g1 = s('g', { 'class': 'group', 'data-group': g.name });
      g1.appendChild(s('text', { x: 4, y: mid + 4, 'class': 'glabel', text: g.name.length > 22 ? g.name.slice(0, 21) + '…' : g.name }, title(g.name)));
      g1.appendChild(s('polygon', { points: upper.concat(lower).join(' '), 'class': 'shape c' + (i % 6) }));
      var q1 = quantile(sorted, 0.25), q3 = quantile(sorted, 0.75), med = quantile(sorted, 0.5);
      g1.appendChild(s('line', { x1: X(sorted[0]), x2: X(sorted[n - 1]), y1: mid, y2: mid, 'class': 'whisker' }));
      g1.appendChild(s('rect', { x: X(q1), y: mid - 5, width: Math.max(1, X(q3) - X(q1)), height: 10, 'class': 'box' },
        title(g.name + ': n ' + n + ', median ' + measure.fmt(med) + ', quartiles ' + measure.fmt(q1) + ' – ' + measure.fmt(q3) + ', range ' + measure.fmt(sorted[0]) + ' – ' + measure.fmt(sorted[n - 1]))));
      g1.appendChild(s('line', { x1: X(med), x2: X(med), y1: mid - 7, y2: mid + 7, 'class': 'median' }));
      g1.appendChild(s('text', { x: x1, y: mid - half + 9, 'text-anchor': 'end', 'class': 'tick', text: 'n ' + n }));
      svg.appendChild(g1);
    });
    return svg;
  }

  function violinPanel(groups, caption) {
    var wrap = h('section', { 'class': 'plots', id: 'plots', 'aria-label': caption });
    wrap.appendChild(h('h3', { text: caption }));
    var grid = h('div', { 'class': 'plotgrid' });
    wrap.appendChild(grid);
    MEASURES.forEach(function (m) {
      var fig = h('figure', { 'class': 'plot' }, h('figcaption', { text: m.name }));
      grid.appendChild(fig);
      later.push(function () {
        fig.appendChild(violins(m, groups.map(function (g) {
          return { name: g.name, values: [].concat.apply([], g.evals.map(function (e) { return values(e, m.key); })) };
        }), plotWidth(fig)));
      });
    });
    return wrap;
  }

  // trend draws one measure of a cell's evaluations in time order, with
  // the success rate's interval as a band and regressions marked.
  function trend(name, list, get, band, fmt, width, regressionOf) {
    var height = 170, l = 58, r = 14, t = 12, b = 30;
    var svg = s('svg', { width: width, height: height, viewBox: '0 0 ' + width + ' ' + height, role: 'img', 'class': 'trend', 'data-plot': 'trend-' + name, 'aria-label': name + ' over ' + list.length + ' evaluations' });
    var pts = list.map(function (e, i) { return { e: e, i: i, v: get(e), band: band ? band(e) : null }; }).filter(function (p) { return p.v !== null && p.v !== undefined; });
    if (!pts.length) {
      svg.appendChild(s('text', { x: width / 2, y: height / 2, 'text-anchor': 'middle', 'class': 'muted', text: 'no evaluation has a ' + name }));
      return svg;
    }
    var lo = Infinity, hi = -Infinity;
    pts.forEach(function (p) { lo = Math.min(lo, p.band ? p.band[0] : p.v); hi = Math.max(hi, p.band ? p.band[1] : p.v); });
    if (band) { lo = Math.min(lo, 0); hi = Math.max(hi, 1); }
    if (hi === lo) { hi += 1; lo = Math.max(0, lo - 1); }
    function X(i) { return list.length === 1 ? (l + width - r) / 2 : l + i / (list.length - 1) * (width - l - r); }
    function Y(v) { return t + (1 - (v - lo) / (hi - lo)) * (height - t - b); }
    for (var k = 0; k <= 4; k++) {
      var v = lo + (hi - lo) * k / 4;
      svg.appendChild(s('line', { x1: l, x2: width - r, y1: Y(v), y2: Y(v), 'class': 'grid' }));
      svg.appendChild(s('text', { x: l - 6, y: Y(v) + 4, 'text-anchor': 'end', 'class': 'tick', text: fmt(v) }));
    }
    if (band) {
      var up = [], down = [];
      pts.forEach(function (p) { if (p.band) { up.push(X(p.i) + ',' + Y(p.band[1])); down.unshift(X(p.i) + ',' + Y(p.band[0])); } });
      if (up.length) svg.appendChild(s('polygon', { points: up.concat(down).join(' '), 'class': 'band' }));
    }
    svg.appendChild(s('polyline', { points: pts.map(function (p) { return X(p.i) + ',' + Y(p.v); }).join(' '), 'class': 'line' }));
    pts.forEach(function (p) {
      var reg = regressionOf(p.e);
      var a = s('a', { href: link(['eval', p.e.key]) });
      a.appendChild(s('circle', { cx: X(p.i), cy: Y(p.v), r: reg ? 6 : 4, 'class': reg ? 'pt regression' : 'pt', 'data-regression': reg ? 'true' : null },
        title(date(p.e.time) + ': ' + name + ' ' + fmt(p.v) + (reg ? ' — regression (' + p.e.regressions.join(', ').replace(/_/g, ' ') + ') against the evaluation before' : ''))));
      svg.appendChild(a);
    });
    var first = list[0], last = list[list.length - 1];
    svg.appendChild(s('text', { x: l, y: height - 8, 'class': 'tick', text: date(first.time).slice(0, 16) }));
    if (list.length > 1) svg.appendChild(s('text', { x: width - r, y: height - 8, 'text-anchor': 'end', 'class': 'tick', text: date(last.time).slice(0, 16) }));
    return svg;
  }

  // ciBar draws a success rate in its interval on [0, 1].
  function ciBar(e) {
    var w = 120, svg = s('svg', { width: w, height: 12, viewBox: '0 0 ' + w + ' 12', 'class': 'cibar', 'aria-hidden': 'true' });
    svg.appendChild(s('rect', { x: 0, y: 5, width: w, height: 2, 'class': 'track' }));
    if (e.ci) svg.appendChild(s('rect', { x: e.ci[0] * w, y: 2, width: Math.max(2, (e.ci[1] - e.ci[0]) * w), height: 8, 'class': 'ci' }));
    svg.appendChild(s('rect', { x: Math.min(w - 3, e.rate * w - 1.5), y: 0, width: 3, height: 12, 'class': 'rate' }));
    return svg;
  }
  function relText(e) { return e.reliability === undefined || e.reliability === null ? 'reliability –' : 'reliability ' + num(e.reliability, 2) + ' ' + e.reliability_label; }
  function ciText(e) { return e.ci ? '[' + pct(e.ci[0]) + ', ' + pct(e.ci[1]) + ']' : ''; }
  function stateBadge(e) {
    if (e.state === 'running') return h('span', { 'class': 'badge running', text: 'running: ' + e.n + ' of ' + e.total + ' runs' });
    if (e.state === 'unmerged') return h('span', { 'class': 'badge unmerged', text: e.n + ' of ' + e.total + ' runs, not merged' });
    if (e.state === 'stopped') return h('span', { 'class': 'badge stopped', title: e.stopped, text: 'stopped after ' + e.n + ' of ' + e.total + ' runs: ' + (e.stopped.length > 120 ? e.stopped.slice(0, 119) + '…' : e.stopped) });
    return null;
  }
  function regressionBadge(e) {
    if (!e || !e.regressions || !e.regressions.length) return null;
    return h('span', { 'class': 'badge regression', 'data-regression': 'true', text: 'regression: ' + e.regressions.join(', ').replace(/_/g, ' ') });
  }

  var later = [];
  var liveStatus = h('span', { id: 'live', 'class': 'live', role: 'status', text: M.live ? 'live' : 'written ' });

  function header(crumbs) {
    var nav = h('nav', { 'aria-label': 'where you are', 'class': 'crumbs' });
    crumbs.forEach(function (c, i) {
      if (i) nav.appendChild(h('span', { 'class': 'sep', text: ' › ' }));
      nav.appendChild(c[1] ? h('a', { href: c[1], text: c[0] }) : h('span', { text: c[0] }));
    });
    return h('header', null, h('div', { 'class': 'top' }, h('h1', null, h('a', { href: '#/', text: 'dal dashboard' })), liveStatus), nav);
  }

  function problemList() {
    if (!problems.length) return null;
    return h('section', { id: 'problems', 'class': 'problems', 'aria-label': 'files skipped' },
      h('h3', { text: problems.length + (problems.length === 1 ? ' file was skipped' : ' files were skipped') }),
      h('ul', null, problems.map(function (p) { return h('li', { 'class': 'problem' }, h('code', { text: p.path }), ' ', p.problem); })));
  }

  function overview() {
    var fws = frameworks(), ts = tasks();
    var main = h('main', null);
    main.appendChild(h('h2', { tabindex: '-1', text: evals.length + ' evaluations: ' + fws.length + ' frameworks × ' + ts.length + ' tasks' }));
    main.appendChild(problemList());
    if (!evals.length) {
      main.appendChild(h('p', { 'class': 'muted', text: 'No evaluation under ' + M.roots.join(', ') + ' yet: run dal-exec consistency --label framework=F --label task=T --report DIR with DIR under one of them.' }));
      return main;
    }
    var table = h('table', { id: 'matrix', 'class': 'matrix', 'aria-label': 'latest evaluation per framework and task' });
    var head = h('tr', null, h('th', { scope: 'col', text: 'framework \\ task' }));
    ts.forEach(function (t) { head.appendChild(h('th', { scope: 'col' }, h('a', { href: link(['task', t]), 'class': 'tasklink', text: t, title: 'compare the frameworks on ' + t }))); });
    table.appendChild(h('thead', null, head));
    var body = h('tbody', null);
    fws.forEach(function (fw, r) {
      var tr = h('tr', null, h('th', { scope: 'row', text: fw }));
      ts.forEach(function (t, c) {
        var list = cellEvals(fw, t), td = h('td', null);
        if (list.length) {
          var e = latestDone(list), running = list.filter(function (x) { return x.state !== 'done'; });
          var a = h('a', { href: link(['cell', fw, t]), 'class': 'cell', 'data-r': r, 'data-c': c, 'data-framework': fw, 'data-task': t,
            'aria-label': fw + ' on ' + t + (e ? ': success ' + pct(e.rate) + ' ' + ciText(e) + ', ' + relText(e) + ', ' + e.verdict : ': running') });
          if (e) {
            a.appendChild(h('span', { 'class': 'rate', text: pct(e.rate) }));
            a.appendChild(h('span', { 'class': 'ci', text: ciText(e) }));
            a.appendChild(ciBar(e));
            a.appendChild(h('span', { 'class': 'rel ' + (e.reliability_label || '').toLowerCase(), text: relText(e) }));
            a.appendChild(h('span', { 'class': 'verdict ' + e.verdict, text: 'consensus: ' + e.verdict + (e.verdict === 'decided' ? ' (' + num(e.confidence, 2) + ')' : '') }));
            a.appendChild(h('span', { 'class': 'meta', text: e.n + ' runs · ' + date(e.time) + (list.length > 1 ? ' · ' + list.length + ' evaluations' : '') }));
            add(a, regressionBadge(e));
          }
          running.forEach(function (x) { add(a, stateBadge(x)); });
          td.appendChild(a);
        } else {
          td.appendChild(h('span', { 'class': 'empty', text: '–' }));
        }
        tr.appendChild(td);
      });
      body.appendChild(tr);
    });
    table.appendChild(body);
    main.appendChild(h('div', { 'class': 'scroll' }, table));
    main.appendChild(violinPanel(fws.map(function (fw) {
      return { name: fw, evals: ts.map(function (t) { return latestDone(cellEvals(fw, t)); }).filter(Boolean) };
    }), 'Runs of each framework’s latest evaluations, all tasks'));
    var running = evals.filter(function (e) { return e.state !== 'done'; });
    if (running.length) {
      main.appendChild(h('section', { id: 'running', 'aria-label': 'running evaluations' }, h('h3', { text: 'Running, stopped and unmerged' }),
        h('ul', null, running.map(function (e) { return h('li', null, h('a', { href: link(['eval', e.key]), text: e.framework + ' / ' + e.task + ' — ' + e.dir }), ' ', stateBadge(e)); }))));
    }
    return main;
  }

  function taskView(task) {
    var main = h('main', null);
    main.appendChild(h('h2', { tabindex: '-1', text: 'Frameworks on ' + task }));
    var fws = frameworks().filter(function (fw) { return cellEvals(fw, task).length; });
    var table = h('table', { id: 'compare', 'class': 'list' });
    table.appendChild(h('thead', null, h('tr', null, ['framework', 'success rate', 'interval', 'reliability', 'consensus', 'mean duration', 'mean tokens', 'mean score', 'runs', 'last'].map(function (x) { return h('th', { scope: 'col', text: x }); }))));
    var body = h('tbody', null);
    fws.forEach(function (fw) {
      var e = latestDone(cellEvals(fw, task));
      if (!e) { body.appendChild(h('tr', null, h('th', { scope: 'row' }, h('a', { href: link(['cell', fw, task]), text: fw })), h('td', { colspan: 9, text: 'running, no finished evaluation yet' }))); return; }
      body.appendChild(h('tr', { 'data-framework': fw },
        h('th', { scope: 'row' }, h('a', { href: link(['cell', fw, task]), text: fw })),
        h('td', null, pct(e.rate), ' ', ciBar(e)), h('td', { text: ciText(e) }),
        h('td', { text: num(e.reliability, 3) + ' ' + (e.reliability_label || '') }), h('td', { text: e.verdict }),
        h('td', { text: ms(e.means.duration_ms) }), h('td', { text: big(e.means.tokens) }), h('td', { text: num(e.means.score, 3) }),
        h('td', { text: e.n }), h('td', null, date(e.time), ' ', regressionBadge(e))));
    });
    table.appendChild(body);
    main.appendChild(h('div', { 'class': 'scroll' }, table));
    main.appendChild(violinPanel(fws.map(function (fw) {
      var e = latestDone(cellEvals(fw, task));
      return { name: fw, evals: e ? [e] : [] };
    }), 'Runs of each framework’s latest evaluation of ' + task));
    return main;
  }

  function cellView(fw, task) {
    var list = cellEvals(fw, task);
    var main = h('main', null);
    main.appendChild(h('h2', { tabindex: '-1', text: fw + ' on ' + task + ': ' + list.length + ' evaluations' }));
    var done = list.filter(function (e) { return e.state === 'done'; });
    var grid = h('div', { 'class': 'plotgrid trends', id: 'trends' });
    main.appendChild(h('section', { 'aria-label': 'trends' }, h('h3', { text: 'Over time (a red point: consistency compare against the evaluation before reports a regression)' }), grid));
    function reg(which) { return function (e) { return e.regressions && e.regressions.indexOf(which) >= 0; }; }
    [['success rate', function (e) { return e.rate; }, function (e) { return e.ci; }, pct, reg('success_rate')],
      ['reliability', function (e) { return e.reliability; }, null, function (x) { return num(x, 2); }, function () { return false; }],
      ['mean duration', function (e) { return e.means.duration_ms; }, null, ms, reg('duration')],
      ['mean tokens', function (e) { return e.means.tokens; }, null, big, reg('tokens')],
      ['mean score', function (e) { return e.means.score; }, null, function (x) { return num(x, 2); }, function () { return false; }]
    ].forEach(function (m) {
      var fig = h('figure', { 'class': 'plot' }, h('figcaption', { text: m[0] }));
      grid.appendChild(fig);
      later.push(function () { fig.appendChild(trend(m[0], done, m[1], m[2], m[3], plotWidth(fig), m[4])); });
    });
    main.appendChild(evalTable(list.slice().reverse()));
    return main;
  }

  function evalTable(list) {
    var table = h('table', { id: 'evaluations', 'class': 'list' });
    table.appendChild(h('thead', null, h('tr', null, ['evaluation', 'when', 'state', 'success rate', 'reliability', 'consensus', 'vs. before'].map(function (x) { return h('th', { scope: 'col', text: x }); }))));
    var body = h('tbody', null);
    list.forEach(function (e) {
      body.appendChild(h('tr', { 'data-key': e.key },
        h('td', null, h('a', { href: link(['eval', e.key]), 'class': 'rowlink', text: e.dir })), h('td', { text: date(e.time) }),
        h('td', null, stateBadge(e) || 'done'), h('td', { text: pct(e.rate) + ' ' + ciText(e) }),
        h('td', { text: num(e.reliability, 3) + ' ' + (e.reliability_label || '') }), h('td', { text: e.verdict || '–' }),
        h('td', null, regressionBadge(e) || (e.previous ? 'no significant regression' : '–'))));
    });
    table.appendChild(body);
    return h('div', { 'class': 'scroll' }, table);
  }

  function evalView(key) {
    var e = byKey(key), main = h('main', null);
    if (!e) {
      main.appendChild(h('h2', { tabindex: '-1', text: 'This evaluation is no longer in the dashboard’s directories' }));
      main.appendChild(h('p', null, h('a', { href: '#/', text: 'back to the overview' })));
      return main;
    }
    main.appendChild(h('h2', { tabindex: '-1', text: e.framework + ' on ' + e.task + ' — ' + e.dir }));
    var dl = h('dl', { 'class': 'facts', id: 'facts' });
    function fact(k, v) { dl.appendChild(h('dt', { text: k })); dl.appendChild(h('dd', null, v)); }
    fact('state', stateBadge(e) || 'done');
    fact('command', h('code', { text: (e.command || []).join(' ') }));
    if (e.labels) fact('labels', Object.keys(e.labels).sort().map(function (k) { return k + '=' + e.labels[k]; }).join(' '));
    fact('when', date(e.time));
    fact(e.state === 'done' ? 'success rate' : 'exited 0 so far', [pct(e.rate) + ' (' + e.successes + '/' + e.n + ') ' + ciText(e), ' ', ciBar(e)]);
    if (e.state === 'done') {
      fact('reliability', num(e.reliability, 3) + ' ' + (e.reliability_label || ''));
      fact('consensus', e.verdict + ' (' + e.strategy + ', confidence ' + num(e.confidence, 2) + ')' + (e.answer ? ': ' + e.answer : ''));
      if (e.previous) {
        var p = byKey(e.previous);
        fact('against the one before', [regressionBadge(e) || 'no significant regression', ' ', p ? h('a', { href: link(['eval', p.key]), text: p.dir }) : '',
          e.comparison ? ' (success p ' + num(e.comparison.success_p, 4) + ', duration p ' + num(e.comparison.duration_p, 4) + ', tokens p ' + num(e.comparison.tokens_p, 4) + ')' : '']);
      }
      if (e.report) fact('report', h('a', { href: e.report, text: 'report.html' }));
    }
    main.appendChild(dl);
    main.appendChild(violinPanel([{ name: e.framework, evals: [e] }], 'Runs of this evaluation'));
    var n = e.runs.i.length;
    var table = h('table', { id: 'runs', 'class': 'list', 'aria-label': 'runs' });
    table.appendChild(h('thead', null, h('tr', null, ['run', e.state === 'done' ? 'success' : 'exit 0', 'exit', 'duration', 'tokens', 'score', M.live ? 'show' : 'bundle (dal-exec show it)'].map(function (x) { return h('th', { scope: 'col', text: x }); }))));
    var body = h('tbody', null);
    for (var k = n - 1, shown = 0; k >= 0 && shown < runsShown; k--, shown++) {
      var i = e.runs.i[k], ok = e.runs.ok[k];
      body.appendChild(h('tr', { 'class': ok ? 'ok' : 'failed', 'data-run': i },
        h('td', { text: i }), h('td', { text: ok ? 'yes' : 'no' }), h('td', { text: e.runs.x[k] }), h('td', { text: ms(e.runs.d[k]) }),
        h('td', { text: big(e.runs.t[k]) }), h('td', { text: num(e.runs.s[k], 3) }),
        h('td', null, M.live ? h('a', { href: 'run/' + encodeURIComponent(e.key) + '/' + i, 'class': 'rowlink', text: 'run ' + i })
          : h('code', { text: 'runs/' + (i < 1000 ? ('00' + i).slice(-3) : i) }))));
    }
    table.appendChild(body);
    main.appendChild(h('h3', { text: n + ' runs, the latest first' + (n > runsShown ? ' (' + runsShown + ' shown)' : '') }));
    main.appendChild(h('div', { 'class': 'scroll' }, table));
    if (n > runsShown) main.appendChild(h('button', { type: 'button', onclick: function () { runsShown += RUNS_SHOWN; render(true); }, text: 'show ' + Math.min(RUNS_SHOWN, n - runsShown) + ' more' }));
    return main;
  }

  var lastRoute = '';
  function render(keepFocus) {
    var r = route(), view, crumbs = [['overview', r[0] ? '#/' : null]];
    var focusId = keepFocus && document.activeElement ? focusKey(document.activeElement) : null;
    var scroll = window.scrollY;
    later = [];
    if (r[0] === 'task' && r[1]) { crumbs.push([r[1], null]); view = taskView(r[1]); }
    else if (r[0] === 'cell' && r[2]) { crumbs.push([r[2], link(['task', r[2]])], [r[1], null]); view = cellView(r[1], r[2]); }
    else if (r[0] === 'eval' && r[1]) {
      var e = byKey(r[1]);
      if (e) crumbs.push([e.task, link(['task', e.task])], [e.framework, link(['cell', e.framework, e.task])]);
      crumbs.push([e ? e.dir : 'evaluation', null]); view = evalView(r[1]);
    } else view = overview();
    app.replaceChildren(header(crumbs), view);
    later.forEach(function (f) { f(); });
    if (focusId) {
      var el = app.querySelector(focusId);
      if (el) el.focus({ preventScroll: true });
      window.scrollTo(0, scroll);
    } else if (location.hash !== lastRoute) {
      var h2 = app.querySelector('h2');
      if (h2 && lastRoute !== '') h2.focus({ preventScroll: true });
      window.scrollTo(0, 0);
    }
    lastRoute = location.hash;
  }
  function focusKey(el) {
    if (el.dataset && el.dataset.r !== undefined) return '.cell[data-r="' + el.dataset.r + '"][data-c="' + el.dataset.c + '"]';
    if (el.getAttribute && el.getAttribute('href')) return 'a[href="' + CSS.escape(el.getAttribute('href')) + '"]';
    return null;
  }

  // Keyboard: arrows move between the matrix's cells and down a table's
  // rows, Escape goes up a level.
  document.addEventListener('keydown', function (ev) {
    if (ev.altKey || ev.ctrlKey || ev.metaKey) return;
    var a = document.activeElement;
    if (ev.key === 'Escape') {
      var r = route();
      if (r[0] === 'eval') { var e = byKey(r[1]); location.hash = e ? link(['cell', e.framework, e.task]) : '#/'; }
      else if (r[0]) location.hash = '#/';
      ev.preventDefault();
      return;
    }
    var dir = { ArrowLeft: [0, -1], ArrowRight: [0, 1], ArrowUp: [-1, 0], ArrowDown: [1, 0] }[ev.key];
    if (!dir || !a) return;
    if (a.classList.contains('cell')) {
      var rr = +a.dataset.r + dir[0], cc = +a.dataset.c + dir[1];
      var next = app.querySelector('.cell[data-r="' + rr + '"][data-c="' + cc + '"]');
      if (next) { next.focus(); ev.preventDefault(); }
      return;
    }
    if (a.classList.contains('rowlink') && dir[1] === 0) {
      var links = Array.prototype.slice.call(a.closest('table').querySelectorAll('a.rowlink'));
      var at = links.indexOf(a) + dir[0];
      if (at >= 0 && at < links.length) { links[at].focus(); ev.preventDefault(); }
    }
  });
  window.addEventListener('hashchange', function () { runsShown = RUNS_SHOWN; render(false); });
  var resizeTimer = 0;
  window.addEventListener('resize', function () { clearTimeout(resizeTimer); resizeTimer = setTimeout(function () { render(true); }, 150); });

  // Live: each evaluation that changes comes as an "eval" event.
  var pending = false;
  function changed() {
    if (pending) return;
    pending = true;
    requestAnimationFrame(function () { pending = false; sortEvals(); render(true); });
  }
  function stamp(text) { liveStatus.textContent = text; }
  if (M.live && window.EventSource) {
    var es = new EventSource('events?since=' + seq);
    es.addEventListener('eval', function (m) {
      var e = JSON.parse(m.data), at = -1;
      for (var i = 0; i < evals.length; i++) if (evals[i].key === e.key) at = i;
      if (at >= 0) evals[at] = e; else evals.push(e);
      changed();
    });
    es.addEventListener('gone', function (m) {
      var k = JSON.parse(m.data), was = byKey(k);
      evals = evals.filter(function (e) { return e.key !== k; });
      // A running evaluation that ended is its report now: its page
      // follows it.
      var r = route();
      if (was && r[0] === 'eval' && r[1] === k) {
        var next = evals.filter(function (e) { return e.id && e.id === was.id && e.state === 'done'; })[0];
        if (next) { lastRoute = link(['eval', next.key]); history.replaceState(null, '', link(['eval', next.key])); }
      }
      changed();
    });
    es.addEventListener('problems', function (m) { problems = JSON.parse(m.data); changed(); });
    es.addEventListener('seq', function (m) { seq = +m.data; app.dataset.seq = seq; stamp('live · updated ' + new Date().toLocaleTimeString()); });
    es.onopen = function () { stamp('live'); app.dataset.connected = 'true'; };
    es.onerror = function () { stamp('reconnecting…'); };
  } else {
    stamp(M.live ? 'live updates need EventSource' : 'snapshot, not live');
  }
  render(false);
  app.dataset.ready = 'true';
})();
