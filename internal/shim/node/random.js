'use strict';
// random.js: Math.random and node:crypto's random functions on dal sources.
//
// Two sources per process (docs/protocol.md, "Seeded randomness labels"):
//   node.Math.random  Math.random: a xoshiro128** generator seeded by the
//                     stream's first 16 bytes (see seededFloats)
//   node.crypto       randomBytes, randomFill(Sync), randomUUID, randomInt,
//                     getRandomValues (node:crypto, crypto.webcrypto and
//                     globalThis.crypto)
//
// A source is one of:
//   seeded  the seedrng stream "<stream>/<source>" (strict and seeded modes)
//   logged  real randomness, every byte appended to a draw log uploaded with
//           draws.put (logged mode); Math.random logs each value as its
//           8-byte big-endian IEEE-754 encoding
//   replay  the bytes of a logged run, fetched with draws.fetch; past the end
//           of the log it reports drift once and continues with the bytes of
//           a fallback (the seeded stream)
//
// Every crypto function is written over one primitive, fill(bytes), so the
// three sources give the same results for the same bytes: randomUUID takes
// 16 bytes and sets the version and variant bits, randomInt takes 6 bytes per
// try with Node's rejection rule, randomBytes(n) takes n bytes.
//
// Key generation (generateKey(Sync), generateKeyPair(Sync), subtle.generateKey)
// draws from the source for secret keys, Ed25519/X25519 and EC (keys.js).
// Not covered (they keep drawing from OpenSSL and each call is reported as
// unserved): RSA/DSA/DH key pairs, generatePrime, Diffie-Hellman and
// ECDH#generateKeys; TLS is not reported (its randomness never reaches the
// program's results).

const { Stream } = require('./seedrng.js');

const SOURCE_MATH = 'node.Math.random';
const SOURCE_CRYPTO = 'node.crypto';
const RAND_MAX = 0xFFFF_FFFF_FFFF;
const FLUSH_BYTES = 64 * 1024;

// ------------------------------------------------------------- sources

function seededBytes(seed, label) {
  const s = new Stream(seed, label);
  return { fill: (u8) => s.fill(u8), drawn: () => s.consumed };
}

// seededFloats serves Math.random: the first 16 bytes of the stream seed a
// xoshiro128** generator (its four 32-bit words, big-endian; an all-zero
// state becomes 1, 0, 0, 0), and each value takes two of its outputs a, b:
// ((a >>> 5) * 2^26 + (b >>> 6)) * 2^-53, as CPython's random() does from
// its generator. A SHAKE-256 block per 512 values cost ~20 ns a value
// (3-5x V8's own Math.random); this costs ~2 ns. Like python.random, the
// stream is drawn once, at the first value: drawn() is then 16.
function seededFloats(seed, label) {
  let s0 = 0;
  let s1 = 0;
  let s2 = 0;
  let s3 = 0;
  let seeded = false; // the stream is drawn at the first value
  function seedState() {
    const b = new Stream(seed, label).bytes(16);
    s0 = b.readUInt32BE(0) | 0;
    s1 = b.readUInt32BE(4) | 0;
    s2 = b.readUInt32BE(8) | 0;
    s3 = b.readUInt32BE(12) | 0;
    if ((s0 | s1 | s2 | s3) === 0) s0 = 1;
    seeded = true;
  }
  function next() {
    const x = Math.imul(s1, 5);
    const r = Math.imul((x << 7) | (x >>> 25), 9);
    const t = s1 << 9;
    s2 ^= s0;
    s3 ^= s1;
    s1 ^= s2;
    s0 ^= s3;
    s2 ^= t;
    s3 = (s3 << 11) | (s3 >>> 21);
    return r;
  }
  return {
    float() {
      if (!seeded) seedState();
      return ((next() >>> 5) * 67108864 + (next() >>> 6)) * 1.1102230246251565e-16;
    },
    drawn: () => (seeded ? 16 : 0),
  };
}

// DrawLog buffers logged draws per label and uploads them with put(label,
// data) whenever FLUSH_BYTES are buffered, and on flush().
class DrawLog {
  constructor(put) {
    this.put = put;
    this.pending = new Map(); // label -> {buf, pos}
  }

  append(label, u8) {
    let p = this.pending.get(label);
    if (p === undefined) {
      p = { buf: Buffer.allocUnsafe(FLUSH_BYTES), pos: 0 };
      this.pending.set(label, p);
    }
    let off = 0;
    while (off < u8.length) {
      const c = Math.min(u8.length - off, FLUSH_BYTES - p.pos);
      p.buf.set(u8.subarray(off, off + c), p.pos);
      p.pos += c;
      off += c;
      if (p.pos === FLUSH_BYTES) this.flushLabel(label, p);
    }
  }

