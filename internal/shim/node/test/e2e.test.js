'use strict';
// End-to-end: Node agents run under the real `dal-exec run` (and its
// embedded dald). DAL_EXEC names the binary; the default is <repo>/bin/dal-exec
// (build it with `go build -o bin/ ./cmd/...`). A missing binary, or one that
// embeds a different Node shim than this working tree, fails the tests: they
// would otherwise test something else than the code next to them.

const test = require('node:test');
const assert = require('node:assert');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { spawnSync } = require('node:child_process');

const repo = path.resolve(__dirname, '..', '..', '..', '..');
const dalExec = process.env.DAL_EXEC || path.join(repo, 'bin', 'dal-exec');
const fixtureDir = fs.mkdtempSync(path.join(os.tmpdir(), 'dal-node-fixtures-'));
const fixture = (name) => path.join(fixtureDir, name);
const shimDir = path.resolve(__dirname, '..');

// The agents the tests run. They are written to a temporary directory at
// startup: .js files under test/ would themselves be run as test files by
// `node --test`.
const FIXTURES = {
  // every clock and random value the shim virtualizes, and a reading
  // argv[2] ms later (default 1500)
  'values.js': String.raw`
const c = require('crypto');
const out = {
  clock: {
    dateNow: Date.now(),
    newDate: new Date().toISOString(),
    dateString: Date(),
    perfNow: performance.now(),
    timeOrigin: performance.timeOrigin,
    hrtime: process.hrtime(),
    hrtimeBigint: String(process.hrtime.bigint()),
    uptime: process.uptime(),
  },
  random: {
    math: [Math.random(), Math.random(), Math.random()],
    randomUUID: c.randomUUID(),
    randomBytes: c.randomBytes(16).toString('hex'),
    getRandomValues: Buffer.from(c.getRandomValues(new Uint8Array(16))).toString('hex'),
    webGetRandomValues: Buffer.from(globalThis.crypto.getRandomValues(new Uint8Array(16)).buffer).toString('hex'),
    webRandomUUID: globalThis.crypto.randomUUID(),
    randomInt: c.randomInt(2 ** 47),
    randomFillSync: c.randomFillSync(Buffer.alloc(16)).toString('hex'),
  },
};
setTimeout(() => {
  out.clock.later = Date.now();
  out.clock.laterPerf = performance.now();
  console.log(JSON.stringify(out));
}, Number(process.argv[2] || 1500));
`,
  // timers of 300, 100, 100, 2000 ms
  'timer-order.js': String.raw`
const log = [];
setTimeout(() => log.push('c'), 300);
setTimeout(() => log.push('a'), 100);
setTimeout(() => log.push('b'), 100);
setTimeout(() => { log.push('d'); console.log(log.join(',')); }, 2000);
`,
  // an agent calling its own HTTP server with http.get and fetch() while a
  // 10 s timeout is pending; the handler answers after a 50 ms timer
  'http.js': String.raw`
const http = require('http');
const t0 = Date.now();
const guard = setTimeout(() => { console.log('timeout fired before the responses'); process.exit(3); }, 10000);
const server = http.createServer((req, res) => {
  setTimeout(() => res.end('hello ' + req.url), 50);
});
server.listen(0, '127.0.0.1', () => {
  const base = 'http://127.0.0.1:' + server.address().port;
  http.get(base + '/get', (res) => {
    let body = '';
    res.on('data', (d) => { body += d; });
    res.on('end', async () => {
      console.log('http.get ' + res.statusCode + ' ' + body + ' after ' + (Date.now() - t0) + ' ms');
      const r = await fetch(base + '/fetch', { signal: AbortSignal.timeout(5000) });
      console.log('fetch ' + r.status + ' ' + (await r.text()) + ' after ' + (Date.now() - t0) + ' ms');
      clearTimeout(guard);
      server.close();
      server.closeAllConnections();
    });
  });
});
`,
  // a Node parent starting two Node children at once (spawn and exec)
  'parent.js': String.raw`
const cp = require('child_process');
const code = 'console.log(process.env.DAL_STREAM)';
const results = [];
let done = 0;
function finish(i, out) {
  results[i] = out.trim();
  if (++done === 2) console.log(JSON.stringify({ parent: process.env.DAL_STREAM, children: results }));
}
const a = cp.spawn(process.execPath, ['-e', code]);
let out = '';
a.stdout.on('data', (d) => { out += d; });
a.on('close', () => finish(0, out));
cp.exec('"' + process.execPath + '" -e "' + code + '"', (err, stdout) => finish(1, err ? String(err) : stdout));
`,
  // parent.js as an ES module: child_process imported, not required
  'parent.mjs': String.raw`
import { spawn, exec } from 'node:child_process';
const code = 'console.log(process.env.DAL_STREAM)';
const results = [];
let done = 0;
function finish(i, out) {
  results[i] = out.trim();
  if (++done === 2) console.log(JSON.stringify({ parent: process.env.DAL_STREAM, children: results }));
}
const a = spawn(process.execPath, ['-e', code]);
let out = '';
a.stdout.on('data', (d) => { out += d; });
a.on('close', () => finish(0, out));
exec('"' + process.execPath + '" -e "' + code + '"', (err, stdout) => finish(1, err ? String(err) : stdout));
`,
  // a CommonJS agent that never requires crypto, then imports it
  'import-crypto.js': String.raw`
(async () => {
  const c = await import('node:crypto');
  const { randomBytes, randomUUID } = await import('crypto');
  console.log(JSON.stringify({
    bytes: c.randomBytes(16).toString('hex'),
    named: randomBytes(16).toString('hex'),
    uuid: randomUUID(),
    viaDefault: c.default.randomInt(2 ** 47),
    web: Buffer.from(c.webcrypto.getRandomValues(new Uint8Array(16))).toString('hex'),
  }));
})();
`,
  // an ES module agent importing crypto's functions by name
  'import-crypto.mjs': String.raw`
import { randomBytes, randomUUID, randomInt } from 'node:crypto';
import crypto from 'node:crypto';
console.log(JSON.stringify({
  bytes: randomBytes(16).toString('hex'),
  uuid: randomUUID(),
  int: randomInt(2 ** 47),
  viaDefault: crypto.randomBytes(16).toString('hex'),
  global: Buffer.from(globalThis.crypto.getRandomValues(new Uint8Array(16))).toString('hex'),
}));
`,
  // 100000 reads of each clock, then the shim's counters
  'reads.js': String.raw`
let x = 0;
for (let i = 0; i < 100000; i++) x += Date.now() + performance.now();
for (let i = 0; i < 100000; i++) x += Number(process.hrtime.bigint() & 1n);
const stats = globalThis[Symbol.for('dal')].stats();
console.log(JSON.stringify({ stats, ok: x > 0 }));
`,
  // ES module imports of node: builtins see the patched functions
  'esm.mjs': String.raw`
import { setTimeout as sleep } from 'node:timers/promises';
import { setTimeout } from 'node:timers';
import { randomUUID } from 'node:crypto';
const t0 = performance.now();
await sleep(3000);
await new Promise((resolve) => setTimeout(resolve, 1000));
console.log(JSON.stringify({ slept: Math.round(performance.now() - t0), uuid: randomUUID() }));
`,
  // a worker thread sharing the process's environment (which the shim
  // cannot name), an RSA key pair, the process times, and whether the
  // shim's files loaded with their cache
  'unserved.js': String.raw`
const { Worker, SHARE_ENV } = require('worker_threads');
const crypto = require('crypto');
crypto.generateKeyPairSync('rsa', { modulusLength: 512 });
const w = new Worker('require("worker_threads").parentPort.postMessage([typeof globalThis[Symbol.for("dal")], Date.now() > Date.UTC(2026, 6, 1)])', { eval: true, env: SHARE_ENV });
w.on('message', (m) => {
  console.log(JSON.stringify({ worker: m, uptime: require('os').uptime(), cpu: process.cpuUsage(), rss: process.resourceUsage().maxRSS }));
});
`,
  // two worker threads, each with timers of 30, 10, 10, 20 ms, its clock
  // and draws; a worker of the second worker; then the main thread's
  'workers.js': String.raw`
const { Worker, isMainThread, parentPort, workerData } = require('worker_threads');
const dal = globalThis[Symbol.for('dal')];
function work(k) {
  const order = [];
  const t0 = Date.now();
  for (const [name, d] of [['c', 30], ['a', 10], ['b', 10], ['d', 20]]) setTimeout(() => order.push(name + '@' + (Date.now() - t0)), d);
  setTimeout(() => {
    const r = { k, stream: dal && dal.stream(), now: Date.now(), perf: performance.now(), rand: [Math.random(), Math.random()], order: order.join(' ') };
    if (k !== 2) return parentPort.postMessage([r]);
    const inner = new Worker(__filename, { workerData: 3 });
    inner.on('message', (m) => parentPort.postMessage([r, ...m]));
  }, 50);
}
if (isMainThread) {
  const got = [];
  for (const k of [1, 2]) {
    new Worker(__filename, { workerData: k }).on('message', (m) => {
      got.push(...m);
      if (got.length === 3) {
        got.sort((a, b) => a.k - b.k);
        console.log(JSON.stringify({ workers: got, main: { stream: dal && dal.stream(), now: Date.now(), rand: Math.random() } }));
      }
    });
  }
} else {
  work(workerData);
}
`,
  // a CommonJS agent reaching the lazily patched builtins every other way:
  // what it loaded before its first line, Math.random taken before its
  // first call, getBuiltinModule, require('timers').promises, an ES module
  // it requires that imports crypto and os by name, AbortSignal.timeout
  'lazy.js': String.raw`
const loaded = ['crypto', 'perf_hooks', 'os', 'timers/promises'].filter((m) => process.moduleLoadList.includes('NativeModule ' + m));
const random = Math.random;
const first = [random(), Math.random(), random()];
const viaGetBuiltin = process.getBuiltinModule('node:crypto').randomUUID();
const named = require('./named.mjs');
const t0 = performance.now();
require('timers').promises.setTimeout(2000).then(() => {
  const signal = AbortSignal.timeout(500); // unref'd, as Node's
  const keep = setTimeout(() => {}, 10000);
  signal.onabort = () => {
    clearTimeout(keep);
    console.log(JSON.stringify({ loaded, first, viaGetBuiltin, named, aborted: Math.round(performance.now() - t0) }));
  };
});
`,
  // an ES module that imports none of them loads none of them; fetch's
  // multipart boundary (undici loads node:crypto itself) is seeded
  'lazy-esm.mjs': String.raw`
import { writeSync } from 'node:fs';
const loaded = ['crypto', 'perf_hooks', 'os', 'timers/promises'].filter((m) => process.moduleLoadList.includes('NativeModule ' + m));
const form = new FormData();
form.append('a', 'b');
const boundary = (await new Response(form).text()).split('\r\n')[0];
writeSync(1, JSON.stringify({ loaded, boundary, list: Array.isArray(process.moduleLoadList) && process.moduleLoadList instanceof Array }) + '\n');
`,
  // values.js in a child whose process.moduleLoadList the shim cannot hook
  // (a preload gave it another prototype first): every patch at once
  'unhooked.js': String.raw`
const path = require('path');
const { spawnSync } = require('child_process');
const pre = path.join(__dirname, 'unhook.js');
const env = { ...process.env, NODE_OPTIONS: '--require ' + JSON.stringify(pre) + ' ' + process.env.NODE_OPTIONS };
const r = spawnSync(process.execPath, [path.join(__dirname, 'values.js'), '1'], { env, encoding: 'utf8' });
process.stdout.write(r.stdout);
process.stderr.write(r.stderr);
`,
  'unhook.js': String.raw`Object.setPrototypeOf(process.moduleLoadList, Object.create(Array.prototype));`,
  'named.mjs': String.raw`
import { randomBytes } from 'node:crypto';
import { uptime } from 'node:os';
import { performance as perf } from 'node:perf_hooks';
export const bytes = randomBytes(8).toString('hex');
export const up = uptime();
export const now = perf.now();
`,
};

