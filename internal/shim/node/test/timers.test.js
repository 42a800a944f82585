'use strict';
// The virtual-timer engine of timers.js, on its own: a clock object, the
// real primitives of this (unshimmed) test process as the driver, and an
// injected I/O probe. No test sleeps in real time except the I/O waits,
// which are bounded by a few ms of real I/O simulated with a native timer.

const test = require('node:test');
const assert = require('node:assert');
const path = require('node:path');
const { spawnSync } = require('node:child_process');
const timers = require('node:timers');
const { createTimers, loopActivity, outstandingIO, ioProgress, AbortError, IDLE, IMMEDIATES, IO, NONE } = require('../timers.js');

const native = {
  setImmediate: timers.setImmediate,
  clearImmediate: timers.clearImmediate,
  setTimeout: timers.setTimeout,
  setInterval: timers.setInterval,
  clearTimeout: timers.clearTimeout,
  clearInterval: timers.clearInterval,
  nowNs: () => Number(process.hrtime.bigint()),
};

// engine returns virtual timers on a fresh clock; io() says whether I/O is
// outstanding (default: never), activity overrides the whole probe.
function engine(io = () => false, activity = () => (io() ? IO : IDLE)) {
  const clock = { t: 0, sleepNs: 0 };
  const vt = createTimers({ clock, native, activity });
  return { clock, vt };
}

const MS = 1e6;

test('timers of 300, 100, 100, 2000 ms fire in (deadline, registration) order', async () => {
  const { clock, vt } = engine();
  const log = [];
  await new Promise((resolve) => {
    vt.setTimeout(() => log.push('c'), 300);
    vt.setTimeout(() => log.push('a'), 100);
    vt.setTimeout(() => log.push('b'), 100);
    vt.setTimeout(() => { log.push('d'); resolve(); }, 2000);
  });
  assert.deepStrictEqual(log, ['a', 'b', 'c', 'd']);
  assert.strictEqual(clock.t, 2000 * MS);
  assert.strictEqual(clock.sleepNs, 2000 * MS);
  assert.deepStrictEqual(vt.fired, [[100 * MS, 2], [100 * MS, 3], [300 * MS, 1], [2000 * MS, 4]]);
});

test('5 s of timers complete on virtual time', async () => {
  const { clock, vt } = engine();
  for (let i = 0; i < 50; i++) await vt.promises.setTimeout(100);
  assert.strictEqual(clock.t, 5000 * MS);
});

test('deadlines count from the virtual now, which clock reads advance', async () => {
  const { clock, vt } = engine();
  clock.t = 7;
  await new Promise((resolve) => vt.setTimeout(resolve, 10));
  assert.strictEqual(clock.t, 7 + 10 * MS);
});

test('a due timer fires without a jump', async () => {
  const { clock, vt } = engine(() => true); // I/O outstanding: only due timers may fire
  await new Promise((resolve) => {
    vt.setTimeout(resolve, 5);
    clock.t += 6 * MS; // 6 ms of clock reads
  });
  assert.strictEqual(clock.t, 6 * MS);
  assert.strictEqual(clock.sleepNs, 0);
});

test('delays below 1 ms, NaN or too large become 1 ms, as in Node', async () => {
  const { clock, vt } = engine();
  const warnings = [];
  const onWarning = (w) => warnings.push(w.name);
  process.on('warning', onWarning);
  try {
    for (const d of [0, -5, NaN, undefined, '0', 2 ** 31]) {
      const before = clock.t;
      await new Promise((resolve) => vt.setTimeout(resolve, d));
      assert.strictEqual(clock.t - before, 1 * MS, `delay ${d}`);
    }
    await new Promise((resolve) => setImmediate(resolve));
  } finally {
    process.off('warning', onWarning);
  }
  assert.deepStrictEqual(warnings, ['TimeoutOverflowWarning']);
});

test('microtasks and nextTicks run between two timers of the same deadline', async () => {
  const { vt } = engine();
  const log = [];
  await new Promise((resolve) => {
    vt.setTimeout(() => {
      log.push('t1');
      Promise.resolve().then(() => log.push('micro'));
      process.nextTick(() => log.push('tick'));
    }, 10);
    vt.setTimeout(() => { log.push('t2'); resolve(); }, 10);
  });
  assert.deepStrictEqual(log, ['t1', 'tick', 'micro', 't2']);
});

test('an immediate scheduled by a timer runs before a later timer', async () => {
  const { vt } = engine(undefined, () => loopActivity());
  const log = [];
  await new Promise((resolve) => {
    vt.setTimeout(() => {
      log.push('t100');
      setImmediate(() => {
        log.push('immediate');
        setImmediate(() => log.push('immediate 2'));
      });
    }, 100);
    vt.setTimeout(() => { log.push('t120'); resolve(); }, 120);
  });
  assert.deepStrictEqual(log, ['t100', 'immediate', 'immediate 2', 't120']);
});

