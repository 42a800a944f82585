'use strict';
// iteration() and checkpoint() of marks.js (docs/marks.md): written in this
// process with DAL_MARKS set, by concurrent child processes, and by a child
// under dal-register.js talking to a stand-in dald (strict mode), whose mark
// must carry the virtual clock.

const test = require('node:test');
const assert = require('node:assert');
const crypto = require('node:crypto');
const fs = require('node:fs');
const net = require('node:net');
const os = require('node:os');
const path = require('node:path');
const { spawn } = require('node:child_process');
const marks = require('../marks.js');
const { decode, frame } = require('../wire.js');

const shimDir = path.resolve(__dirname, '..');
const EPOCH = 1767225600000000000n;
const realClock = { now: () => BigInt(Date.now()) * 1000000n };

// setup makes a workspace and a marks directory and points DAL_MARKS and
// DAL_WORKSPACE at them until t ends.
function setup(t) {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'dal-marks-'));
  const ws = path.join(tmp, 'ws');
  const dir = path.join(tmp, 'marks');
  fs.mkdirSync(path.join(ws, 'out'), { recursive: true });
  fs.mkdirSync(dir);
  const saved = { DAL_MARKS: process.env.DAL_MARKS, DAL_WORKSPACE: process.env.DAL_WORKSPACE };
  process.env.DAL_MARKS = dir;
  process.env.DAL_WORKSPACE = ws;
  const cwd = process.cwd();
  t.after(() => {
    process.chdir(cwd);
    for (const [k, v] of Object.entries(saved)) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
    fs.rmSync(tmp, { recursive: true, force: true });
  });
  const file = (rel, data, mode = 0o644, base = ws) => {
    const p = path.join(base, rel);
    fs.mkdirSync(path.dirname(p), { recursive: true });
    fs.writeFileSync(p, data);
    fs.chmodSync(p, mode);
    return p;
  };
  const onDisk = (kind, seq) => fs.readFileSync(path.join(dir, `${kind}s`, String(seq).padStart(4, '0'), 'mark.json'), 'utf8');
  return { tmp, ws, dir, file, onDisk };
}

const sha = (data) => crypto.createHash('sha256').update(data).digest('hex');

// parsed reads a mark.json, at_ns kept exact (as a string).
function parsed(text) {
  const at = /"at_ns": (\d+)\n\}\n$/.exec(text);
  assert.ok(at, `mark.json does not end with an integer at_ns:\n${text}`);
  return { ...JSON.parse(text), at_ns: BigInt(at[1]) };
}

test('two iterations are numbered 1 and 2, with copies, hashes and modes', (t) => {
  const s = setup(t);
  const report = s.file('out/report.md', '# draft 1\n', 0o640);
  const m1 = marks.iteration({ score: 0.5, artifacts: [report], dimensions: { validation: 1, completeness: 0.25 }, note: 'first' }, realClock);
  s.file('out/report.md', '# draft 2, longer\n', 0o600);
  const m2 = marks.iteration({ score: 0.75, artifacts: report }, realClock);
  assert.deepStrictEqual([m1.seq, m2.seq], [1, 2]);
  assert.deepStrictEqual(parsed(s.onDisk('iteration', 1)), m1);
  assert.deepStrictEqual(parsed(s.onDisk('iteration', 2)), m2);
  assert.deepStrictEqual(
    { v: m1.v, kind: m1.kind, score: m1.score, dimensions: m1.dimensions, note: m1.note, runtime: m1.runtime, pid: m1.pid },
    { v: 1, kind: 'iteration', score: 0.5, dimensions: { validation: 1, completeness: 0.25 }, note: 'first', runtime: 'node', pid: process.pid });
  assert.ok(!('state' in m2) && !('dimensions' in m2), 'empty fields are left out, as the Go writer does');
  for (const [m, data, mode] of [[m1, '# draft 1\n', 0o640], [m2, '# draft 2, longer\n', 0o600]]) {
    assert.deepStrictEqual(m.artifacts, [{ path: 'out/report.md', abs: report, file: 'files/0', sha256: sha(data), size: data.length, mode }]);
    assert.strictEqual(fs.readFileSync(path.join(s.dir, 'iterations', String(m.seq).padStart(4, '0'), 'files', '0'), 'utf8'), data);
  }
  assert.ok(m1.at_ns > 0n && m2.at_ns >= m1.at_ns);
  assert.ok(!fs.existsSync(path.join(s.dir, 'iterations', '0001', 'mark.json.tmp')));
});