for (const [name, src] of Object.entries(FIXTURES)) fs.writeFileSync(fixture(name), src);
test.after(() => fs.rmSync(fixtureDir, { recursive: true, force: true }));

// run executes `dal-exec run FLAGS -- node ARGS` and returns {status, stdout, stderr}.
function run(flags, args, { env } = {}) {
  const r = spawnSync(dalExec, ['run', ...flags, '--', process.execPath, ...args], {
    encoding: 'utf8',
    timeout: 60000,
    env: env || process.env,
  });
  if (r.error) throw r.error;
  return r;
}

// ok runs and asserts a clean exit with nothing on stderr.
function ok(flags, args) {
  const r = run(flags, args);
  assert.strictEqual(r.status, 0, `dal-exec ${flags.join(' ')} exited ${r.status}\nstderr: ${r.stderr}`);
  assert.strictEqual(r.stderr, '', 'the agent wrote nothing to stderr and neither did the shim');
  return r.stdout;
}

test('dal-exec is built and embeds this Node shim', () => {
  assert.ok(fs.existsSync(dalExec), `${dalExec} does not exist: build it with \`go build -o bin/ ./cmd/...\` in ${repo}, or set DAL_EXEC`);
  const out = ok([], ['-e', 'console.log(process.env.NODE_OPTIONS)']);
  const m = /--require (?:"([^"]+)"|(\S+))/.exec(out);
  assert.ok(m, `NODE_OPTIONS does not load the shim: ${out}`);
  const installed = path.dirname(m[1] || m[2]);
  for (const name of fs.readdirSync(shimDir).filter((n) => n.endsWith('.js'))) {
    const mine = fs.readFileSync(path.join(shimDir, name), 'utf8');
    const theirs = fs.existsSync(path.join(installed, name)) ? fs.readFileSync(path.join(installed, name), 'utf8') : null;
    assert.ok(mine === theirs, `${dalExec} embeds another version of ${name}: rebuild it (go build -o bin/ ./cmd/...)`);
  }
});

