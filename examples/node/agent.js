'use strict';
// A Node "agent" that prints everything dal's Node shim virtualizes: clocks,
// randomness, timer order and a measured sleep. Under dal in strict mode its
// output depends only on the seed (and the epoch):
//
//   bin/dal-exec run --seed 7 -- node examples/node/agent.js     same output every run
//   bin/dal-exec run --seed 8 -- node examples/node/agent.js     other random values, same clocks
//   node examples/node/agent.js                                 real clock: changes every run
//
// Node 20, built-in modules only.

const crypto = require('node:crypto');
const { setTimeout: sleep } = require('node:timers/promises');

function line(name, value) {
  console.log(`${name.padEnd(24)} ${value}`);
}

async function main() {
  line('Date.now()', Date.now());
  line('new Date().toISOString()', new Date().toISOString());
  line('performance.now()', performance.now().toFixed(3));
  line('process.hrtime.bigint()', process.hrtime.bigint());
  line('Math.random()', Math.random());
  line('crypto.randomUUID()', crypto.randomUUID());
  line('crypto.randomBytes(8)', crypto.randomBytes(8).toString('hex'));
  line('getRandomValues(u32[2])', Array.from(globalThis.crypto.getRandomValues(new Uint32Array(2))).join(' '));

  // Timer order: timeouts, an interval and immediates, mixed. Under dal the
  // order is fixed by (deadline, registration order); natively the first
  // timeout and the immediate may swap from run to run.
  const order = await new Promise((resolve) => {
    const seen = [];
    let ticks = 0;
    setTimeout(() => seen.push('timeout(0)'), 0);
    setImmediate(() => seen.push('immediate'));
    const interval = setInterval(() => {
      seen.push(`interval#${++ticks}`);
      if (ticks === 3) clearInterval(interval);
    }, 40);
    setTimeout(() => {
      seen.push('timeout(100)');
      setImmediate(() => seen.push('immediate after timeout(100)'));
    }, 100);
    setTimeout(() => seen.push('timeout(50)'), 50);
    setTimeout(() => resolve(seen), 200);
  });
  line('timer order', order.join(', '));

  // A measured sleep: 2.5 s on the clock, milliseconds of wall time under dal.
  const t0 = performance.now();
  await sleep(2500);
  line('slept (ms)', (performance.now() - t0).toFixed(3));
  line('Date.now() after', Date.now());

  const dal = globalThis[Symbol.for('dal')];
  if (dal && dal.active) {
    const s = dal.stats();
    line('dal', `mode ${s.mode}, stream ${s.stream}, ${s.reads} clock reads, ${s.round_trips} round trip(s)`);
  } else {
    line('dal', 'not active: real clock and randomness');
  }
}

main();
