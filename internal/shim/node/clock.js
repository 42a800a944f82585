'use strict';
// clock.js: the three clock sources behind the patched Date, performance and
// process.hrtime (docs/protocol.md, "Virtual time").
//
// Every source has the same shape, so the patches do not care which one runs:
//
//   nowMs()        realtime read, integer ms since the Unix epoch (Date)
//   monoNs()       monotonic read, ns as a Number (performance.now = ns/1e6,
//                  process.hrtime = ns)
//   timeOriginMs() performance.timeOrigin, ms (fractional)
//   reads          clock reads so far
//   t              virtual offset in ns (strict), elapsed ns (recording)
//   sleepNs        virtual ns advanced other than by reads (strict)
//
// strict:    t += quantum per read; realtime = epoch + t, monotonic = mono + t;
//            timeOrigin = epoch - mono, so timeOrigin + performance.now()
//            equals Date.now() up to the sub-ms part. Reads are pure
//            arithmetic: no IPC, no allocation. Values stay exact while t
//            is below 2^53 ns (104 days of virtual time).
// recording: seeded and logged modes. Real clocks; every read is buffered as
//            a tick (kind 0 realtime, 1 monotonic; value in ns) and uploaded
//            with ticks.put every `batch` reads and at exit. Realtime ticks
//            carry what Date.now() returned (whole ms) or timeOrigin (whole
//            µs); monotonic ticks carry mono_ns + the ns elapsed since the
//            shim started, so performance.now() starts near mono_ns/1e6 ms.
// replay:    serves the recorded ticks back (ticks.fetch, `batch` at a time)
//            through the same value -> result functions as recording, so a
//            replayed read returns exactly what the recorded read returned.
//            Reading past the end of the recording, or a read of the other
//            kind than recorded, is drift: reported once, then each read
//            continues from the last served value plus the quantum.

const { scaledUints } = require('./wire.js');

const KIND_REALTIME = 0;
const KIND_MONOTONIC = 1;
// ns per buffered unit, by kind: realtime ticks are buffered in µs
const TICK_SCALE = [1000, 1];

// splitEpoch splits an epoch in ns (BigInt) into whole ms and the ns below,
// flooring for instants before 1970.
function splitEpoch(epochNs) {
  let ms = epochNs / 1000000n;
  let sub = epochNs - ms * 1000000n;
  if (sub < 0n) { ms -= 1n; sub += 1000000n; }
  return [Number(ms), Number(sub)];
}

function strictClock({ epochNs, monoNs, quantumNs }) {
  const [epochMs, epochSubNs] = splitEpoch(epochNs);
  const q = quantumNs;
  const origin = Number(epochNs - BigInt(monoNs)) / 1e6;
  const c = {
    kind: 'strict',
    t: 0,
    reads: 0,
    sleepNs: 0,
    nowMs() {
      c.reads++;
      return epochMs + Math.floor((epochSubNs + (c.t += q)) / 1e6);
    },
    monoNs() {
      c.reads++;
      return monoNs + (c.t += q);
    },
    timeOriginMs() {
      return origin;
    },
    // realtimeNs is the realtime value of the next read as a BigInt (dal.now()).
    realtimeNs() {
      c.reads++;
      return epochNs + BigInt(c.t += q);
    },
    // sleep advances virtual time by ns without a clock read.
    sleep(ns) {
      c.t += ns;
      c.sleepNs += ns;
    },
    flush() {},
  };
  return c;
}

// realSource reads the real clocks for recording.
function realSource({ monoNs, native }) {
  const perfStart = native.perfNow();
  const originAdjMs = native.timeOrigin + perfStart - monoNs / 1e6;
  return {
    // each returns the tick value in the unit the tick buffer keeps:
    // realtime in µs, monotonic in ns (both safe Numbers)
    nowUs: () => native.dateNow() * 1000,
    originUs: () => Math.round(originAdjMs * 1000),
    monoNs: () => monoNs + Math.round((native.perfNow() - perfStart) * 1e6),
    elapsedNs: () => Math.round((native.perfNow() - perfStart) * 1e6),
  };
}