test('two strict runs with the same seed are byte-identical', () => {
  const a = ok(['--seed', '7'], [fixture('values.js')]);
  const b = ok(['--seed', '7'], [fixture('values.js')]);
  assert.ok(a.length > 100);
  assert.strictEqual(a, b);
});

test('another seed changes every random value and no clock value', () => {
  const a = JSON.parse(ok(['--seed', '7'], [fixture('values.js')]));
  const b = JSON.parse(ok(['--seed', '8'], [fixture('values.js')]));
  assert.deepStrictEqual(b.clock, a.clock);
  for (const key of Object.keys(a.random)) {
    if (Array.isArray(a.random[key])) {
      a.random[key].forEach((v, i) => assert.notStrictEqual(b.random[key][i], v, `${key}[${i}]`));
    } else {
      assert.notStrictEqual(b.random[key], a.random[key], key);
    }
  }
});

test('the clock starts at 2026-01-01T00:00:00Z and moves by virtual time only', () => {
  const { clock } = JSON.parse(ok([], [fixture('values.js')]));
  assert.strictEqual(clock.dateNow, Date.UTC(2026, 0, 1));
  assert.strictEqual(clock.newDate, '2026-01-01T00:00:00.000Z');
  assert.match(clock.dateString, /^Thu Jan 01 2026 00:00:00 GMT\+0000/);
  assert.strictEqual(clock.perfNow, 1000.004, 'mono_ns (1 s) + 4 reads of 1 µs');
  assert.strictEqual(clock.timeOrigin, Date.UTC(2026, 0, 1) - 1000);
  assert.deepStrictEqual(clock.hrtime, [1, 5000]);
  assert.strictEqual(clock.hrtimeBigint, '1000006000');
  assert.strictEqual(clock.uptime, 0.000007);
  assert.strictEqual(clock.later, Date.UTC(2026, 0, 1) + 1500, 'the timer fired at its virtual deadline');
  assert.strictEqual(clock.laterPerf, 2500.009);
});

