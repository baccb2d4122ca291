// The MCP server over real HTTP, driven by the SDK's own Client and StreamableHTTPClientTransport.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import net from 'node:net';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { balanceOf, call, closeDb, db, demo, ledgerOf, newOrg, ownPair, query, stack } from './helpers/stack.ts';
import { processPool, startApiProcess } from './helpers/processes.ts';
import { boundRun, boundSearch, boundWorkflow } from '../apps/api/mcp/bound.ts';
import { RunOutputSchema, type RunResult } from '../apps/api/mcp/schemas.ts';
import { checkArguments } from '../apps/api/mcp/failures.ts';
import { publishApi } from '../shared/db/catalog.ts';
import { weatherApi } from '../shared/catalog/demo/weather.ts';

const london = { api: '@weather', operation: 'current_weather', input: { city: 'London' } };
const order = { api: '@shop', operation: 'place_order', input: { sku: 'NW-MUG-STL', quantity: 1 } };

const clients: Client[] = [];
async function connect(apiKey: string, path = '/mcp'): Promise<Client> {
  const client = new Client({ name: 'mcp-test', version: '1.0.0' });
  const transport = new StreamableHTTPClientTransport(new URL(`${stack().baseUrl}${path}`), {
    requestInit: { headers: { authorization: `Bearer ${apiKey}` } },
  });
  await client.connect(transport);
  clients.push(client);
  return client;
}

async function callTool(client: Client, name: string, args: Record<string, unknown>) {
  const r = (await client.callTool({ name, arguments: args }, undefined, { timeout: 120_000 })) as CallToolResult;
  return { ...r, sc: r.structuredContent as any, text: (r.content[0] as { text: string }).text };
}

const requestCount = async (orgId: string) => Number((await db().query('SELECT count(*) FROM requests WHERE org_id = $1', [orgId])).rows[0].count);

afterAll(closeDb);
beforeEach(async () => {
  await demo('/__demo/reset');
});
afterEach(async () => {
  while (clients.length) await clients.pop()!.close().catch(() => {});
});

