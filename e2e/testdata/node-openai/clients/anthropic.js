// The official @anthropic-ai/sdk against the messages API: two plain
// calls, a streamed one event by event, a tool use, a stream left after
// its first text delta.
const Anthropic = require('@anthropic-ai/sdk');
const { fail } = require('./common');
(async () => {
  const client = new Anthropic({ baseURL: process.env.ANTHROPIC_BASE_URL, apiKey: process.env.ANTHROPIC_API_KEY, maxRetries: 0 });
  for (const text of ['hello', 'again']) {
    const r = await client.messages.create({ model: 'test-model', max_tokens: 64, messages: [{ role: 'user', content: text }] });
    console.log('plain:', r.content[0].text);
  }
  const s = await client.messages.create({ model: 'test-model', max_tokens: 64, stream: true, messages: [{ role: 'user', content: 'stream please' }] });
  for await (const ev of s) console.log('event:', ev.type, JSON.stringify(ev.delta ?? {}));
  const t = await client.messages.create({
    model: 'test-model', max_tokens: 64, messages: [{ role: 'user', content: 'weather?' }],
    tools: [{ name: 'get_weather', description: 'weather', input_schema: { type: 'object', properties: { city: { type: 'string' } } } }],
  });
  console.log('tool:', t.content[0].name, JSON.stringify(t.content[0].input));
  const e = await client.messages.create({ model: 'test-model', max_tokens: 64, stream: true, messages: [{ role: 'user', content: 'close early' }] });
  for await (const ev of e) {
    console.log('early event:', ev.type, JSON.stringify(ev.delta ?? {}));
    if (ev.type === 'content_block_delta') break; // aborts the request
  }
  console.log('closed early');
})().catch(fail);