test('at_ns is written as an exact integer', (t) => {
  const s = setup(t);
  const m = marks.iteration({ score: 1 }, { now: () => EPOCH + 123n });
  assert.strictEqual(m.at_ns, EPOCH + 123n);
  assert.match(s.onDisk('iteration', 1), /"at_ns": 1767225600000000123\n\}\n$/);
});

test('a directory expands to its regular files sorted by the bytes of their paths', (t) => {
  const s = setup(t);
  // '-' sorts before '/', capitals before lower case, U+FF21 before U+1F600
  // (UTF-8 order; UTF-16 order would put the emoji first)
  for (const rel of ['site/a/b.txt', 'site/a-c/x.txt', 'site/z.txt', 'site/a/deep/e.txt', 'site/B.txt', 'site/\u{1F600}.txt', 'site/\uFF21.txt']) {
    s.file(rel, rel);
  }
  fs.mkdirSync(path.join(s.ws, 'site', 'empty'));
  fs.symlinkSync(path.join(s.ws, 'site', 'z.txt'), path.join(s.ws, 'site', 'link.txt'));
  fs.symlinkSync(path.join(s.ws, 'site', 'a'), path.join(s.ws, 'site', 'linkdir'));
  const first = s.file('first.txt', '1');
  const m = marks.iteration({ score: 1, artifacts: [first, path.join(s.ws, 'site')] }, realClock);
  const want = ['first.txt', 'site/B.txt', 'site/a-c/x.txt', 'site/a/b.txt', 'site/a/deep/e.txt', 'site/z.txt', 'site/\uFF21.txt', 'site/\u{1F600}.txt'];
  assert.deepStrictEqual(m.artifacts.map((a) => a.path), want);
  assert.deepStrictEqual(m.artifacts.map((a) => a.file), want.map((_, i) => `files/${i}`));
  for (const a of m.artifacts) {
    assert.strictEqual(a.sha256, sha(fs.readFileSync(path.join(s.ws, a.path))));
    assert.strictEqual(a.sha256, sha(fs.readFileSync(path.join(s.dir, 'iterations', '0001', a.file))));
  }
});

test('paths are resolved against the cwd and stored relative to the workspace', (t) => {
  const s = setup(t);
  const inside = s.file('out/sub/r.txt', 'r');
  const outside = s.file('elsewhere.txt', 'e', 0o644, s.tmp);
  process.chdir(path.join(s.ws, 'out', 'sub'));
  const m = marks.iteration({ score: 0.1, artifacts: ['r.txt', '../../../elsewhere.txt', '.'] }, realClock);
  assert.deepStrictEqual(m.artifacts.map((a) => [a.path, a.abs]), [['out/sub/r.txt', inside], [outside, outside], ['out/sub/r.txt', inside]]);
  delete process.env.DAL_WORKSPACE;
  assert.strictEqual(marks.iteration({ score: 0.1, artifacts: 'r.txt' }, realClock).artifacts[0].path, inside, 'no workspace: absolute');
});