test('another epoch moves the realtime clocks and not the monotonic ones', () => {
  const { clock } = JSON.parse(ok(['--epoch', '2030-06-01T12:00:00Z'], [fixture('values.js')]));
  assert.strictEqual(clock.newDate, '2030-06-01T12:00:00.000Z');
  assert.strictEqual(clock.perfNow, 1000.004);
});

test('timers of 300, 100, 100, 2000 ms fire as a, b, c, d', () => {
  assert.strictEqual(ok([], [fixture('timer-order.js')]).trim(), 'a,b,c,d');
});

test('HTTP to a local server completes under strict mode while a timeout is pending', () => {
  const out = ok([], [fixture('http.js')]);
  assert.strictEqual(out, 'http.get 200 hello /get after 50 ms\nfetch 200 hello /fetch after 100 ms\n');
});

test('a Node parent spawning two Node children gets streams 0.1 and 0.2', () => {
  const got = JSON.parse(ok([], [fixture('parent.js')]));
  assert.strictEqual(got.parent, '0');
  assert.deepStrictEqual(got.children, ['0.1', '0.2']);
});

test('an ES module parent importing child_process names its children 0.1 and 0.2', () => {
  const got = JSON.parse(ok([], [fixture('parent.mjs')]));
  assert.strictEqual(got.parent, '0');
  assert.deepStrictEqual(got.children, ['0.1', '0.2']);
});

