'use strict';
// marks.js: iteration() and checkpoint(), the marks an agent writes into
// $DAL_MARKS to tell dal-exec about its refinement iterations and its
// checkpoints. The protocol is docs/marks.md (the Go reference is
// internal/marks); dal-register.js and dal.js expose these functions on the
// dal object, bound to the shim's clock.
//
//   iteration({ score, artifacts, dimensions, note, name }, clock) -> mark | null
//   checkpoint(name, { artifacts, state, tag, note }, clock)       -> mark | null
//   phase(name, { note }, clock)                                     -> mark | null
//
// A mark is a numbered directory claimed with mkdir (atomic: concurrent
// writers, threads or processes, never share a number), copies of the
// artifacts under files/, then mark.json (written as mark.json.tmp, then
// renamed). Everything is checked before a number is claimed: bad input
// throws (TypeError for a wrong type, RangeError for a value outside [0, 1],
// an ENOENT error for a missing artifact) and writes nothing. Without
// DAL_MARKS in the environment both return null and do nothing.
//
// clock.now() returns the realtime clock in ns as a BigInt: the shim's
// (virtual) clock, read once per mark, so record and replay write the same
// at_ns; it is written to JSON as an exact integer. The returned mark is the
// object written to mark.json, with at_ns as a BigInt. Everything is
// synchronous; no randomness is used.

const fs = require('fs');
const path = require('path');
const crypto = require('crypto');

const VERSION = 1;
const CHUNK = 1 << 20;

function iteration(opts, clock) {
  const o = options('dal.iteration', opts, ['score', 'artifacts', 'dimensions', 'note', 'name']);
  return write('iteration', {
    score: o.score, dimensions: o.dimensions, name: o.name, tag: undefined, state: undefined,
    note: o.note, artifacts: o.artifacts,
  }, clock);
}

function checkpoint(name, opts, clock) {
  if (typeof name !== 'string' || name === '') {
    throw new TypeError(`dal.checkpoint: the name must be a non-empty string, got ${describe(name)}`);
  }
  const o = options('dal.checkpoint', opts, ['artifacts', 'state', 'tag', 'note']);
  return write('checkpoint', {
    score: undefined, dimensions: undefined, name, tag: o.tag, state: o.state, note: o.note,
    artifacts: o.artifacts,
  }, clock);
}

function phase(name, opts, clock) {
  if (typeof name !== 'string' || name === '') {
    throw new TypeError(`dal.phase: the name must be a non-empty string, got ${describe(name)}`);
  }
  const o = options('dal.phase', opts, ['note']);
  return write('phase', {
    score: undefined, dimensions: undefined, name, tag: undefined, state: undefined, note: o.note,
    artifacts: undefined,
  }, clock);
}

function options(where, opts, known) {
  if (opts === undefined || opts === null) return {};
  if (typeof opts !== 'object' || Array.isArray(opts)) {
    throw new TypeError(`${where}: expected an options object, got ${describe(opts)}`);
  }
  for (const k of Object.keys(opts)) {
    if (!known.includes(k)) throw new TypeError(`${where}: unknown option ${k} (known: ${known.join(', ')})`);
  }
  return opts;
}

function write(kind, f, clock) {
  const where = `dal.${kind}`;
  const root = process.env.DAL_MARKS;
  if (!root) return null;

  let score = null;
  if (f.score !== undefined && f.score !== null) score = unit(where, 'the score', f.score);
  const dims = {};
  let nDims = 0;
  if (f.dimensions !== undefined && f.dimensions !== null) {
    if (typeof f.dimensions !== 'object' || Array.isArray(f.dimensions)) {
      throw new TypeError(`${where}: dimensions must be an object of name -> number in [0, 1], got ${describe(f.dimensions)}`);
    }
    for (const [k, v] of Object.entries(f.dimensions)) {
      if (k === '') throw new TypeError(`${where}: dimension names must be non-empty`);
      dims[k] = unit(where, `dimension ${JSON.stringify(k)}`, v);
      nDims++;
    }
  }
  for (const what of ['name', 'tag', 'note']) {
    if (f[what] !== undefined && f[what] !== null && typeof f[what] !== 'string') {
      throw new TypeError(`${where}: the ${what} must be a string, got ${describe(f[what])}`);
    }
  }
  let state;
  if (f.state !== undefined && f.state !== null) {
    let text;
    try {
      text = JSON.stringify(f.state);
    } catch (e) {
      throw new TypeError(`${where}: the state must be JSON-serializable (${e.message})`);
    }
    if (text === undefined) throw new TypeError(`${where}: the state must be JSON-serializable, got ${describe(f.state)}`);
    state = JSON.parse(text);
  }
  const files = expand(where, f.artifacts);

  // Valid: read the clock once, claim a number, copy, then publish.
  const atNs = BigInt(clock && typeof clock.now === 'function' ? clock.now() : BigInt(Date.now()) * 1000000n);
  const ws = process.env.DAL_WORKSPACE || '';
  const [dir, seq] = claim(path.join(root, `${kind}s`));
  try {
    fs.mkdirSync(path.join(dir, 'files'));
    const artifacts = files.map((src, i) => {
      const { sha256, size, mode } = copy(src, path.join(dir, 'files', String(i)));
      return { path: relTo(ws, src), abs: src, file: `files/${i}`, sha256, size, mode };
    });
    // Empty optional fields are left out, as the Go writer does.
    const mark = { v: VERSION, kind, seq, score };
    if (nDims > 0) mark.dimensions = dims;
    if (f.name) mark.name = f.name;
    if (f.tag) mark.tag = f.tag;
    if (state !== undefined) mark.state = state;
    if (f.note) mark.note = f.note;
    mark.artifacts = artifacts;
    mark.runtime = 'node';
    mark.pid = process.pid;
    // at_ns is a BigInt (above 2**53): spliced in as the last field by hand.
    const body = JSON.stringify(mark, null, 2);
    const text = `${body.slice(0, body.length - 2)},\n  "at_ns": ${atNs.toString()}\n}\n`;
    const tmp = path.join(dir, 'mark.json.tmp');
    fs.writeFileSync(tmp, text);
    fs.renameSync(tmp, path.join(dir, 'mark.json'));
    mark.at_ns = atNs;
    return mark;
  } catch (e) {
    // A mark that cannot be completed is removed, not left half-written.
    try { fs.rmSync(dir, { recursive: true, force: true }); } catch { /* keep the first error */ }
    throw e;
  }
}

