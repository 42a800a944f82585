// What every Node agent of TestNetworkClients asks.
const BASE = process.env.LLM_BASE;
const KEY = process.env.OPENAI_API_KEY;
const H = { Authorization: 'Bearer ' + KEY, 'Content-Type': 'application/json' };
const TOOLS = [{ type: 'function', function: { name: 'get_weather', parameters: { type: 'object', properties: { city: { type: 'string' } } } } }];
const plain = (text) => JSON.stringify({ model: 'test-model', messages: [{ role: 'user', content: text }], temperature: 0 });
const stream = JSON.stringify({ model: 'test-model', stream: true, messages: [{ role: 'user', content: 'stream please' }] });
// A stream the server holds open after its first event: the agent reads
// that and closes.
const early = JSON.stringify({ model: 'test-model', stream: true, messages: [{ role: 'user', content: 'close early' }] });
const tool = JSON.stringify({ model: 'test-model', messages: [{ role: 'user', content: 'weather?' }], tools: TOOLS });
// The Responses API and Anthropic's messages API, for the agents that
// speak them with a plain HTTP client: where, how, what to ask, what to
// print of the answers.
const messages = (content, more) => ({ model: 'test-model', max_tokens: 64, messages: [{ role: 'user', content }], ...more });
const APIS = {
  responses: {
    url: BASE + '/responses', headers: H,
    plain: (input) => ({ model: 'test-model', input }),
    stream: { model: 'test-model', input: 'stream please', stream: true },
    tool: { model: 'test-model', input: 'weather?', tools: [{ type: 'function', name: 'get_weather', parameters: TOOLS[0].function.parameters }] },
    early: { model: 'test-model', input: 'close early', stream: true },
    text: (r) => r.output[0].content[0].text,
    call: (r) => r.output[0].name + ' ' + r.output[0].arguments,
  },
  messages: {
    url: process.env.ANTHROPIC_BASE_URL + '/v1/messages',
    headers: { 'x-api-key': process.env.ANTHROPIC_API_KEY, 'anthropic-version': '2023-06-01', 'Content-Type': 'application/json' },
    plain: (text) => messages(text),
    stream: messages('stream please', { stream: true }),
    tool: messages('weather?', { tools: [{ name: 'get_weather', input_schema: TOOLS[0].function.parameters }] }),
    early: messages('close early', { stream: true }),
    text: (r) => r.content[0].text,
    call: (r) => r.content[0].name + ' ' + JSON.stringify(r.content[0].input),
  },
};
const fail = (e) => { console.error('agent error:', e.message); process.exit(3); };
module.exports = { BASE, KEY, H, TOOLS, APIS, plain, stream, early, tool, fail };
