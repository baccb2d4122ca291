// Tool arguments are hostile: whatever breaks a tool's input schema is the service's invalid_input
// envelope (code, param, details.issues), bounded however many issues the arguments carry, and an
// argument the tool does not take is refused rather than silently ignored. Over real HTTP with the
// SDK's own client. And the tools' descriptions say what a call costs; an empty JSON-RPC batch is
// an Invalid Request.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { balanceOf, closeDb, db, newOrg, stack } from './helpers/stack.ts';
import { publishApi } from '../shared/db/catalog.ts';
import { weatherApi } from '../shared/catalog/demo/weather.ts';
import { bulkListApi } from './helpers/bulk-list.ts';

const clients: Client[] = [];
async function connect(apiKey: string, path = '/mcp'): Promise<Client> {
  const client = new Client({ name: 'mcp-arguments-test', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(`${stack().baseUrl}${path}`), { requestInit: { headers: { authorization: `Bearer ${apiKey}` } } }));
  clients.push(client);
  return client;
}
async function callTool(client: Client, name: string, args: Record<string, unknown>) {
  const r = (await client.callTool({ name, arguments: args }, undefined, { timeout: 60_000 })) as CallToolResult;
  const text = (r.content[0] as { text: string }).text;
  return { ...r, sc: r.structuredContent as any, text };
}
const requestCount = async (orgId: string) => Number((await db().query('SELECT count(*) FROM requests WHERE org_id = $1', [orgId])).rows[0].count);

afterAll(closeDb);
afterEach(async () => {
  while (clients.length) await clients.pop()!.close().catch(() => {});
});

const london = { api: '@weather', operation: 'current_weather', input: { city: 'London' } };

describe('tool arguments that break the input schema', () => {
  it('run tools answer status failed with invalid_input naming the argument; nothing is run or charged', async () => {
    const org = await newOrg(5);
    const client = await connect(org.api_key);
    for (const [args, param, message] of [
      [{ ...london, wait_seconds: 500 }, 'wait_seconds', /170/],
      [{ ...london, max_chars: 10 }, 'max_chars', /1000/],
      [{ ...london, include: [5] }, 'include.0', /string/],
      [{ ...london, api: 'weather' }, 'api', /handle/],
      [{ api: '@weather', operation: 'current_weather' }, 'input', /expected record/],
    ] as const) {
      const r = await callTool(client, 'svc_run_workflow', args);
      expect(r.isError, r.text).toBe(true);
      expect(r.sc, r.text).toMatchObject({ status: 'failed', request_id: null, error: { code: 'invalid_input', status: 400, param } });
      expect(r.sc.error.details.issues[0]).toMatchObject({ path: param, message: expect.stringMatching(message) });
      expect(JSON.parse(r.text)).toEqual(r.sc);
    }
    const getRun = await callTool(client, 'svc_get_run', { request_id: 'nope' });
    expect(getRun.sc).toMatchObject({ status: 'failed', error: { code: 'invalid_input', param: 'request_id' } });
    expect(await requestCount(org.org_id)).toBe(0);
    expect((await balanceOf(org.org_id)).charged ?? 0).toBe(0);
  });

  it('an argument the tool does not take (a misspelled wait_seconds, say) is refused, not silently ignored', async () => {
    const org = await newOrg(5);
    const client = await connect(org.api_key);
    const r = await callTool(client, 'svc_run_workflow', { ...london, wait_second: 5 });
    expect(r.isError).toBe(true);
    expect(r.sc).toMatchObject({ status: 'failed', error: { code: 'invalid_input', param: 'wait_second', details: { issues: [{ path: 'wait_second', message: 'unknown field' }] } } });
    expect(await requestCount(org.org_id)).toBe(0);
    // tools/list says so too: clients can check before calling.
    const { tools } = await client.listTools();
    for (const t of tools) if (t.name.startsWith('svc_')) expect(t.inputSchema.additionalProperties, t.name).toBe(false);
  });

  it('free tools answer the Error envelope as text, with param and details.issues', async () => {
    const client = await connect((await newOrg(1)).api_key);
    const missing = await callTool(client, 'svc_get_workflow', {});
    expect(missing.isError).toBe(true);
    expect(missing.structuredContent).toBeUndefined();
    const env = JSON.parse(missing.text);
    expect(env).toMatchObject({ success: false, error: { code: 'invalid_input', param: 'api', details: { issues: [{ path: 'api' }] } } });
    const limit = JSON.parse((await callTool(client, 'svc_search_workflows', { limit: 0 })).text);
    expect(limit.error).toMatchObject({ code: 'invalid_input', param: 'limit' });
  });

  it('many bad values make a bounded answer: the first issues, and how many there were', async () => {
    const client = await connect((await newOrg(1)).api_key);
    // Within include's 1000 paths, each of the wrong type: 1000 issues.
    const include = Array.from({ length: 1000 }, () => 1);
    const long = 'k'.repeat(100_000);
    const r = await callTool(client, 'svc_run_workflow', { ...london, include, [long]: 1 });
    expect(r.sc.error.code).toBe('invalid_input');
    expect(r.text.length).toBeLessThan(20_000);
    expect(r.sc.error.details.issues.length).toBeLessThanOrEqual(20);
    expect(r.sc.error.details.more_issues).toBe(1001 - r.sc.error.details.issues.length);
    expect(r.sc.error.message).toMatch(/1001 issues in all/);
    const free = await callTool(client, 'svc_search_workflows', { [long]: 1, query: 5 });
    expect(free.text.length).toBeLessThan(20_000);
    expect(JSON.parse(free.text).error.code).toBe('invalid_input');
  });
});

