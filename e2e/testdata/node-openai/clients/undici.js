// undici's request: two plain calls, a streamed one read by read, a tool
// call, a stream left after its first read; then the same over the
// Responses API and Anthropic's messages API.
const { request } = require('undici');
const { BASE, H, APIS, plain, stream, early, tool, fail } = require('./common');
const url = BASE + '/chat/completions';
(async () => {
  for (const text of ['hello', 'again']) {
    const r = await request(url, { method: 'POST', headers: { ...H, 'Accept-Encoding': 'gzip' }, body: plain(text) });
    const zlib = require('zlib');
    let b = Buffer.from(await r.body.arrayBuffer());
    if (r.headers['content-encoding'] === 'gzip') b = zlib.gunzipSync(b);
    console.log('plain:', JSON.parse(b).choices[0].message.content, 'ce:', r.headers['content-encoding'], 'length:', r.headers['content-length']);
  }
  const r = await request(url, { method: 'POST', headers: H, body: stream });
  for await (const chunk of r.body) console.log('read:', JSON.stringify(chunk.toString()));
  const t = await (await request(url, { method: 'POST', headers: H, body: tool })).body.json();
  const f = t.choices[0].message.tool_calls[0].function;
  console.log('tool:', f.name, f.arguments);
  const e = await request(url, { method: 'POST', headers: H, body: early });
  for await (const chunk of e.body) {
    console.log('early read:', JSON.stringify(chunk.toString()));
    break; // destroys the body, and the connection with it
  }
  for (const [api, a] of Object.entries(APIS)) {
    const call = (body) => request(a.url, { method: 'POST', headers: a.headers, body: JSON.stringify(body) });
    console.log(api, 'plain:', a.text(await (await call(a.plain('hello'))).body.json()));
    for await (const chunk of (await call(a.stream)).body) console.log(api, 'read:', JSON.stringify(chunk.toString()));
    console.log(api, 'tool:', a.call(await (await call(a.tool)).body.json()));
    for await (const chunk of (await call(a.early)).body) {
      console.log(api, 'early read:', JSON.stringify(chunk.toString()));
      break;
    }
  }
  console.log('closed early');
})().catch(fail);