test('bad input throws and writes nothing', (t) => {
  const s = setup(t);
  const ok = s.file('ok.txt', 'ok');
  const fifo = path.join(s.tmp, 'fifo');
  require('node:child_process').execFileSync('mkfifo', [fifo]);
  const circular = [];
  circular.push(circular);
  const it = (o) => () => marks.iteration(o, realClock);
  const cp = (name, o) => () => marks.checkpoint(name, o, realClock);
  const cases = [
    ['score bool', it({ score: true, artifacts: [ok] }), TypeError],
    ['score string', it({ score: '0.5' }), TypeError],
    ['score above 1', it({ score: 1.5, artifacts: [ok] }), RangeError],
    ['score below 0', it({ score: -0.1 }), RangeError],
    ['score NaN', it({ score: NaN }), RangeError],
    ['dimension above 1', it({ dimensions: { validation: 2 } }), RangeError],
    ['dimension bool', it({ dimensions: { validation: true } }), TypeError],
    ['dimensions an array', it({ dimensions: [['a', 1]] }), TypeError],
    ['unknown option', it({ scores: 0.5 }), TypeError],
    ['options not an object', it(0.5), TypeError],
    ['missing artifact', it({ score: 0.5, artifacts: [ok, path.join(s.ws, 'nope')] }), 'ENOENT'],
    ['missing relative artifact', cp('c', { artifacts: ['nope.txt'] }), 'ENOENT'],
    ['artifact not a path', it({ score: 0.5, artifacts: [ok, 5] }), TypeError],
    ['artifacts not a list', it({ score: 0.5, artifacts: 5 }), TypeError],
    ['artifact a fifo', it({ score: 0.5, artifacts: [fifo] }), TypeError],
    ['state BigInt', cp('c', { state: { n: 1n } }), TypeError],
    ['state circular', cp('c', { state: circular }), TypeError],
    ['state a function', cp('c', { state: () => 1 }), TypeError],
    ['checkpoint without a name', cp('', { artifacts: [ok] }), TypeError],
    ['checkpoint name not a string', cp(undefined), TypeError],
    ['note not a string', it({ score: 0.5, note: 3 }), TypeError],
    ['tag not a string', cp('c', { tag: 1 }), TypeError],
  ];
  for (const [name, call, want] of cases) {
    try {
      assert.throws(call, (e) => (typeof want === 'string' ? e.code === want : e instanceof want && e.constructor === want), name);
      assert.deepStrictEqual(fs.readdirSync(s.dir), [], `${name}: something was written`);
    } finally {
      for (const e of fs.readdirSync(s.dir)) fs.rmSync(path.join(s.dir, e), { recursive: true });
    }
  }
});

test('numbers follow the highest directory; checkpoints count on their own', (t) => {
  const s = setup(t);
  fs.mkdirSync(path.join(s.dir, 'iterations', '0007'), { recursive: true }); // incomplete: its writer died
  fs.writeFileSync(path.join(s.dir, 'iterations', '0009'), ''); // not a directory
  fs.mkdirSync(path.join(s.dir, 'iterations', 'notes'));
  assert.strictEqual(marks.iteration({ score: 0.5 }, realClock).seq, 8);
  assert.strictEqual(marks.checkpoint('first', {}, realClock).seq, 1);
});

test('a checkpoint keeps its name, tag and state', (t) => {
  const s = setup(t);
  s.file('state/db.json', '{}');
  const state = { phase: 'build', done: [1, 2], nested: { ok: true, none: null } };
  const m = marks.checkpoint('phase-build', { artifacts: [path.join(s.ws, 'state')], state, tag: 'release', note: 'built' }, realClock);
  assert.deepStrictEqual(parsed(s.onDisk('checkpoint', 1)), m);
  assert.deepStrictEqual(
    { kind: m.kind, seq: m.seq, score: m.score, name: m.name, tag: m.tag, state: m.state, note: m.note },
    { kind: 'checkpoint', seq: 1, score: null, name: 'phase-build', tag: 'release', state, note: 'built' });
  assert.deepStrictEqual(m.artifacts.map((a) => a.path), ['state/db.json']);
  assert.ok(!fs.existsSync(path.join(s.dir, 'iterations')));
});

