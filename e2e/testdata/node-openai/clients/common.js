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
const fail = (e) => { console.error('agent error:', e.message); process.exit(3); };
module.exports = { BASE, KEY, H, TOOLS, plain, stream, early, tool, fail };