  flushLabel(label, p) {
    if (p.pos === 0) return;
    const data = Buffer.from(p.buf.subarray(0, p.pos));
    p.pos = 0;
    this.put(label, data);
  }

  flush() {
    for (const [label, p] of this.pending) this.flushLabel(label, p);
  }
}

function loggedBytes(label, nativeFill, log) {
  let drawn = 0;
  return {
    fill(u8) {
      nativeFill(u8);
      log.append(label, u8);
      drawn += u8.length;
      return u8;
    },
    drawn: () => drawn,
  };
}

function loggedFloats(label, nativeRandom, log) {
  const b = Buffer.alloc(8);
  let drawn = 0;
  return {
    float() {
      const v = nativeRandom();
      b.writeDoubleBE(v, 0);
      log.append(label, b);
      drawn += 8;
      return v;
    },
    drawn: () => drawn,
  };
}

// replayBytes serves a logged draw stream. fetch(from, max) returns {data,
// end}; fallbackFill(u8) serves the draws past the end of the log.
function replayBytes(label, fetch, drift, fallbackFill, chunk = FLUSH_BYTES) {
  let buf = Buffer.alloc(0);
  let pos = 0;
  let base = 0;
  let end = false;
  let pastEnd = false;
  let drawn = 0;
  function refill() {
    if (end) return false;
    const r = fetch(base + buf.length, chunk);
    base += buf.length;
    buf = Buffer.from(r.data || []);
    pos = 0;
    end = !!r.end || buf.length === 0;
    return buf.length > 0;
  }
  return {
    fill(u8) {
      let off = 0;
      while (off < u8.length) {
        if (pos === buf.length && (pastEnd || !refill())) {
          if (!pastEnd) {
            pastEnd = true;
            drift('random', `${label}: draw past the ${base + buf.length} recorded bytes`);
          }
          fallbackFill(u8.subarray(off));
          break;
        }
        const c = Math.min(u8.length - off, buf.length - pos);
        u8.set(buf.subarray(pos, pos + c), off);
        pos += c;
        off += c;
      }
      drawn += u8.length;
      return u8;
    },
    drawn: () => drawn,
  };
}

function replayFloats(bytes) {
  const b = Buffer.alloc(8);
  return {
    float() {
      bytes.fill(b);
      const v = b.readDoubleBE(0);
      return v >= 0 && v < 1 ? v : 0; // a corrupt log must not break Math.random's contract
    },
    drawn: () => bytes.drawn(),
  };
}

// ------------------------------------------------------------- errors

function argType(name, expected, actual) {
  const e = new TypeError(`The "${name}" argument must be ${expected}. Received ${actual === null ? 'null' : typeof actual}`);
  e.code = 'ERR_INVALID_ARG_TYPE';
  return e;
}

function outOfRange(name, range, actual) {
  const e = new RangeError(`The value of "${name}" is out of range. It must be ${range}. Received ${actual}`);
  e.code = 'ERR_OUT_OF_RANGE';
  return e;
}

function validateCallback(cb) {
  if (typeof cb !== 'function') throw argType('callback', 'of type function', cb);
}

// ------------------------------------------------------------- installing

const MAX_SIZE = 2 ** 31 - 1;

function asBytes(buf, name) {
  if (buf instanceof ArrayBuffer || (typeof SharedArrayBuffer !== 'undefined' && buf instanceof SharedArrayBuffer)) {
    return { u8: new Uint8Array(buf), elementSize: 1 };
  }
  if (ArrayBuffer.isView(buf)) {
    return { u8: new Uint8Array(buf.buffer, buf.byteOffset, buf.byteLength), elementSize: buf.BYTES_PER_ELEMENT || 1 };
  }
  throw argType(name, 'an instance of ArrayBuffer or ArrayBufferView', buf);
}

function range(u8, elementSize, offset, size) {
  if (offset === undefined) offset = 0;
  if (typeof offset !== 'number') throw argType('offset', 'of type number', offset);
  const maxElems = u8.length / elementSize;
  if (Number.isNaN(offset) || offset < 0 || offset > maxElems) throw outOfRange('offset', `>= 0 && <= ${maxElems}`, offset);
  if (size === undefined) size = maxElems - offset;
  if (typeof size !== 'number') throw argType('size', 'of type number', size);
  if (Number.isNaN(size) || size < 0 || offset + size > maxElems) throw outOfRange('size + offset', `<= ${u8.length}`, (size + offset) * elementSize);
  return u8.subarray(Math.floor(offset * elementSize), Math.floor((offset + size) * elementSize));
}

