// Node worker threads under the shim: each worker is its own stream, named
// in creation order, with its own virtual clock, draws and ordered timers;
// a worker's worker too. Lines: "<kind> <name> <value>".
const { Worker, isMainThread, parentPort, workerData } = require('worker_threads');

function work(k) {
  const order = [];
  const t0 = Date.now();
  for (const [name, d] of [['c', 30], ['a', 10], ['b', 10], ['d', 20]]) setTimeout(() => order.push(`${name}@${Date.now() - t0}`), d);
  setTimeout(() => {
    const dal = globalThis[Symbol.for('dal')];
    const r = { k, stream: dal ? dal.stream() : 'none', now: Date.now(), order: order.join(','), rand: Math.random() };
    if (k !== 2) return parentPort.postMessage([r]);
    const inner = new Worker(__filename, { workerData: 3 });
    inner.on('message', (m) => parentPort.postMessage([r, ...m]));
  }, 50);
}

if (isMainThread) {
  const got = [];
  for (const k of [1, 2]) {
    new Worker(__filename, { workerData: k }).on('message', (m) => {
      got.push(...m);
      if (got.length < 3) return;
      got.sort((a, b) => a.k - b.k);
      for (const r of got) {
        console.log(`fixed worker${r.k}_stream ${r.stream}`);
        console.log(`fixed worker${r.k}_timers ${r.order}`);
        console.log(`fixed worker${r.k}_now ${r.now}`);
        console.log(`random worker${r.k}_draw ${r.rand}`);
      }
      console.log(`fixed main_now ${Date.now()}`);
      console.log(`random main_draw ${Math.random()}`);
    });
  }
} else {
  work(workerData);
}
