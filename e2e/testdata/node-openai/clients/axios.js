// axios: two plain calls, a streamed one read by read, a tool call, a
// stream destroyed after its first read; then the same over the Responses
// API and Anthropic's messages API.
const axios = require('axios');
const { BASE, H, APIS, plain, stream, early, tool, fail } = require('./common');
const url = BASE + '/chat/completions';
const ax = axios.create({ proxy: false, timeout: 30000 });
// first is a stream's first read.
const first = (s) => new Promise((resolve, reject) => {
  s.once('data', resolve);
  s.once('error', reject);
});
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
  console.log('early read:', JSON.stringify((await first(e.data)).toString()));
  e.data.destroy();
  for (const [api, a] of Object.entries(APIS)) {
    const call = (body, more) => ax.post(a.url, body, { headers: a.headers, ...more });
    console.log(api, 'plain:', a.text((await call(a.plain('hello'))).data));
    const s = await call(a.stream, { responseType: 'stream' });
    await new Promise((resolve, reject) => {
      s.data.on('data', (b) => console.log(api, 'read:', JSON.stringify(b.toString())));
      s.data.on('end', resolve);
      s.data.on('error', reject);
    });
    console.log(api, 'tool:', a.call((await call(a.tool)).data));
    const e = await call(a.early, { responseType: 'stream' });
    console.log(api, 'early read:', JSON.stringify((await first(e.data)).toString()));
    e.data.destroy();
  }
  console.log('closed early');
})().catch(fail);