function uuidFrom(b) {
  b[6] = (b[6] & 0x0f) | 0x40;
  b[8] = (b[8] & 0x3f) | 0x80;
  const h = Buffer.from(b).toString('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

const INTEGER_ARRAYS = new Set(['Int8Array', 'Uint8Array', 'Uint8ClampedArray', 'Int16Array', 'Uint16Array',
  'Int32Array', 'Uint32Array', 'BigInt64Array', 'BigUint64Array']);

function isIntegerTypedArray(v) {
  if (!ArrayBuffer.isView(v) || v instanceof DataView) return false;
  const tag = Object.prototype.toString.call(v).slice(8, -1);
  return INTEGER_ARRAYS.has(tag);
}

// installCrypto replaces the random functions of node:crypto with versions
// drawing from bytes.fill, key generation included (keys.js, loaded on
// first use). unserved(what) notes a generator left to OpenSSL (reported at
// exit).
function installCrypto(crypto, bytes, unserved = () => {}) {
  const fill = bytes.fill;
  const { randomUUID, getRandomValues } = webRandom(fill);

  function randomBytes(size, callback) {
    if (typeof size !== 'number') throw argType('size', 'of type number', size);
    if (Number.isNaN(size) || size < 0 || size > MAX_SIZE) throw outOfRange('size', `>= 0 && <= ${MAX_SIZE}`, size);
    if (callback !== undefined) validateCallback(callback);
    const buf = Buffer.alloc(Math.floor(size));
    fill(buf);
    if (callback === undefined) return buf;
    process.nextTick(callback, null, buf);
    return undefined;
  }

  function randomFillSync(buf, offset, size) {
    const { u8, elementSize } = asBytes(buf, 'buf');
    fill(range(u8, elementSize, offset, size));
    return buf;
  }

  function randomFill(buf, offset, size, callback) {
    const { u8, elementSize } = asBytes(buf, 'buf');
    if (typeof offset === 'function') { callback = offset; offset = undefined; size = undefined; }
    else if (typeof size === 'function') { callback = size; size = undefined; }
    validateCallback(callback);
    fill(range(u8, elementSize, offset, size));
    process.nextTick(callback, null, buf);
  }

  function randomInt(min, max, callback) {
    const minNotSpecified = typeof max === 'undefined' || typeof max === 'function';
    if (minNotSpecified) { callback = max; max = min; min = 0; }
    const isSync = typeof callback === 'undefined';
    if (!isSync) validateCallback(callback);
    if (!Number.isSafeInteger(min)) throw argType('min', 'a safe integer', min);
    if (!Number.isSafeInteger(max)) throw argType('max', 'a safe integer', max);
    if (max <= min) throw outOfRange('max', `greater than the value of "min" (${min})`, max);
    const span = max - min;
    if (!(span <= RAND_MAX)) throw outOfRange(`max${minNotSpecified ? '' : ' - min'}`, `<= ${RAND_MAX}`, span);
    const limit = RAND_MAX - (RAND_MAX % span);
    const b = Buffer.alloc(6);
    let n;
    do {
      fill(b);
      n = b.readUIntBE(0, 6);
    } while (n >= limit);
    const result = (n % span) + min;
    if (isSync) return result;
    process.nextTick(callback, undefined, result);
    return undefined;
  }

  const replaced = { randomBytes, randomFillSync, randomFill, randomUUID, randomInt, getRandomValues };
  // the deprecated aliases of randomBytes
  for (const alias of ['pseudoRandomBytes', 'prng', 'rng']) {
    if (typeof crypto[alias] === 'function') replaced[alias] = randomBytes;
  }
  const keys = () => require('./keys.js');
  const nativeOf = (name) => (typeof crypto[name] === 'function' ? crypto[name] : null);
  const pairSync = nativeOf('generateKeyPairSync');
  const pair = nativeOf('generateKeyPair');
  const keySync = nativeOf('generateKeySync');
  const key = nativeOf('generateKey');
  if (pairSync) replaced.generateKeyPairSync = function generateKeyPairSync(type, options) { return keys().generateKeyPairSync(fill, pairSync, unserved, type, options); };
  if (pair) replaced.generateKeyPair = function generateKeyPair(type, options, callback) { return keys().generateKeyPair(fill, pair, unserved, type, options, callback); };
  if (keySync) replaced.generateKeySync = function generateKeySync(type, options) { return keys().generateKeySync(fill, keySync, type, options); };
  if (key) replaced.generateKey = function generateKey(type, options, callback) { return keys().generateKey(fill, key, type, options, callback); };
  for (const name of ['generatePrime', 'generatePrimeSync', 'createDiffieHellman', 'createDiffieHellmanGroup', 'getDiffieHellman']) {
    const orig = nativeOf(name);
    if (orig) replaced[name] = reporting(orig, `crypto.${name}`, unserved);
  }
  for (const cls of ['ECDH', 'DiffieHellman', 'DiffieHellmanGroup']) {
    const proto = crypto[cls] && crypto[cls].prototype;
    if (proto && typeof proto.generateKeys === 'function') define(proto, 'generateKeys', reporting(proto.generateKeys, `crypto.${cls}#generateKeys`, unserved));
  }
  for (const [name, fn] of Object.entries(replaced)) define(crypto, name, fn);
  // node:crypto's webcrypto is a getter that loads the Web Crypto object:
  // Node's is patched when it loads (installWebCrypto); one given as a
  // plain property is patched here.
  const web = Object.getOwnPropertyDescriptor(crypto, 'webcrypto');
  if (web && web.value) installWebCrypto(web.value, bytes, unserved);
  return replaced;
}

// webRandom returns randomUUID and getRandomValues drawing from fill.
function webRandom(fill) {
  function randomUUID(options) {
    if (options !== undefined && (options === null || typeof options !== 'object')) throw argType('options', 'of type object', options);
    return uuidFrom(fill(new Uint8Array(16)));
  }

  function getRandomValues(data) {
    if (!isIntegerTypedArray(data)) {
      throw new DOMException('The data argument must be an integer-type TypedArray', 'TypeMismatchError');
    }
    if (data.byteLength > 65536) {
      throw new DOMException('The requested length exceeds 65,536 bytes', 'QuotaExceededError');
    }
    fill(new Uint8Array(data.buffer, data.byteOffset, data.byteLength));
    return data;
  }

  return { randomUUID, getRandomValues };
}

// installWebCrypto does installCrypto's work on the Web Crypto object
// (globalThis.crypto, crypto.webcrypto): getRandomValues, randomUUID and
// subtle.generateKey draw from bytes.fill.
function installWebCrypto(web, bytes, unserved = () => {}) {
  const fill = bytes.fill;
  const { randomUUID, getRandomValues } = webRandom(fill);
  define(web, 'getRandomValues', getRandomValues);
  define(web, 'randomUUID', randomUUID);
  const subtle = web.subtle;
  if (subtle && typeof subtle.generateKey === 'function') {
    const nativeGen = subtle.generateKey.bind(subtle);
    define(subtle, 'generateKey', function generateKey(algorithm, extractable, usages) {
      return require('./keys.js').subtleGenerateKey(fill, subtle, nativeGen, unserved, algorithm, extractable, usages);
    });
  }
}

// reporting wraps a function that draws from OpenSSL: it runs natively and
// each call is noted as unserved.
function reporting(fn, what, unserved) {
  const wrapped = function (...args) {
    unserved(what);
    return new.target ? Reflect.construct(fn, args, new.target) : fn.apply(this, args);
  };
  Object.defineProperty(wrapped, 'name', { value: fn.name });
  return wrapped;
}

// define sets obj[name] = fn keeping the property's enumerability. A
// non-configurable accessor is left alone: node:crypto's getRandomValues is
// one, and it forwards to webcrypto.getRandomValues, which is patched.
function define(obj, name, fn) {
  const d = Object.getOwnPropertyDescriptor(obj, name);
  if (d && !d.configurable) {
    if (d.writable) obj[name] = fn;
    return;
  }
  Object.defineProperty(obj, name, {
    value: fn,
    writable: true,
    enumerable: d ? !!d.enumerable : false,
    configurable: true,
  });
}

function installMathRandom(floats) {
  const float = floats.float;
  define(Math, 'random', function random() { return float(); });
}

module.exports = {
  SOURCE_MATH, SOURCE_CRYPTO,
  seededBytes, seededFloats, loggedBytes, loggedFloats, replayBytes, replayFloats, DrawLog,
  installCrypto, installWebCrypto, installMathRandom, uuidFrom,
};
