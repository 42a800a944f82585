'use strict';
// wire.js: the dald wire protocol for the Node shim (docs/protocol.md, "Frames").
//
// Two parts, built on Node's standard library only:
//   - a msgpack codec for the subset the protocol uses: maps with string keys,
//     str, bin, ints of every width, float64 (float32 accepted), bool, nil,
//     arrays. Integers decode to Number when they are safe integers and to
//     BigInt otherwise; BigInt and Number both encode as the smallest msgpack
//     int that holds them.
//   - Client, a synchronous request/reply connection to dald over its Unix
//     socket. Node has no synchronous socket API: the socket is connected with
//     the pipe_wrap binding (connect(2) completes at once for a local Unix
//     socket), then driven with fs.writeSync/fs.readSync on its non-blocking
//     fd, waiting ~20 µs with Atomics.wait between reads that find nothing.
//     The handle is unref'd, so it never keeps the event loop alive, and the
//     fd is close-on-exec, so children do not inherit it.

const fs = require('fs');

const MAX_FRAME = 4 << 20;

// The real clock, captured when the module loads (before any patching): the
// client's own deadlines must not read, or advance, the agent's clock.
const realNow = Date.now;

// ---------------------------------------------------------------- encoding

const MIN_SAFE = -(2n ** 53n);
const MAX_SAFE = 2n ** 53n;
const MAX_U64 = 2n ** 64n;
const MIN_I64 = -(2n ** 63n);
const TWO_32 = 0x100000000;
const MAX_SAFE_NUMBER = Number.MAX_SAFE_INTEGER;

// Raw is a value encoded already; the encoder copies its bytes.
class Raw {
  constructor(bytes) {
    this.bytes = bytes;
  }
}

// scaledUints returns the msgpack array of vals[i] * scales[tags[i]] for
// i < n, each a uint64, computed exactly without BigInt: vals are
// non-negative integers below 2^53 and the products below 2^64. Used for
// tick values (realtime µs * 1000, monotonic ns * 1), which exceed 2^53.
function scaledUints(vals, tags, scales, n) {
  const e = new Encoder(5 + 9 * n);
  e.arrayHeader(n);
  const buf = e.buf;
  let pos = e.pos;
  for (let i = 0; i < n; i++) {
    const v = vals[i];
    const scale = scales[tags[i]];
    if (!(v >= 0 && v <= MAX_SAFE_NUMBER && Math.floor(v) === v)) {
      throw new RangeError(`scaledUints: ${v} is not an integer in [0, 2^53)`);
    }
    // v = vh * 2^32 + vl; v * scale = (vh * scale + carry) * 2^32 + (vl * scale mod 2^32)
    const vh = Math.floor(v / TWO_32);
    const lo = (v - vh * TWO_32) * scale; // < 2^32 * scale, exact
    const carry = Math.floor(lo / TWO_32);
    const hi = vh * scale + carry;
    if (hi >= TWO_32) throw new RangeError(`scaledUints: ${v} * ${scale} does not fit in 64 bits`);
    const l = lo - carry * TWO_32;
    buf[pos] = 0xcf;
    buf[pos + 1] = hi >>> 24;
    buf[pos + 2] = hi >>> 16;
    buf[pos + 3] = hi >>> 8;
    buf[pos + 4] = hi;
    buf[pos + 5] = l >>> 24;
    buf[pos + 6] = l >>> 16;
    buf[pos + 7] = l >>> 8;
    buf[pos + 8] = l;
    pos += 9;
  }
  e.pos = pos;
  return new Raw(e.buf.subarray(0, e.pos));
}

// The codec works on Uint8Arrays, reads and writes numbers through a
// DataView and short ASCII strings byte by byte: V8's own functions, where
// Buffer's are Node functions that each cost a compilation at their first
// call -- a hello would pay ~0.4 ms for them at every process start.
class Encoder {
  constructor(size = 256) {
    this.buf = new Uint8Array(size);
    this.dv = new DataView(this.buf.buffer);
    this.pos = 0;
  }

