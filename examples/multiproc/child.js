// Child of examples/multiproc/parent.py: its clock and randomness.
const crypto = require("crypto");
console.log(`node child stream ${process.env.DAL_STREAM || "-"}: Date.now ${Date.now()} Math.random ${Math.random()} randomUUID ${crypto.randomUUID()}`);
