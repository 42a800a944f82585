// Node's global fetch: two plain calls, a streamed one read by read, a tool
// call, a stream cancelled after its first read; then a plain call, a
// stream, a tool call and a stream cancelled after its first read (one of
// the several events the server sent) over the Responses API and over
// Anthropic's messages API.
const { BASE, H, APIS, plain, stream, early, tool, fail } = require('./common');
const url = BASE + '/chat/completions';
(async () => {
  for (const text of ['hello', 'again']) {
    const r = await fetch(url, { method: 'POST', headers: H, body: plain(text) });
    const j = await r.json();
    console.log('plain:', j.choices[0].message.content, 'ce:', r.headers.get('content-encoding'));
  }
  const r = await fetch(url, { method: 'POST', headers: H, body: stream });
  const reader = r.body.getReader();
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    console.log('read:', JSON.stringify(new TextDecoder().decode(value)));
  }
  const t = await (await fetch(url, { method: 'POST', headers: H, body: tool })).json();
  const f = t.choices[0].message.tool_calls[0].function;
  console.log('tool:', f.name, f.arguments);
  const e = (await fetch(url, { method: 'POST', headers: H, body: early })).body.getReader();
  console.log('early read:', JSON.stringify(new TextDecoder().decode((await e.read()).value)));
  await e.cancel();
  for (const [api, a] of Object.entries(APIS)) {
    const call = (body) => fetch(a.url, { method: 'POST', headers: a.headers, body: JSON.stringify(body) });
    console.log(api, 'plain:', a.text(await (await call(a.plain('hello'))).json()));
    const s = (await call(a.stream)).body.getReader();
    for (;;) {
      const { value, done } = await s.read();
      if (done) break;
      console.log(api, 'read:', JSON.stringify(new TextDecoder().decode(value)));
    }
    console.log(api, 'tool:', a.call(await (await call(a.tool)).json()));
    // One read, one event of the several the server sent, then cancel.
    const e = (await call(a.early)).body.getReader();
    console.log(api, 'early read:', JSON.stringify(new TextDecoder().decode((await e.read()).value)));
    await e.cancel();
  }
  console.log('closed early');
})().catch(fail);