  reserve(n) {
    if (this.pos + n <= this.buf.length) return;
    let size = this.buf.length * 2;
    while (size < this.pos + n) size *= 2;
    const next = new Uint8Array(size);
    next.set(this.buf.subarray(0, this.pos));
    this.buf = next;
    this.dv = new DataView(next.buffer);
  }

  u8(v) { this.reserve(1); this.buf[this.pos++] = v; }
  u16(v) { this.reserve(2); this.dv.setUint16(this.pos, v); this.pos += 2; }
  u32(v) { this.reserve(4); this.dv.setUint32(this.pos, v); this.pos += 4; }

  bytes(b) {
    this.reserve(b.length);
    this.buf.set(b, this.pos);
    this.pos += b.length;
  }

  value(v) {
    switch (typeof v) {
      case 'undefined': this.u8(0xc0); return;
      case 'boolean': this.u8(v ? 0xc3 : 0xc2); return;
      case 'number':
        if (Number.isInteger(v)) {
          if (Number.isSafeInteger(v)) { this.int(v); return; }
          if (v >= -(2 ** 63) && v < 2 ** 64) { this.bigint(BigInt(v)); return; }
        }
        this.reserve(9);
        this.buf[this.pos] = 0xcb;
        this.dv.setFloat64(this.pos + 1, v);
        this.pos += 9;
        return;
      case 'bigint': this.bigint(v); return;
      case 'string': this.str(v); return;
      case 'object':
        if (v === null) { this.u8(0xc0); return; }
        if (v instanceof Raw) { this.bytes(v.bytes); return; }
        if (v instanceof Uint8Array) { this.bin(v); return; }
        if (ArrayBuffer.isView(v)) { this.bin(new Uint8Array(v.buffer, v.byteOffset, v.byteLength)); return; }
        if (Array.isArray(v)) {
          this.arrayHeader(v.length);
          for (const x of v) this.value(x);
          return;
        }
        if (v instanceof Map) {
          this.mapHeader(v.size);
          for (const [k, x] of v) { this.str(String(k)); this.value(x); }
          return;
        }
        {
          const keys = Object.keys(v).filter((k) => v[k] !== undefined);
          this.mapHeader(keys.length);
          for (const k of keys) { this.str(k); this.value(v[k]); }
        }
        return;
      default:
        throw new TypeError(`msgpack: cannot encode a ${typeof v}`);
    }
  }

  // int encodes a safe integer in the smallest msgpack int.
  int(v) {
    if (v >= 0) {
      if (v < 0x80) this.u8(v);
      else if (v < 0x100) { this.u8(0xcc); this.u8(v); }
      else if (v < 0x10000) { this.u8(0xcd); this.u16(v); }
      else if (v < 0x100000000) { this.u8(0xce); this.u32(v); }
      else { this.u8(0xcf); this.u32(Math.floor(v / 0x100000000)); this.u32(v >>> 0); }
      return;
    }
    if (v >= -32) this.u8(v & 0xff);
    else if (v >= -0x80) { this.u8(0xd0); this.u8(v & 0xff); }
    else if (v >= -0x8000) { this.u8(0xd1); this.u16(v & 0xffff); }
    else if (v >= -0x80000000) { this.u8(0xd2); this.u32(v >>> 0); }
    else {
      this.reserve(9);
      this.buf[this.pos] = 0xd3;
      this.dv.setBigInt64(this.pos + 1, BigInt(v));
      this.pos += 9;
    }
  }

  bigint(v) {
    if (v > MIN_SAFE && v < MAX_SAFE) { this.int(Number(v)); return; }
    this.reserve(9);
    if (v >= 0n) {
      if (v >= MAX_U64) throw new RangeError('msgpack: integer does not fit in 64 bits');
      this.buf[this.pos] = 0xcf;
      this.dv.setBigUint64(this.pos + 1, v);
    } else {
      if (v < MIN_I64) throw new RangeError('msgpack: integer does not fit in 64 bits');
      this.buf[this.pos] = 0xd3;
      this.dv.setBigInt64(this.pos + 1, v);
    }
    this.pos += 9;
  }