// recordingClock logs every read. put(kinds: Buffer, values) uploads one
// batch synchronously; values is the msgpack array of the tick values in ns
// (a wire.Raw, encoded without BigInt).
function recordingClock({ monoNs, batch, native, put }) {
  const real = realSource({ monoNs, native });
  const kinds = new Uint8Array(batch);
  const vals = new Float64Array(batch); // realtime: µs; monotonic: ns
  let n = 0;
  let originUs = -1;
  const c = {
    kind: 'recording',
    reads: 0,
    sleepNs: 0,
    get t() { return real.elapsedNs(); },
    nowMs() {
      const us = real.nowUs();
      kinds[n] = KIND_REALTIME;
      vals[n] = us;
      c.reads++;
      if (++n === batch) c.flush();
      return us / 1000;
    },
    monoNs() {
      const ns = real.monoNs();
      kinds[n] = KIND_MONOTONIC;
      vals[n] = ns;
      c.reads++;
      if (++n === batch) c.flush();
      return ns;
    },
    // timeOrigin is read (and logged) once, then cached.
    timeOriginMs() {
      if (originUs < 0) {
        originUs = real.originUs();
        kinds[n] = KIND_REALTIME;
        vals[n] = originUs;
        c.reads++;
        if (++n === batch) c.flush();
      }
      return originUs / 1000;
    },
    realtimeNs() {
      return BigInt(c.nowMs()) * 1000000n;
    },
    pending() { return n; },
    flush() {
      if (n === 0) return;
      const values = scaledUints(vals, kinds, TICK_SCALE, n);
      const k = Buffer.from(kinds.subarray(0, n));
      n = 0;
      put(k, values);
    },
  };
  return c;
}

// replayClock serves recorded ticks. fetch(from, max) returns {kinds (bytes),
// values (ints), end}; drift(what, detail) reports. Past the end of the
// recording (or on a read of the other kind than recorded) each read
// continues from the last value served for its kind plus the quantum, so a
// drifting replay stays deterministic; the drift is reported once.
function replayClock({ epochNs, monoNs, quantumNs, batch, fetch, drift }) {
  let kinds = new Uint8Array(0);
  let vals = new Float64Array(0);
  let pos = 0;
  let base = 0; // index of kinds[0] in the recording
  let end = false;
  let pastEnd = false;
  let mismatched = false;
  let originUs = -1;
  let lastUs = Number(epochNs / 1000n); // last realtime value served, µs
  let lastNs = monoNs; // last monotonic value served, ns

  function refill() {
    if (end) return false;
    const r = fetch(base + kinds.length, batch);
    base += kinds.length;
    const k = r.kinds || Buffer.alloc(0);
    const v = r.values || [];
    kinds = Uint8Array.from(k);
    vals = new Float64Array(kinds.length);
    for (let i = 0; i < kinds.length; i++) {
      const x = BigInt(v[i]);
      vals[i] = kinds[i] === KIND_REALTIME ? Number(x / 1000n) : Number(x);
    }
    pos = 0;
    end = !!r.end || kinds.length === 0;
    return kinds.length > 0;
  }

  // next returns the value of the next read of kind: realtime in µs,
  // monotonic in ns.
  function next(kind) {
    c.reads++;
    if (pos === kinds.length && (pastEnd || !refill())) {
      if (!pastEnd) {
        pastEnd = true;
        drift('clock', `read ${c.reads} past the ${base + kinds.length} recorded ticks; later reads continue from the last recorded value`);
      }
      return advance(kind);
    }
    const k = kinds[pos];
    const v = vals[pos++];
    if (k !== kind) {
      if (!mismatched) {
        mismatched = true;
        drift('clock', `read ${c.reads} is ${kind === KIND_REALTIME ? 'realtime' : 'monotonic'}, the recording has ${k === KIND_REALTIME ? 'realtime' : 'monotonic'} there`);
      }
      return advance(kind);
    }
    if (kind === KIND_REALTIME) lastUs = v;
    else lastNs = v;
    return v;
  }

  function advance(kind) {
    if (kind === KIND_REALTIME) return (lastUs += quantumNs / 1000);
    return (lastNs += quantumNs);
  }

  const c = {
    kind: 'replay',
    reads: 0,
    sleepNs: 0,
    t: 0,
    nowMs() {
      return Math.floor(next(KIND_REALTIME) / 1000);
    },
    monoNs() {
      return next(KIND_MONOTONIC);
    },
    timeOriginMs() {
      if (originUs < 0) originUs = next(KIND_REALTIME);
      return originUs / 1000;
    },
    realtimeNs() {
      return BigInt(c.nowMs()) * 1000000n;
    },
    flush() {},
  };
  return c;
}

module.exports = { strictClock, recordingClock, replayClock, splitEpoch, KIND_REALTIME, KIND_MONOTONIC };
