// An agent using the official openai SDK (its fetch ignores proxy
// variables: dal captures it at the server's own loopback address).
const { OpenAI } = require('openai');

async function main() {
  const client = new OpenAI({ baseURL: process.env.LLM_BASE, apiKey: process.env.OPENAI_API_KEY, maxRetries: 0 });
  const plain = await client.chat.completions.create({
    model: 'test-model', messages: [{ role: 'user', content: 'hello' }], temperature: 0,
  });
  console.log('plain:', plain.choices[0].message.content);
  const stream = await client.chat.completions.create({
    model: 'test-model', stream: true, stream_options: { include_usage: true },
    messages: [{ role: 'user', content: 'stream please' }],
  });
  let chunks = 0;
  let text = '';
  for await (const chunk of stream) {
    chunks++;
    for (const c of chunk.choices) text += c.delta.content || '';
  }
  console.log('stream:', text, 'chunks:', chunks);
  for (let i = 0; i < 3; i++) {
    const r = await client.chat.completions.create({ model: 'test-model', messages: [{ role: 'user', content: 'same' }] });
    console.log(`again ${i}:`, r.choices[0].message.content);
  }
}

main().catch((e) => { console.error('agent error:', e.message); process.exit(3); });