test('a setImmediate loop polling for a timer does not hold virtual time forever', async () => {
  const { clock, vt } = engine(undefined, () => IMMEDIATES);
  let done = false;
  let spins = 0;
  const spin = () => { spins++; if (!done) setImmediate(spin); };
  spin();
  await new Promise((resolve) => vt.setTimeout(() => { done = true; resolve(); }, 100));
  assert.strictEqual(clock.t, 100 * MS);
  assert.ok(spins >= 1000, `the jump waited ${spins} turns`);
});

test('arguments and this reach the callback', async () => {
  const { vt } = engine();
  const got = await new Promise((resolve) => {
    const t = vt.setTimeout(function cb(a, b, c, d) { resolve([this === t, a, b, c, d]); }, 1, 1, 2, 3, 4);
  });
  assert.deepStrictEqual(got, [true, 1, 2, 3, 4]);
});

test('setInterval repeats from its firing time until cleared', async () => {
  const { vt } = engine();
  let n = 0;
  await new Promise((resolve) => {
    const iv = vt.setInterval(() => {
      if (++n === 3) { vt.clearInterval(iv); resolve(); }
    }, 100);
  });
  await new Promise((resolve) => vt.setTimeout(resolve, 1000));
  assert.strictEqual(n, 3);
  assert.deepStrictEqual(vt.fired.slice(0, 3).map(([d]) => d / MS), [100, 200, 300]);
});

test('clearTimeout takes the timer, its numeric id, or a string of it', async () => {
  const { vt } = engine();
  const log = [];
  const a = vt.setTimeout(() => log.push('a'), 10);
  const b = vt.setTimeout(() => log.push('b'), 10);
  const c = vt.setTimeout(() => log.push('c'), 10);
  const d = vt.setTimeout(() => log.push('d'), 10);
  vt.clearTimeout(a);
  vt.clearTimeout(+b);
  vt.clearTimeout(String(+c));
  vt.clearTimeout(null);
  vt.clearTimeout(undefined);
  assert.strictEqual(typeof +d, 'number');
  await new Promise((resolve) => vt.setTimeout(resolve, 20));
  assert.deepStrictEqual(log, ['d']);
});

test('timer objects: ref, unref, hasRef, refresh, close, toPrimitive', async () => {
  const { clock, vt } = engine();
  const log = [];
  const t = vt.setTimeout(() => log.push(clock.t / MS), 100);
  assert.strictEqual(t.hasRef(), true);
  assert.strictEqual(t.unref(), t);
  assert.strictEqual(t.hasRef(), false);
  assert.strictEqual(t.ref(), t);
  await new Promise((resolve) => vt.setTimeout(resolve, 50));
  assert.strictEqual(t.refresh(), t); // now due at 150
  await new Promise((resolve) => vt.setTimeout(resolve, 200));
  assert.deepStrictEqual(log, [150]);
  t.refresh(); // revives a timer that already fired
  await new Promise((resolve) => vt.setTimeout(resolve, 200));
  assert.deepStrictEqual(log, [150, 350]);
  const u = vt.setTimeout(() => log.push('closed'), 1);
  assert.strictEqual(u.close(), u);
  u.refresh(); // a cleared timer stays cleared
  await new Promise((resolve) => vt.setTimeout(resolve, 10));
  assert.deepStrictEqual(log, [150, 350]);
  assert.strictEqual(Number(t), Number(t));
  assert.notStrictEqual(Number(t), Number(u));
});

test('a callback that throws does not stop the other timers', async () => {
  const { vt } = engine();
  const errors = [];
  const listeners = process.listeners('uncaughtException');
  process.removeAllListeners('uncaughtException');
  process.on('uncaughtException', (e) => errors.push(e.message));
  try {
    await new Promise((resolve) => {
      vt.setTimeout(() => { throw new Error('boom'); }, 10);
      vt.setTimeout(resolve, 20);
    });
  } finally {
    process.removeAllListeners('uncaughtException');
    for (const l of listeners) process.on('uncaughtException', l);
  }
  assert.deepStrictEqual(errors, ['boom']);
});

test('an invalid callback is a TypeError with Node\'s code', () => {
  const { vt } = engine();
  assert.throws(() => vt.setTimeout('code', 1), { name: 'TypeError', code: 'ERR_INVALID_ARG_TYPE' });
});