  str(s) {
    if (s.length < 0x100 && this.ascii(s)) return;
    const n = Buffer.byteLength(s);
    if (n < 32) this.u8(0xa0 | n);
    else if (n < 0x100) { this.u8(0xd9); this.u8(n); }
    else if (n < 0x10000) { this.u8(0xda); this.u16(n); }
    else { this.u8(0xdb); this.u32(n); }
    this.reserve(n);
    this.pos += utf8Encoder().encodeInto(s, this.buf.subarray(this.pos, this.pos + n)).written;
  }

  // ascii writes s, shorter than 256, when it is ASCII; false: it is not.
  ascii(s) {
    const n = s.length;
    for (let i = 0; i < n; i++) if (s.charCodeAt(i) > 0x7f) return false;
    this.reserve(2 + n);
    const buf = this.buf;
    if (n < 32) buf[this.pos++] = 0xa0 | n;
    else { buf[this.pos++] = 0xd9; buf[this.pos++] = n; }
    for (let i = 0; i < n; i++) buf[this.pos + i] = s.charCodeAt(i);
    this.pos += n;
    return true;
  }

  bin(b) {
    const n = b.length;
    if (n < 0x100) { this.u8(0xc4); this.u8(n); }
    else if (n < 0x10000) { this.u8(0xc5); this.u16(n); }
    else { this.u8(0xc6); this.u32(n); }
    this.bytes(b);
  }

  arrayHeader(n) {
    if (n < 16) this.u8(0x90 | n);
    else if (n < 0x10000) { this.u8(0xdc); this.u16(n); }
    else { this.u8(0xdd); this.u32(n); }
  }

  mapHeader(n) {
    if (n < 16) this.u8(0x80 | n);
    else if (n < 0x10000) { this.u8(0xde); this.u16(n); }
    else { this.u8(0xdf); this.u32(n); }
  }
}

let textEncoder = null;
let textDecoder = null;
const utf8Encoder = () => (textEncoder ??= new TextEncoder());
const utf8Decoder = () => (textDecoder ??= new TextDecoder('utf-8', { ignoreBOM: true })); // keeps a BOM, as Buffer#toString

// encode returns the msgpack encoding of v (a Buffer).
function encode(v) {
  const e = new Encoder();
  e.value(v);
  return Buffer.from(e.buf.buffer, 0, e.pos);
}

// frame returns the frame carrying the msgpack encoding of v, u32be length ||
// body, as a Uint8Array. sizeHint, when known, avoids regrowing the buffer.
function frame(v, sizeHint = 256) {
  const e = new Encoder(sizeHint);
  e.pos = 4;
  e.value(v);
  e.dv.setUint32(0, e.pos - 4);
  return e.buf.subarray(0, e.pos);
}

// ---------------------------------------------------------------- decoding

class Decoder {
  constructor(buf) {
    this.buf = buf;
    this.dv = new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
    this.pos = 0;
  }

  need(n) {
    if (this.pos + n > this.buf.length) throw new RangeError('msgpack: truncated input');
  }

