'use strict';
// timers.js: setTimeout/setInterval on virtual time (strict mode).
//
// THE RULE
//
// The shim keeps its own heap of virtual timers ordered by (deadline,
// registration order); deadlines are virtual ns (stream offset t + delay).
// One real handle drives the heap (a native setImmediate, or a native
// setTimeout while waiting for I/O). Each time it runs it looks at the
// earliest timer:
//
//   1. due (deadline <= t): fire it.
//   2. not due, no OUTSTANDING I/O, but immediates pending (the agent's or
//      Node's own setImmediate callbacks): the loop is not idle yet. Look
//      again on the next turn, after them. An immediate that a timer callback
//      schedules thus runs before the next, later timer, as in Node. Bounded:
//      after 1000 such turns in a row (a setImmediate loop polling for a
//      timer) rule 3 applies anyway.
//   3. not due, no OUTSTANDING I/O, no immediates: jump t to its deadline and
//      fire it. The jump runs from a native setImmediate, so I/O callbacks
//      that are ready get their turn (poll phase) before virtual time moves.
//   4. not due and I/O outstanding: wait for the I/O with native timers, in
//      polls of at most 16 ms, until the polls have waited (deadline - t) in
//      all with no I/O progress. When the I/O is done first, rules 2-3
//      apply; when the waits add up first, the timer fires (t jumps to its
//      deadline). Virtual time does not move while waiting: clock reads
//      during the wait still see t advance by the quantum only, so what the
//      agent reads does not depend on how long the I/O took. A poll counts
//      for the native time it took, at most its own timeout: under dal's
//      syscall layer the native clock is the process's virtual one, which a
//      wait held for a response the proxy owes does not move, and which
//      another thread's wait (Node's platform thread waits 5 s at a time)
//      may move while the poll waits: that is not this poll's time. Any I/O
//      progress (a byte read or written by a socket or pipe, a request or
//      handle begun or ended, the program reading the clock) starts the
//      count again, so waits spread over a run (a few ms per request
//      before the proxy holds it) never add up to a timeout. What was
//      waited for a given earliest timer is kept when the agent adds or
//      clears other timers, so a timeout still fires after its duration
//      while I/O is pending.
//
// One timer fires per turn of the event loop, so nextTicks, microtasks,
// immediates and ready I/O run between two timer callbacks as in Node.
//
// OUTSTANDING I/O is read from process.getActiveResourcesInfo(), refined
// with process._getActiveHandles() for sockets. It counts: fs requests, DNS
// requests, connect/write/shutdown requests, child processes, worker ports,
// client sockets (connecting or open and ref'd), stdin while it is being
// read, and any resource type not listed below. It does NOT count: the
// shim's own driver and connection, native Timeout/Immediate objects (Node's
// internal timers, e.g. keep-alive timeouts), stdout/stderr, listening
// servers (TCPServerWrap, PipeServerWrap) and their accepted connections
// (which wait for a peer, like the server does), bound UDP sockets, signal
// handlers and fs watchers. Unref'd handles are not listed by Node at all.
//
// WHY: an agent's typical race is a request to an LLM or tool API against a
// timeout timer. Locally served (replay) the request completes long before
// the timeout in real time, so the outcome is the same on every run; under
// dal's syscall layer with the delivery order (record's default), a poll
// waiting for a response the proxy owes is held until it comes, however
// long upstream takes, so recording and replay agree too. A
// listening server, an idle keep-alive connection or a watcher never
// freezes time: they do not count, and when something does count the timers
// still fire after their real duration, so no configuration hangs.
//
// LIMITS
//   - Work on the libuv threadpool that is not a request object (zlib,
//     crypto.pbkdf2/scrypt/generateKeyPair callbacks) is invisible to
//     getActiveResourcesInfo: a virtual timer can fire before it completes
//     even if its real duration is shorter than the timer's.
//   - An open ref'd client socket (a WebSocket, a database connection) makes
//     timers run at real speed while it is open.
//   - When I/O the proxy does not hold (a child's pipe, a WebSocket, the
//     moment before the proxy has read a request) and a timer race closely
//     in real time, the winner depends on real timing.
//   - A ref'd setInterval that is never cleared keeps Node alive forever,
//     natively too; here it burns through virtual time as fast as the CPU
//     allows: bound such agents with dal-exec --timeout.
//   - Rule 2 sees ref'd immediates only (Node does not list unref'd ones).
//   - Completed I/O is noticed by polling, within 16 ms of real time; that
//     delay costs wall time only, never changes virtual time.
//   - Node's internal timers (socket.setTimeout, http keep-alive, the
//     timeout option of child_process.exec) stay on real time.
//     AbortSignal.timeout is moved onto virtual time by dal-register.js.
//   - setImmediate, process.nextTick and queueMicrotask stay native (faking
//     them has hung Node); they carry no time.