describe('MCP authentication', () => {
  it('without a key: 401 JSON envelope with a Bearer challenge naming resource_metadata', async () => {
    const res = await call('POST', '/mcp', {
      body: { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'x', version: '1' } } },
      headers: { accept: 'application/json, text/event-stream' },
    });
    expect(res.status).toBe(401);
    expect(res.body).toMatchObject({ success: false, error: { code: 'api_key_required', status: 401 } });
    const challenge = res.headers.get('www-authenticate')!;
    expect(challenge).toMatch(/^Bearer /);
    expect(challenge).toContain('realm="');
    expect(challenge).toContain(`resource_metadata="${stack().baseUrl}/.well-known/oauth-protected-resource/mcp"`);

    const bad = await call('POST', '/mcp/workflows/weather', { key: 'svc_sk_' + 'x'.repeat(40), body: {} });
    expect(bad.status).toBe(401);
    expect(bad.body.error.code).toBe('invalid_api_key');
    expect(bad.headers.get('www-authenticate')).toContain('error="invalid_token"');
    expect(bad.headers.get('www-authenticate')).toContain('resource_metadata=');
  });

  it('the credential is checked before the body is read: without one, whatever the body, 401 with the resource_metadata challenge', async () => {
    const expectChallenge = (res: { status: number; body: any; headers: Headers; text: string }, code: string) => {
      expect(res.status, res.text.slice(0, 300)).toBe(401);
      expect(res.body).toMatchObject({ success: false, error: { code, status: 401, type: 'authentication_error' } });
      expect(res.headers.get('www-authenticate')).toContain(`resource_metadata="${stack().baseUrl}/.well-known/oauth-protected-resource/mcp"`);
    };
    const json = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' };
    // Not JSON: the body was parsed first, and this was 400 invalid_input.
    for (const path of ['/mcp', '/mcp/workflows/weather']) expectChallenge(await call('POST', path, { rawBody: '{bad', headers: json }), 'api_key_required');
    // Another type: 401, not 415.
    expectChallenge(await call('POST', '/mcp', { rawBody: '{}', headers: { ...json, 'content-type': 'text/plain' } }), 'api_key_required');
    // Over the 2 MiB body limit: 401, not 413.
    const big = await call('POST', '/mcp', { rawBody: `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":"${'x'.repeat(3 * 1024 * 1024)}"}}`, headers: json });
    expectChallenge(big, 'api_key_required');
    // The audit's body: 1.8 MB, an array of 900,000 elements 60 deep with one __proto__ at its end
    // (seconds of CPU to parse and locate, for anyone who could reach the parser).
    const hostile = '['.repeat(60) + '0,'.repeat(900_000) + '{"__proto__":1}' + ']'.repeat(60);
    const started = performance.now();
    expectChallenge(await call('POST', '/mcp', { rawBody: hostile, headers: json }), 'api_key_required');
    expectChallenge(await call('POST', '/mcp', { key: `svc_sk_${'x'.repeat(40)}`, rawBody: hostile, headers: json }), 'invalid_api_key');
    expect(performance.now() - started).toBeLessThan(3_000);
  });

  it('a large body without a credential is answered 401 before it is sent whole, and the connection goes on as on POST /v1/query', async () => {
    const u = new URL(stack().baseUrl);
    const declared = 3 * 1024 * 1024;
    const sentFirst = 64 * 1024;
    /** Headers declaring 3 MiB and only the first 64 KiB of it; the answer that comes back before the rest. */
    const exchange = (path: string) =>
      new Promise<{ first: string; all: string }>((resolve, reject) => {
        const socket = net.connect(Number(u.port), u.hostname);
        let out = '';
        let first = '';
        const timer = setTimeout(() => (socket.destroy(), reject(new Error(`${path}: no answer before the body was sent whole; got ${JSON.stringify(out.slice(0, 200))}`))), 10_000);
        socket.on('error', reject);
        socket.on('data', (d) => {
          out += d.toString('latin1');
          const end = out.indexOf('\r\n\r\n');
          const length = Number(/\r\ncontent-length: (\d+)/i.exec(out)?.[1] ?? NaN);
          if (!first && end >= 0 && out.length >= end + 4 + length) {
            first = out;
            // The rest of the body, then a second request on the same connection.
            socket.write(' '.repeat(declared - sentFirst - 1) + '}');
            socket.write(`GET /mcp HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`);
          }
        });
        socket.on('end', () => (clearTimeout(timer), resolve({ first, all: out })));
        socket.write(`POST ${path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: ${declared}\r\n\r\n`);
        socket.write('{' + ' '.repeat(sentFirst - 1));
      });
    // A second answer follows the first one's body on the same line.
    const statuses = (text: string) => [...text.matchAll(/HTTP\/1\.1 (\d{3}) /g)].map((m) => Number(m[1]));
    const mcp = await exchange('/mcp');
    expect(statuses(mcp.first)).toEqual([401]);
    expect(mcp.first).toMatch(/\r\nwww-authenticate: Bearer realm="workflow-query-service", resource_metadata="[^"]+\/\.well-known\/oauth-protected-resource\/mcp"/i);
    expect(JSON.parse(mcp.first.slice(mcp.first.indexOf('\r\n\r\n') + 4)).error.code).toBe('api_key_required');
    // The unread rest is dropped and the connection carries the next request, as on /v1/query.
    expect(statuses(mcp.all)).toEqual([401, 401]);
    const rest = await exchange('/v1/query');
    expect(statuses(rest.all)).toEqual([401, 401]);
    expect(/\r\nconnection: ([^\r]+)/i.exec(mcp.first)?.[1]).toBe(/\r\nconnection: ([^\r]+)/i.exec(rest.first)?.[1]);
  });

  it('bad credentials with a body are refused before it is parsed and still count in the failure bucket of the address; valid ones are served as before', async () => {
    const org = await newOrg(1);
    const api = await startApiProcess({ ...ownPair('mcp-failures'), env: { WQS_SKIP_MIGRATIONS: '1', AUTH_FAILURES_PER_ADDRESS_BURST: '3', AUTH_FAILURES_PER_ADDRESS_PER_SECOND: '0.05' } });
    try {
      const base = String(api.started.url);
      const json = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' };
      const post = (key: string | undefined, rawBody: string) => call('POST', '/mcp', { baseUrl: base, key, rawBody, headers: json });
      const ping = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ping' });
      // A valid key: a body that is not JSON is still the 400 envelope (read after the key), a ping is served.
      const notJson = await post(org.api_key, '{bad');
      expect(notJson.status, notJson.text).toBe(400);
      expect(notJson.body.error.code).toBe('invalid_input');
      expect((await post(org.api_key, ping)).status).toBe(200);
      // Three failed checks (unknown key, malformed key, unknown access token), each 401 whatever the body.
      const unknown = await post(`svc_sk_${'Q'.repeat(40)}`, '{bad');
      expect(unknown.status, unknown.text).toBe(401);
      expect(unknown.body.error.code).toBe('invalid_api_key');
      expect(unknown.headers.get('www-authenticate')).toMatch(/error="invalid_token".*resource_metadata=/);
      expect((await post('svc_sk_short', ping)).body.error.code).toBe('invalid_api_key');
      const token = await post(`wqs_at_${'A'.repeat(43)}`, '{bad');
      expect(token.status, token.text).toBe(401);
      expect(token.body.error.code).toBe('invalid_access_token');
      // The address's bucket is empty: the next check is refused before any lookup.
      const limited = await post(`svc_sk_${'R'.repeat(40)}`, '{bad');
      expect(limited.status, limited.text).toBe(429);
      expect(limited.body.error.code).toBe('authentication_rate_limited');
      // A missing credential is no failed check (as on /v1/query): its 401 as ever.
      expect((await post(undefined, '{bad')).body.error.code).toBe('api_key_required');
      // The key in use from this address still works.
      expect((await post(org.api_key, ping)).status).toBe(200);
    } finally {
      await api.kill();
    }
  });

  it('a page from an Origin that is not allowed is 403 before anything else (DNS rebinding); allowed origins and non-browser callers pass', async () => {
    const org = await newOrg(1);
    const api = await startApiProcess({ ...ownPair('mcp-origin'), env: { WQS_SKIP_MIGRATIONS: '1', MCP_ALLOWED_ORIGINS: 'https://agent.example.com' } });
    try {
      const base = String(api.started.url);
      const init = { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'x', version: '1' } } };
      const post = (origin: string | undefined, key?: string) =>
        call('POST', '/mcp', { baseUrl: base, key, body: init, headers: { accept: 'application/json, text/event-stream', ...(origin ? { origin } : {}) } });
      for (const origin of ['http://evil.example', 'https://agent.example.com:8443', 'null']) {
        for (const key of [org.api_key, undefined]) {
          const refused = await post(origin, key);
          expect(refused.status, origin).toBe(403);
          expect(refused.body).toMatchObject({ jsonrpc: '2.0', id: null, error: { code: -32000 } });
        }
      }
      const get = await call('GET', '/mcp', { baseUrl: base, key: org.api_key, headers: { origin: 'http://evil.example' } });
      expect(get.status).toBe(403);
      for (const origin of ['https://agent.example.com', new URL(base).origin, undefined]) {
        const ok = await post(origin, org.api_key);
        expect(ok.status, String(origin)).toBe(200);
      }
      // The allowed origin still needs a key.
      expect((await post('https://agent.example.com')).status).toBe(401);
    } finally {
      await api.kill();
    }
  });

  it('the SDK client cannot connect without a key', async () => {
    const client = new Client({ name: 'anon', version: '1' });
    await expect(client.connect(new StreamableHTTPClientTransport(new URL(`${stack().baseUrl}/mcp`)))).rejects.toThrow();
  });

  it('serves RFC 9728 protected resource metadata', async () => {
    const res = await call('GET', '/.well-known/oauth-protected-resource');
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ resource: stack().baseUrl, bearer_methods_supported: ['header'] });
    expect(typeof res.body.resource_documentation).toBe('string');
    expect(Array.isArray(res.body.authorization_servers)).toBe(true);
    const mcp = await call('GET', '/.well-known/oauth-protected-resource/mcp');
    expect(mcp.body.resource).toBe(`${stack().baseUrl}/mcp`);
  });
});

