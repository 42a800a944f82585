// Promise.all over four LLM calls with fetch; each, once answered, reads
// the clock and draws a random number.
const base = process.env.LLM_BASE;
async function call(i) {
  const r = await fetch(base + "/chat/completions", {
    method: "POST", headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ model: "m", messages: [{ role: "user", content: `tool ${i}` }] }),
  });
  const j = await r.json();
  return `${i} ${j.choices[0].message.content} t=${Date.now()} p=${performance.now().toFixed(3)} r=${Math.random().toFixed(6)}`;
}
(async () => {
  const done = [];
  await Promise.all([0, 1, 2, 3].map(async (i) => done.push(await call(i))));
  for (const l of done) console.log(l);
})();