for (const agent of ['import-crypto.js', 'import-crypto.mjs']) {
  test(`${agent}: node:crypto imported by ${agent.endsWith('.mjs') ? 'an ES module' : 'a CommonJS agent'} draws from the seed`, () => {
    const a = JSON.parse(ok(['--seed', '3'], [fixture(agent)]));
    const b = JSON.parse(ok(['--seed', '3'], [fixture(agent)]));
    const c = JSON.parse(ok(['--seed', '4'], [fixture(agent)]));
    assert.deepStrictEqual(a, b, 'the same seed gives the same values');
    for (const k of Object.keys(a)) assert.notStrictEqual(a[k], c[k], `another seed changes ${k}`);
  });
}

test('builtins are patched when the program loads them, whichever way it does', () => {
  const a = JSON.parse(ok(['--seed', '3'], [fixture('lazy.js')]));
  const b = JSON.parse(ok(['--seed', '3'], [fixture('lazy.js')]));
  const c = JSON.parse(ok(['--seed', '4'], [fixture('lazy.js')]));
  assert.deepStrictEqual(a.loaded, [], 'the shim loads none of them itself');
  assert.deepStrictEqual(a, b, 'the same seed gives the same values');
  assert.strictEqual(new Set(a.first).size, 3);
  for (const k of ['first', 'viaGetBuiltin']) assert.notDeepStrictEqual(a[k], c[k], `another seed changes ${k}`);
  assert.notStrictEqual(a.named.bytes, c.named.bytes, 'an ES module required by name draws from the seed');
  assert.ok(a.named.up >= 1 && a.named.up < 2, `os.uptime ${a.named.up} imported by name is virtual`);
  assert.ok(a.named.now > 1000 && a.named.now < 1001, `performance.now ${a.named.now} from perf_hooks is virtual`);
  assert.strictEqual(a.aborted, 2500, 'timers/promises and AbortSignal.timeout run on virtual time');
});