describe('MCP tools', () => {
  it('lists the five tools with described input and output schemas and annotations; read_only drops the action tool', async () => {
    const org = await newOrg(5);
    const { tools } = await (await connect(org.api_key)).listTools();
    expect(tools.map((t) => t.name).sort()).toEqual(['svc_get_run', 'svc_get_workflow', 'svc_run_action', 'svc_run_workflow', 'svc_search_workflows']);
    for (const t of tools) {
      expect(t.description!.length).toBeGreaterThan(20);
      expect(t.inputSchema.type).toBe('object');
      expect(t.outputSchema?.type).toBe('object');
      expect(t.annotations).toMatchObject({ readOnlyHint: expect.any(Boolean), destructiveHint: expect.any(Boolean), openWorldHint: expect.any(Boolean) });
      for (const [name, prop] of Object.entries(t.inputSchema.properties ?? {})) expect((prop as { description?: string }).description, `${t.name}.${name}`).toBeTruthy();
    }
    const byName = Object.fromEntries(tools.map((t) => [t.name, t]));
    expect(byName.svc_run_action!.description).toMatch(/only when the user asked/);
    expect(byName.svc_run_action!.annotations).toMatchObject({ readOnlyHint: false, destructiveHint: true });
    expect(byName.svc_run_workflow!.annotations).toMatchObject({ readOnlyHint: true, destructiveHint: false });
    expect(byName.svc_run_workflow!.inputSchema.properties).toMatchObject({
      wait_seconds: { minimum: 1, maximum: 170 },
      max_chars: { minimum: 1000, maximum: 150000 },
    });
    expect(byName.svc_run_workflow!.outputSchema!.properties).toHaveProperty('request_id');
    expect(byName.svc_run_workflow!.outputSchema!.properties).toHaveProperty('truncated');

    const ro = await (await connect(org.api_key, '/mcp?read_only=true')).listTools();
    expect(ro.tools.map((t) => t.name).sort()).toEqual(['svc_get_run', 'svc_get_workflow', 'svc_run_workflow', 'svc_search_workflows']);
  });

  it('searches workflows and reads one operation with its schemas (free)', async () => {
    const org = await newOrg(5);
    const client = await connect(org.api_key);
    const found = await callTool(client, 'svc_search_workflows', { query: 'weather' });
    expect(found.isError).toBeFalsy();
    const weather = found.sc.workflows.find((w: { api: string }) => w.api === '@weather');
    expect(weather.operations.map((o: { operation: string }) => o.operation)).toContain('current_weather');

    const ops = await callTool(client, 'svc_get_workflow', { api: '@weather' });
    expect(ops.sc.operations.length).toBeGreaterThan(0);
    const one = await callTool(client, 'svc_get_workflow', { api: '@weather', operation: 'current_weather' });
    const detail = await call('GET', '/v1/catalog/detail?api=@weather');
    const current = detail.body.data.operations.find((o: { operation: string }) => o.operation === 'current_weather');
    expect(one.sc.operation.input_schema).toEqual(current.input_schema);
    expect(one.sc.operation.output_schema).toEqual(current.output_schema);
    expect(one.sc.operation.selectable_fields).toContain('temperature_c');

    const missing = await callTool(client, 'svc_get_workflow', { api: '@nope' });
    expect(missing.isError).toBe(true);
    expect(JSON.parse(missing.text).error.code).toBe('unknown_api_slug');
    expect(await requestCount(org.org_id)).toBe(0);
    expect((await balanceOf(org.org_id)).charged).toBe(0);
  });

  it('a call that breaks a tool schema, or names no tool, says what is wrong instead of inviting a retry', async () => {
    const client = await connect((await newOrg(5)).api_key);
    const missing = await callTool(client, 'svc_get_workflow', {});
    expect(missing.isError).toBe(true);
    expect(JSON.parse(missing.text).error).toMatchObject({ code: 'invalid_input', param: 'api', message: expect.stringMatching(/^Invalid arguments: api: /) });
    expect(missing.text).not.toMatch(/Retry shortly/);
    const wrongType = await callTool(client, 'svc_get_workflow', { api: 5 });
    expect(JSON.parse(wrongType.text).error).toMatchObject({ code: 'invalid_input', param: 'api' });
    // A tool the server does not offer is a protocol error (MCP: "Unknown tools"), not a tool result.
    await expect(client.callTool({ name: 'svc_no_such_tool', arguments: {} })).rejects.toMatchObject({ code: -32602, message: expect.stringContaining('Unknown tool: svc_no_such_tool') });
  });

  it('requests whose params do not parse, and any tools/list cursor, are JSON-RPC -32602 with a short message', async () => {
    const org = await newOrg(1);
    const rpc = async (method: string, params: unknown, path = '/mcp') => {
      const res = await call('POST', path, { key: org.api_key, body: { jsonrpc: '2.0', id: 7, method, params }, headers: { accept: 'application/json, text/event-stream' } });
      expect(res.status, res.text).toBe(200);
      const line = res.text.split('\n').find((l) => l.startsWith('data: '));
      return JSON.parse(line ? line.slice(6) : res.text) as { id: number; result?: any; error?: { code: number; message: string } };
    };
    for (const [method, params] of [
      ['tools/call', {}],
      ['tools/call', { name: 'svc_get_run', arguments: 'x' }],
      ['tools/list', { cursor: 123 }],
      ['tools/list', { cursor: 'zzz' }],
    ] as const) {
      const r = await rpc(method, params);
      expect(r.error, `${method} ${JSON.stringify(params)}`).toMatchObject({ code: -32602 });
      expect(r.error!.message.length).toBeLessThanOrEqual(500);
      expect(r.error!.message).not.toMatch(/\n|"expected"/);
    }
    // On a per-workflow endpoint, a tool of another variant is unknown too.
    const other = await rpc('tools/call', { name: 'svc_run_workflow', arguments: {} }, '/mcp/workflows/weather');
    expect(other.error).toMatchObject({ code: -32602, message: expect.stringContaining('Unknown tool: svc_run_workflow') });
    // Stateless: the server never announces list changes.
    const init = await rpc('initialize', { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'x', version: '1' } });
    expect(init.result.capabilities.tools).toEqual({ listChanged: false });
  });

  it('svc_run_workflow runs through the query service: billed, receipted, visible in request status', async () => {
    const org = await newOrg(5);
    const client = await connect(org.api_key);
    const r = await callTool(client, 'svc_run_workflow', london);
    expect(r.isError).toBeFalsy();
    expect(r.sc).toMatchObject({ status: 'succeeded', truncated: false, output: { city: 'London', country: 'GB' } });
    expect(r.sc.receipt).toMatchObject({ request_id: r.sc.request_id, billing: { status: 'settled', charged_credits: 1 } });
    expect(JSON.parse(r.text)).toEqual(r.sc);
    const status = await call('GET', `/v1/query/requests/${r.sc.request_id}`, { key: org.api_key });
    expect(status.body.data).toMatchObject({ status: 'succeeded', receipt: { billing: { status: 'settled', charged_credits: 1 } } });
    expect((await balanceOf(org.org_id)).charged).toBe(1);
    expect(await ledgerOf(org.org_id)).toEqual([
      { request_id: r.sc.request_id, kind: 'reserve', amount: expect.any(Number) },
      { request_id: r.sc.request_id, kind: 'settle', amount: expect.any(Number) },
    ]);

    const bad = await callTool(client, 'svc_run_workflow', { ...london, input: { town: 'London' } });
    expect(bad.isError).toBe(true);
    expect(bad.sc).toMatchObject({ status: 'failed', request_id: null, error: { code: 'invalid_provider_input', status: 422 } });
    const failed = await callTool(client, 'svc_run_workflow', { ...london, input: { city: 'Atlantis' } });
    expect(failed.isError).toBe(true);
    expect(failed.sc).toMatchObject({ status: 'failed', error: { code: 'not_found', status: 404 }, receipt: { billing: { status: 'released' } } });
    expect((await balanceOf(org.org_id)).charged).toBe(1);
  });

  it('svc_run_workflow refuses actions and svc_run_action refuses read-only operations, before anything is charged', async () => {
    const org = await newOrg(5);
    const client = await connect(org.api_key);
    const a = await callTool(client, 'svc_run_workflow', order);
    expect(a.isError).toBe(true);
    expect(a.sc, a.text).toMatchObject({ status: 'refused', request_id: null });
    expect(a.sc.message).toMatch(/svc_run_action/);
    const b = await callTool(client, 'svc_run_action', london);
    expect(b.isError).toBe(true);
    expect(b.sc.status).toBe('refused');
    expect(b.sc.message).toMatch(/svc_run_workflow/);
    expect(await requestCount(org.org_id)).toBe(0);
    expect(await ledgerOf(org.org_id)).toEqual([]);
  });

  it("include with exclude is refused as POST /v1/query refuses it: invalid_input naming the tool's exclude argument, nothing run or charged", async () => {
    const org = await newOrg(5);
    const client = await connect(org.api_key);
    const both = { ...london, include: ['city'], exclude: ['city'] };
    const r = await callTool(client, 'svc_run_workflow', both);
    expect(r.isError).toBe(true);
    expect(r.sc, r.text).toMatchObject({ status: 'failed', request_id: null, error: { code: 'invalid_input', status: 400, param: 'exclude' } });
    expect(r.sc.error.details.issues).toMatchObject([{ path: 'exclude', message: 'cannot be combined with include' }]);
    expect(r.text).not.toContain('response.');
    // The same failure over REST, in the query's terms (the tool's include and exclude are its response.include and response.exclude).
    const rest = await query(org.api_key, { api: london.api, operation: london.operation, input: london.input, response: { include: ['city'], exclude: ['city'] } });
    expect(rest.status).toBe(400);
    expect(rest.body.error).toMatchObject({ code: r.sc.error.code, param: 'response.exclude' });
    expect(rest.body.error.details.issues).toMatchObject([{ path: 'response.exclude', message: 'cannot be combined with response.include' }]);
    expect(await requestCount(org.org_id)).toBe(0);
    expect(await ledgerOf(org.org_id)).toEqual([]);
  });

  it("a refusal names the tool's own arguments: include.N and exclude.N, idempotency_key, and a per-workflow tool's input fields as its arguments", async () => {
    const org = await newOrg(5);
    const client = await connect(org.api_key);
    const paths = (r: { sc: any }) => (r.sc.error.details?.issues ?? []).map((i: { path: string }) => i.path);

    const inc = await callTool(client, 'svc_run_workflow', { ...london, include: ['city', 'no_such_field'] });
    expect(inc.sc, inc.text).toMatchObject({ status: 'failed', error: { code: 'invalid_input', param: 'include.1' } });
    expect(paths(inc)).toEqual(['include.1']);
    const exc = await callTool(client, 'svc_run_workflow', { ...london, exclude: ['no_such_field'] });
    expect(exc.sc, exc.text).toMatchObject({ status: 'failed', error: { code: 'invalid_input', param: 'exclude.0' } });
    expect(paths(exc)).toEqual(['exclude.0']);
    // REST keeps the query's own paths.
    const rest = await query(org.api_key, { ...london, response: { include: ['city', 'no_such_field'] } });
    expect(rest.body.error.param).toBe('response.include.1');

    // The key is the idempotency_key argument, not the Idempotency-Key header.
    const k = `mcp-terms-${Date.now()}`;
    expect((await callTool(client, 'svc_run_workflow', { ...london, idempotency_key: k })).sc.status).toBe('succeeded');
    const conflict = await callTool(client, 'svc_run_workflow', { ...london, input: { city: 'Paris' }, idempotency_key: k });
    expect(conflict.sc.error).toMatchObject({ code: 'idempotency_key_conflict', param: 'idempotency_key' });
    expect(conflict.sc.error.message).toMatch(/\bidempotency_key\b/);
    expect(conflict.sc.error.message).not.toMatch(/Idempotency-Key/);

    // svc_run_workflow's input is its `input` argument; a per-workflow tool's arguments are the input itself.
    const generic = await callTool(client, 'svc_run_workflow', { ...london, input: { town: 'London' } });
    expect(generic.sc.error.code).toBe('invalid_provider_input');
    expect(generic.sc.error.param).toBe(paths(generic)[0]);
    expect(paths(generic).length).toBeGreaterThan(0);
    for (const p of paths(generic)) expect(['input.city', 'input.town']).toContain(p);
    const listing = await call('GET', '/v1/catalog/tools?api=@weather', { key: org.api_key });
    const current = listing.body.data.items.find((t: { operation: string }) => t.operation === 'current_weather');
    const wf = await connect(org.api_key, '/mcp/workflows/weather');
    const own = await callTool(wf, current.name, { town: 'London' });
    expect(own.isError).toBe(true);
    expect(own.sc.error.code).toBe('invalid_provider_input');
    expect(paths(own).map((p: string) => `input.${p}`)).toEqual(paths(generic));
    expect(own.sc.error.param).toBe(paths(own)[0]);
    // Its texts name the arguments as the tool's caller knows them: `city`, never `input.city`.
    expect(generic.sc.error.message).toMatch(/input\.(city|town)/);
    expect(JSON.stringify([own.sc.error.message, own.sc.error.details.issues])).not.toMatch(/input\.(city|town)/);
    expect((await balanceOf(org.org_id)).charged).toBe(1);
  });

  it('read_only=true refuses actions and cannot call the action tool', async () => {
    const org = await newOrg(5);
    const client = await connect(org.api_key, '/mcp?read_only=true');
    const a = await callTool(client, 'svc_run_workflow', order);
    expect(a.isError).toBe(true);
    expect(a.sc.status).toBe('refused');
    expect(a.sc.message).toMatch(/read_only/);
    await expect(client.callTool({ name: 'svc_run_action', arguments: order })).rejects.toMatchObject({ code: -32602 });
    const search = await callTool(client, 'svc_search_workflows', { api: '@shop' });
    expect(search.sc.workflows[0].operations.every((o: { performs_actions: boolean }) => !o.performs_actions)).toBe(true);
    expect(await requestCount(org.org_id)).toBe(0);
  });

  it('progress notifications come from the reservation notice, not from querying the workflow each second', async () => {
    const org = await newOrg(5);
    const client = await connect(org.api_key);
    // Cairo only (no other test asks for it): the site holds this run for 2 s after it reserved.
    await demo('/__demo/faults', { host: 'weather.example.test', path_prefix: '/api/v1/current?city=Cairo', latency_ms: 2000, times: 1 });
    const heard: Array<{ progress: number; total?: number; message?: string }> = [];
    const r = (await client.callTool({ name: 'svc_run_workflow', arguments: { api: '@weather', operation: 'current_weather', input: { city: 'Cairo' } } }, undefined, {
      timeout: 120_000,
      onprogress: (p) => heard.push(p),
    })) as CallToolResult;
    expect(r.isError).toBeFalsy();
    expect(r.structuredContent).toMatchObject({ status: 'succeeded', output: { city: 'Cairo' } });
    // `executing` is the third of six stages; the notice's own message says where it came from (the
    // workflow's progress query would say "Running @weather current_weather").
    expect(heard).toContainEqual({ progress: 3, total: 6, message: 'Running the workflow' });
    expect(heard.map((h) => h.message)).not.toContain('Running @weather current_weather');
    expect((await balanceOf(org.org_id)).charged).toBe(1);
  });

  it('a run slower than wait_seconds answers running with a request_id; svc_get_run returns it, billed once', async () => {
    const org = await newOrg(5);
    const client = await connect(org.api_key);
    await demo('/__demo/faults', { host: 'weather.example.test', latency_ms: 3000, times: 1 });
    const started = Date.now();
    const r = await callTool(client, 'svc_run_workflow', { ...london, wait_seconds: 1 });
    expect(Date.now() - started).toBeLessThan(2_900);
    expect(r.isError).toBeFalsy();
    expect(r.sc).toMatchObject({ status: 'running', request_id: expect.stringMatching(/^req_/) });
    expect(r.sc.message).toMatch(/svc_get_run/);
    const got = await callTool(client, 'svc_get_run', { request_id: r.sc.request_id, wait_seconds: 30 });
    expect(got.sc).toMatchObject({ status: 'succeeded', request_id: r.sc.request_id, output: { city: 'London' } });
    // Later reads come from the request record, free.
    const again = await callTool(client, 'svc_get_run', { request_id: r.sc.request_id });
    expect(again.sc.output).toEqual(got.sc.output);
    expect((await balanceOf(org.org_id)).charged).toBe(1);

    const other = await newOrg(1);
    const foreign = await callTool(await connect(other.api_key), 'svc_get_run', { request_id: r.sc.request_id });
    expect(foreign.isError).toBe(true);
    expect(foreign.sc.error.code).toBe('request_not_found');

    // After its retention the result is deleted (as the maintenance Schedule does): it is gone, not "interrupted".
    await db().query('UPDATE requests SET result = NULL, response_status = NULL WHERE id = $1', [r.sc.request_id]);
    const gone = await callTool(client, 'svc_get_run', { request_id: r.sc.request_id });
    expect(gone.isError).toBe(true);
    expect(gone.sc.error.code).toBe('request_not_found');
    expect(gone.sc.error.message).toMatch(/deleted/);
  });

  it('max_chars shortens long output, marks it truncated and says how to narrow it', async () => {
    const org = await newOrg(5);
    const client = await connect(org.api_key);
    const args = { api: '@books', operation: 'search_books', input: { query: 'the', max_results: 10 } };
    const full = await callTool(client, 'svc_run_workflow', args);
    expect(full.sc.truncated).toBe(false);
    const fullChars = JSON.stringify(full.sc.output).length;
    expect(fullChars).toBeGreaterThan(1000);
    const short = await callTool(client, 'svc_run_workflow', { ...args, max_chars: 1000 });
    expect(short.sc.status).toBe('succeeded');
    expect(short.sc.truncated).toBe(true);
    expect(JSON.stringify(short.sc.output).length).toBeLessThanOrEqual(1000);
    expect(short.sc.message).toMatch(/include/);
    expect(short.sc.message).toMatch(/exclude/);
    const narrow = await callTool(client, 'svc_run_workflow', { ...args, include: ['books.title'], max_chars: 1000 });
    expect(narrow.sc.truncated).toBe(false);
    expect(narrow.sc.output.books[0]).toEqual({ title: expect.any(String) });
  });

  it('idempotency_key: the same key and arguments replay the run, across MCP and REST, charged once', async () => {
    const org = await newOrg(5);
    const client = await connect(org.api_key);
    const k = `mcp-${Date.now()}`;
    const first = await callTool(client, 'svc_run_workflow', { ...london, idempotency_key: k });
    const second = await callTool(client, 'svc_run_workflow', { ...london, idempotency_key: k });
    expect(second.sc).toMatchObject({ status: 'succeeded', request_id: first.sc.request_id, replayed: true });
    expect(second.sc.output).toEqual(first.sc.output);
    const rest = await query(org.api_key, london, { 'idempotency-key': k });
    expect(rest.headers.get('idempotency-replayed')).toBe('true');
    expect(rest.headers.get('x-request-id')).toBe(first.sc.request_id);
    const conflict = await callTool(client, 'svc_run_workflow', { ...london, input: { city: 'Paris' }, idempotency_key: k });
    expect(conflict.sc.error.code).toBe('idempotency_key_conflict');
    expect((await balanceOf(org.org_id)).charged).toBe(1);
  });
});