  value() {
    this.need(1);
    const b = this.buf[this.pos++];
    if (b < 0x80) return b;
    if (b >= 0xe0) return b - 0x100;
    if ((b & 0xf0) === 0x80) return this.map(b & 0x0f);
    if ((b & 0xf0) === 0x90) return this.array(b & 0x0f);
    if ((b & 0xe0) === 0xa0) return this.str(b & 0x1f);
    const buf = this.buf;
    const dv = this.dv;
    let v;
    switch (b) {
      case 0xc0: return null;
      case 0xc2: return false;
      case 0xc3: return true;
      case 0xc4: this.need(1); return this.bin(buf[this.pos++]);
      case 0xc5: this.need(2); v = dv.getUint16(this.pos); this.pos += 2; return this.bin(v);
      case 0xc6: this.need(4); v = dv.getUint32(this.pos); this.pos += 4; return this.bin(v);
      case 0xc7: this.need(1); return this.ext(buf[this.pos++]);
      case 0xc8: this.need(2); v = dv.getUint16(this.pos); this.pos += 2; return this.ext(v);
      case 0xc9: this.need(4); v = dv.getUint32(this.pos); this.pos += 4; return this.ext(v);
      case 0xca: this.need(4); v = dv.getFloat32(this.pos); this.pos += 4; return v;
      case 0xcb: this.need(8); v = dv.getFloat64(this.pos); this.pos += 8; return v;
      case 0xcc: this.need(1); return buf[this.pos++];
      case 0xcd: this.need(2); v = dv.getUint16(this.pos); this.pos += 2; return v;
      case 0xce: this.need(4); v = dv.getUint32(this.pos); this.pos += 4; return v;
      case 0xcf: this.need(8); v = dv.getBigUint64(this.pos); this.pos += 8; return narrow(v);
      case 0xd0: this.need(1); v = dv.getInt8(this.pos); this.pos += 1; return v;
      case 0xd1: this.need(2); v = dv.getInt16(this.pos); this.pos += 2; return v;
      case 0xd2: this.need(4); v = dv.getInt32(this.pos); this.pos += 4; return v;
      case 0xd3: this.need(8); v = dv.getBigInt64(this.pos); this.pos += 8; return narrow(v);
      case 0xd4: return this.ext(1);
      case 0xd5: return this.ext(2);
      case 0xd6: return this.ext(4);
      case 0xd7: return this.ext(8);
      case 0xd8: return this.ext(16);
      case 0xd9: this.need(1); return this.str(buf[this.pos++]);
      case 0xda: this.need(2); v = dv.getUint16(this.pos); this.pos += 2; return this.str(v);
      case 0xdb: this.need(4); v = dv.getUint32(this.pos); this.pos += 4; return this.str(v);
      case 0xdc: this.need(2); v = dv.getUint16(this.pos); this.pos += 2; return this.array(v);
      case 0xdd: this.need(4); v = dv.getUint32(this.pos); this.pos += 4; return this.array(v);
      case 0xde: this.need(2); v = dv.getUint16(this.pos); this.pos += 2; return this.map(v);
      case 0xdf: this.need(4); v = dv.getUint32(this.pos); this.pos += 4; return this.map(v);
      default: throw new RangeError(`msgpack: invalid type byte 0x${b.toString(16)}`);
    }
  }

  str(n) {
    this.need(n);
    const buf = this.buf;
    const end = this.pos + n;
    let s = '';
    if (n <= 64) {
      // short ASCII, as nearly every string of the protocol is
      for (let i = this.pos; i < end; i++) {
        const c = buf[i];
        if (c > 0x7f) { s = null; break; }
        s += String.fromCharCode(c);
      }
    } else {
      s = null;
    }
    if (s === null) s = utf8Decoder().decode(buf.subarray(this.pos, end));
    this.pos = end;
    return s;
  }

  bin(n) {
    this.need(n);
    const b = Buffer.from(this.buf.subarray(this.pos, this.pos + n));
    this.pos += n;
    return b;
  }

  // ext values carry no meaning in the protocol; they decode to {type, data}.
  ext(n) {
    this.need(1 + n);
    const type = this.dv.getInt8(this.pos++);
    return { type, data: this.bin(n) };
  }

  array(n) {
    const a = new Array(n);
    for (let i = 0; i < n; i++) a[i] = this.value();
    return a;
  }

  map(n) {
    const m = {};
    for (let i = 0; i < n; i++) {
      const k = this.value();
      m[typeof k === 'string' ? k : String(k)] = this.value();
    }
    return m;
  }
}

