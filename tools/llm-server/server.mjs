// A tiny local OpenAI-compatible server over node-llama-cpp, for the LLM router's tests (issue 10):
// `POST /v1/chat/completions` (plain answers, and forced tool calls: `tool_choice` naming a function
// makes the model write that function's arguments under a grammar built from its JSON schema) and
// `GET /v1/models`. Not part of the service; it proves the plumbing, not a model's quality.
//
//   node server.mjs --model <file.gguf> [--port 0] [--host 127.0.0.1] [--api-key <key>]
//
// Prints one JSON line `{"event":"llm_server_started","url":"http://host:port/v1","model":…}` when ready.
// Requests are answered one at a time (one context sequence): the tests send a few.
import http from 'node:http';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { getLlama, LlamaChatSession } from 'node-llama-cpp';

const { values: args } = parseArgs({
  options: {
    model: { type: 'string' },
    port: { type: 'string', default: '0' },
    host: { type: 'string', default: '127.0.0.1' },
    'api-key': { type: 'string' },
    // One thread by default: on a busy machine llama.cpp's worker threads spin-wait for each other,
    // and two of them on two shared cores were seen to turn a 1 s answer into 15 s.
    threads: { type: 'string', default: '1' },
  },
});
if (!args.model) {
  process.stderr.write('usage: node server.mjs --model <file.gguf> [--port 0] [--host 127.0.0.1] [--api-key <key>]\n');
  process.exit(2);
}
const MODEL_ID = path.basename(args.model, '.gguf');
const MAX_BODY = 1024 * 1024;
const MAX_TOKENS = 512;

// build: 'never' — the prebuilt CPU binary (@node-llama-cpp/linux-x64) or nothing: never compile or download.
const llama = await getLlama({ gpu: false, build: 'never', logLevel: 'error' });
const model = await llama.loadModel({ modelPath: args.model });
const context = await model.createContext({ contextSize: 4096, threads: Number(args.threads) });
const sequence = context.getSequence();

/** The part of a JSON schema node-llama-cpp's grammar understands; the rest (pattern, format, bounds) is left to the caller's validation. */
function grammarSchema(s) {
  if (s === null || typeof s !== 'object' || Array.isArray(s)) return { type: ['string', 'number', 'boolean', 'null'] };
  if ('const' in s) return { const: s.const };
  if (Array.isArray(s.enum)) return { enum: s.enum.filter((v) => v === null || ['string', 'number', 'boolean'].includes(typeof v)) };
  const union = s.oneOf ?? s.anyOf;
  if (Array.isArray(union)) return { oneOf: union.map(grammarSchema) };
  const type = Array.isArray(s.type) ? s.type.filter((t) => t !== 'object' && t !== 'array') : s.type;
  if (type === 'object' || (type === undefined && s.properties)) {
    const properties = Object.fromEntries(Object.entries(s.properties ?? {}).map(([k, v]) => [k, grammarSchema(v)]));
    const required = (s.required ?? []).filter((k) => k in properties);
    return { type: 'object', properties, required, additionalProperties: false };
  }
  if (type === 'array') return { type: 'array', items: grammarSchema(s.items ?? {}), ...(s.maxItems !== undefined ? { maxItems: s.maxItems } : {}) };
  if (type === 'string') return { type: 'string', ...(s.maxLength !== undefined ? { maxLength: s.maxLength } : {}) };
  if (type === undefined || (Array.isArray(type) && type.length === 0)) return { type: ['string', 'number', 'boolean', 'null'] };
  return { type };
}

const text = (content) =>
  typeof content === 'string' ? content : Array.isArray(content) ? content.map((p) => (typeof p?.text === 'string' ? p.text : '')).join('') : '';

/** OpenAI messages → node-llama-cpp chat history and the last user turn. */
function conversation(messages) {
  const history = [];
  for (const m of messages.slice(0, -1)) {
    if (m.role === 'system' || m.role === 'developer') history.push({ type: 'system', text: text(m.content) });
    else if (m.role === 'user') history.push({ type: 'user', text: text(m.content) });
    else if (m.role === 'assistant') {
      const calls = (m.tool_calls ?? []).map((c) => c.function?.arguments ?? '').join('\n');
      history.push({ type: 'model', response: [text(m.content) || calls] });
    } else if (m.role === 'tool') history.push({ type: 'user', text: `Tool result: ${text(m.content)}` });
  }
  const last = messages.at(-1);
  return { history, prompt: text(last?.content) };
}