const { AsyncResource } = require('async_hooks');

const TIMEOUT_MAX = 2 ** 31 - 1;
const MAX_FIRED_LOG = 65536;
const MAX_POLL_MS = 16;
const MAX_DEFER = 1000;

// What the event loop has pending besides virtual timers (see THE RULE).
const IDLE = 0;
const IMMEDIATES = 1;
const IO = 2;
const NONE = 3; // nothing ref'd besides timers: Node would exit once no ref'd timer is left

// AbortError mirrors the error timers/promises rejects with.
class AbortError extends Error {
  constructor(message = 'The operation was aborted', options = undefined) {
    super(message, options);
    this.code = 'ABORT_ERR';
    this.name = 'AbortError';
  }
}

function invalidArgType(name, expected, actual) {
  let shown;
  if (actual == null) shown = ` Received ${actual}`;
  else if (typeof actual === 'function') shown = ` Received function ${actual.name}`;
  else if (typeof actual === 'object') shown = ' Received an instance of ' + (actual.constructor && actual.constructor.name || 'Object');
  else shown = ` Received type ${typeof actual} (${String(actual).slice(0, 25)})`;
  const e = new TypeError(`The "${name}" argument must be ${expected}.${shown}`);
  e.code = 'ERR_INVALID_ARG_TYPE';
  return e;
}

// loopActivity reports what the event loop has pending besides virtual
// timers: IO (outstanding I/O, see THE RULE), else IMMEDIATES (ref'd
// immediates are queued), else IDLE. ignore(name) lets the caller exclude
// resources of its own. Call it from inside the driver: the immediate that
// runs it is no longer counted by Node.
function loopActivity(ignore) {
  const info = process.getActiveResourcesInfo(); // ref'd resources only
  let sockets = false;
  let immediates = false;
  let alive = false;
  for (let i = 0; i < info.length; i++) {
    const name = info[i];
    switch (name) {
      case 'Immediate':
        immediates = true;
        continue;
      case 'Timeout':
        continue;
      case 'TCPServerWrap': case 'PipeServerWrap':
      case 'SignalWrap': case 'FSEventWrap': case 'StatWatcher': case 'UDPWrap':
        alive = true;
        continue;
      case 'TCPSocketWrap': case 'TCPWrap': case 'PipeWrap': case 'TTYWrap':
        // Stdio pipes and ttys are listed as ref'd but hold the loop only
        // while reading; socketsOutstanding tells the live ones apart.
        sockets = true;
        continue;
      default:
        if (ignore && ignore(name)) continue;
        return IO;
    }
  }
  if (sockets && socketsOutstanding()) return IO;
  if (immediates) return IMMEDIATES;
  return alive ? IDLE : NONE;
}

// outstandingIO reports whether the process has outstanding I/O.
function outstandingIO(ignore) {
  return loopActivity(ignore) === IO;
}