describe('MCP per-workflow endpoint', () => {
  it('offers the catalog tool list of the workflow, with each operation input schema, plus svc_get_run', async () => {
    const org = await newOrg(5);
    const listing = await call('GET', '/v1/catalog/tools?api=@weather', { key: org.api_key });
    const client = await connect(org.api_key, '/mcp/workflows/weather');
    const { tools } = await client.listTools();
    expect(tools.map((t) => t.name).sort()).toEqual([...listing.body.data.items.map((t: { name: string }) => t.name), 'svc_get_run'].sort());
    for (const item of listing.body.data.items) {
      const t = tools.find((x) => x.name === item.name)!;
      expect(t.inputSchema).toEqual(item.inputSchema);
      expect(t.title).toBe(item.title);
      expect(t.description).toBe(item.description);
      expect(t.annotations).toEqual(item.annotations);
      expect((t.outputSchema!.properties as Record<string, unknown>).output).toMatchObject({ type: 'object' });
    }
    const current = listing.body.data.items.find((t: { operation: string }) => t.operation === 'current_weather');
    const r = await callTool(client, current.name, { city: 'London' });
    expect(r.sc).toMatchObject({ status: 'succeeded', api: '@weather', operation: 'current_weather', output: { city: 'London' } });
    expect((await balanceOf(org.org_id)).charged).toBe(1);
    const invalid = await callTool(client, current.name, { town: 'London' });
    expect(invalid.isError).toBe(true);
    expect(invalid.sc.error.code).toBe('invalid_provider_input');
  });

  it('combines with read_only=true: no action tools; an unknown workflow is a 404', async () => {
    const org = await newOrg(5);
    const listing = await call('GET', '/v1/catalog/tools?api=@shop', { key: org.api_key });
    const actions = listing.body.data.items.filter((t: { performs_actions: boolean }) => t.performs_actions);
    expect(actions.length).toBeGreaterThan(0);
    const all = await (await connect(org.api_key, '/mcp/workflows/shop')).listTools();
    expect(all.tools.map((t) => t.name)).toEqual(expect.arrayContaining(actions.map((t: { name: string }) => t.name)));
    const ro = await (await connect(org.api_key, '/mcp/workflows/shop?read_only=true')).listTools();
    const names = ro.tools.map((t) => t.name);
    for (const a of actions) expect(names).not.toContain(a.name);
    expect(names).toContain('svc_get_run');
    expect(names.length).toBe(listing.body.data.items.length - actions.length + 1);

    const missing = await call('POST', '/mcp/workflows/no-such-workflow', { key: org.api_key, body: {} });
    expect(missing.status).toBe(404);
    expect(missing.body.error.code).toBe('unknown_api_slug');
  });
});