function narrow(v) {
  return v > MIN_SAFE && v < MAX_SAFE ? Number(v) : v;
}

// decode returns the single msgpack value that fills buf.
function decode(buf) {
  const d = new Decoder(buf);
  const v = d.value();
  if (d.pos !== buf.length) throw new RangeError(`msgpack: ${buf.length - d.pos} bytes after the value`);
  return v;
}

// ---------------------------------------------------------------- client

// Client is one synchronous connection to dald. call() blocks the thread
// until dald replies; send() writes a request without waiting for its reply
// (uploads: ticks.put, draws.put), which is read and checked later, before
// the next call() or whenever it is already there. dald answers the requests
// of a connection in order, so replies are matched by position and id.
// Neither is ever used for a clock read.
class Client {
  // Preconditions: path names a listening Unix stream socket. Throws with a
  // one-sentence message when it cannot connect (at the first write when
  // connect(2) failed: libuv reports that later).
  constructor(path, { wait, timeoutMs = 30000 } = {}) {
    this.path = path;
    this.nextId = 1;
    this.roundTrips = 0;
    this.timeoutMs = timeoutMs;
    this.sleepCell = new Int32Array(new SharedArrayBuffer(4));
    this.wait = wait || Atomics.wait;
    this.header = new Uint8Array(4);
    this.pending = []; // [id, op] of sent requests whose reply is unread
    this.headerFill = 0; // bytes of the next reply's header already read
    this.connecting = true;
    this.handle = null;
    this.fd = connectUnix(path, this);
  }

  // unreachable returns the error for a connection that failed with code:
  // the path is checked only then (a first fs.statSync costs ~0.2 ms).
  unreachable(code) {
    let st;
    try {
      st = fs.statSync(this.path);
    } catch (e) {
      return new Error(`no dald socket at ${this.path} (${e.code})`);
    }
    if (!st.isSocket()) return new Error(`${this.path} is not a socket`);
    return new Error(`nothing answers at ${this.path} (${code})`);
  }

  // call sends {op, id, ...fields} and returns the reply map. Throws when dald
  // answers ok: false (with dald's sentence), when an earlier send() was
  // refused, or when the connection fails.
  call(op, fields) {
    this.drain(true);
    const id = this.write(op, fields);
    const reply = this.readReply(op, id);
    this.roundTrips++;
    return reply;
  }

  // send sends {op, id, ...fields} without waiting for the reply.
  send(op, fields) {
    this.drain(false);
    const id = this.write(op, fields);
    this.pending.push([id, op]);
    this.roundTrips++;
  }

  // drain reads the replies of earlier send()s: all of them when wait is
  // true, else those that have arrived. Throws on the first refused one.
  drain(wait) {
    while (this.pending.length > 0) {
      if (!wait && !this.replyReady()) return;
      const [id, op] = this.pending.shift();
      this.readReply(op, id);
    }
  }

  write(op, fields) {
    if (this.fd < 0) throw new Error('the connection to dald is closed');
    const id = this.nextId++;
    const msg = { op, id };
    let size = 256;
    for (const k in fields) {
      const v = fields[k];
      msg[k] = v;
      if (v instanceof Raw) size += v.bytes.length;
      else if (v instanceof Uint8Array) size += v.length + 5;
    }
    try {
      this.writeAll(frame(msg, size));
    } catch (e) {
      if (e.code === 'ENOTCONN' || e.code === 'EPIPE' || e.code === 'ECONNREFUSED' || e.code === 'ECONNRESET') {
        throw this.unreachable(e.code);
      }
      throw e;
    }
    return id;
  }

  readReply(op, id) {
    const reply = this.readFrame();
    if (reply === null || typeof reply !== 'object' || Array.isArray(reply)) {
      throw new Error(`dald answered ${op} with a reply that is not a map`);
    }
    if (reply.id !== id) throw new Error(`dald answered ${op} #${id} with reply #${reply.id}`);
    if (reply.ok !== true) {
      const e = new Error(String(reply.err || `dald refused ${op}`));
      e.refused = op;
      throw e;
    }
    return reply;
  }

