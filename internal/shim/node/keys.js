'use strict';
// keys.js: key generation on a dal byte source (random.js's fill), loaded on
// the first call of a key generator.
//
// Served from the source (so seeded in strict and seeded modes, logged and
// replayed in logged mode), with the byte counts below taken in call order:
//   secret keys   crypto.generateKey(Sync) 'hmac'/'aes', subtle.generateKey
//                 AES-CTR/CBC/GCM/KW and HMAC: length/8 bytes
//   Ed25519, X25519  crypto.generateKeyPair(Sync), subtle.generateKey: the
//                 32-byte private key
//   EC (P-256, P-384, P-521, secp256k1)  crypto.generateKeyPair(Sync) 'ec',
//                 subtle.generateKey ECDSA/ECDH: the private scalar, drawn
//                 as the curve order's byte length and redrawn until it lies
//                 in [1, order)
// Everything else (RSA, DSA, DH, X448/Ed448, createECDH().generateKeys,
// generatePrime, createDiffieHellman) still draws from OpenSSL: it runs
// natively and is reported as unserved (noted by the caller).

const crypto = require('crypto');

const ORDERS = {
  'P-256': ['prime256v1', 0xffffffff00000000ffffffffffffffffbce6faada7179e84f3b9cac2fc632551n],
  'P-384': ['secp384r1', 0xffffffffffffffffffffffffffffffffffffffffffffffffc7634d81f4372ddf581a0db248b0a77aecec196accc52973n],
  'P-521': ['secp521r1', 0x01fffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffa51868783bf2f966b7fcc0148f709a5d03bb5c9b8899c47aebb6fb71e91386409n],
  secp256k1: ['secp256k1', 0xfffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141n],
};
const CURVE_ALIASES = { prime256v1: 'P-256', secp384r1: 'P-384', secp521r1: 'P-521', secp256k1: 'secp256k1' };

// PKCS#8 of an Ed25519 / X25519 private key: this prefix, then the 32 bytes.
const PKCS8_PREFIX = {
  ed25519: Buffer.from('302e020100300506032b657004220420', 'hex'),
  x25519: Buffer.from('302e020100300506032b656e04220420', 'hex'),
};

function bytes(fill, n) {
  return Buffer.from(fill(new Uint8Array(n)));
}

// scalar draws an EC private scalar in [1, order) as big-endian bytes of the
// order's length.
function scalar(fill, order) {
  const len = Math.ceil(order.toString(16).length / 2);
  const topBits = order.toString(2).length % 8;
  for (;;) {
    const b = bytes(fill, len);
    if (topBits) b[0] &= (1 << topBits) - 1;
    const v = BigInt(`0x${b.toString('hex')}`);
    if (v > 0n && v < order) return b;
  }
}

function b64u(buf) {
  return Buffer.from(buf).toString('base64url');
}

// ecJwk returns the private and public JWKs of a fresh key on curve.
function ecJwk(fill, curve) {
  const [name, order] = ORDERS[curve];
  const d = scalar(fill, order);
  const ecdh = crypto.createECDH(name);
  ecdh.setPrivateKey(d);
  const pub = ecdh.getPublicKey();
  const n = (pub.length - 1) / 2;
  const jwk = { kty: 'EC', crv: curve, x: b64u(pub.subarray(1, 1 + n)), y: b64u(pub.subarray(1 + n)) };
  return { priv: { ...jwk, d: b64u(d) }, pub: jwk };
}

// keyPairObjects returns {privateKey, publicKey} KeyObjects, or null for a
// type this module does not serve.
function keyPairObjects(fill, type, options) {
  if (type === 'ed25519' || type === 'x25519') {
    const der = Buffer.concat([PKCS8_PREFIX[type], bytes(fill, 32)]);
    const privateKey = crypto.createPrivateKey({ key: der, format: 'der', type: 'pkcs8' });
    return { privateKey, publicKey: crypto.createPublicKey(privateKey) };
  }
  if (type === 'ec' && options && typeof options.namedCurve === 'string') {
    const curve = ORDERS[options.namedCurve] ? options.namedCurve : CURVE_ALIASES[options.namedCurve];
    if (!curve) return null;
    const { priv } = ecJwk(fill, curve);
    const privateKey = crypto.createPrivateKey({ key: priv, format: 'jwk' });
    return { privateKey, publicKey: crypto.createPublicKey(privateKey) };
  }
  return null;
}

function encode(pair, options) {
  const pub = options && options.publicKeyEncoding;
  const priv = options && options.privateKeyEncoding;
  return {
    publicKey: pub ? pair.publicKey.export(pub) : pair.publicKey,
    privateKey: priv ? pair.privateKey.export(priv) : pair.privateKey,
  };
}

// generateKeyPairSync is crypto.generateKeyPairSync; native(type, options)
// is the real one, unserved(what) notes a type left to OpenSSL.
function generateKeyPairSync(fill, native, unserved, type, options) {
  const pair = keyPairObjects(fill, type, options);
  if (pair === null) {
    unserved(`crypto.generateKeyPair(${type})`);
    return native(type, options);
  }
  return encode(pair, options);
}

