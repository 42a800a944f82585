'use strict';
// The Node shim's seedrng must produce the bytes and floats of
// testdata/seedrng.json (written by the Go implementation) exactly.

const test = require('node:test');
const assert = require('node:assert');
const fs = require('node:fs');
const path = require('node:path');
const { Stream, FloatStream, block, BLOCK_SIZE } = require('../seedrng.js');

const vectorFile = path.join(__dirname, '..', '..', '..', '..', 'testdata', 'seedrng.json');

// loadVectors parses the vector file keeping seeds exact: JSON.parse would
// round 18446744073709551615 to a double.
function loadVectors() {
  const raw = fs.readFileSync(vectorFile, 'utf8');
  const vectors = JSON.parse(raw);
  const seeds = [...raw.matchAll(/"seed":\s*(\d+)/g)].map((m) => BigInt(m[1]));
  assert.strictEqual(seeds.length, vectors.length, 'one exact seed per vector');
  return vectors.map((v, i) => ({ ...v, seed: seeds[i] }));
}

const vectors = loadVectors();

test('the vector file has vectors, including a 64-bit seed and a block crossing', () => {
  assert.ok(vectors.length >= 7);
  assert.ok(vectors.some((v) => v.seed === 18446744073709551615n));
  assert.ok(vectors.some((v) => v.offset < BLOCK_SIZE && v.offset + v.length > BLOCK_SIZE));
});

for (const [i, v] of vectors.entries()) {
  test(`vector ${i}: bytes of (${v.seed}, ${JSON.stringify(v.label)}) [${v.offset}, ${v.offset + v.length})`, () => {
    const s = new Stream(v.seed, v.label);
    s.bytes(v.offset);
    assert.strictEqual(s.bytes(v.length).toString('hex'), v.hex);
  });

  test(`vector ${i}: floats of (${v.seed}, ${JSON.stringify(v.label)})`, () => {
    const s = new Stream(v.seed, v.label);
    const f = new FloatStream(v.seed, v.label);
    for (const want of v.floats) {
      assert.strictEqual(s.float64(), want);
      assert.strictEqual(f.float64(), want);
    }
  });
}

test('reading in pieces equals reading at once', () => {
  const whole = new Stream(5n, 'l').bytes(10000);
  const s = new Stream(5n, 'l');
  const parts = [1, 4095, 3, 4097, 1804].map((n) => s.bytes(n));
  assert.ok(Buffer.concat(parts).equals(whole));
  assert.strictEqual(s.consumed, 10000);
});

test('FloatStream reads the same stream as Stream.float64 across blocks', () => {
  const s = new Stream(9n, '0/node.Math.random');
  const f = new FloatStream(9n, '0/node.Math.random');
  for (let i = 0; i < 1100; i++) assert.strictEqual(f.float64(), s.float64());
  assert.strictEqual(f.consumed, 8800);
});

test('the stream starts with block 0', () => {
  assert.ok(new Stream(0n, '').bytes(8).equals(block(0n, '', 0).subarray(0, 8)));
});

test('seeds and labels separate streams', () => {
  const a = new Stream(7n, '0/x').bytes(32);
  assert.ok(!a.equals(new Stream(8n, '0/x').bytes(32)));
  assert.ok(!a.equals(new Stream(7n, '0.1/x').bytes(32)));
});

test('seeds outside [0, 2^64) are refused', () => {
  assert.throws(() => new Stream(-1n, 'x'), RangeError);
  assert.throws(() => new Stream(1n << 64n, 'x'), RangeError);
});
