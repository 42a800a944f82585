'use strict';
// seedrng.js: the named, seeded byte streams of seedrng (seedrng/seedrng.go),
// byte for byte:
//
//   block(i) = SHAKE256("dal.seedrng.v1" || 0x00 || u64be(seed) || u64be(i) || utf8(label), 4096 bytes)
//   stream   = block(0) || block(1) || ...
//   Uint64   = next 8 bytes, big-endian;  Float64 = (Uint64 >> 11) * 2^-53
//
// Vectors: testdata/seedrng.json (checked by test/seedrng.test.js).

// node:crypto (SHAKE-256) is loaded at the first block: ~3 ms that a
// process drawing nothing does not pay.
const BLOCK_SIZE = 4096;
const DOMAIN = Buffer.from('dal.seedrng.v1\x00', 'latin1');
const TWO_POW_21 = 2 ** 21;
const TWO_POW_M53 = 2 ** -53;

// toSeed converts a seed given as BigInt, Number or decimal/hex string to a
// BigInt in [0, 2^64).
function toSeed(seed) {
  const s = typeof seed === 'bigint' ? seed : BigInt(seed);
  if (s < 0n || s >= 1n << 64n) throw new RangeError(`seed ${s} is not in [0, 2^64)`);
  return s;
}

// blockInput returns the hash input of stream (seed, label) with a zero
// counter; setCounter writes block index i into it.
function blockInput(seed, label) {
  const lab = Buffer.from(label, 'utf8');
  const input = Buffer.alloc(DOMAIN.length + 16 + lab.length);
  DOMAIN.copy(input, 0);
  input.writeBigUInt64BE(toSeed(seed), DOMAIN.length);
  lab.copy(input, DOMAIN.length + 16);
  return input;
}

const COUNTER = DOMAIN.length + 8;

function setCounter(input, i) {
  input.writeUInt32BE(Math.floor(i / 0x100000000), COUNTER);
  input.writeUInt32BE(i >>> 0, COUNTER + 4);
}

// Copying an empty SHAKE-256 context skips the algorithm lookup that
// createHash does each time (about a quarter of a block's cost).
let emptyShake = null;

function hashBlock(input) {
  if (emptyShake === null) emptyShake = require('crypto').createHash('shake256');
  return emptyShake.copy({ outputLength: BLOCK_SIZE }).update(input).digest();
}

// block returns block i of stream (seed, label) as a fresh Buffer.
function block(seed, label, i) {
  const input = blockInput(seed, label);
  setCounter(input, Number(i));
  return hashBlock(input);
}

// Stream reads the bytes of one (seed, label) stream in order.
class Stream {
  constructor(seed, label) {
    this.seed = toSeed(seed);
    this.label = label;
    this.input = blockInput(this.seed, label);
    this.next = 0; // index of the next block to compute
    this.buf = null;
    this.pos = BLOCK_SIZE;
    this.consumed = 0; // bytes handed out so far
  }

  refill() {
    setCounter(this.input, this.next++);
    this.buf = hashBlock(this.input);
    this.pos = 0;
  }

  // fill writes the next target.length bytes of the stream into target (a Uint8Array).
  fill(target) {
    const n = target.length;
    let off = 0;
    while (off < n) {
      if (this.pos === BLOCK_SIZE) this.refill();
      const c = Math.min(n - off, BLOCK_SIZE - this.pos);
      target.set(this.buf.subarray(this.pos, this.pos + c), off);
      this.pos += c;
      off += c;
    }
    this.consumed += n;
    return target;
  }

  // bytes returns the next n bytes as a Buffer.
  bytes(n) {
    return this.fill(Buffer.allocUnsafe(n));
  }

  uint64() {
    return this.bytes(8).readBigUInt64BE(0);
  }

  float64() {
    const b = this.bytes(8);
    return (b.readUInt32BE(0) * TWO_POW_21 + (b.readUInt32BE(4) >>> 11)) * TWO_POW_M53;
  }
}

// FloatStream serves Float64 values of one stream fast: each 4 KiB block is
// converted to 512 doubles at once, so a draw is an array load. It reads the
// same stream as Stream.float64() called repeatedly.
class FloatStream {
  constructor(seed, label) {
    this.seed = toSeed(seed);
    this.label = label;
    this.input = blockInput(this.seed, label);
    this.next = 0;
    this.values = new Float64Array(BLOCK_SIZE / 8);
    this.pos = this.values.length;
  }

  refill() {
    setCounter(this.input, this.next++);
    const b = hashBlock(this.input);
    const v = this.values;
    for (let i = 0, j = 0; i < v.length; i++, j += 8) {
      const hi = ((b[j] << 24) | (b[j + 1] << 16) | (b[j + 2] << 8) | b[j + 3]) >>> 0;
      const lo = ((b[j + 4] << 24) | (b[j + 5] << 16) | (b[j + 6] << 8) | b[j + 7]) >>> 0;
      v[i] = (hi * TWO_POW_21 + (lo >>> 11)) * TWO_POW_M53;
    }
    this.pos = 0;
  }

  // consumed is the number of stream bytes handed out.
  get consumed() {
    return this.next === 0 ? 0 : ((this.next - 1) * BLOCK_SIZE) + this.pos * 8;
  }

  float64() {
    if (this.pos === this.values.length) this.refill();
    return this.values[this.pos++];
  }
}

module.exports = { BLOCK_SIZE, block, Stream, FloatStream, toSeed };