function generateKeyPair(fill, native, unserved, type, options, callback) {
  if (typeof options === 'function') {
    callback = options;
    options = undefined;
  }
  if (typeof callback !== 'function') return native(type, options, callback); // Node's own error
  let pair;
  try {
    pair = keyPairObjects(fill, type, options);
  } catch (e) {
    process.nextTick(callback, e);
    return undefined;
  }
  if (pair === null) {
    unserved(`crypto.generateKeyPair(${type})`);
    return native(type, options, callback);
  }
  let out;
  try {
    out = encode(pair, options);
  } catch (e) {
    process.nextTick(callback, e);
    return undefined;
  }
  process.nextTick(callback, null, out.publicKey, out.privateKey);
  return undefined;
}

function secretLength(type, options) {
  const length = options && options.length;
  if (!Number.isInteger(length)) return -1;
  if (type === 'hmac' && length >= 8 && length <= 2 ** 31 - 1) return length;
  if (type === 'aes' && (length === 128 || length === 192 || length === 256)) return length;
  return -1;
}

// generateKeySync is crypto.generateKeySync ('hmac', 'aes').
function generateKeySync(fill, native, type, options) {
  const bits = secretLength(type, options);
  if (bits < 0) return native(type, options); // Node's own validation error
  return crypto.createSecretKey(bytes(fill, Math.floor(bits / 8)));
}

function generateKey(fill, native, type, options, callback) {
  const bits = secretLength(type, options);
  if (bits < 0 || typeof callback !== 'function') return native(type, options, callback);
  const key = crypto.createSecretKey(bytes(fill, Math.floor(bits / 8)));
  process.nextTick(callback, null, key);
  return undefined;
}

// ------------------------------------------------------------- Web Crypto

const HMAC_BLOCK = { 'SHA-1': 512, 'SHA-256': 512, 'SHA-384': 1024, 'SHA-512': 1024 };
const PAIR_USAGES = {
  ECDSA: [['sign'], ['verify']],
  ECDH: [['deriveKey', 'deriveBits'], []],
  Ed25519: [['sign'], ['verify']],
  X25519: [['deriveKey', 'deriveBits'], []],
};

function hashName(h) {
  return typeof h === 'string' ? h.toUpperCase() : h && typeof h.name === 'string' ? h.name.toUpperCase() : '';
}

// subtleGenerateKey is SubtleCrypto#generateKey; native is the real one
// (bound), unserved(what) notes an algorithm left to OpenSSL.
async function subtleGenerateKey(fill, subtle, native, unserved, algorithm, extractable, usages) {
  const alg = typeof algorithm === 'string' ? { name: algorithm } : algorithm;
  const name = alg && typeof alg.name === 'string' ? alg.name : '';
  const upper = name.toUpperCase();
  if (!Array.isArray(usages) || usages.length === 0) return native(algorithm, extractable, usages);
  if (['AES-CTR', 'AES-CBC', 'AES-GCM', 'AES-KW'].includes(upper) && [128, 192, 256].includes(alg.length)) {
    return subtle.importKey('raw', bytes(fill, alg.length / 8), { name: upper }, extractable, usages);
  }
  if (upper === 'HMAC') {
    const hash = hashName(alg.hash);
    const length = alg.length === undefined ? HMAC_BLOCK[hash] : alg.length;
    if (HMAC_BLOCK[hash] && Number.isInteger(length) && length > 0 && length % 8 === 0) {
      return subtle.importKey('raw', bytes(fill, length / 8), { name: 'HMAC', hash, length }, extractable, usages);
    }
    return native(algorithm, extractable, usages);
  }
  const canon = { ECDSA: 'ECDSA', ECDH: 'ECDH', ED25519: 'Ed25519', X25519: 'X25519' }[upper];
  if (canon) {
    const [privUses, pubUses] = PAIR_USAGES[canon];
    if (usages.some((u) => !privUses.includes(u) && !pubUses.includes(u))) return native(algorithm, extractable, usages);
    const priv = usages.filter((u) => privUses.includes(u));
    const pub = usages.filter((u) => pubUses.includes(u));
    if (canon === 'ECDSA' || canon === 'ECDH') {
      if (!ORDERS[alg.namedCurve] || alg.namedCurve === 'secp256k1') return native(algorithm, extractable, usages);
      const { priv: pj, pub: uj } = ecJwk(fill, alg.namedCurve);
      const params = { name: canon, namedCurve: alg.namedCurve };
      return {
        privateKey: await subtle.importKey('jwk', pj, params, extractable, priv),
        publicKey: await subtle.importKey('jwk', uj, params, true, pub),
      };
    }
    const type = canon.toLowerCase();
    const { privateKey, publicKey } = keyPairObjects(fill, type);
    return {
      privateKey: await subtle.importKey('pkcs8', privateKey.export({ format: 'der', type: 'pkcs8' }), { name: canon }, extractable, priv),
      publicKey: await subtle.importKey('spki', publicKey.export({ format: 'der', type: 'spki' }), { name: canon }, true, pub),
    };
  }
  unserved(`crypto.subtle.generateKey(${name || typeof algorithm})`);
  return native(algorithm, extractable, usages);
}

module.exports = {
  generateKeyPairSync, generateKeyPair, generateKeySync, generateKey, subtleGenerateKey, keyPairObjects,
};
