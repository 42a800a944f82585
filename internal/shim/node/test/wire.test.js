'use strict';
// The msgpack codec: every int width decodes, encodings are the smallest,
// and values survive a round trip.

const test = require('node:test');
const assert = require('node:assert');
const { encode, decode, frame, scaledUints } = require('../wire.js');

const hex = (h) => Buffer.from(h.replace(/ /g, ''), 'hex');

test('decodes every integer encoding', () => {
  const cases = [
    ['00', 0], ['7f', 127], // positive fixint
    ['ff', -1], ['e0', -32], // negative fixint
    ['cc ff', 255], ['cc 05', 5], // uint8 (also non-minimal)
    ['cd ffff', 65535], ['cd 0001', 1], // uint16
    ['ce ffffffff', 4294967295], ['ce 00000002', 2], // uint32
    ['cf 0000000100000000', 4294967296], ['cf 0000000000000003', 3], // uint64
    ['cf 001fffffffffffff', 2 ** 53 - 1],
    ['cf ffffffffffffffff', 18446744073709551615n], ['cf 18867251edfa0000', 1767225600000000000n],
    ['d0 80', -128], ['d0 7f', 127], // int8
    ['d1 8000', -32768], ['d1 0004', 4], // int16
    ['d2 80000000', -2147483648], ['d2 00000006', 6], // int32
    ['d3 8000000000000000', -9223372036854775808n], ['d3 0000000000000007', 7], // int64
    ['d3 ffffffffffffffff', -1], ['d3 ffe0000000000001', -(2 ** 53) + 1],
  ];
  for (const [h, want] of cases) assert.strictEqual(decode(hex(h)), want, h);
});

test('encodes integers in the smallest form', () => {
  const cases = [
    [0, '00'], [127, '7f'], [128, 'cc80'], [255, 'ccff'], [256, 'cd0100'], [65535, 'cdffff'],
    [65536, 'ce00010000'], [4294967295, 'ceffffffff'], [4294967296, 'cf0000000100000000'],
    [-1, 'ff'], [-32, 'e0'], [-33, 'd0df'], [-128, 'd080'], [-129, 'd1ff7f'], [-32768, 'd18000'],
    [-32769, 'd2ffff7fff'], [-2147483648, 'd280000000'], [-2147483649, 'd3ffffffff7fffffff'],
    [18446744073709551615n, 'cfffffffffffffffff'], [-9223372036854775808n, 'd38000000000000000'],
    [1767225600000000000n, 'cf18867251edfa0000'], [5n, '05'],
  ];
  for (const [v, want] of cases) assert.strictEqual(encode(v).toString('hex'), want, String(v));
});

test('refuses integers beyond 64 bits', () => {
  assert.throws(() => encode(1n << 64n), RangeError);
  assert.throws(() => encode(-(1n << 63n) - 1n), RangeError);
});

test('every int width survives a round trip', () => {
  const values = [0, 1, 127, 128, 255, 256, 65535, 65536, 2 ** 32 - 1, 2 ** 32, 2 ** 53 - 1,
    -1, -32, -33, -128, -129, -32768, -32769, -(2 ** 31), -(2 ** 31) - 1, -(2 ** 53) + 1,
    2n ** 63n, 2n ** 64n - 1n, -(2n ** 63n), 1767225600000000000n];
  for (const v of values) {
    const back = decode(encode(v));
    assert.strictEqual(BigInt(back), BigInt(v), String(v));
  }
});

test('str, bin, float, bool, nil, arrays and maps of every size class', () => {
  const long = (n) => 'x'.repeat(n);
  const values = [
    null, true, false, 1.5, -0.25, 1e300, '', 'π', long(31), long(32), long(255), long(256), long(70000),
    [], [1, 'a', null], Array.from({ length: 20 }, (_, i) => i), Array.from({ length: 70000 }, () => 0),
    {}, { a: 1, b: [true, { c: 'd' }] }, Object.fromEntries(Array.from({ length: 20 }, (_, i) => [`k${i}`, i])),
  ];
  for (const v of values) assert.deepStrictEqual(decode(encode(v)), v);
  for (const n of [0, 5, 255, 256, 70000]) {
    const b = Buffer.alloc(n, 7);
    const back = decode(encode(b));
    assert.ok(Buffer.isBuffer(back) && back.equals(b), `bin of ${n}`);
  }
});

test('decodes float32, str8/16/32, bin8/16/32, array16/32, map16/32 written by others', () => {
  assert.strictEqual(decode(hex('ca 3fc00000')), 1.5);
  assert.strictEqual(decode(hex('d9 01 61')), 'a');
  assert.strictEqual(decode(hex('da 0001 61')), 'a');
  assert.strictEqual(decode(hex('db 00000001 61')), 'a');
  assert.deepStrictEqual([...decode(hex('c4 02 0102'))], [1, 2]);
  assert.deepStrictEqual([...decode(hex('c5 0002 0102'))], [1, 2]);
  assert.deepStrictEqual([...decode(hex('c6 00000002 0102'))], [1, 2]);
  assert.deepStrictEqual(decode(hex('dc 0002 01 02')), [1, 2]);
  assert.deepStrictEqual(decode(hex('dd 00000002 01 02')), [1, 2]);
  assert.deepStrictEqual(decode(hex('de 0001 a161 01')), { a: 1 });
  assert.deepStrictEqual(decode(hex('df 00000001 a161 01')), { a: 1 });
});

test('ext values decode without breaking the map around them', () => {
  assert.deepStrictEqual(decode(hex('82 a161 d4 05 aa a162 01')), { a: { type: 5, data: Buffer.from([0xaa]) }, b: 1 });
});

test('truncated or trailing input is an error', () => {
  assert.throws(() => decode(hex('cd 01')), RangeError);
  assert.throws(() => decode(hex('92 01')), RangeError);
  assert.throws(() => decode(hex('01 02')), RangeError);
  assert.throws(() => decode(hex('c1')), RangeError);
});

test('frames carry a big-endian length', () => {
  const f = frame({ op: 'hello', id: 1 });
  assert.strictEqual(new DataView(f.buffer, f.byteOffset).getUint32(0), f.length - 4);
  assert.deepStrictEqual(decode(f.subarray(4)), { op: 'hello', id: 1 });
});

test('undefined map values are left out', () => {
  assert.deepStrictEqual(decode(encode({ a: 1, b: undefined })), { a: 1 });
});

test('scaledUints encodes exact uint64 products without BigInt', () => {
  const vals = new Float64Array([0, 1, 1795342327783123, 2 ** 53 - 1, 4294967295, 4294967296, 1e9 + 7]);
  const tags = new Uint8Array([0, 1, 0, 1, 0, 0, 1]);
  const scales = [1000, 1];
  const raw = scaledUints(vals, tags, scales, vals.length);
  const got = decode(raw.bytes).map(BigInt);
  const want = [...vals].map((v, i) => BigInt(v) * BigInt(scales[tags[i]]));
  assert.deepStrictEqual(got, want);
  assert.deepStrictEqual(decode(encode({ values: raw })), { values: decode(raw.bytes) }, 'a Raw nests in a map');
  assert.throws(() => scaledUints(new Float64Array([-1]), new Uint8Array(1), [1], 1), RangeError);
  assert.throws(() => scaledUints(new Float64Array([2 ** 53 - 1]), new Uint8Array(1), [4096], 1), RangeError);
});