function socketsOutstanding() {
  const handles = process._getActiveHandles();
  for (let i = 0; i < handles.length; i++) {
    const h = handles[i];
    if (h === null || typeof h !== 'object') continue;
    if (h.listening !== undefined && typeof h.address === 'function' && typeof h.listen === 'function') continue; // a server
    const fd = h.fd !== undefined ? h.fd : h._handle && h._handle.fd;
    if (h._isStdio || fd === 1 || fd === 2) continue;
    if (fd === 0 || h === process.stdin) {
      if (h._handle && h._handle.reading) return true;
      continue;
    }
    if (h.server || (h._tlsOptions && h._tlsOptions.isServer)) continue; // accepted connection
    // An unref'd socket does not hold the loop: it is a pooled keep-alive
    // connection (Node's http.Agent and undici unref idle ones), with no
    // request in flight; counting it would make an idle agent wait out its
    // timers in real time, or not, depending on when the pool lets go.
    const hh = h._handle;
    if (hh && typeof hh.hasRef === 'function' && !hh.hasRef()) continue;
    if (typeof h.write === 'function' && (h.readable !== undefined || h.writable !== undefined)) return true; // a socket
    if (h.constructor && h.constructor.name === 'ChildProcess') return true;
  }
  return false;
}

// ioProgress returns a mark that changes when the process's I/O makes
// progress: bytes read or written by its ref'd sockets and pipes, or its
// ref'd resources (requests, handles, besides timers and immediates)
// coming or going.
function ioProgress() {
  let bytes = 0;
  const handles = process._getActiveHandles();
  for (let i = 0; i < handles.length; i++) {
    const h = handles[i];
    if (h === null || typeof h !== 'object') continue;
    const r = h.bytesRead;
    const w = h.bytesWritten;
    if (typeof r === 'number') bytes += r;
    if (typeof w === 'number') bytes += w;
  }
  let n = 0;
  const info = process.getActiveResourcesInfo();
  for (let i = 0; i < info.length; i++) {
    if (info[i] !== 'Timeout' && info[i] !== 'Immediate') n++;
  }
  return bytes * 4096 + n;
}

