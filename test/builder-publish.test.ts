// Workflows built by organizations, through the builder module on the real stack: test runs on the
// real engines through Temporal, publish with the ledger charge, versions, restore, diff, sharing,
// and what the HTTP contract and MCP then show (or hide) of them.
import { randomBytes } from 'node:crypto';
import { Client, Connection } from '@temporalio/client';
import { Client as McpClient } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { diffVersions, getVersion, listVersions, listWorkflows, publish, restore, testRun, testRunWorkflowId, workflowTemplate, type BuilderDefinition } from '../shared/builder/index.ts';
import type { healthCheckWorkflow } from '../workflows/health-check-workflow.ts';
import { weatherApi } from '../shared/catalog/demo/weather.ts';
import { addConnection, loadKeyring } from '../shared/db/connections.ts';
import { loadConfig } from '../shared/config.ts';
import { createPool } from '../shared/db/pool.ts';
import { balanceOf, call, closeDb, dataConverter, db, demo, newOrg, query, stack, until } from './helpers/stack.ts';

let connection: Connection;
let temporal: Client;
const deps = () => ({ db: db(), temporal, taskQueue: stack().taskQueue, browserTaskQueue: `${stack().taskQueue}-browser` });
const mcpClients: McpClient[] = [];

beforeAll(async () => {
  connection = await Connection.connect({ address: stack().temporalAddress });
  temporal = new Client({ connection, dataConverter: await dataConverter() });
});
afterAll(async () => {
  for (const c of mcpClients) await c.close().catch(() => {});
  await connection?.close();
  await closeDb();
});

const handle = (p: string) => `@${p}-${randomBytes(4).toString('hex')}`;
const EXPECTED = workflowTemplate().operations[0]!.examples[0]!.output as Record<string, unknown>;
const INPUT = { isbn13: '9782918455943' };

/** Version 2 of the template: `authors` is no longer read. */
function withoutAuthors(def: BuilderDefinition): BuilderDefinition {
  const d = structuredClone(def);
  const op = d.operations[0]!;
  const fields = ((op.recipe.steps as Array<Record<string, unknown>>)[2]!.fields as Record<string, unknown>);
  delete fields.authors;
  const schema = op.output_schema as { required: string[]; properties: Record<string, unknown> };
  schema.required = schema.required.filter((k) => k !== 'authors');
  delete schema.properties.authors;
  const { authors: _a, ...rest } = op.examples[0]!.output as Record<string, unknown>;
  op.examples[0]!.output = rest;
  op.label = 'Book price (no authors)';
  return d;
}

async function buildLedger(orgId: string) {
  const r = await db().query(`SELECT kind, amount, note FROM credit_ledger WHERE org_id = $1 AND kind = 'build' ORDER BY id`, [orgId]);
  return r.rows as Array<{ kind: string; amount: number; note: string }>;
}

async function expectIdentity(orgId: string, want: { granted: number; available: number; charged: number }) {
  const b = await balanceOf(orgId);
  expect(b).toEqual({ ...want, reserved: 0 });
  expect(b.granted).toBe(b.available + b.reserved + b.charged);
}

async function expectRefusal(p: Promise<unknown>, code: string, reason?: string) {
  const err = (await p.then(() => null, (e: unknown) => e)) as { code?: string; details?: { reason?: string } } | null;
  expect(err, 'expected a refusal').not.toBeNull();
  expect(err!.code).toBe(code);
  if (reason) expect(err!.details?.reason).toBe(reason);
}

async function mcp(apiKey: string, path: string) {
  const client = new McpClient({ name: 'builder-test', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(`${stack().baseUrl}${path}`), { requestInit: { headers: { authorization: `Bearer ${apiKey}` } } }));
  mcpClients.push(client);
  return client;
}

