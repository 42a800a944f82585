'use strict';
// The clock sources of clock.js: strict arithmetic, and recording then
// replaying through in-memory ticks.put/ticks.fetch stand-ins.

const test = require('node:test');
const assert = require('node:assert');
const { strictClock, recordingClock, replayClock, splitEpoch } = require('../clock.js');
const { decode } = require('../wire.js');

const EPOCH = 1767225600000000000n; // 2026-01-01T00:00:00Z
const MONO = 1e9;

test('strict: every read adds the quantum; realtime = epoch + t, monotonic = mono + t', () => {
  const c = strictClock({ epochNs: EPOCH, monoNs: MONO, quantumNs: 1000 });
  assert.strictEqual(c.nowMs(), 1767225600000);
  assert.strictEqual(c.t, 1000);
  assert.strictEqual(c.monoNs(), MONO + 2000);
  assert.strictEqual(c.realtimeNs(), EPOCH + 3000n);
  assert.strictEqual(c.reads, 3);
  assert.strictEqual(new Date(c.nowMs()).toISOString(), '2026-01-01T00:00:00.000Z');
});

test('strict: Date.now crosses a millisecond after 1000 reads of 1 µs', () => {
  const c = strictClock({ epochNs: EPOCH, monoNs: MONO, quantumNs: 1000 });
  const seen = [];
  for (let i = 0; i < 1000; i++) seen.push(c.nowMs());
  assert.strictEqual(seen[998], 1767225600000);
  assert.strictEqual(seen[999], 1767225600001);
});

test('strict: timeOrigin + performance.now() is the realtime clock', () => {
  const c = strictClock({ epochNs: EPOCH + 123456789n, monoNs: MONO, quantumNs: 1000 });
  const perfNow = c.monoNs() / 1e6;
  const wall = Number(EPOCH + 123456789n + BigInt(c.t)) / 1e6;
  assert.ok(Math.abs(c.timeOriginMs() + perfNow - wall) < 0.001);
  assert.strictEqual(c.reads, 1, 'timeOrigin is not a read');
});

test('strict: sleeps advance t without a read', () => {
  const c = strictClock({ epochNs: EPOCH, monoNs: MONO, quantumNs: 1000 });
  c.sleep(5e9);
  assert.strictEqual(c.nowMs(), 1767225605000);
  assert.deepStrictEqual([c.reads, c.sleepNs, c.t], [1, 5e9, 5e9 + 1000]);
});

test('splitEpoch floors epochs before 1970', () => {
  assert.deepStrictEqual(splitEpoch(-1n), [-1, 999999]);
  assert.deepStrictEqual(splitEpoch(1500000n), [1, 500000]);
});

function fakeNative() {
  let ms = 1795000000000;
  let perf = 30;
  return {
    dateNow: () => (ms += 3),
    perfNow: () => (perf += 0.0015),
    timeOrigin: 1794999999970.25,
  };
}

test('recording logs every read as a tick and replay serves the same results', () => {
  const puts = [];
  const rec = recordingClock({ monoNs: MONO, batch: 4, native: fakeNative(), put: (k, v) => puts.push([Buffer.from(k), decode(v.bytes)]) });
  const reads = (c) => [c.nowMs(), c.monoNs(), c.timeOriginMs(), c.nowMs(), c.monoNs(), c.timeOriginMs(), c.nowMs()];
  const recorded = reads(rec);
  assert.strictEqual(puts.length, 1, 'one full batch uploaded');
  rec.flush();
  assert.strictEqual(rec.reads, 6, 'timeOrigin is read once');
  const kinds = Buffer.concat(puts.map((p) => p[0]));
  const values = puts.flatMap((p) => p[1]);
  assert.strictEqual(kinds.toString('hex'), '000100000100');
  assert.strictEqual(values[0], 1795000000003000000n, 'realtime ticks are ns since the epoch');
  assert.strictEqual(typeof values[1], 'number');
  assert.ok(values[1] > MONO && values[1] < MONO + 1e6, 'monotonic ticks start at mono_ns');

  const fetches = [];
  const drifts = [];
  const rep = replayClock({
    epochNs: EPOCH, monoNs: MONO, quantumNs: 1000, batch: 4,
    fetch: (from, max) => {
      fetches.push([from, max]);
      return { kinds: kinds.subarray(from, from + max), values: values.slice(from, from + max), end: from + max >= kinds.length };
    },
    drift: (what, detail) => drifts.push([what, detail]),
  });
  assert.deepStrictEqual(reads(rep), recorded);
  assert.deepStrictEqual(fetches, [[0, 4], [4, 4]]);
  assert.deepStrictEqual(drifts, []);
  // past the end: drift once, then the last value plus the quantum
  const last = recorded[6];
  assert.strictEqual(rep.nowMs(), last);
  assert.strictEqual(rep.monoNs(), recorded[4] + 1000);
  assert.strictEqual(drifts.length, 1);
  assert.match(drifts[0][1], /read 7 past the 6 recorded ticks/);
});

test('replay reports a read of the wrong kind once and stays deterministic', () => {
  const drifts = [];
  const make = () => replayClock({
    epochNs: EPOCH, monoNs: MONO, quantumNs: 1000, batch: 16,
    fetch: () => ({ kinds: Buffer.from([0, 0]), values: [EPOCH, EPOCH + 5000000n], end: true }),
    drift: (what, detail) => drifts.push(detail),
  });
  const a = make();
  const b = make();
  const seq = (c) => [c.monoNs(), c.nowMs(), c.monoNs(), c.monoNs()];
  assert.deepStrictEqual(seq(a), seq(b));
  assert.strictEqual(drifts.filter((d) => /monotonic, the recording has realtime/.test(d)).length, 2); // once per clock
});
