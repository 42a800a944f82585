// axios: two plain calls, a streamed one read by read, a tool call, a
// stream destroyed after its first read.
const axios = require('axios');
const { BASE, H, plain, stream, early, tool, fail } = require('./common');
const url = BASE + '/chat/completions';
const ax = axios.create({ proxy: false, timeout: 30000 });
(async () => {
  for (const text of ['hello', 'again']) {
    const r = await ax.post(url, plain(text), { headers: H });
    console.log('plain:', r.data.choices[0].message.content);
  }
  const r = await ax.post(url, stream, { headers: H, responseType: 'stream' });
  await new Promise((resolve, reject) => {
    r.data.on('data', (b) => console.log('read:', JSON.stringify(b.toString())));
    r.data.on('end', resolve);
    r.data.on('error', reject);
  });
  const t = await ax.post(url, tool, { headers: H });
  const f = t.data.choices[0].message.tool_calls[0].function;
  console.log('tool:', f.name, f.arguments);
  const e = await ax.post(url, early, { headers: H, responseType: 'stream' });
  const first = await new Promise((resolve, reject) => {
    e.data.once('data', resolve);
    e.data.once('error', reject);
  });
  console.log('early read:', JSON.stringify(first.toString()));
  e.data.destroy();
  console.log('closed early');
})().catch(fail);