test('outstanding I/O holds virtual time until it completes', async () => {
  let busy = true;
  const { clock, vt } = engine(() => busy);
  const log = [];
  native.setTimeout(() => { log.push('io done'); busy = false; }, 5); // 5 ms of "real I/O"
  await new Promise((resolve) => vt.setTimeout(() => { log.push('timer'); resolve(); }, 60000));
  assert.deepStrictEqual(log, ['io done', 'timer']);
  assert.strictEqual(clock.t, 60000 * MS);
});

test('a timer fires after its real duration when the I/O never completes', async () => {
  const { clock, vt } = engine(() => true);
  const start = native.nowNs();
  await new Promise((resolve) => vt.setTimeout(resolve, 20));
  assert.ok(native.nowNs() - start >= 20 * MS, 'waited for the real duration');
  assert.strictEqual(clock.t, 20 * MS);
});

test('a timer does not fire while I/O keeps completing faster than its delay, however long the I/O lasts in all', async () => {
  let busy = true;
  const { clock, vt } = engine(() => busy);
  const log = [];
  let completions = 0;
  // 12 responses 8 ms apart (96 ms of I/O in all), each handled by code
  // that reads the clock, racing a 30 ms timeout.
  const io = native.setInterval(() => {
    clock.t += 1000; // the handler's clock read
    if (++completions === 12) { native.clearInterval(io); busy = false; log.push('io done'); }
  }, 8);
  await new Promise((resolve) => vt.setTimeout(() => { log.push('timer'); resolve(); }, 30));
  assert.deepStrictEqual(log, ['io done', 'timer']);
});

test('a jump of the native clock during a poll counts only as the poll\'s own timeout', async () => {
  // Under dal's syscall layer the native clock is the process's virtual
  // one, which another thread's wait (Node's platform thread waits 5 s at
  // a time) can move while the event loop polls for a response: that must
  // not fire a 100 ms timer early.
  let jump = 0;
  const jumpy = { ...native, nowNs: () => native.nowNs() + jump };
  const clock = { t: 0, sleepNs: 0 };
  const vt = createTimers({ clock, native: jumpy, activity: () => IO, progress: () => 0 });
  let polls = 0;
  const moved = native.setInterval(() => { polls++; jump += 5000 * MS; }, 1);
  const start = native.nowNs();
  await new Promise((resolve) => vt.setTimeout(resolve, 100));
  native.clearInterval(moved);
  assert.ok(polls > 0, 'the native clock jumped while the timer waited');
  assert.ok(native.nowNs() - start >= 100 * MS, 'waited its own duration, not the jumps');
  assert.strictEqual(clock.t, 100 * MS);
});

test('I/O progress without clock reads restarts the wait: short waits spread over a run never add up to a timeout', async () => {
  // 12 requests 8 ms apart (96 ms in all), by code that never reads the
  // clock (undici), racing a 30 ms unref'd housekeeping timer.
  let busy = true;
  let mark = 0;
  const clock = { t: 0, sleepNs: 0 };
  const vt = createTimers({ clock, native, activity: () => (busy ? IO : IDLE), progress: () => mark });
  const log = [];
  let completions = 0;
  const io = native.setInterval(() => {
    mark++; // a response read
    if (++completions === 12) { native.clearInterval(io); busy = false; log.push('io done'); }
  }, 8);
  await new Promise((resolve) => vt.setTimeout(() => { log.push('timer'); resolve(); }, 30));
  assert.deepStrictEqual(log, ['io done', 'timer']);
  assert.strictEqual(clock.t, 30 * MS);
});

test('ioProgress changes when a socket reads', async () => {
  const net = require('node:net');
  const srv = net.createServer((c) => c.end('hello')).listen(0);
  await new Promise((resolve) => srv.once('listening', resolve));
  const c = net.connect(srv.address().port);
  await new Promise((resolve) => c.once('connect', resolve));
  const before = ioProgress();
  await new Promise((resolve) => c.once('data', resolve));
  assert.notStrictEqual(ioProgress(), before);
  c.destroy();
  srv.close();
});

test('an unref\'d timer does not fire when nothing else holds the loop, as Node would exit first', async () => {
  let state = NONE;
  const { clock, vt } = engine(undefined, () => state);
  let fired = false;
  vt.setTimeout(() => { fired = true; }, 499).unref(); // undici's housekeeping tick
  await new Promise((resolve) => native.setTimeout(resolve, 40));
  assert.strictEqual(fired, false, 'an idle process with only unref\'d timers does not jump to them');
  assert.strictEqual(clock.t, 0);
  state = IDLE; // a listening server holds the loop: now time jumps
  await new Promise((resolve) => native.setTimeout(resolve, 40));
  assert.strictEqual(fired, true);
  assert.strictEqual(clock.t, 499 * MS);
});