let queue = Promise.resolve();
/** One completion at a time, on a fresh chat over the one sequence. */
function complete(body) {
  const run = async () => {
    const { history, prompt } = conversation(body.messages);
    const forced = typeof body.tool_choice === 'object' ? body.tool_choice?.function?.name : undefined;
    const tool = forced ? (body.tools ?? []).find((t) => t?.function?.name === forced) : undefined;
    if (forced && !tool) throw Object.assign(new Error(`tool_choice names ${forced}, which is not in tools`), { status: 400 });
    const grammar = tool ? await llama.createGrammarForJsonSchema(grammarSchema(tool.function.parameters ?? { type: 'object', properties: {} })) : undefined;
    await sequence.clearHistory();
    const session = new LlamaChatSession({ contextSequence: sequence, autoDisposeSequence: false });
    try {
      session.setChatHistory(history);
      const maxTokens = Math.min(Number(body.max_tokens ?? body.max_completion_tokens ?? MAX_TOKENS) || MAX_TOKENS, MAX_TOKENS);
      const out = await session.prompt(prompt, { grammar, maxTokens, temperature: Number(body.temperature ?? 0) });
      return { out, tool };
    } finally {
      session.dispose({ disposeSequence: false });
    }
  };
  const result = queue.then(run, run);
  queue = result.catch(() => undefined);
  return result;
}

function send(res, status, body) {
  const json = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(json) });
  res.end(json);
}
const fail = (res, status, message, type = 'invalid_request_error') => send(res, status, { error: { message, type, code: null } });

async function readJson(req) {
  const chunks = [];
  let size = 0;
  for await (const c of req) {
    size += c.length;
    if (size > MAX_BODY) throw Object.assign(new Error('request body too large'), { status: 413 });
    chunks.push(c);
  }
  try {
    return JSON.parse(Buffer.concat(chunks).toString('utf8'));
  } catch {
    throw Object.assign(new Error('request body is not JSON'), { status: 400 });
  }
}

const server = http.createServer(async (req, res) => {
  try {
    if (args['api-key'] && req.headers.authorization !== `Bearer ${args['api-key']}`) return fail(res, 401, 'Incorrect API key provided', 'authentication_error');
    const url = new URL(req.url ?? '/', 'http://local');
    if (req.method === 'GET' && url.pathname === '/v1/models')
      return send(res, 200, { object: 'list', data: [{ id: MODEL_ID, object: 'model', created: 0, owned_by: 'local' }] });
    if (req.method !== 'POST' || url.pathname !== '/v1/chat/completions') return fail(res, 404, `no route ${req.method} ${url.pathname}`);
    const body = await readJson(req);
    if (!Array.isArray(body?.messages) || body.messages.length === 0) return fail(res, 400, 'messages must be a non-empty array');
    const { out, tool } = await complete(body);
    const id = `chatcmpl-${Date.now().toString(36)}${Math.random().toString(36).slice(2, 8)}`;
    const message = tool
      ? { role: 'assistant', content: null, tool_calls: [{ id: `call_${id.slice(9)}`, type: 'function', function: { name: tool.function.name, arguments: out } }] }
      : { role: 'assistant', content: out };
    send(res, 200, {
      id,
      object: 'chat.completion',
      created: Math.floor(Date.now() / 1000),
      model: MODEL_ID,
      choices: [{ index: 0, message, finish_reason: tool ? 'tool_calls' : 'stop' }],
    });
  } catch (err) {
    const status = typeof err?.status === 'number' ? err.status : 500;
    fail(res, status, status === 500 ? 'the model failed to answer' : String(err.message), status === 500 ? 'server_error' : 'invalid_request_error');
  }
});
server.listen(Number(args.port), args.host, () => {
  const { port } = server.address();
  process.stdout.write(`${JSON.stringify({ event: 'llm_server_started', url: `http://${args.host}:${port}/v1`, model: MODEL_ID })}\n`);
});
for (const signal of ['SIGTERM', 'SIGINT'])
  process.once(signal, () => {
    server.close();
    void llama.dispose().finally(() => process.exit(0));
  });