test('an ES module loads only what it imports; Node\'s own draws (fetch\'s multipart boundary) are seeded', () => {
  const a = JSON.parse(ok(['--seed', '3'], [fixture('lazy-esm.mjs')]));
  const b = JSON.parse(ok(['--seed', '3'], [fixture('lazy-esm.mjs')]));
  const c = JSON.parse(ok(['--seed', '4'], [fixture('lazy-esm.mjs')]));
  assert.deepStrictEqual(a.loaded, []);
  assert.strictEqual(a.list, true, 'process.moduleLoadList is still an array');
  assert.match(a.boundary, /^------formdata-undici-0\d+$/);
  assert.strictEqual(a.boundary, b.boundary);
  assert.notStrictEqual(a.boundary, c.boundary);
});

test('where the shim cannot watch builtins load, it patches them all at start-up', () => {
  const a = JSON.parse(ok(['--seed', '3'], [fixture('unhooked.js')]));
  const b = JSON.parse(ok(['--seed', '3'], [fixture('unhooked.js')]));
  const c = JSON.parse(ok(['--seed', '4'], [fixture('unhooked.js')]));
  assert.deepStrictEqual(a, b);
  assert.strictEqual(a.clock.dateNow, Date.UTC(2026, 0, 1));
  for (const key of Object.keys(a.random)) assert.notDeepStrictEqual(c.random[key], a.random[key], key);
});

test('clock reads make no round trip in strict mode', () => {
  const { stats } = JSON.parse(ok([], [fixture('reads.js')]));
  assert.strictEqual(stats.round_trips, 1, 'hello only');
  assert.strictEqual(stats.reads, 300000);
  assert.strictEqual(stats.now_ns, 300000 * 1000);
});

test('seeded mode batches its tick uploads', () => {
  const { stats } = JSON.parse(ok(['--mode', 'seeded'], [fixture('reads.js')]));
  assert.strictEqual(stats.reads, 300000);
  assert.strictEqual(stats.round_trips, 1 + Math.floor(300000 / 4096));
});

test('ES module imports of timers and crypto are virtualized', () => {
  const a = JSON.parse(ok(['--seed', '3'], [fixture('esm.mjs')]));
  const b = JSON.parse(ok(['--seed', '3'], [fixture('esm.mjs')]));
  assert.strictEqual(a.slept, 4000);
  assert.strictEqual(a.uuid, b.uuid);
});

