// A Node agent's remaining sources: Web Crypto key generation, webcrypto
// random values, process times, uptime; an RSA key pair (left to OpenSSL,
// reported in syscalls.json, not printed). Lines: "<kind> <name> <value>".
'use strict';
const crypto = require('crypto');
const os = require('os');

(async () => {
  const subtle = globalThis.crypto.subtle;
  const aes = await subtle.generateKey({ name: 'AES-GCM', length: 256 }, true, ['encrypt', 'decrypt']);
  console.log('random subtle_aes', Buffer.from(await subtle.exportKey('raw', aes)).toString('hex'));
  const ec = await subtle.generateKey({ name: 'ECDSA', namedCurve: 'P-256' }, true, ['sign', 'verify']);
  console.log('random subtle_ecdsa', (await subtle.exportKey('jwk', ec.publicKey)).x);
  const ed = crypto.generateKeyPairSync('ed25519');
  console.log('random ed25519', ed.publicKey.export({ format: 'jwk' }).x);
  console.log('random webcrypto_values', Buffer.from(crypto.webcrypto.getRandomValues(new Uint8Array(8))).toString('hex'));
  console.log('random webcrypto_uuid', crypto.webcrypto.randomUUID());
  crypto.generateKeyPairSync('rsa', { modulusLength: 1024 });
  await new Promise((resolve) => setTimeout(resolve, 2000));
  console.log('fixed uptime', os.uptime());
  // CPU time and resource usage are real (they measure work, not time)
  const cpu = process.cpuUsage();
  console.log('fixed cpu_usage', cpu.user > 0 && cpu.system >= 0);
  const ru = process.resourceUsage();
  console.log('fixed resource_usage', ru.userCPUTime > 0 && ru.maxRSS > 0);
})();
