// LangChain JS (@langchain/openai's ChatOpenAI): invoke twice, stream
// printing every chunk, a tool call bound with bindTools, a stream left
// after its first chunk.
const { ChatOpenAI } = require('@langchain/openai');
const { BASE, KEY, TOOLS, fail } = require('./common');
(async () => {
  const model = new ChatOpenAI({ model: 'test-model', apiKey: KEY, configuration: { baseURL: BASE }, maxRetries: 0, temperature: 0 });
  for (const text of ['hello', 'again']) {
    const r = await model.invoke(text);
    console.log('plain:', r.content);
  }
  for await (const chunk of await model.stream('stream please')) console.log('chunk:', JSON.stringify(chunk.content));
  const t = await model.bindTools(TOOLS).invoke('weather?');
  console.log('tool:', t.tool_calls[0].name, JSON.stringify(t.tool_calls[0].args));
  for await (const chunk of await model.stream('close early')) {
    console.log('early chunk:', JSON.stringify(chunk.content));
    break;
  }
  console.log('closed early');
})().catch(fail);