function unit(where, what, v) {
  if (typeof v !== 'number') throw new TypeError(`${where}: ${what} must be a number in [0, 1], got ${describe(v)}`);
  if (!(v >= 0 && v <= 1)) throw new RangeError(`${where}: ${what} must be a number in [0, 1], got ${v}`);
  return v;
}

function describe(v) {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'an array';
  if (typeof v === 'string') return JSON.stringify(v);
  if (typeof v === 'object' || typeof v === 'function' || typeof v === 'symbol') return `a ${typeof v}`;
  return `${typeof v} ${String(v)}`;
}

// expand returns the absolute paths of the regular files named by artifacts
// (a path or an array of paths; files or directories, relative to the current
// directory), directories expanded to their regular files sorted by path.
function expand(where, artifacts) {
  if (artifacts === undefined || artifacts === null) return [];
  const list = typeof artifacts === 'string' || artifacts instanceof URL || Buffer.isBuffer(artifacts) ? [artifacts] : artifacts;
  if (!Array.isArray(list)) throw new TypeError(`${where}: artifacts must be a path or an array of paths, got ${describe(artifacts)}`);
  const out = [];
  for (let p of list) {
    if (p instanceof URL) p = require('url').fileURLToPath(p);
    else if (Buffer.isBuffer(p)) p = p.toString();
    if (typeof p !== 'string' || p === '') throw new TypeError(`${where}: an artifact must be a path, got ${describe(p)}`);
    const abs = path.resolve(p);
    let st;
    try {
      st = fs.statSync(abs);
    } catch (e) {
      if (e.code !== 'ENOENT') throw e;
      const err = new Error(`${where}: artifact ${abs} does not exist`);
      Object.assign(err, { code: 'ENOENT', errno: e.errno, syscall: 'stat', path: abs });
      throw err;
    }
    let found;
    if (st.isFile()) {
      found = [abs];
    } else if (st.isDirectory()) {
      found = [];
      walk(abs, found);
      found.sort(byBytes);
    } else {
      throw new TypeError(`${where}: artifact ${abs} is not a regular file or a directory`);
    }
    for (const q of found) fs.accessSync(q, fs.constants.R_OK);
    out.push(...found);
  }
  return out;
}

// walk appends the regular files under d; symbolic links are not followed.
function walk(d, found) {
  for (const e of fs.readdirSync(d, { withFileTypes: true })) {
    const p = path.join(d, e.name);
    if (e.isDirectory()) walk(p, found);
    else if (e.isFile()) found.push(p);
  }
}

// byBytes orders paths by their UTF-8 bytes, as the Go writer does.
function byBytes(a, b) {
  return Buffer.compare(Buffer.from(a), Buffer.from(b));
}

// relTo returns p relative to the workspace with / separators when inside
// it, else p.
function relTo(ws, p) {
  if (!ws) return p;
  const rel = path.relative(path.resolve(ws), p);
  if (rel === '..' || rel.startsWith(`..${path.sep}`) || path.isAbsolute(rel)) return p;
  return rel.split(path.sep).join('/');
}

function copy(src, dst) {
  const h = crypto.createHash('sha256');
  const buf = Buffer.allocUnsafe(CHUNK);
  let size = 0;
  const fd = fs.openSync(src, 'r');
  try {
    const mode = fs.fstatSync(fd).mode & 0o777;
    const out = fs.openSync(dst, 'wx', 0o644);
    try {
      for (;;) {
        const n = fs.readSync(fd, buf, 0, CHUNK, null);
        if (n === 0) break;
        h.update(buf.subarray(0, n));
        let off = 0;
        while (off < n) off += fs.writeSync(out, buf, off, n - off);
        size += n;
      }
    } finally {
      fs.closeSync(out);
    }
    return { sha256: h.digest('hex'), size, mode };
  } finally {
    fs.closeSync(fd);
  }
}

// claim makes the next %04d directory in parent with mkdir; returns [path, n].
function claim(parent) {
  fs.mkdirSync(parent, { recursive: true });
  let n = 1;
  for (const e of fs.readdirSync(parent, { withFileTypes: true })) {
    if (e.isDirectory() && /^[0-9]+$/.test(e.name)) n = Math.max(n, Number(e.name) + 1);
  }
  for (;; n++) {
    const d = path.join(parent, String(n).padStart(4, '0'));
    try {
      fs.mkdirSync(d);
      return [d, n];
    } catch (e) {
      if (e.code !== 'EEXIST') throw e;
    }
  }
}

module.exports = { iteration, checkpoint, phase };
