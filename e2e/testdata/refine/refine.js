// A refinement loop in Node: three drafts of out/report.md, marked with the
// dal shim's iteration(). Iteration 2 is the best.
'use strict';
const fs = require('fs');
const dal = globalThis[Symbol.for('dal')];
fs.mkdirSync('out', { recursive: true });
[0.72, 0.85, 0.83].forEach((score, i) => {
  fs.writeFileSync('out/report.md', `draft ${i + 1}\n`);
  const mark = dal.iteration({ score, artifacts: ['out/report.md'], note: `draft ${i + 1}` });
  console.log('iteration', mark && mark.seq);
});