describe('a private workflow with a public handle', () => {
  it('each per-workflow tool runs its own operation, and svc_get_workflow lists every operation the handle reaches', async () => {
    const org = await newOrg(20);
    // A public workflow of its own handle (the demo @weather's operations), so no other file's counts
    // see this test's, and the organization's private one of that handle: one operation,
    // current_weather, at 3 credits (the public one costs 1).
    const name = `shadow-${Math.random().toString(36).slice(2, 8)}`;
    const h = `@${name}`;
    // Two operations only: health checks run every public workflow's examples, and the weather site
    // rate-limits its alerts (the health test counts on them).
    const current = weatherApi.operations.find((o) => o.name === 'current_weather')!;
    const forecast = weatherApi.operations.find((o) => o.name === 'forecast')!;
    await publishApi(db(), { ...weatherApi, handle: h, operations: [current, forecast] });
    await publishApi(db(), { ...weatherApi, handle: h, name: 'Own Weather', operations: [{ ...current, cost_credits: 3 }] }, { ownerOrgId: org.org_id });
    const listing = await call('GET', `/v1/catalog/tools?api=${h}`, { key: org.api_key });
    const named = listing.body.data.items.filter((t: { operation: string }) => t.operation === 'current_weather');
    const pub = named.find((t: { visibility: string }) => t.visibility === 'public');
    const own = named.find((t: { visibility: string }) => t.visibility === 'private');
    expect(pub.name).not.toBe(own.name);

    const client = await connect(org.api_key, `/mcp/workflows/${name}`);
    const viaPublic = await callTool(client, pub.name, { city: 'London' });
    expect(viaPublic.sc.receipt.billing).toEqual({ status: 'settled', reserved_credits: 1, charged_credits: 1 });
    const viaOwn = await callTool(client, own.name, { city: 'London' });
    expect(viaOwn.sc.receipt.billing).toEqual({ status: 'settled', reserved_credits: 3, charged_credits: 3 });
    const rows = await db().query('SELECT id, operation_id, is_public_api FROM requests WHERE org_id = $1', [org.org_id]);
    const byId = new Map(rows.rows.map((r) => [r.id, r]));
    expect(byId.get(viaPublic.sc.request_id)).toMatchObject({ operation_id: pub.operation_id, is_public_api: true });
    expect(byId.get(viaOwn.sc.request_id)).toMatchObject({ operation_id: own.operation_id, is_public_api: false });
    expect((await balanceOf(org.org_id)).charged).toBe(4);

    // svc_get_workflow: the private operation, and the public ones it does not shadow (all runnable by handle).
    const generic = await connect(org.api_key);
    const ops = (await callTool(generic, 'svc_get_workflow', { api: h })).sc;
    expect(ops.visibility).toBe('private');
    const publicOps = listing.body.data.items.filter((t: { visibility: string; operation: string }) => t.visibility === 'public' && t.operation !== 'current_weather');
    expect(publicOps.length).toBeGreaterThan(0);
    expect(ops.operations.map((o: { tool: string; visibility: string }) => `${o.tool} ${o.visibility}`).sort()).toEqual(
      [`${own.name} private`, ...publicOps.map((t: { name: string }) => `${t.name} public`)].sort(),
    );
  });
});