// createTimers returns the virtual-timer API driven on clock.
//
//   clock:  { t }  the stream's virtual offset in ns (a Number), read and
//           advanced by the timers; clock.sleepNs (if present) accumulates
//           every advance the timers make.
//   native: { setImmediate, clearImmediate, setTimeout, clearTimeout, nowNs }
//           the real primitives, saved before any patching.
//   activity: () => IDLE | IMMEDIATES | IO (default: loopActivity).
//   progress: () => a mark that changes when I/O makes progress (default:
//           ioProgress).
function createTimers({ clock, native, activity = loopActivity, progress = ioProgress }) {
  const heap = []; // entries {d: deadline ns, s: seq, timer}, a binary min-heap
  const byId = new Map(); // numeric ids handed out through Symbol.toPrimitive
  const fired = []; // [deadline_offset_ns, seq] in firing order
  let firedCount = 0;
  let seq = 0;
  let nextId = 1;
  let active = 0; // timers with a live heap entry
  let refed = 0; // of those, how many are ref'd

  let driver = null; // native Immediate or Timeout
  let driverKind = 0; // 0 none, 1 plan queued (immediate), 2 waiting for I/O (timeout)
  let waitEntry = null; // the entry whose deadline the I/O wait is for
  let waited = 0; // native ns the polls for it waited with no I/O progress
  let waitSeen = 0; // clock.t at the last poll: a change means the program ran
  let waitMark = 0; // progress() at the last poll
  let pollStart = 0; // native ns when the poll under way began
  let pollNs = 0; // its timeout
  let polled = 0; // native ns the last poll counts for (at most its timeout)
  let pollMs = 1;
  let deferred = 0; // turns in a row a jump waited for immediates

  // ------------------------------------------------------------ the heap

  function less(a, b) {
    return a.d < b.d || (a.d === b.d && a.s < b.s);
  }

  function push(e) {
    heap.push(e);
    let i = heap.length - 1;
    while (i > 0) {
      const p = (i - 1) >> 1;
      if (!less(heap[i], heap[p])) break;
      [heap[i], heap[p]] = [heap[p], heap[i]];
      i = p;
    }
  }

  function pop() {
    const top = heap[0];
    const last = heap.pop();
    if (heap.length > 0) {
      heap[0] = last;
      let i = 0;
      for (;;) {
        const l = 2 * i + 1;
        const r = l + 1;
        let m = i;
        if (l < heap.length && less(heap[l], heap[m])) m = l;
        if (r < heap.length && less(heap[r], heap[m])) m = r;
        if (m === i) break;
        [heap[i], heap[m]] = [heap[m], heap[i]];
        i = m;
      }
    }
    return top;
  }

  // top returns the earliest live entry, dropping stale ones (cleared or
  // re-armed timers leave their old entry behind).
  function top() {
    while (heap.length > 0) {
      const e = heap[0];
      if (e.timer._entry === e) return e;
      pop();
    }
    return null;
  }

  // ------------------------------------------------------------ timers

  function arm(timer, deadline) {
    const e = { d: deadline, s: ++seq, timer };
    if (timer._entry === null) {
      active++;
      if (timer._ref) refed++;
    }
    timer._entry = e;
    push(e);
  }

  function disarm(timer) {
    if (timer._entry === null) return;
    timer._entry = null;
    active--;
    if (timer._ref) refed--;
    if (heap.length > 64 && heap.length > 4 * active) compact();
  }

  function compact() {
    const live = heap.filter((e) => e.timer._entry === e);
    heap.length = 0;
    for (const e of live) push(e);
  }

  class Timeout {
    constructor(callback, after, args, repeat) {
      this._idleTimeout = after;
      this._onTimeout = callback;
      this._timerArgs = args;
      this._repeat = repeat ? after : null;
      this._destroyed = false;
      this._ref = true;
      this._entry = null;
      this._id = 0;
      this._cleared = false;
      this._resource = new AsyncResource('Timeout');
    }

    ref() {
      if (!this._ref) {
        this._ref = true;
        if (this._entry !== null) { refed++; syncRef(); }
      }
      return this;
    }

    unref() {
      if (this._ref) {
        this._ref = false;
        if (this._entry !== null) { refed--; syncRef(); }
      }
      return this;
    }

    hasRef() {
      return this._ref;
    }

    // refresh restarts the timer from now with its original delay, as a new
    // registration; it revives a timer that already fired, not a cleared one.
    refresh() {
      if (!this._cleared) {
        this._destroyed = false;
        arm(this, clock.t + delayNs(this._idleTimeout));
        schedule();
      }
      return this;
    }

    close() {
      clear(this);
      return this;
    }

    [Symbol.toPrimitive]() {
      if (this._id === 0) {
        this._id = nextId++;
        if (!this._cleared) byId.set(this._id, this);
      }
      return this._id;
    }
  }
  if (typeof Symbol.dispose === 'symbol') {
    Timeout.prototype[Symbol.dispose] = function dispose() { clear(this); };
  }

  function delayNs(ms) {
    return Math.round(ms * 1e6);
  }

  function coerceDelay(after) {
    after *= 1;
    if (!(after >= 1 && after <= TIMEOUT_MAX)) {
      if (after > TIMEOUT_MAX) {
        process.emitWarning(`${after} does not fit into a 32-bit signed integer.\nTimeout duration was set to 1.`, 'TimeoutOverflowWarning');
      }
      after = 1;
    }
    return after;
  }

  function create(callback, after, args, repeat) {
    if (typeof callback !== 'function') throw invalidArgType('callback', 'of type function', callback);
    const timer = new Timeout(callback, coerceDelay(after), args, repeat);
    arm(timer, clock.t + delayNs(timer._idleTimeout));
    schedule();
    return timer;
  }

  function setTimeout(callback, after, arg1, arg2, arg3) {
    let args;
    const n = arguments.length;
    if (n > 2) {
      if (n === 3) args = [arg1];
      else if (n === 4) args = [arg1, arg2];
      else args = Array.prototype.slice.call(arguments, 2);
    }
    return create(callback, after, args, false);
  }

  function setInterval(callback, repeat, arg1, arg2, arg3) {
    let args;
    const n = arguments.length;
    if (n > 2) {
      if (n === 3) args = [arg1];
      else if (n === 4) args = [arg1, arg2];
      else args = Array.prototype.slice.call(arguments, 2);
    }
    return create(callback, repeat, args, true);
  }

  // clear returns true when timer was one of ours (or a numeric id of ours).
  function clear(timer) {
    if (timer instanceof Timeout) {
      timer._cleared = true;
      timer._destroyed = true;
      if (timer._id !== 0) byId.delete(timer._id);
      if (timer._entry !== null) {
        disarm(timer);
        schedule();
      }
      return true;
    }
    if (typeof timer === 'number' || typeof timer === 'string') {
      const t = byId.get(Number(timer));
      if (t !== undefined) return clear(t);
    }
    return false;
  }

  function clearTimeout(timer) {
    if (timer == null) return;
    if (!clear(timer)) native.clearTimeout(timer);
  }

  function clearInterval(timer) {
    if (timer == null) return;
    if (!clear(timer)) native.clearInterval(timer);
  }

  // ------------------------------------------------------------ the driver

  function syncRef() {
    if (driver === null) return;
    if (refed > 0) driver.ref();
    else driver.unref();
  }

  // schedule makes sure a plan runs for the current earliest timer.
  function schedule() {
    if (driverKind === 1) { syncRef(); return; }
    if (driverKind === 2) {
      // A poll cut short still counts for what it waited.
      native.clearTimeout(driver);
      driver = null;
      driverKind = 0;
      if (pollNs > 0) polled = Math.min(Math.max(native.nowNs() - pollStart, 0), pollNs);
      pollNs = 0;
    }
    if (active === 0) { waitEntry = null; return; }
    driver = native.setImmediate(plan);
    driverKind = 1;
    syncRef();
  }

  function plan() {
    driver = null;
    driverKind = 0;
    const e = top();
    if (e === null) { waitEntry = null; return; }
    if (e.d <= clock.t) { waitEntry = null; fire(e); return; }
    const pending = activity();
    if (pending === IMMEDIATES && deferred < MAX_DEFER) {
      deferred++;
      driver = native.setImmediate(plan); // after the immediates queued now
      driverKind = 1;
      syncRef();
      return;
    }
    if (pending === NONE && refed === 0) {
      // Only unref'd timers are left and nothing else holds the loop: Node
      // exits here without firing them, and so do we. Look again later in
      // case something we cannot see keeps the process alive.
      waitEntry = null;
      driver = native.setTimeout(plan, 10);
      driverKind = 2;
      syncRef();
      return;
    }
    if (pending !== IO) { waitEntry = null; polled = 0; fire(e); return; }
    // I/O is outstanding: wait for it, at most until the polls have waited
    // the timer's whole delay with no I/O progress (THE RULE, 4).
    const mark = progress();
    if (waitEntry !== e || waitSeen !== clock.t || mark !== waitMark) {
      waitEntry = e;
      waited = 0;
      waitSeen = clock.t;
      waitMark = mark;
      pollMs = 1;
    } else {
      waited += polled;
    }
    polled = 0;
    const left = (e.d - clock.t) - waited;
    if (left <= 0) { waitEntry = null; fire(e); return; }
    const ms = Math.max(1, Math.min(Math.ceil(left / 1e6), pollMs));
    pollMs = Math.min(pollMs * 2, MAX_POLL_MS);
    pollStart = native.nowNs();
    pollNs = ms * 1e6;
    driver = native.setTimeout(afterPoll, ms);
    driverKind = 2;
    syncRef();
  }

  // afterPoll runs when a poll's native timer fires: it counts the poll
  // for the native time it took, at most its timeout.
  function afterPoll() {
    polled = Math.min(Math.max(native.nowNs() - pollStart, 0), pollNs);
    pollNs = 0;
    plan();
  }

  function fire(e) {
    const timer = e.timer;
    deferred = 0;
    pop();
    if (clock.t < e.d) {
      if (clock.sleepNs !== undefined) clock.sleepNs += e.d - clock.t;
      clock.t = e.d;
    }
    if (firedCount < MAX_FIRED_LOG) fired.push([e.d, e.s]);
    firedCount++;
    const start = clock.t;
    timer._entry = null;
    active--;
    if (timer._ref) refed--;
    if (!timer._repeat) {
      timer._destroyed = true;
      if (timer._id !== 0) byId.delete(timer._id);
    }
    schedule(); // before the callback: an exception in it must not stop the timers
    try {
      const args = timer._timerArgs;
      if (args === undefined) timer._resource.runInAsyncScope(timer._onTimeout, timer);
      else timer._resource.runInAsyncScope(timer._onTimeout, timer, ...args);
    } finally {
      if (timer._repeat && !timer._cleared && timer._entry === null) {
        timer._idleTimeout = timer._repeat;
        arm(timer, start + delayNs(timer._repeat));
        schedule();
      }
    }
  }

  // ------------------------------------------------------------ promises

  function validateOptions(options) {
    if (options === null || typeof options !== 'object') throw invalidArgType('options', 'of type object', options);
    const { signal, ref = true } = options;
    if (signal !== undefined && (signal === null || typeof signal !== 'object' || !('aborted' in signal))) {
      throw invalidArgType('options.signal', 'an instance of AbortSignal', signal);
    }
    if (typeof ref !== 'boolean') throw invalidArgType('options.ref', 'of type boolean', ref);
    return { signal, ref };
  }

  function promiseSetTimeout(after, value, options = {}) {
    let signal, ref;
    try {
      ({ signal, ref } = validateOptions(options));
    } catch (err) {
      return Promise.reject(err);
    }
    if (signal && signal.aborted) return Promise.reject(new AbortError(undefined, { cause: signal.reason }));
    let onCancel;
    return new Promise((resolve, reject) => {
      const timer = create(resolve, after, [value], false);
      if (!ref) timer.unref();
      if (signal) {
        onCancel = () => {
          clear(timer);
          reject(new AbortError(undefined, { cause: signal.reason }));
        };
        signal.addEventListener('abort', onCancel, { once: true });
      }
    }).finally(() => {
      if (signal && onCancel) signal.removeEventListener('abort', onCancel);
    });
  }

  async function* promiseSetInterval(after, value, options = {}) {
    const { signal, ref } = validateOptions(options);
    if (signal && signal.aborted) throw new AbortError(undefined, { cause: signal.reason });
    let onCancel;
    let interval;
    try {
      let notYielded = 0;
      let callback;
      interval = create(() => {
        notYielded++;
        if (callback) { callback(); callback = undefined; }
      }, after, undefined, true);
      if (!ref) interval.unref();
      if (signal) {
        onCancel = () => {
          clear(interval);
          if (callback) {
            callback(Promise.reject(new AbortError(undefined, { cause: signal.reason })));
            callback = undefined;
          }
        };
        signal.addEventListener('abort', onCancel, { once: true });
      }
      while (!(signal && signal.aborted)) {
        if (notYielded === 0) await new Promise((resolve) => { callback = resolve; });
        for (; notYielded > 0; notYielded--) yield value;
      }
      throw new AbortError(undefined, { cause: signal && signal.reason });
    } finally {
      if (interval) clear(interval);
      if (signal && onCancel) signal.removeEventListener('abort', onCancel);
    }
  }

  function schedulerWait(delay, options) {
    return promiseSetTimeout(delay, undefined, options);
  }

  return {
    Timeout,
    setTimeout,
    setInterval,
    clearTimeout,
    clearInterval,
    promises: { setTimeout: promiseSetTimeout, setInterval: promiseSetInterval, wait: schedulerWait },
    fired, // [deadline_offset_ns, seq] in firing order (at most 65536)
    stats: () => ({ active, refed, fired: firedCount, heap: heap.length }),
  };
}

module.exports = { createTimers, loopActivity, outstandingIO, ioProgress, AbortError, MAX_FIRED_LOG, IDLE, IMMEDIATES, IO, NONE };
