// The official openai SDK: two plain calls, a streamed one event by event, a tool call.
const { OpenAI } = require('openai');
const { BASE, KEY, TOOLS, fail } = require('./common');
(async () => {
  const client = new OpenAI({ baseURL: BASE, apiKey: KEY, maxRetries: 0 });
  for (const text of ['hello', 'again']) {
    const r = await client.chat.completions.create({ model: 'test-model', messages: [{ role: 'user', content: text }], temperature: 0 });
    console.log('plain:', r.choices[0].message.content);
  }
  const s = await client.chat.completions.create({
    model: 'test-model', stream: true, stream_options: { include_usage: true }, messages: [{ role: 'user', content: 'stream please' }],
  });
  for await (const chunk of s) console.log('event:', JSON.stringify(chunk.choices[0]?.delta ?? chunk.usage));
  const t = await client.chat.completions.create({ model: 'test-model', messages: [{ role: 'user', content: 'weather?' }], tools: TOOLS });
  const f = t.choices[0].message.tool_calls[0].function;
  console.log('tool:', f.name, f.arguments);
})().catch(fail);
