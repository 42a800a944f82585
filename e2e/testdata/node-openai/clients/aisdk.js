// Vercel's AI SDK (ai + @ai-sdk/openai): generateText twice, streamText
// printing every text part, a tool call, over chat completions; then
// generateText and streamText over the Responses API (the provider's
// default); a chat stream aborted after its first text part.
const { generateText, streamText, tool, jsonSchema } = require('ai');
const { createOpenAI } = require('@ai-sdk/openai');
const { BASE, KEY, fail } = require('./common');
(async () => {
  const openai = createOpenAI({ baseURL: BASE, apiKey: KEY });
  for (const prompt of ['hello', 'again']) {
    const r = await generateText({ model: openai.chat('test-model'), prompt, temperature: 0, maxRetries: 0 });
    console.log('plain:', r.text);
  }
  const s = streamText({ model: openai.chat('test-model'), prompt: 'stream please', maxRetries: 0, onError: ({ error }) => fail(error) });
  for await (const part of s.textStream) console.log('text part:', JSON.stringify(part));
  const weather = tool({ description: 'the weather', inputSchema: jsonSchema({ type: 'object', properties: { city: { type: 'string' } } }) });
  const t = await generateText({ model: openai.chat('test-model'), prompt: 'weather?', tools: { get_weather: weather }, maxRetries: 0 });
  console.log('tool:', t.toolCalls[0].toolName, JSON.stringify(t.toolCalls[0].input));

  const r = await generateText({ model: openai('test-model'), prompt: 'hello', maxRetries: 0 });
  console.log('responses plain:', r.text);
  const rs = streamText({ model: openai('test-model'), prompt: 'stream please', maxRetries: 0, onError: ({ error }) => fail(error) });
  for await (const part of rs.textStream) console.log('responses text part:', JSON.stringify(part));

  const abort = new AbortController();
  const es = streamText({ model: openai.chat('test-model'), prompt: 'close early', maxRetries: 0, abortSignal: abort.signal });
  for await (const part of es.textStream) {
    console.log('early text part:', JSON.stringify(part));
    abort.abort();
    break;
  }
  console.log('closed early');
})().catch(fail);