// run starts node with args and env (NODE_OPTIONS and DAL_* of this process
// removed) and resolves to { code, stdout, stderr }.
function run(args, env) {
  const e = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('DAL_') && k !== 'NODE_OPTIONS') e[k] = v;
  return new Promise((resolve, reject) => {
    const c = spawn(process.execPath, args, { env: { ...e, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    c.stdout.on('data', (d) => { stdout += d; });
    c.stderr.on('data', (d) => { stderr += d; });
    c.on('error', reject);
    c.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

test('concurrent processes get distinct numbers', async (t) => {
  const s = setup(t);
  const ok = s.file('ok.txt', 'ok');
  const per = 5;
  const code = `const dal = require(${JSON.stringify(path.join(shimDir, 'dal.js'))});
for (let i = 0; i < ${per}; i++) console.log(dal.iteration({ score: 0.5, artifacts: [${JSON.stringify(ok)}] }).seq);`;
  const runs = await Promise.all([0, 1, 2, 3].map(() => run(['-e', code], { DAL_MARKS: s.dir, DAL_WORKSPACE: s.ws })));
  const seqs = [];
  for (const r of runs) {
    assert.strictEqual(r.code, 0, r.stderr);
    seqs.push(...r.stdout.split('\n').filter(Boolean).map(Number));
  }
  assert.deepStrictEqual(seqs.sort((a, b) => a - b), Array.from({ length: 4 * per }, (_, i) => i + 1));
  for (const n of seqs) assert.strictEqual(parsed(s.onDisk('iteration', n)).seq, n);
});

test('outside dal nothing is written and the API returns null', async (t) => {
  const s = setup(t);
  const ok = s.file('ok.txt', 'ok');
  delete process.env.DAL_MARKS;
  assert.strictEqual(marks.iteration({ score: 0.5, artifacts: [ok] }, realClock), null);
  assert.strictEqual(marks.checkpoint('c', { artifacts: [ok], state: { a: 1 } }, realClock), null);
  const code = `const dal = require(${JSON.stringify(path.join(shimDir, 'dal.js'))});
console.log(JSON.stringify([dal.active, dal.iteration({ score: 0.5 }), dal.checkpoint('c')]));`;
  const r = await run(['-e', code], {});
  assert.strictEqual(r.code, 0, r.stderr);
  assert.deepStrictEqual(JSON.parse(r.stdout), [false, null, null]);
  assert.deepStrictEqual(fs.readdirSync(s.dir), []);
});

// fakeDald answers hello with a strict session and every other op with ok.
async function fakeDald(t, sock) {
  const server = net.createServer((c) => {
    let buf = Buffer.alloc(0);
    c.on('data', (d) => {
      buf = Buffer.concat([buf, d]);
      while (buf.length >= 4 && buf.length >= 4 + buf.readUInt32BE(0)) {
        const n = buf.readUInt32BE(0);
        const msg = decode(buf.subarray(4, 4 + n));
        buf = buf.subarray(4 + n);
        const reply = msg.op === 'hello'
          ? { id: msg.id, ok: true, stream: '0', mode: 'strict', seed: 7, epoch_ns: EPOCH, mono_ns: 1e9, quantum_ns: 1000, batch: 4096 }
          : { id: msg.id, ok: true };
        c.write(frame(reply));
      }
    });
    c.on('error', () => {});
  });
  await new Promise((resolve) => server.listen(sock, resolve));
  t.after(() => server.close());
}

test('under dal-register.js the mark carries the virtual clock', async (t) => {
  const s = setup(t);
  const sock = path.join(s.tmp, 'dald.sock');
  await fakeDald(t, sock);
  const code = `const dal = require(${JSON.stringify(path.join(shimDir, 'dal.js'))});
const before = dal.now();
const it = dal.iteration({ score: 0.5 });
const cp = dal.checkpoint('c', { state: [1] });
const after = dal.now();
console.log(JSON.stringify([dal.active, dal === globalThis[Symbol.for('dal')], String(before), String(it.at_ns), String(cp.at_ns), String(after)]));`;
  const r = await run(['-e', code], {
    NODE_OPTIONS: `--require ${path.join(shimDir, 'dal-register.js')}`,
    DAL_SOCKET: sock, DAL_SESSION: 's1', DAL_MARKS: s.dir,
  });
  assert.strictEqual(r.code, 0, r.stderr);
  assert.strictEqual(r.stderr, '');
  const [active, same, before, it, cp, after] = JSON.parse(r.stdout);
  assert.deepStrictEqual([active, same], [true, true]);
  assert.ok(BigInt(before) >= EPOCH && BigInt(before) < EPOCH + 1000000000n, before);
  // one clock read per mark, a quantum (1000 ns) each
  assert.deepStrictEqual([BigInt(it) - BigInt(before), BigInt(cp) - BigInt(it), BigInt(after) - BigInt(cp)], [1000n, 1000n, 1000n]);
  assert.strictEqual(parsed(s.onDisk('iteration', 1)).at_ns, BigInt(it));
  assert.strictEqual(parsed(s.onDisk('checkpoint', 1)).at_ns, BigInt(cp));
});