describe('MCP answers keep their bounds', () => {
  const within = (r: { text: string; sc: unknown }, max: number) => {
    expect(r.text.length).toBeLessThanOrEqual(max);
    // the text is the structured content, not a different rendering of it
    if (r.sc !== undefined) expect(JSON.parse(r.text)).toEqual(r.sc);
  };

  it('max_chars bounds every tool that takes it, marked truncated with a hint', async () => {
    const org = await newOrg(5);
    const client = await connect(org.api_key);
    const full = await callTool(client, 'svc_search_workflows', {});
    expect(full.text.length).toBeGreaterThan(1000);
    const search = await callTool(client, 'svc_search_workflows', { max_chars: 1000 });
    within(search, 1000);
    expect(search.isError).toBeFalsy();
    expect(search.sc.truncated).toBe(true);
    expect(search.sc.workflows.length).toBeGreaterThan(0);
    expect(search.sc.message).toMatch(/query/);

    const list = await callTool(client, 'svc_get_workflow', { api: '@weather', max_chars: 1000 });
    within(list, 1000);
    expect(list.sc.truncated).toBe(true);
    const one = await callTool(client, 'svc_get_workflow', { api: '@books', operation: 'search_books', max_chars: 1000 });
    within(one, 1000);
    expect(one.sc).toMatchObject({ truncated: true, operation: { operation: 'search_books' } });
    expect(one.sc.message).toMatch(/max_chars/);
    const roomy = await callTool(client, 'svc_get_workflow', { api: '@books', operation: 'search_books', max_chars: 150_000 });
    expect(roomy.sc.truncated).toBeUndefined();
    expect(roomy.sc.operation.examples.length).toBeGreaterThan(0);

    const args = { api: '@books', operation: 'search_books', input: { query: 'the', max_results: 10 }, max_chars: 1000 };
    const run = await callTool(client, 'svc_run_workflow', args);
    within(run, 1000);
    expect(run.sc).toMatchObject({ status: 'succeeded', truncated: true });
    expect(run.sc.receipt.billing.status).toBe('settled');
    const again = await callTool(client, 'svc_get_run', { request_id: run.sc.request_id, max_chars: 1000 });
    within(again, 1000);
    expect(again.sc).toMatchObject({ status: 'succeeded', truncated: true, request_id: run.sc.request_id });

    const action = await callTool(client, 'svc_run_action', { ...order, max_chars: 1000 });
    within(action, 1000);
  });

  it('arguments nested too deep are a clean invalid_input, never an internal error text', async () => {
    const org = await newOrg(5);
    const client = await connect(org.api_key);
    const nest = (depth: number) => {
      let v: unknown = 'x';
      for (let i = 0; i < depth; i++) v = { a: v };
      return v as Record<string, unknown>;
    };
    // Past the HTTP body's own depth limit (64 levels, apps/api/plugins/json-body.ts) the request is
    // refused before MCP sees it: the SDK client surfaces the 400 invalid_input envelope as an error.
    for (const depth of [80, 1500]) {
      const refusal = await callTool(client, 'svc_run_workflow', { ...london, input: nest(depth) }).then(
        () => undefined,
        (err: Error) => err.message,
      );
      expect(refusal).toMatch(/"code":"invalid_input"/);
      expect(refusal).toMatch(/deeper than 64 levels/);
      expect(refusal).not.toMatch(/call stack|RangeError|at .*\.ts:/);
    }
    // Within the body limit but past the tools' own argument bound (more than 100,000 values):
    // a tool error, nothing run. (The tools' depth bound backs up the body's.)
    const wide = await callTool(client, 'svc_run_workflow', { ...london, input: { list: Array.from({ length: 100_001 }, () => 0) } });
    expect(wide.isError).toBe(true);
    expect(wide.sc).toMatchObject({ status: 'failed', error: { code: 'invalid_input' } });
    // Deeper than a client can even serialize: the raw JSON-RPC body. A refusal by the HTTP body
    // parser's own depth limit is as good as a tool error; the internal text is never an answer.
    for (const depth of [1500, 20_000]) {
      const body = `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"svc_run_workflow","arguments":{"api":"@weather","operation":"current_weather","input":${'{"a":'.repeat(depth)}1${'}'.repeat(depth)}}}}`;
      const res = await fetch(`${stack().baseUrl}/mcp`, {
        method: 'POST',
        headers: { authorization: `Bearer ${org.api_key}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
        body,
      });
      const text = await res.text();
      expect(res.status, text).toBeLessThan(500);
      expect(text).not.toMatch(/call stack|RangeError|at .*\.ts:/);
      if (res.status === 200) expect(text).toMatch(/invalid_input/);
    }
    expect(await requestCount(org.org_id)).toBe(0);
    expect((await balanceOf(org.org_id)).charged ?? 0).toBe(0);
  });

  describe('with a database that goes away', () => {
    // A TCP relay to PostgreSQL that cuts any connection carrying a query on `requests` once armed:
    // key checks still pass, reading the run record fails the way a lost database does.
    let relay: net.Server;
    let armed = false;
    const pool = processPool(() => ownPair('mcp-db'));
    beforeAll(async () => {
      const target = new URL(stack().databaseUrl);
      relay = net.createServer((client) => {
        const upstream = net.connect(Number(target.port), target.hostname);
        client.on('data', (chunk) => {
          if (armed && chunk.toString('latin1').includes('FROM requests')) {
            client.destroy();
            upstream.destroy();
            return;
          }
          upstream.write(chunk);
        });
        upstream.on('data', (chunk) => client.write(chunk));
        for (const s of [client, upstream]) s.on('error', () => undefined);
        client.on('close', () => upstream.destroy());
        upstream.on('close', () => client.destroy());
      });
      await new Promise<void>((r) => relay.listen(0, '127.0.0.1', () => r()));
    });
    afterAll(async () => {
      await pool.killAll();
      await new Promise<void>((r) => relay.close(() => r()));
    });

    it('svc_get_run answers a retryable 503 code with a retry hint, no database text', async () => {
      const org = await newOrg(5);
      const rest = await query(org.api_key, london);
      expect(rest.status).toBe(200);
      const requestId = rest.headers.get('x-request-id')!;
      const target = new URL(stack().databaseUrl);
      target.host = `127.0.0.1:${(relay.address() as net.AddressInfo).port}`;
      const api = await pool.spawn('api', { ...ownPair('mcp-db'), databaseUrl: target.toString() });
      const client = new Client({ name: 'mcp-test', version: '1.0.0' });
      await client.connect(new StreamableHTTPClientTransport(new URL(`${String(api.started.url)}/mcp`), { requestInit: { headers: { authorization: `Bearer ${org.api_key}` } } }));
      clients.push(client);
      const ok = await callTool(client, 'svc_get_run', { request_id: requestId });
      expect(ok.sc.status).toBe('succeeded');
      armed = true;
      try {
        const r = await callTool(client, 'svc_get_run', { request_id: requestId });
        expect(r.isError).toBe(true);
        expect(r.sc).toMatchObject({ status: 'failed', error: { code: 'engine_unavailable', status: 503, retryable: true } });
        expect(r.sc.message).toMatch(/retry after \d+ s/);
        expect(r.text).not.toMatch(/Connection terminated|ECONNRESET|postgres|SELECT/i);
      } finally {
        armed = false;
      }
    });
  });
});

describe('arguments too large (pure)', () => {
  it('is named by the top-level argument it is in; the arguments as a whole name none (no param, issue path \'\')', () => {
    const inInput = checkArguments({ api: '@x', input: { list: Array.from({ length: 100_001 }, () => 0) } })!;
    expect(inInput).toMatchObject({ code: 'invalid_input', param: 'input', details: { issues: [{ path: 'input' }] } });
    const whole = checkArguments(Object.fromEntries(Array.from({ length: 100_001 }, (_, i) => [`k${i}`, 0])))!;
    expect(whole.code).toBe('invalid_input');
    expect(whole.param).toBeUndefined();
    expect(whole.details).toEqual({ issues: [{ path: '', message: 'has more than 100000 values' }] });
  });
});

describe('bounding answers (pure)', () => {
  const run = (output: unknown, extra: Record<string, unknown> = {}) =>
    ({ status: 'succeeded', request_id: 'req_0123456789abcdef', api: '@x', operation: 'y', truncated: false, output, ...extra }) as RunResult;

  it.each([
    ['a long list', { items: Array.from({ length: 500 }, (_, i) => ({ i, name: `item ${i}` })) }],
    ['one huge string', 'x'.repeat(50_000)],
    ['a string of quotes (escaping grows it)', '"'.repeat(5_000)],
    ['deeply keyed objects', Object.fromEntries(Array.from({ length: 400 }, (_, i) => [`key_${i}`, { v: 'y'.repeat(30) }]))],
  ])('a run with %s fits and stays a valid run answer', (_name, output) => {
    for (const max of [1000, 1500, 5000]) {
      const b = boundRun(run(output), max);
      expect(JSON.stringify(b).length).toBeLessThanOrEqual(max);
      expect(b.truncated).toBe(true);
      expect(b.message).toMatch(/include or exclude/);
      expect(RunOutputSchema.safeParse(b).success).toBe(true);
    }
  });

  it('a failure with many issue details fits, keeping its code', () => {
    const issues = Array.from({ length: 300 }, (_, i) => ({ path: `input.f${i}`, message: 'must be a string of at most 100 characters' }));
    const failed = { status: 'failed', request_id: null, api: '@x', operation: 'y', truncated: false, error: { type: 'validation_error', code: 'invalid_provider_input', message: 'bad input', status: 422, details: { issues } } } as RunResult;
    const b = boundRun(failed, 1000);
    expect(JSON.stringify(b).length).toBeLessThanOrEqual(1000);
    expect(b.error).toMatchObject({ code: 'invalid_provider_input', status: 422 });
  });

  it('svc_get_workflow leaves out the input schema only when nothing else is left', () => {
    const big = { type: 'object', properties: Object.fromEntries(Array.from({ length: 200 }, (_, i) => [`field_${i}`, { type: 'string', description: 'z'.repeat(40) }])) };
    const answer = {
      api: '@x',
      name: 'X',
      visibility: 'public' as const,
      operation: { operation: 'y', description: 'd', input_schema: { type: 'object' }, output_schema: big, selectable_fields: ['a', 'b'], examples: [{ input: {}, output: big }] },
    };
    const small = boundWorkflow(answer, 1000);
    expect(JSON.stringify(small).length).toBeLessThanOrEqual(1000);
    expect(small.operation!.input_schema).toEqual({ type: 'object' });
    expect(small.message).toMatch(/examples left out.*output_schema left out/);
    const huge = boundWorkflow({ ...answer, operation: { ...answer.operation, input_schema: big } }, 1000);
    expect(JSON.stringify(huge).length).toBeLessThanOrEqual(1000);
    expect(huge.message).toMatch(/input_schema left out/);
  });

  it('svc_get_workflow cuts 20,000 selectable fields to the longest list that fits, measuring the answer a few times, not once per field', () => {
    const fields = Array.from({ length: 20_000 }, (_, i) => `section_${i % 50}.${'p'.repeat(40)}_${i}`);
    const answer = {
      api: '@x',
      name: 'X',
      visibility: 'public' as const,
      operation: { operation: 'y', description: 'd', input_schema: { type: 'object' }, output_schema: { type: 'object' }, selectable_fields: fields, examples: [] },
    };
    const started = performance.now();
    const b = boundWorkflow(answer, 5000);
    // One field at a time took minutes here (about 20,000 serializations of 1.2 MB).
    expect(performance.now() - started).toBeLessThan(5000);
    const kept = b.operation!.selectable_fields;
    expect(JSON.stringify(b).length).toBeLessThanOrEqual(5000);
    expect(kept).toEqual(fields.slice(0, kept.length));
    // The longest prefix: one more field would not fit.
    expect(JSON.stringify({ ...b, operation: { ...b.operation, selectable_fields: fields.slice(0, kept.length + 1) } }).length).toBeGreaterThan(5000);
    expect(b.message).toMatch(/selectable_fields cut short/);
    expect(b.operation!.output_schema).toEqual({ type: 'object' });
  });

  it('search keeps whole workflows while they fit and says how to narrow', () => {
    const workflows = Array.from({ length: 30 }, (_, i) => ({ api: `@w${i}`, name: `W${i}`, operations: [{ operation: 'op', description: 'd'.repeat(100) }] }));
    const b = boundSearch({ workflows, truncated: false }, 1000);
    expect(JSON.stringify(b).length).toBeLessThanOrEqual(1000);
    expect(b.workflows.length).toBeGreaterThan(0);
    expect(b.workflows.length).toBeLessThan(30);
    expect(b.message).toMatch(/of 30 workflows/);
  });
});
