'use strict';
// random.js: the crypto functions over a byte source, with Node's
// validation, and the logged -> replayed round trip.

const test = require('node:test');
const assert = require('node:assert');
const r = require('../random.js');
const { Stream } = require('../seedrng.js');

function fakeCrypto() {
  return { webcrypto: {} };
}

function seeded(seed = 7n) {
  const c = fakeCrypto();
  const fns = r.installCrypto(c, r.seededBytes(seed, '0/node.crypto'));
  return { c, fns };
}

test('randomBytes, randomUUID and getRandomValues read node.crypto in order', () => {
  const { c } = seeded();
  const want = new Stream(7n, '0/node.crypto').bytes(4 + 16 + 8);
  assert.strictEqual(c.randomBytes(4).toString('hex'), want.subarray(0, 4).toString('hex'));
  const u = Buffer.from(want.subarray(4, 20));
  u[6] = (u[6] & 0x0f) | 0x40;
  u[8] = (u[8] & 0x3f) | 0x80;
  assert.strictEqual(c.randomUUID().replace(/-/g, ''), u.toString('hex'));
  const v = c.webcrypto.getRandomValues(new Uint32Array(2));
  assert.ok(Buffer.from(v.buffer).equals(want.subarray(20, 28)));
});

test('randomUUID is a version 4 UUID', () => {
  const { c } = seeded();
  for (let i = 0; i < 50; i++) assert.match(c.randomUUID(), /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
});

test('callback forms are asynchronous and draw at call time', async () => {
  const { c } = seeded();
  const want = new Stream(7n, '0/node.crypto').bytes(8);
  let sync = true;
  const got = await new Promise((resolve, reject) => {
    c.randomBytes(8, (err, buf) => (err ? reject(err) : resolve([sync, buf])));
    sync = false;
  });
  assert.deepStrictEqual([got[0], got[1].toString('hex')], [false, want.toString('hex')]);
  const buf = Buffer.alloc(6);
  await new Promise((resolve) => c.randomFill(buf, 2, resolve));
  assert.ok(buf.subarray(0, 2).equals(Buffer.alloc(2)));
  const n = await new Promise((resolve) => c.randomInt(10, (err, v) => resolve(v)));
  assert.ok(Number.isInteger(n) && n >= 0 && n < 10);
});

test('randomFillSync honours offset and size in elements', () => {
  const { c } = seeded();
  const a = new Uint16Array(4);
  c.randomFillSync(a, 1, 2);
  assert.strictEqual(a[0], 0);
  assert.strictEqual(a[3], 0);
  assert.ok(a[1] !== 0 || a[2] !== 0);
  assert.throws(() => c.randomFillSync(a, 5), { code: 'ERR_OUT_OF_RANGE' });
  assert.throws(() => c.randomFillSync('x'), { code: 'ERR_INVALID_ARG_TYPE' });
  const ab = new ArrayBuffer(4);
  assert.strictEqual(c.randomFillSync(ab), ab);
});

test('randomInt follows Node\'s range rules', () => {
  const { c } = seeded();
  const seen = new Set();
  for (let i = 0; i < 300; i++) {
    const v = c.randomInt(-3, 3);
    assert.ok(v >= -3 && v < 3);
    seen.add(v);
  }
  assert.strictEqual(seen.size, 6);
  assert.throws(() => c.randomInt(5, 5), { code: 'ERR_OUT_OF_RANGE' });
  assert.throws(() => c.randomInt(1.5), { code: 'ERR_INVALID_ARG_TYPE' });
  assert.throws(() => c.randomInt(0, 2 ** 48), { code: 'ERR_OUT_OF_RANGE' });
});

test('getRandomValues refuses float arrays and more than 65536 bytes', () => {
  const { c } = seeded();
  assert.throws(() => c.webcrypto.getRandomValues(new Float64Array(1)), { name: 'TypeMismatchError' });
  assert.throws(() => c.webcrypto.getRandomValues(new Uint8Array(65537)), { name: 'QuotaExceededError' });
  assert.strictEqual(c.webcrypto.getRandomValues(new BigInt64Array(2)).length, 2);
});

// xoshiro128 is an independent xoshiro128** (Vigna's reference, on a
// Uint32Array) seeded as seededFloats documents.
function xoshiro128(seedBytes) {
  const s = new Uint32Array(4);
  for (let i = 0; i < 4; i++) s[i] = seedBytes.readUInt32BE(4 * i);
  const rotl = (x, k) => ((x << k) | (x >>> (32 - k))) >>> 0;
  return () => {
    const result = Math.imul(rotl(Math.imul(s[1], 5) >>> 0, 7), 9) >>> 0;
    const t = (s[1] << 9) >>> 0;
    s[2] ^= s[0]; s[3] ^= s[1]; s[1] ^= s[2]; s[0] ^= s[3]; s[2] ^= t;
    s[3] = rotl(s[3], 11);
    return result;
  };
}

const VECTOR_7 = 0.21126324724689072; // seed 7, stream 0: also checked against a Python xoshiro128**

test('seeded Math.random is xoshiro128** seeded by the first 16 bytes of node.Math.random', () => {
  const floats = r.seededFloats(3n, '0.2/node.Math.random');
  assert.strictEqual(floats.drawn(), 0);
  const next = xoshiro128(new Stream(3n, '0.2/node.Math.random').bytes(16));
  for (let i = 0; i < 1000; i++) {
    const a = next() >>> 5;
    const b = next() >>> 6;
    const v = floats.float();
    assert.strictEqual(v, (a * 2 ** 26 + b) / 2 ** 53);
    assert.ok(v >= 0 && v < 1);
  }
  assert.strictEqual(floats.drawn(), 16);
  // a fixed vector: a change of the generator changes every recorded run
  assert.strictEqual(r.seededFloats(7n, '0/node.Math.random').float(), VECTOR_7);
});

test('logged draws replay to the same values, then fall back with one drift', () => {
  const puts = new Map();
  const log = new r.DrawLog((label, data) => puts.set(label, Buffer.concat([puts.get(label) || Buffer.alloc(0), data])));
  const realFill = (u8) => require('node:crypto').randomFillSync(u8);
  const bytes = r.loggedBytes(r.SOURCE_CRYPTO, realFill, log);
  const floats = r.loggedFloats(r.SOURCE_MATH, Math.random, log);
  const c1 = fakeCrypto();
  r.installCrypto(c1, bytes);
  const recorded = [c1.randomUUID(), floats.float(), c1.randomBytes(100000).toString('hex'), c1.randomInt(1000), floats.float()];
  log.flush();
  assert.ok(bytes.drawn() >= 16 + 100000 + 6, 'randomInt draws 6 bytes per try');
  assert.strictEqual(puts.get(r.SOURCE_CRYPTO).length, bytes.drawn());
  assert.strictEqual(puts.get(r.SOURCE_MATH).length, 16);

  const drifts = [];
  const fetcher = (label) => (from, max) => {
    const data = puts.get(label).subarray(from, from + max);
    return { data, end: from + max >= puts.get(label).length };
  };
  const fallback = r.seededBytes(1n, '0/node.crypto');
  const rb = r.replayBytes(r.SOURCE_CRYPTO, fetcher(r.SOURCE_CRYPTO), (w, d) => drifts.push(d), fallback.fill);
  const rf = r.replayFloats(r.replayBytes(r.SOURCE_MATH, fetcher(r.SOURCE_MATH), (w, d) => drifts.push(d), () => {}));
  const c2 = fakeCrypto();
  r.installCrypto(c2, rb);
  const replayed = [c2.randomUUID(), rf.float(), c2.randomBytes(100000).toString('hex'), c2.randomInt(1000), rf.float()];
  assert.deepStrictEqual(replayed, recorded);
  assert.deepStrictEqual(drifts, []);
  const extra = c2.randomBytes(4);
  assert.strictEqual(extra.toString('hex'), new Stream(1n, '0/node.crypto').bytes(4).toString('hex'));
  assert.strictEqual(drifts.length, 1);
  assert.match(drifts[0], /node\.crypto: draw past the \d+ recorded bytes/);
});

test('key generation draws from node.crypto; RSA is left to OpenSSL and reported', async () => {
  const crypto = require('crypto');
  const unserved = [];
  // a copy of node:crypto's exports, so this test patches nothing shared
  const subtle = crypto.webcrypto.subtle;
  const copy = () => ({
    generateKeySync: crypto.generateKeySync, generateKeyPairSync: crypto.generateKeyPairSync,
    generateKey: crypto.generateKey, generateKeyPair: crypto.generateKeyPair,
    webcrypto: { subtle: { generateKey: subtle.generateKey.bind(subtle), importKey: subtle.importKey.bind(subtle) } },
  });
  const c = copy();
  r.installCrypto(c, r.seededBytes(7n, '0/node.crypto'), (what) => unserved.push(what));
  const want = new Stream(7n, '0/node.crypto').bytes(32 + 32 + 16);
  // hmac: 32 bytes; ed25519: the 32-byte private key; AES-128 (subtle): 16 bytes
  assert.strictEqual(c.generateKeySync('hmac', { length: 256 }).export().toString('hex'), want.subarray(0, 32).toString('hex'));
  const ed = c.generateKeyPairSync('ed25519');
  assert.strictEqual(ed.privateKey.export({ format: 'jwk' }).d, Buffer.from(want.subarray(32, 64)).toString('base64url'));
  const aes = await c.webcrypto.subtle.generateKey({ name: 'AES-GCM', length: 128 }, true, ['encrypt']);
  assert.strictEqual(Buffer.from(await crypto.webcrypto.subtle.exportKey('raw', aes)).toString('hex'), want.subarray(64, 80).toString('hex'));
  // an EC key pair signs and verifies
  const ec = await c.webcrypto.subtle.generateKey({ name: 'ECDSA', namedCurve: 'P-256' }, false, ['sign', 'verify']);
  const sig = await crypto.webcrypto.subtle.sign({ name: 'ECDSA', hash: 'SHA-256' }, ec.privateKey, Buffer.from('m'));
  assert.ok(await crypto.webcrypto.subtle.verify({ name: 'ECDSA', hash: 'SHA-256' }, ec.publicKey, sig, Buffer.from('m')));
  assert.deepStrictEqual([ec.privateKey.extractable, ec.publicKey.extractable, ec.privateKey.usages, ec.publicKey.usages], [false, true, ['sign'], ['verify']]);
  // the same seed, the same keys
  const again = copy();
  r.installCrypto(again, r.seededBytes(7n, '0/node.crypto'));
  again.generateKeySync('hmac', { length: 256 });
  assert.strictEqual(again.generateKeyPairSync('ed25519').publicKey.export({ format: 'jwk' }).x, ed.publicKey.export({ format: 'jwk' }).x);
  // left to OpenSSL, and said so
  c.generateKeyPairSync('rsa', { modulusLength: 512 });
  await c.webcrypto.subtle.generateKey({ name: 'RSA-PSS', modulusLength: 512, publicExponent: new Uint8Array([1, 0, 1]), hash: 'SHA-256' }, true, ['sign', 'verify']);
  assert.deepStrictEqual(unserved, ['crypto.generateKeyPair(rsa)', 'crypto.subtle.generateKey(RSA-PSS)']);
  // Node's own validation errors
  assert.throws(() => c.generateKeySync('aes', { length: 100 }), { code: 'ERR_INVALID_ARG_VALUE' });
});