test('stdio pipes do not count as holding the loop', () => {
  // This test process's stdout is a pipe (node --test): listed as ref'd,
  // not alive.
  assert.notStrictEqual(loopActivity(), IO);
});

test('timers added during an I/O wait do not restart the wait for the earliest', async () => {
  const { clock, vt } = engine(() => true);
  let adds = 0;
  const churn = native.setInterval(() => { adds++; vt.clearTimeout(vt.setTimeout(() => {}, 1000)); }, 2);
  try {
    await new Promise((resolve) => vt.setTimeout(resolve, 30));
  } finally {
    native.clearInterval(churn);
  }
  assert.ok(adds > 3, `the agent re-planned the wait (${adds} times)`);
  assert.strictEqual(clock.t, 30 * MS);
});

test('timers/promises setTimeout: value, abort before and during', async () => {
  const { clock, vt } = engine();
  assert.strictEqual(await vt.promises.setTimeout(100, 'v'), 'v');
  assert.strictEqual(clock.t, 100 * MS);
  const ac = new AbortController();
  ac.abort('why');
  await assert.rejects(vt.promises.setTimeout(10, 'x', { signal: ac.signal }), (e) => e instanceof AbortError && e.code === 'ABORT_ERR' && e.cause === 'why');
  const ac2 = new AbortController();
  const p = vt.promises.setTimeout(1000, 'x', { signal: ac2.signal });
  vt.setTimeout(() => ac2.abort(), 10);
  await assert.rejects(p, { name: 'AbortError' });
  assert.ok(clock.t < 1000 * MS + 100 * MS);
  await assert.rejects(vt.promises.setTimeout(1, 'x', { ref: 'yes' }), { code: 'ERR_INVALID_ARG_TYPE' });
});

test('timers/promises setInterval yields on every tick and stops on break', async () => {
  const { clock, vt } = engine();
  const seen = [];
  for await (const v of vt.promises.setInterval(100, 'tick')) {
    seen.push([v, clock.t / MS]);
    if (seen.length === 3) break;
  }
  assert.deepStrictEqual(seen, [['tick', 100], ['tick', 200], ['tick', 300]]);
  assert.strictEqual(vt.stats().active, 0);
});

test('scheduler.wait is a virtual sleep', async () => {
  const { clock, vt } = engine();
  await vt.promises.wait(250);
  assert.strictEqual(clock.t, 250 * MS);
});

test('the driver keeps the process alive only for ref\'d timers', () => {
  const script = `
    const t = require('timers');
    const { createTimers } = require(${JSON.stringify(path.join(__dirname, '..', 'timers.js'))});
    const clock = { t: 0 };
    const vt = createTimers({ clock, native: { ...t, nowNs: () => Number(process.hrtime.bigint()) }, io: () => false });
    vt.setTimeout(() => console.log('unref fired'), 1000).unref();
    vt.setTimeout(() => console.log('ref fired', clock.t / 1e6), 500);
    const u = vt.setInterval(() => console.log('interval'), 7);
    u.unref();
    process.on('exit', () => console.log('exit', clock.t / 1e6));
  `;
  const r = spawnSync(process.execPath, ['-e', script], { encoding: 'utf8', timeout: 20000 });
  assert.strictEqual(r.status, 0, r.stderr);
  const lines = r.stdout.trim().split('\n');
  // The unref'd interval runs while the ref'd timer holds the loop (7, 14,
  // ..., 497 ms), then the process exits: the unref'd timers never fire after.
  assert.deepStrictEqual(lines.slice(-2), ['ref fired 500', 'exit 500']);
  assert.strictEqual(lines.filter((l) => l === 'interval').length, 71);
  assert.ok(!lines.includes('unref fired'));
});

test('outstandingIO ignores servers, stdio and idle accepted connections, counts client sockets and fs requests', async () => {
  const net = require('node:net');
  const fs = require('node:fs');
  const server = net.createServer((s) => s.on('data', () => {}));
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  try {
    assert.strictEqual(outstandingIO(), false, 'a listening server is not outstanding');
    const client = net.connect(server.address().port, '127.0.0.1');
    assert.strictEqual(outstandingIO(), true, 'a connecting client is');
    await new Promise((resolve) => client.on('connect', resolve));
    assert.strictEqual(outstandingIO(), true, 'an open client socket is');
    client.unref();
    // the accepted side remains, ref'd and idle: not outstanding
    await new Promise((resolve) => setImmediate(resolve));
    assert.strictEqual(outstandingIO(), false, 'an idle accepted connection is not');
    client.destroy();
    const done = new Promise((resolve) => fs.stat(__filename, resolve));
    assert.strictEqual(outstandingIO(), true, 'an fs request is');
    await done;
  } finally {
    server.close();
  }
});
