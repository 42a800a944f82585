// The official openai SDK: chat completions (two plain calls, a streamed
// one event by event, a tool call, a stream closed after its first
// event), then the Responses API alike, and a Responses stream the agent
// closes after its first text delta.
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
  const ce = await client.chat.completions.create({ model: 'test-model', stream: true, messages: [{ role: 'user', content: 'close early' }] });
  for await (const chunk of ce) {
    console.log('early chunk:', JSON.stringify(chunk.choices[0].delta));
    break; // aborts the request
  }

  for (const input of ['hello', 'again']) {
    const r = await client.responses.create({ model: 'test-model', input });
    console.log('responses plain:', r.output_text);
  }
  const rs = await client.responses.create({ model: 'test-model', input: [{ role: 'user', content: 'stream please' }], stream: true });
  for await (const ev of rs) console.log('responses event:', ev.sequence_number, ev.type, ev.delta ?? '');
  const rt = await client.responses.create({
    model: 'test-model', input: 'weather?',
    tools: [{ type: 'function', name: 'get_weather', parameters: TOOLS[0].function.parameters, strict: false }],
  });
  console.log('responses tool:', rt.output[0].name, rt.output[0].arguments);
  const early = await client.responses.create({ model: 'test-model', input: 'close early', stream: true });
  for await (const ev of early) {
    console.log('early event:', ev.type, ev.delta ?? '');
    if (ev.type === 'response.output_text.delta') break; // closes the stream
  }
  console.log('closed early');
})().catch(fail);