test('a seeded recording replays to the same output, without drift', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'dal-node-'));
  try {
    const clock = path.join(dir, 'clock.json');
    // seeded mode keeps native timers: a short delay keeps the test fast
    const recorded = ok(['--mode', 'seeded', '--seed', '5', '--clock-out', clock], [fixture('values.js'), '20']);
    const replayed = ok(['--mode', 'seeded', '--seed', '5', '--replay-clock', clock], [fixture('values.js'), '20']);
    assert.strictEqual(replayed, recorded);
    const live = JSON.parse(recorded).clock;
    assert.ok(live.dateNow > Date.UTC(2025, 0, 1), 'seeded mode runs on the real clock');
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test('logged mode draws real randomness and logs every draw', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'dal-node-'));
  try {
    const clock = path.join(dir, 'clock.json');
    const a = JSON.parse(ok(['--mode', 'logged', '--seed', '5', '--clock-out', clock], [fixture('values.js'), '1']));
    const b = JSON.parse(ok(['--mode', 'logged', '--seed', '5'], [fixture('values.js'), '1']));
    assert.notStrictEqual(a.random.randomUUID, b.random.randomUUID);
    const [stream] = JSON.parse(fs.readFileSync(clock, 'utf8')).streams;
    // 16 bytes per UUID, 16 per buffer or array, 6 per randomInt try
    assert.strictEqual(stream.draws['node.Math.random'], 3 * 8);
    assert.ok(stream.draws['node.crypto'] >= 2 * 16 + 4 * 16 + 6, JSON.stringify(stream.draws));
    assert.strictEqual(stream.reads, stream.ticks.kinds.length);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test('a logged recording replays to the same output, real randomness included', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'dal-node-'));
  try {
    const clock = path.join(dir, 'clock.json');
    const recorded = ok(['--mode', 'logged', '--clock-out', clock], [fixture('values.js'), '1']);
    const replayed = ok(['--replay-clock', clock], [fixture('values.js'), '1']);
    assert.strictEqual(replayed, recorded);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test('default mode patches nothing', () => {
  const out = ok(['--mode', 'default'], ['-e', `
    const dal = globalThis[Symbol.for('dal')];
    console.log(JSON.stringify({ active: dal.active, real: Date.now() > Date.UTC(2025, 0, 1), native: Date.now === dal.native.dateNow && Math.random === dal.native.mathRandom }));
  `]);
  assert.deepStrictEqual(JSON.parse(out), { active: false, real: true, native: true });
});

test('the shim adds no warning, even under --pending-deprecation', () => {
  const out = ok([], ['--pending-deprecation', '--throw-deprecation', fixture('timer-order.js')]);
  assert.strictEqual(out.trim(), 'a,b,c,d');
});

test('a child without its session token is refused by dald and runs unpatched', () => {
  // spawnSync takes the env as given: no DAL_SESSION_TOKEN put back. A
  // strict run gives the token as a file (DAL_SESSION_TOKEN_FILE).
  const out = JSON.parse(ok([], ['-e', `
    const cp = require('child_process');
    const code = 'console.log(Date.now() - Date.UTC(2026, 0, 1) < 1000)';
    const child = (env) => cp.spawnSync(process.execPath, ['-e', code], { env, encoding: 'utf8' });
    const forged = child({ ...process.env, DAL_SESSION_TOKEN: 'f'.repeat(64) });
    const missing = child({ ...process.env, DAL_SESSION_TOKEN: '', DAL_SESSION_TOKEN_FILE: '' });
    const own = child(process.env);
    console.log(JSON.stringify({ forged, missing, own }));
  `]));
  assert.strictEqual(out.own.stdout, 'true\n', 'with the token the child is on virtual time');
  assert.strictEqual(out.own.stderr, '');
  for (const [name, want] of [['forged', 'is wrong'], ['missing', 'is missing']]) {
    const r = out[name];
    // Refused, the child's shim stays out of the way; the syscall layer
    // still serves every process of the run the virtual clock.
    assert.strictEqual(r.stdout, 'true\n', `${name}: the child is off the virtual clock`);
    assert.match(r.stderr, new RegExp(`^dal: cannot use dald at .*: .*the session token ${want}: .*DAL_SESSION_TOKEN.*runs unvirtualized\n$`), name);
  }
});

test('without dald the process runs unpatched and says so in one line', () => {
  const env = {
    PATH: process.env.PATH,
    NODE_OPTIONS: `--require ${path.join(shimDir, 'dal-register.js')}`,
    DAL_SOCKET: path.join(os.tmpdir(), `no-dald-${process.pid}.sock`),
    DAL_SESSION: 's',
  };
  const r = spawnSync(process.execPath, ['-e', 'console.log(Date.now() > Date.UTC(2025, 0, 1), Math.random() !== Math.random())'], { encoding: 'utf8', env });
  assert.strictEqual(r.status, 0);
  assert.strictEqual(r.stdout, 'true true\n');
  const lines = r.stderr.trim().split('\n');
  assert.strictEqual(lines.length, 1, r.stderr);
  assert.match(lines[0], /^dal: cannot use dald at .*no-dald.*: no dald socket .*runs unvirtualized$/);
});

test('worker threads get the shim: streams in creation order, their own clocks, draws and ordered timers', () => {
  const a = ok(['--seed', '7'], [fixture('workers.js')]);
  const b = ok(['--seed', '7'], [fixture('workers.js')]);
  assert.strictEqual(a, b);
  const out = JSON.parse(a);
  assert.deepStrictEqual(out.workers.map((w) => [w.k, w.stream]), [[1, '0.1'], [2, '0.2'], [3, '0.2.1']]);
  for (const w of out.workers) {
    assert.strictEqual(w.order, 'a@10 b@10 d@20 c@30', `worker ${w.k}'s timers`);
    assert.strictEqual(w.now, Date.UTC(2026, 0, 1) + 50, `worker ${w.k}'s clock starts at the epoch and its timer fired at 50 ms`);
  }
  assert.notStrictEqual(out.workers[0].rand[0], out.workers[1].rand[0], 'each worker has its own random stream');
  assert.strictEqual(out.main.stream, '0');
  const other = JSON.parse(ok(['--seed', '8'], [fixture('workers.js')]));
  out.workers.forEach((w, i) => {
    assert.notStrictEqual(other.workers[i].rand[0], w.rand[0], `worker ${w.k}'s draws follow the seed`);
    assert.strictEqual(other.workers[i].now, w.now);
  });
});

test('a worker sharing the environment and RSA keys are reported as unserved; CPU times are real and counted', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'dal-node-'));
  try {
    const clock = path.join(dir, 'clock.json');
    const r = run(['--clock-out', clock], [fixture('unserved.js')]);
    assert.strictEqual(r.status, 0, r.stderr);
    assert.match(r.stderr, /started a worker thread with env: SHARE_ENV: the shim cannot name it/);
    const out = JSON.parse(r.stdout);
    // The shim leaves the worker alone, and says so; the syscall layer of
    // a strict run still gives it the virtual clock.
    assert.deepStrictEqual(out.worker, ['undefined', false]);
    // CPU time and resource usage are real (they measure work), as the
    // syscall layer leaves C's clock() and times(): counted, not escapes
    assert.ok(out.rss > 0 && out.cpu.user > 0, `resource usage ${out.rss} KiB, CPU ${JSON.stringify(out.cpu)}: not the real ones`);
    assert.ok(out.uptime >= 1 && out.uptime < 2, `os.uptime ${out.uptime} is not on the virtual monotonic clock`);
    const [stream] = JSON.parse(fs.readFileSync(clock, 'utf8')).streams;
    assert.deepStrictEqual(stream.unserved, {
      'clock/worker_threads(SHARE_ENV)': 1, 'random/worker_threads(SHARE_ENV)': 1, 'random/crypto.generateKeyPair(rsa)': 1,
      'cpu_clock/process.cpuUsage': 1, 'cpu_clock/process.resourceUsage': 1,
    });
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test('the installed shim carries a V8 code cache this node accepts', () => {
  const out = ok([], ['-e', 'console.log(process.env.NODE_OPTIONS)']);
  const m = /--require (?:"([^"]+)"|(\S+))/.exec(out);
  const installed = path.dirname(m[1] || m[2]);
  const cache = fs.readFileSync(path.join(installed, '.v8', `${process.version}-${process.arch}`, 'shim.cache'));
  const caches = new Map();
  for (let i = cache.readUInt32BE(0), p = 4; i > 0; i--) {
    const nameLen = cache.readUInt16BE(p);
    const name = cache.toString('latin1', p + 2, p + 2 + nameLen);
    const len = cache.readUInt32BE(p + 2 + nameLen);
    p += 2 + nameLen + 4;
    caches.set(name, cache.subarray(p, p + len));
    p += len;
  }
  const vm = require('node:vm');
  const { wrap } = require('node:module');
  for (const name of ['runtime.js', 'wire.js', 'builtins.js', 'clock.js', 'random.js', 'timers.js']) {
    assert.ok(caches.has(name), `no code cache for ${name}`);
    const script = new vm.Script(wrap(fs.readFileSync(path.join(installed, name), 'utf8')), { filename: name, cachedData: caches.get(name) });
    assert.strictEqual(script.cachedDataRejected, false, `${name}'s code cache was rejected`);
  }
});