describe('what the run tools say a run costs', () => {
  it("is the operation's cost_credits, which svc_search_workflows shows and the run charges, not a flat 1 credit", async () => {
    const org = await newOrg(10);
    const name = `pricey-${Math.random().toString(36).slice(2, 8)}`;
    const current = weatherApi.operations.find((o) => o.name === 'current_weather')!;
    await publishApi(db(), { ...weatherApi, handle: `@${name}`, name: 'Pricey Weather', operations: [{ ...current, cost_credits: 3 }] }, { ownerOrgId: org.org_id });
    const client = await connect(org.api_key);
    const { tools } = await client.listTools();
    for (const tool of ['svc_run_workflow', 'svc_run_action']) {
      const description = tools.find((t) => t.name === tool)!.description!;
      expect(description, tool).not.toMatch(/\b1 credit\b/);
      expect(description, tool).toMatch(/cost_credits/);
    }
    const found = await callTool(client, 'svc_search_workflows', { api: `@${name}` });
    expect(found.sc.workflows[0].operations[0]).toMatchObject({ operation: 'current_weather', cost_credits: 3 });
    const run = await callTool(client, 'svc_run_workflow', { ...london, api: `@${name}` });
    expect(run.sc, run.text).toMatchObject({ status: 'succeeded', receipt: { billing: { status: 'settled', charged_credits: 3 } } });
    expect((await balanceOf(org.org_id)).charged).toBe(3);
  });
});

describe('svc_search_workflows over many workflows', () => {
  it('past one page of tools, shows the first workflows whole (an operation added later included) and says more match, without a count it did not make', async () => {
    const org = await newOrg(1);
    const word = `zq${Math.random().toString(36).slice(2, 8)}`;
    const template = bulkListApi('@x', 'books.example.test', 'x');
    const op = (name: string) => ({ ...template.operations[0]!, name, description: `${word} operation` });
    const publish = (i: number, ops: ReturnType<typeof op>[]) =>
      publishApi(db(), { ...template, handle: `@${word}-${i}`, name: `Many ${i}`, description: `${word} ${i}`, operations: ops }, { ownerOrgId: org.org_id });
    // More workflows than one page of tools (100), so a search need not read them all.
    for (let i = 0; i < 105; i++) await publish(i, [op('list_items')]);
    // A later version of the first adds an operation: its id comes after every other workflow's.
    await publish(0, [op('list_items'), op('count_items')]);
    const client = await connect(org.api_key);
    const r = await callTool(client, 'svc_search_workflows', { query: word, limit: 2 });
    expect(r.sc.truncated).toBe(true);
    expect(r.sc.message).toBe('More workflows match than the 2 shown. Narrow with query or api, or raise limit (up to 100).');
    expect(r.sc.workflows.map((w: { api: string; operations: Array<{ operation: string }> }) => [w.api, w.operations.map((o) => o.operation).sort()])).toEqual([
      [`@${word}-0`, ['count_items', 'list_items']],
      [`@${word}-1`, ['list_items']],
    ]);
  });
});

describe('JSON-RPC batches', () => {
  it('an empty batch is one Invalid Request error (-32600, id null), not 202 Accepted', async () => {
    const org = await newOrg(1);
    const res = await fetch(`${stack().baseUrl}/mcp`, {
      method: 'POST',
      headers: { authorization: `Bearer ${org.api_key}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: '[]',
    });
    expect(res.status).toBe(400);
    expect(await res.json()).toEqual({ jsonrpc: '2.0', error: { code: -32600, message: 'Invalid Request: an empty batch' }, id: null });
  });
});