describe('building a private workflow', () => {
  const h = handle('bookshop');
  const def = workflowTemplate(h);
  let org: Awaited<ReturnType<typeof newOrg>>;
  let other: Awaited<ReturnType<typeof newOrg>>;

  beforeAll(async () => {
    [org, other] = await Promise.all([newOrg(1000), newOrg(10)]);
  });

  it('refuses to publish before a passing test run, charging nothing', async () => {
    await expectRefusal(publish(db(), org.org_id, def), 'publish_refused', 'test_run_required');
    await expectIdentity(org.org_id, { granted: 1000, available: 1000, charged: 0 });
    expect(await buildLedger(org.org_id)).toEqual([]);
  });

  it('test-runs every example on the real engine, free, and shows output beside the expected one', async () => {
    const run = await testRun(deps(), org.org_id, def);
    expect(run).toMatchObject({ api: h, passed: true });
    expect(run.results).toEqual([
      expect.objectContaining({ operation: 'book_price', index: 0, input: INPUT, expected: EXPECTED, output: EXPECTED, equal: true, schema_ok: true, schema_errors: [], error: null, passed: true }),
    ]);
    const row = await db().query('SELECT status, definition_hash FROM builder_test_runs WHERE id = $1', [run.test_run_id]);
    expect(row.rows[0]).toEqual({ status: 'passed', definition_hash: run.definition_hash });
    // The run is a Temporal workflow of its own.
    const wf = await temporal.workflow.getHandle(testRunWorkflowId(org.org_id)).describe();
    expect(wf.type).toBe('builderTestRunWorkflow');
    await expectIdentity(org.org_id, { granted: 1000, available: 1000, charged: 0 });
  });

  it('publishes version 1 privately for 100 credits in the ledger; the org queries it with its key', async () => {
    const pub = await publish(db(), org.org_id, def);
    expect(pub).toMatchObject({ api: h, version: 1, visibility: 'private', charged_credits: 100 });
    await expectIdentity(org.org_id, { granted: 1000, available: 900, charged: 100 });
    expect(await buildLedger(org.org_id)).toEqual([{ kind: 'build', amount: 100, note: `build ${h} v1` }]);

    const res = await query(org.api_key, { api: h, operation: 'book_price', input: INPUT });
    expect(res.status).toBe(200);
    expect(res.body.data.output).toEqual(EXPECTED);
    expect(res.body.data.receipt.billing).toMatchObject({ status: 'settled', charged_credits: 1 });
    // A private workflow is its owner's: not rated.
    const st = await call('GET', `/v1/query/requests/${res.body.data.receipt.request_id}`, { key: org.api_key });
    expect(st.body.data).toMatchObject({ can_rate: false, feedback_unavailable_reason: 'private_api' });
    expect((await listWorkflows(db(), org.org_id)).map((w) => [w.api, w.visibility, w.latest_version])).toEqual([[h, 'private', 1]]);
  });

  it('stays invisible to everyone else: public catalog, detail, suggest, sitemap, api-catalog, tools, MCP and queries', async () => {
    const q = await query(other.api_key, { api: h, operation: 'book_price', input: INPUT });
    expect([q.status, q.body.error.code]).toEqual([404, 'unknown_api_slug']);
    const pinned = await query(other.api_key, { api: h, operation: 'book_price', input: INPUT, visibility: 'private' });
    expect([pinned.status, pinned.body.error.code]).toEqual([404, 'unknown_api_slug']);
    // Even its owner cannot reach it as a public workflow.
    const pub = await query(org.api_key, { api: h, operation: 'book_price', input: INPUT, visibility: 'public' });
    expect([pub.status, pub.body.error.code]).toEqual([404, 'unknown_api_slug']);

    const name = h.slice(1);
    const texts = [
      (await call('GET', `/v1/catalog?query=${encodeURIComponent(name)}`)).text,
      (await call('GET', `/v1/catalog?query=bookshop%20prices&limit=100`)).text,
      (await call('GET', `/v1/catalog/suggest?query=${encodeURIComponent(name)}`)).text,
      (await call('GET', '/v1/catalog/sitemap')).text,
      (await call('GET', '/.well-known/api-catalog')).text,
      (await call('GET', '/v1/catalog/tools?limit=100', { key: other.api_key })).text,
      (await call('GET', `/v1/catalog/tools?api=${encodeURIComponent(h)}`, { key: other.api_key })).text,
    ];
    for (const t of texts) expect(t).not.toContain(name);
    const detail = await call('GET', `/v1/catalog/detail?api=${encodeURIComponent(h)}`, { key: org.api_key });
    expect(detail.status).toBe(404);
    const otherMcp = await call('POST', `/mcp/workflows/${name}`, { key: other.api_key, body: {} });
    expect([otherMcp.status, otherMcp.body.error.code]).toEqual([404, 'unknown_api_slug']);
  });

  it('is listed for its own organization as private in tools and MCP (also /mcp/workflows/{name})', async () => {
    const tools = await call('GET', `/v1/catalog/tools?api=${encodeURIComponent(h)}`, { key: org.api_key });
    expect(tools.status).toBe(200);
    expect(tools.body.data.items).toEqual([expect.objectContaining({ api: h, operation: 'book_price', visibility: 'private', contract_version: 1, performs_actions: false })]);
    const client = await mcp(org.api_key, `/mcp/workflows/${h.slice(1)}`);
    const listed = (await client.listTools()).tools.map((t) => t.name);
    expect(listed).toEqual(expect.arrayContaining([tools.body.data.items[0].name, 'svc_get_run']));
    expect(listed).toHaveLength(2);
  });

  it('updates to version 2 (default moves), keeps version 1 by pin, restores 1 as version 3, and diffs', async () => {
    const v2 = withoutAuthors(def);
    const run = await testRun(deps(), org.org_id, v2);
    expect(run.passed).toBe(true);
    expect(await publish(db(), org.org_id, v2)).toMatchObject({ version: 2, visibility: 'private', charged_credits: 100 });

    const latest = await query(org.api_key, { api: h, operation: 'book_price', input: INPUT });
    expect(latest.status).toBe(200);
    expect(latest.body.data.output.authors).toBeUndefined();
    const pinned = await query(org.api_key, { api: h, operation: 'book_price', input: INPUT, version: 1 });
    expect(pinned.status).toBe(200);
    expect(pinned.body.data.output).toEqual(EXPECTED);
    const missing = await query(org.api_key, { api: h, operation: 'book_price', input: INPUT, version: 9 });
    expect([missing.status, missing.body.error.code]).toEqual([409, 'workflow_version_unavailable']);

    expect(await restore(db(), org.org_id, h, 1)).toMatchObject({ version: 3, restored_from: 1, charged_credits: 100 });
    expect(await getVersion(db(), org.org_id, h, 3)).toEqual(def);
    const restored = await query(org.api_key, { api: h, operation: 'book_price', input: INPUT });
    expect(restored.body.data.output).toEqual(EXPECTED);
    const tools = await call('GET', `/v1/catalog/tools?api=${encodeURIComponent(h)}`, { key: org.api_key });
    expect(tools.body.data.items[0].contract_version).toBe(3);

    const d12 = await diffVersions(db(), org.org_id, h, 1, 2);
    expect(d12.patch).toMatch(/^-\s+"authors": \{$/m);
    expect(d12.patch).toMatch(/^\+\s+"label": "Book price \(no authors\)",$/m);
    expect((await diffVersions(db(), org.org_id, h, 1, 3)).patch).not.toContain('@@');
    await expectRefusal(diffVersions(db(), org.org_id, h, 1, 7), 'workflow_version_unavailable');
    await expectRefusal(diffVersions(db(), other.org_id, h, 1, 2), 'unknown_api_slug');
    await expectRefusal(restore(db(), other.org_id, h, 1), 'unknown_api_slug');

    expect((await listVersions(db(), org.org_id, h)).map((v) => [v.version, v.restored_from, v.charged_credits])).toEqual([
      [3, 1, 100],
      [2, null, 100],
      [1, null, 100],
    ]);
    // Three builds of 100 and four completed runs of 1 credit (one in the previous test).
    await expectIdentity(org.org_id, { granted: 1000, available: 1000 - 304, charged: 304 });
  });

  it('gets health checks like the demo workflows', async () => {
    const summary = await temporal.workflow.execute<typeof healthCheckWorkflow>('healthCheckWorkflow', {
      taskQueue: stack().taskQueue,
      workflowId: `builder-health-${randomBytes(4).toString('hex')}`,
      args: [{ apis: [h], exampleTimeoutMs: 60_000 }],
    });
    expect(summary.operations).toEqual([expect.objectContaining({ api: h, operation: 'book_price', version: 3, status: 'healthy', recorded: true })]);
    const health = () => db().query(`SELECT o.health_status, o.health_detail, o.health_checked_at FROM operations o JOIN apis a ON a.id = o.api_id WHERE a.handle = $1`, [h]);
    expect((await health()).rows).toEqual([{ health_status: 'healthy', health_detail: '1/1 examples returned their documented output', health_checked_at: expect.any(Date) }]);
    // A new default version starts unknown, first in line for the next check (never checked).
    expect(await restore(db(), org.org_id, h, 2)).toMatchObject({ version: 4 });
    expect((await health()).rows).toEqual([{ health_status: 'unknown', health_detail: null, health_checked_at: null }]);
  });
});

describe('each version as published', () => {
  it('a version pinned after a read-only one was published still acts, as an action: one attempt, never read-only', async () => {
    const org = await newOrg(1000);
    const h = handle('acting');
    // Version 1 knocks on the site first (an action step the demo site answers 404 to), then reads.
    const acting = workflowTemplate(h);
    (acting.operations[0]!.recipe.steps as unknown[]).unshift({
      type: 'request', name: 'Knock', method: 'POST', url: 'http://books.example.test/books/{{input.isbn13}}', action: true, expect_status: [404, 405],
    });
    expect((await testRun(deps(), org.org_id, acting)).passed).toBe(true);
    expect(await publish(db(), org.org_id, acting)).toMatchObject({ version: 1 });
    const reading = workflowTemplate(h);
    expect((await testRun(deps(), org.org_id, reading)).passed).toBe(true);
    expect(await publish(db(), org.org_id, reading)).toMatchObject({ version: 2 });

    // How each run went: an action is an ordinary activity with one attempt; a read-only HTTP
    // query is one local activity (no activity task at all).
    const ran = async (version?: number) => {
      const res = await query(org.api_key, { api: h, operation: 'book_price', input: INPUT, ...(version ? { version } : {}) });
      expect(res.status, res.text).toBe(200);
      const requestId = res.body.data.receipt.request_id as string;
      const row = await db().query('SELECT performs_actions FROM requests WHERE id = $1', [requestId]);
      const history = await temporal.workflow.getHandle(`query-${org.org_id}-${requestId}`).fetchHistory();
      const scheduled = history.events!.map((e) => e.activityTaskScheduledEventAttributes).filter((a) => a);
      return { performs_actions: row.rows[0].performs_actions, activities: scheduled.map((a) => [a!.activityType!.name, a!.retryPolicy?.maximumAttempts]) };
    };
    expect(await ran(1)).toEqual({ performs_actions: true, activities: [['executeOperation', 1]] });
    expect(await ran()).toEqual({ performs_actions: false, activities: [] });
    // The catalog shows the default version's.
    const tools = await call('GET', `/v1/catalog/tools?api=${encodeURIComponent(h)}`, { key: org.api_key });
    expect(tools.body.data.items).toEqual([expect.objectContaining({ contract_version: 2, performs_actions: false })]);

    // A version row without its own flag (written by an older process during a deploy) reads as the
    // operation's, read-only: the worker still refuses to run its action step on the read-only path.
    await db().query(
      `UPDATE operation_versions SET performs_actions = NULL WHERE version = 1 AND operation_id = (SELECT o.id FROM operations o JOIN apis a ON a.id = o.api_id WHERE a.handle = $1 AND a.owner_org_id = $2)`,
      [h, org.org_id],
    );
    const before = await balanceOf(org.org_id);
    const refused = await query(org.api_key, { api: h, operation: 'book_price', input: INPUT, version: 1 });
    expect([refused.status, refused.body.error?.code, refused.body.error?.receipt?.billing?.status]).toEqual([500, 'internal_error', 'released']);
    expect(await balanceOf(org.org_id)).toEqual(before);
  });
});

describe('the price of a run is the price of the version that runs', () => {
  it("republishing a shared workflow at a higher price leaves other organizations' pinned calls at the price they pinned", async () => {
    const owner = await newOrg(100);
    const caller = await newOrg(100);
    const h = handle('priced');
    const v1 = workflowTemplate(h);
    v1.operations[0]!.cost_credits = 2;
    expect((await testRun(deps(), owner.org_id, v1)).passed).toBe(true);
    expect(await publish(db(), owner.org_id, v1, { share: true })).toMatchObject({ version: 1 });
    const v2 = structuredClone(v1);
    v2.operations[0]!.cost_credits = 40;
    v2.operations[0]!.label = 'Book price (dearer)';
    expect((await testRun(deps(), owner.org_id, v2)).passed).toBe(true);
    expect(await publish(db(), owner.org_id, v2, { share: true })).toMatchObject({ version: 2 });

    const run = async (version?: number) => {
      const res = await query(caller.api_key, { api: h, operation: 'book_price', input: INPUT, ...(version ? { version } : {}) });
      expect(res.status, res.text).toBe(200);
      return { header: res.headers.get('x-svc-cost-credits'), billing: res.body.data.receipt.billing };
    };
    // Pinned to version 1: its own price, whatever the default costs now.
    expect(await run(1)).toEqual({ header: '2', billing: { status: 'settled', reserved_credits: 2, charged_credits: 2 } });
    // The default (version 2) costs what version 2 says, and the catalog shows that price.
    expect(await run()).toEqual({ header: '40', billing: { status: 'settled', reserved_credits: 40, charged_credits: 40 } });
    const detail = await call('GET', `/v1/catalog/detail?api=${encodeURIComponent(h)}`);
    expect(detail.body.data.operations).toEqual([expect.objectContaining({ operation: 'book_price', contract_version: 2, cost_credits: 40 })]);
    await expectIdentity(caller.org_id, { granted: 100, available: 58, charged: 42 });

    // A version row without its own price (written by an older process during a deploy) costs the
    // operation's, as before.
    await db().query(
      `UPDATE operation_versions SET cost_credits = NULL WHERE version = 1 AND operation_id = (SELECT o.id FROM operations o JOIN apis a ON a.id = o.api_id WHERE a.handle = $1)`,
      [h],
    );
    expect((await run(1)).header).toBe('40');
  });
});

describe('examples that fail and definitions that are invalid', () => {
  it('a failing example shows the difference and its publish is refused, charging nothing', async () => {
    const org = await newOrg(500);
    const def = workflowTemplate(handle('wrong'));
    (def.operations[0]!.examples[0]!.output as Record<string, unknown>).price = 1.23;
    const run = await testRun(deps(), org.org_id, def);
    expect(run.passed).toBe(false);
    expect(run.results[0]).toMatchObject({ equal: false, schema_ok: true, passed: false, error: null, output: { price: 7.99 }, expected: { price: 1.23 } });
    await expectRefusal(publish(db(), org.org_id, def), 'publish_refused', 'test_run_required');
    await expectIdentity(org.org_id, { granted: 500, available: 500, charged: 0 });
    expect(await buildLedger(org.org_id)).toEqual([]);
    const apis = await db().query('SELECT count(*)::int AS n FROM apis WHERE owner_org_id = $1', [org.org_id]);
    expect(apis.rows[0].n).toBe(0);
  });

  it('an off-schema output fails the schema check; a private destination is refused like in queries', async () => {
    const org = await newOrg(10);
    const def = workflowTemplate(handle('schema'));
    const op = def.operations[0]!;
    (op.output_schema as { properties: Record<string, unknown> }).properties.price = { type: 'number', maximum: 5 };
    (op.examples[0]!.output as Record<string, unknown>).price = 4;
    const run = await testRun(deps(), org.org_id, def);
    expect(run.results[0]).toMatchObject({ schema_ok: false, passed: false, schema_errors: [{ path: '/price', message: 'must be <= 5' }] });

    const guarded = workflowTemplate(handle('guard'));
    guarded.sites.push({ name: 'Metadata', host: '169.254.169.254' });
    const g = guarded.operations[0]!;
    g.recipe.hosts = ['169.254.169.254'];
    (g.recipe.steps as Array<Record<string, unknown>>)[0]!.url = 'http://169.254.169.254/latest/meta-data/{{input.isbn13}}';
    const blocked = await testRun(deps(), org.org_id, guarded);
    expect(blocked.passed).toBe(false);
    expect(blocked.results[0]!.output).toBeNull();
    expect(blocked.results[0]!.error?.code).toBe('workflow_execution_failed');
  });

  it("a draft needing a connection runs with the testing organization's own, like a query", async () => {
    const op = weatherApi.operations.find((o) => o.name === 'weather_history')!;
    const v = op.versions[0]!;
    const def: BuilderDefinition = {
      handle: handle('history'),
      name: 'My weather history',
      description: 'Past weather with our own key.',
      category: 'weather',
      sites: [{ name: 'Skyline Weather', host: 'weather.example.test' }],
      operations: [{ name: 'history', label: op.label, description: op.description, input_schema: v.input_schema, output_schema: v.output_schema, recipe: v.recipe as Record<string, unknown>, examples: v.examples.slice(0, 1), access: op.access }],
    };
    const [org, stranger] = await Promise.all([newOrg(10), newOrg(10)]);
    const connect = async (orgId: string, key: string) =>
      addConnection(db(), await loadKeyring(loadConfig()), { orgId, kind: 'access_key', name: 'WEATHER_API_KEY', site: 'weather.example.test', secret: { WEATHER_API_KEY: key } });
    // Another organization's connection is never used.
    await connect(stranger.org_id, 'wk_demo_valid_key_123');
    const none = await testRun(deps(), org.org_id, def);
    expect(none.results[0]).toMatchObject({ passed: false, output: null, error: { code: 'credentials_missing' } });
    await connect(org.org_id, 'wk_demo_valid_key_123');
    const own = await testRun(deps(), org.org_id, def);
    expect(own.results[0]).toMatchObject({ passed: true, equal: true, error: null });
    expect(JSON.stringify(own)).not.toContain('wk_demo_valid_key_123');
    await expectIdentity(org.org_id, { granted: 10, available: 10, charged: 0 });

    // Shared, it would run with its callers' keys: a recipe host that is not the key's site refuses sharing.
    const leaky: BuilderDefinition = structuredClone(def);
    leaky.sites.push({ name: 'Collector', host: 'books.example.test' });
    leaky.operations[0]!.recipe.hosts = ['weather.example.test', 'books.example.test'];
    expect((await testRun(deps(), org.org_id, leaky)).passed).toBe(true);
    const err = (await publish(db(), org.org_id, leaky, { share: true }).catch((e: unknown) => e)) as { code: string; details: { reason: string; issues: Array<{ path: string }> } };
    expect(err).toMatchObject({ code: 'publish_refused', details: { reason: 'connections_leave_site', issues: [{ path: '/operations/0/recipe/hosts/1' }] } });
    expect((await db().query('SELECT count(*)::int AS n FROM apis WHERE handle = $1', [leaky.handle])).rows[0].n).toBe(0);
  });

  it('sharing exposes the shared definition only: operations and versions of the private history are withdrawn', async () => {
    const op = weatherApi.operations.find((o) => o.name === 'weather_history')!;
    const v = op.versions[0]!;
    const history = { name: 'history', label: op.label, description: op.description, input_schema: v.input_schema, output_schema: v.output_schema, recipe: v.recipe as Record<string, unknown>, examples: v.examples.slice(0, 1), access: op.access };
    const h = handle('leak');
    // Private version 1: an operation that sends the caller's key to another host, under two names.
    const leaky = structuredClone(history);
    leaky.recipe.hosts = ['weather.example.test', 'books.example.test'];
    const v1: BuilderDefinition = {
      handle: h,
      name: 'Weather history',
      description: 'Past weather.',
      category: 'weather',
      sites: [{ name: 'Skyline Weather', host: 'weather.example.test' }, { name: 'Collector', host: 'books.example.test' }],
      operations: [leaky, { ...structuredClone(leaky), name: 'steal' }],
    };
    // Version 2, shared: the clean operation only.
    const v2: BuilderDefinition = { ...v1, sites: [v1.sites[0]!], operations: [history] };
    const [org, caller] = await Promise.all([newOrg(300), newOrg(10)]);
    for (const o of [org, caller])
      await addConnection(db(), await loadKeyring(loadConfig()), { orgId: o.org_id, kind: 'access_key', name: 'WEATHER_API_KEY', site: 'weather.example.test', secret: { WEATHER_API_KEY: 'wk_demo_valid_key_123' } });
    expect((await testRun(deps(), org.org_id, v1)).passed).toBe(true);
    expect(await publish(db(), org.org_id, v1)).toMatchObject({ version: 1, visibility: 'private' });
    expect((await testRun(deps(), org.org_id, v2)).passed).toBe(true);
    expect(await publish(db(), org.org_id, v2, { share: true })).toMatchObject({ version: 2, visibility: 'public' });

    const input = v.examples[0]!.input;
    // The shared operation runs with the caller's own key.
    const ok = await query(caller.api_key, { api: h, operation: 'history', input });
    expect(ok.status, ok.text).toBe(200);
    // What only the private history had is gone for everyone, the owner included.
    for (const key of [caller.api_key, org.api_key]) {
      const left = await query(key, { api: h, operation: 'steal', input });
      expect(left.status, left.text).toBe(404);
      expect(left.body.error.code).toBe('unknown_operation');
      const pinned = await query(key, { api: h, operation: 'history', version: 1, input });
      expect(pinned.status, pinned.text).toBe(409);
      expect(pinned.body.error).toMatchObject({ code: 'workflow_version_unavailable', details: { available_versions: [2] } });
    }
    const tools = await call('GET', `/v1/catalog/tools?api=${encodeURIComponent(h)}`, { key: caller.api_key });
    expect(tools.body.data.items.map((t: { operation: string }) => t.operation)).toEqual(['history']);
    expect((await balanceOf(caller.org_id)).charged).toBe(ok.body.data.receipt.billing.charged_credits);
  });

  it("a browser recipe's examples run on the browser task queue (the workers with Chromium), an HTTP recipe's on the main queue", async () => {
    const org = await newOrg(10);
    const handle = `@browser-draft-${randomBytes(3).toString('hex')}`;
    const def = workflowTemplate(handle);
    const http = structuredClone(def.operations[0]!);
    def.operations[0]!.recipe = { ...(def.operations[0]!.recipe as object), engine: 'browser' } as never;
    def.operations.push({ ...http, name: 'book_price_http' });
    const run = await testRun(deps(), org.org_id, def);
    expect(run.results.map((r) => [r.operation, r.passed])).toEqual([
      ['book_price', true],
      ['book_price_http', true],
    ]);
    const history = await temporal.workflow.getHandle(testRunWorkflowId(org.org_id)).fetchHistory();
    const queues = history
      .events!.map((e) => e.activityTaskScheduledEventAttributes)
      .filter((a) => a?.activityType?.name === 'runDraftExample')
      .map((a) => a!.taskQueue?.name);
    expect(queues).toEqual([`${stack().taskQueue}-browser`, stack().taskQueue]);
  });

  it('an invalid definition is refused before anything runs, with a pointer per issue', async () => {
    const org = await newOrg(10);
    const def = workflowTemplate(handle('bad')) as unknown as Record<string, any>;
    def.operations[0].recipe.hosts.push('elsewhere.example.test');
    def.operations[0].recipe.steps[0].url = 42;
    const err = (await testRun(deps(), org.org_id, def).catch((e: unknown) => e)) as { code: string; details: { issues: Array<{ path: string }> } };
    expect(err.code).toBe('invalid_input');
    expect(err.details.issues.map((i) => i.path).sort()).toEqual(['/operations/0/recipe/steps/0/url']);
    const runs = await db().query('SELECT count(*)::int AS n FROM builder_test_runs WHERE org_id = $1', [org.org_id]);
    expect(runs.rows[0].n).toBe(0);
  });
});

describe('test runs share the engines with every organization', () => {
  it('one test run per organization at a time: a second one meanwhile is refused and recorded nowhere, the first completes', async () => {
    const org = await newOrg(0); // zero credits: test runs are free, which is why they are bounded
    const bystander = await newOrg(0);
    const def = workflowTemplate(handle('one-at-a-time'));
    const before = await db().query('SELECT count(*)::int AS n FROM builder_test_runs WHERE org_id = $1', [org.org_id]);
    const outcomes = await Promise.allSettled([testRun(deps(), org.org_id, def), testRun(deps(), org.org_id, def), testRun(deps(), bystander.org_id, def)]);
    const mine = outcomes.slice(0, 2);
    const done = mine.filter((o) => o.status === 'fulfilled');
    const refused = mine.filter((o) => o.status === 'rejected').map((o) => (o as PromiseRejectedResult).reason);
    expect(done).toHaveLength(1);
    expect((done[0] as PromiseFulfilledResult<Awaited<ReturnType<typeof testRun>>>).value.passed).toBe(true);
    expect(refused).toHaveLength(1);
    expect(refused[0]).toMatchObject({ code: 'organization_concurrency_limit', details: { reason: 'test_run_running' } });
    // Another organization's run is not held up by it.
    expect(outcomes[2]).toMatchObject({ status: 'fulfilled', value: { passed: true } });
    // Only the run that ran left a row.
    const rows = await db().query('SELECT status FROM builder_test_runs WHERE org_id = $1', [org.org_id]);
    expect(rows.rows.length - before.rows[0].n).toBe(1);
    expect(rows.rows.map((r) => r.status)).toEqual(['passed']);
    // Once it finished, the organization runs the next one.
    expect((await testRun(deps(), org.org_id, def)).passed).toBe(true);
  });

  it('an action example cut off mid-way is action_unconfirmed: it may have happened on the website', async () => {
    const org = await newOrg(0);
    const key = `builder-action-${randomBytes(4).toString('hex')}`;
    await demo('/__demo/holds', { key });
    try {
      const def = workflowTemplate(handle('held-action'));
      // The action's request is held open by the site until after the run's budget.
      (def.operations[0]!.recipe.steps as unknown[]).unshift({ type: 'request', name: 'Reserve', method: 'GET', url: `http://books.example.test/__probe/hold?key=${key}`, action: true });
      const run = await testRun({ ...deps(), budgetMs: 6_000 }, org.org_id, def);
      expect(run.passed).toBe(false);
      expect(run.results.map((r) => r.error)).toEqual([
        { code: 'action_unconfirmed', message: 'The example did not finish within its time limit, and its action may have happened on the website; check the website before running it again' },
      ]);
      // The request did reach the site.
      expect(await (await fetch(`${stack().demoOrigin}/__demo/holds?key=${key}`)).json()).toMatchObject({ requests: 1 });
    } finally {
      await demo('/__demo/holds/release', { key });
    }
  });

  it('a test run stops within its total time budget: the examples it had no time for are reported as not run', async () => {
    const org = await newOrg(0);
    const def = workflowTemplate(handle('budget'));
    def.operations[0]!.examples.push(structuredClone(def.operations[0]!.examples[0]!));
    const run = await testRun({ ...deps(), budgetMs: 1_000 }, org.org_id, def);
    expect(run.passed).toBe(false);
    expect(run.results.map((r) => [r.passed, r.error?.code, r.error?.message.startsWith('Not run')])).toEqual([
      [false, 'execution_timeout', true],
      [false, 'execution_timeout', true],
    ]);
    const history = await temporal.workflow.getHandle(testRunWorkflowId(org.org_id)).fetchHistory();
    expect(history.events!.filter((e) => e.activityTaskScheduledEventAttributes?.activityType?.name === 'runDraftExample')).toEqual([]);
    // The whole run is bounded too: the budget plus two minutes, not 30.
    const started = history.events![0]!.workflowExecutionStartedEventAttributes!;
    expect(Number(started.workflowExecutionTimeout!.seconds)).toBe(121);
  });
});

describe('billing and sharing', () => {
  it('402 insufficient_credits when short: nothing written; sharing is free and public', async () => {
    const org = await newOrg(50);
    const h = handle('shared');
    const def = workflowTemplate(h);
    expect((await testRun(deps(), org.org_id, def)).passed).toBe(true);
    await expectRefusal(publish(db(), org.org_id, def), 'insufficient_credits');
    await expectIdentity(org.org_id, { granted: 50, available: 50, charged: 0 });
    expect((await db().query('SELECT count(*)::int AS n FROM apis WHERE handle = $1', [h])).rows[0].n).toBe(0);

    expect(await publish(db(), org.org_id, def, { share: true })).toMatchObject({ version: 1, visibility: 'public', charged_credits: 0 });
    await expectIdentity(org.org_id, { granted: 50, available: 50, charged: 0 });
    expect(await buildLedger(org.org_id)).toEqual([]);
    const detail = await call('GET', `/v1/catalog/detail?api=${encodeURIComponent(h)}`);
    expect(detail.status).toBe(200);
    const found = await until(async () => {
      const r = await call('GET', `/v1/catalog?query=${encodeURIComponent(h.slice(1))}`);
      return r.body.data.items.find((i: { api: string }) => i.api === h);
    });
    expect(found).toMatchObject({ api: h, visibility: 'public' });

    // Sharing cannot be turned off again; another organization cannot take the public handle...
    await expectRefusal(publish(db(), org.org_id, def, { share: false }), 'publish_refused', 'already_shared');
    const rival = await newOrg(500);
    expect((await testRun(deps(), rival.org_id, def)).passed).toBe(true);
    await expectRefusal(publish(db(), rival.org_id, def, { share: true }), 'publish_refused', 'handle_taken');
    // ...but may build a private workflow of the same name, which wins for it.
    const mine = withoutAuthors(def);
    expect((await testRun(deps(), rival.org_id, mine)).passed).toBe(true);
    expect(await publish(db(), rival.org_id, mine)).toMatchObject({ version: 1, visibility: 'private', charged_credits: 100 });
    const own = await query(rival.api_key, { api: h, operation: 'book_price', input: INPUT });
    expect(own.body.data.output.authors).toBeUndefined();
    const theirs = await query(rival.api_key, { api: h, operation: 'book_price', input: INPUT, visibility: 'public' });
    expect(theirs.body.data.output).toEqual(EXPECTED);
    const st = await call('GET', `/v1/query/requests/${theirs.body.data.receipt.request_id}`, { key: rival.api_key });
    expect(st.body.data).toMatchObject({ can_rate: true, feedback_unavailable_reason: null });
    // The owner's own shared workflow: own_api.
    const ownRun = await query(org.api_key, { api: h, operation: 'book_price', input: INPUT });
    const ownSt = await call('GET', `/v1/query/requests/${ownRun.body.data.receipt.request_id}`, { key: org.api_key });
    expect(ownSt.body.data).toMatchObject({ can_rate: false, feedback_unavailable_reason: 'own_api' });
  });

  it('two concurrent publishes of one handle: one version each, in order, each charged once', async () => {
    const org = await newOrg(1000);
    const h = handle('race');
    const def = workflowTemplate(h);
    const other = withoutAuthors(def);
    expect((await testRun(deps(), org.org_id, def)).passed).toBe(true);
    expect((await testRun(deps(), org.org_id, other)).passed).toBe(true);
    const results = await Promise.all([publish(db(), org.org_id, def), publish(db(), org.org_id, other)]);
    expect(results.map((r) => r.version).sort()).toEqual([1, 2]);
    expect(results.every((r) => r.charged_credits === 100 && !r.unchanged)).toBe(true);
    expect((await buildLedger(org.org_id)).map((l) => l.note).sort()).toEqual([`build ${h} v1`, `build ${h} v2`]);
    await expectIdentity(org.org_id, { granted: 1000, available: 800, charged: 200 });
    const defaults = await db().query(`SELECT o.default_version FROM operations o JOIN apis a ON a.id = o.api_id WHERE a.handle = $1`, [h]);
    expect(defaults.rows).toEqual([{ default_version: 2 }]);
  });

  it('the same definition published twice at once (a form sent twice): one version, charged once; the other answer is that version, unchanged', async () => {
    const org = await newOrg(1000);
    const h = handle('twice');
    const def = workflowTemplate(h);
    expect((await testRun(deps(), org.org_id, def)).passed).toBe(true);
    const results = await Promise.all([publish(db(), org.org_id, def), publish(db(), org.org_id, def)]);
    expect(results.map((r) => [r.version, r.charged_credits, r.unchanged]).sort()).toEqual([
      [1, 0, true],
      [1, 100, false],
    ]);
    expect((await buildLedger(org.org_id)).map((l) => l.note)).toEqual([`build ${h} v1`]);
    await expectIdentity(org.org_id, { granted: 1000, available: 900, charged: 100 });
    // Restoring the version that is already the latest is that version again, free.
    expect(await restore(db(), org.org_id, h, 1)).toMatchObject({ version: 1, charged_credits: 0, unchanged: true });
    // Sharing the same definition is a change (a new, public version).
    expect(await publish(db(), org.org_id, def, { share: true })).toMatchObject({ version: 2, visibility: 'public', charged_credits: 0, unchanged: false });
    expect((await db().query('SELECT count(*)::int AS n FROM builder_versions v JOIN apis a ON a.id = v.api_id WHERE a.handle = $1', [h])).rows[0].n).toBe(2);
  });

  it("a publish whose catalog writes are held does not hold the organization's queries: the build is charged last", async () => {
    const org = await newOrg(1000);
    const h = handle('slow');
    const def = workflowTemplate(h);
    expect((await testRun(deps(), org.org_id, def)).passed).toBe(true);
    // Holding writes to operation versions (reads go on) stalls the publish inside its catalog
    // writes, as a large publish or a slow disk would.
    const holder = createPool(stack().databaseUrl, 1);
    const held = await holder.connect();
    let publishing: Promise<unknown> | undefined;
    try {
      await held.query('BEGIN');
      await held.query('LOCK TABLE operation_versions IN SHARE MODE');
      const holderPid = (await held.query('SELECT pg_backend_pid() AS pid')).rows[0].pid as number;
      publishing = publish(db(), org.org_id, def);
      publishing.catch(() => undefined);
      await until(async () => (await db().query('SELECT 1 FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))', [holderPid])).rowCount! > 0, 10_000, 100);
      // Meanwhile the same organization's query reserves, runs and settles on its balance row.
      const answer = await Promise.race([query(org.api_key, { api: '@weather', operation: 'current_weather', input: { city: 'London' } }), new Promise<'held'>((r) => setTimeout(() => r('held'), 10_000))]);
      expect(answer, "the query waited on the publish's charge").not.toBe('held');
      expect((answer as Awaited<ReturnType<typeof query>>).status).toBe(200);
    } finally {
      await held.query('ROLLBACK').catch(() => undefined);
      held.release();
      await holder.end();
    }
    expect(await publishing).toMatchObject({ api: h, version: 1, charged_credits: 100 });
    await expectIdentity(org.org_id, { granted: 1000, available: 899, charged: 101 });
  });
});