  // replyReady reports whether a reply has started to arrive, reading its
  // first bytes into this.header (readFrame continues from there).
  replyReady() {
    if (this.headerFill > 0) return true;
    let got;
    try {
      got = fs.readSync(this.fd, this.header, 0, 4, null);
    } catch (e) {
      if (e.code === 'EAGAIN') return false;
      throw e;
    }
    if (got === 0) throw new Error('dald closed the connection');
    this.headerFill = got;
    return true;
  }

  writeAll(buf) {
    let off = 0;
    const deadline = realNow() + this.timeoutMs;
    while (off < buf.length) {
      try {
        off += fs.writeSync(this.fd, buf, off, buf.length - off);
      } catch (e) {
        if (e.code !== 'EAGAIN') throw e;
        this.pause(deadline, 'write');
      }
    }
  }

  readExact(buf, n, deadline, off = 0) {
    while (off < n) {
      let got;
      try {
        got = fs.readSync(this.fd, buf, off, n - off, null);
      } catch (e) {
        if (e.code !== 'EAGAIN') throw e;
        this.pause(deadline, 'reply');
        continue;
      }
      if (got === 0) throw new Error('dald closed the connection');
      off += got;
    }
  }

  readFrame() {
    const deadline = realNow() + this.timeoutMs;
    const have = this.headerFill || 0;
    this.headerFill = 0;
    this.readExact(this.header, 4, deadline, have);
    const h = this.header;
    const n = ((h[0] << 24) | (h[1] << 16) | (h[2] << 8) | h[3]) >>> 0;
    if (n === 0 || n > MAX_FRAME) throw new Error(`dald sent a frame of ${n} bytes`);
    const body = new Uint8Array(n);
    this.readExact(body, n, deadline);
    return decode(body);
  }

  pause(deadline, what) {
    if (realNow() > deadline) throw new Error(`dald did not answer (${what}) within ${this.timeoutMs} ms`);
    this.wait.call(Atomics, this.sleepCell, 0, 0, 0.02);
  }

  close() {
    if (this.handle) {
      try { this.handle.close(); } catch { /* already closed */ }
    }
    this.handle = null;
    this.fd = -1;
  }
}

// connectUnix connects a pipe_wrap handle to path and returns its fd. The
// handle is unref'd and kept on owner.handle so it is not collected.
function connectUnix(path, owner) {
  // process.binding is documentation-deprecated (DEP0111) and only warns
  // under --pending-deprecation; the shim must not add warnings to the
  // agent's stderr, so the warning is silenced for this one call.
  const saved = process.noDeprecation;
  let binding;
  try {
    process.noDeprecation = true;
    binding = process.binding('pipe_wrap');
  } finally {
    process.noDeprecation = saved;
  }
  const { Pipe, PipeConnectWrap, constants } = binding;
  const handle = new Pipe(constants.SOCKET);
  const req = new PipeConnectWrap();
  req.oncomplete = (status) => {
    owner.connecting = false;
    if (status < 0) owner.connectError = status;
  };
  // libuv connects a Unix socket synchronously but reports a failed
  // connect(2) later, through oncomplete: a refused connection shows up as
  // ENOTCONN/EPIPE on the first write, which call() turns into an error.
  const err = handle.connect(req, path);
  if (err) {
    handle.close();
    throw owner.unreachable(errname(err));
  }
  handle.unref();
  owner.handle = handle;
  const fd = handle.fd;
  if (typeof fd !== 'number' || fd < 0) {
    handle.close();
    throw new Error(`connected to ${path} but the socket has no fd`);
  }
  return fd;
}

function errname(code) {
  try {
    return require('util').getSystemErrorName(code);
  } catch {
    return String(code);
  }
}

module.exports = { encode, decode, frame, Client, Raw, scaledUints, MAX_FRAME };
