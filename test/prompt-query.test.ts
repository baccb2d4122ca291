// Prompt mode end to end on the real stack (issue 10): a prompt is routed within its scope, its
// input filled, and it runs as the direct query it routes to (same workflow, streaming,
// idempotency, status), billed 5 credits plus the operation's price once on success; abstentions,
// missing inputs and failed runs cost nothing. The prompts are ones any sensible router must route.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { createParser, type EventSourceMessage } from 'eventsource-parser';
import { afterAll, beforeEach, describe, expect, it } from 'vitest';
import { balanceOf, call, closeDb, db, demo, ledgerOf, newOrg, query, stack } from './helpers/stack.ts';
import { publishApi } from '../shared/db/catalog.ts';
import { createFile } from '../shared/db/files.ts';
import { demoCatalog } from '../shared/catalog/demo/index.ts';

const LONDON = 'What is the current weather in London?';
const PRICE = 1 + 5; // current_weather's price and the prompt-search fee
// Other test files publish public APIs into the same database, some of them copies of @weather
// (test/feedback.test.ts's popularity test): a prompt about London's weather may rightly route to
// one of those. Prompts whose assertions name the demo operation they route to are scoped to the
// demo catalog's handles (a filter applied before ranking, as a caller would).
const DEMO = demoCatalog.map((a) => a.handle);
const key = () => `prompt-${Date.now()}-${Math.random().toString(36).slice(2)}`;

afterAll(closeDb);
beforeEach(async () => {
  await demo('/__demo/reset');
});

const requestCount = async (orgId: string) => (await db().query('SELECT count(*)::int AS n FROM requests WHERE org_id = $1', [orgId])).rows[0].n as number;

/** A refused prompt: its code, no receipt, no request row, no ledger row. */
async function expectFree(res: { status: number; body: any }, orgId: string, status: number, code: string) {
  expect(res.status, JSON.stringify(res.body)).toBe(status);
  expect(res.body.error.code).toBe(code);
  expect(res.body.error).not.toHaveProperty('receipt');
  expect(await ledgerOf(orgId)).toEqual([]);
  expect(await requestCount(orgId)).toBe(0);
}

describe('a routed prompt runs like a direct query', () => {
  it('runs the operation it names, with the input from the prompt, charged 5 + its price once', async () => {
    const org = await newOrg(20);
    const res = await query(org.api_key, { prompt: LONDON, allowed_apis: DEMO });
    expect(res.status, res.text).toBe(200);
    const rid = res.body.data.receipt.request_id;
    expect(res.body.data.output.city).toBe('London');
    expect(res.body.data.receipt).toEqual({
      request_id: rid,
      api: '@weather',
      operation: 'current_weather',
      billing: { status: 'settled', reserved_credits: PRICE, charged_credits: PRICE },
    });
    expect(res.headers.get('x-svc-api')).toBe('@weather');
    expect(res.headers.get('x-svc-cost-credits')).toBe(String(PRICE));
    expect(res.headers.get('x-svc-billing-status')).toBe('settled');
    expect(res.headers.get('idempotency-replayed')).toBe('false');
    expect(await ledgerOf(org.org_id)).toEqual([
      { request_id: rid, kind: 'reserve', amount: PRICE },
      { request_id: rid, kind: 'settle', amount: PRICE },
    ]);
    expect(await balanceOf(org.org_id)).toEqual({ granted: 20, available: 20 - PRICE, reserved: 0, charged: PRICE });

    // The status shows how it was routed; the row names what ran.
    const status = await call('GET', `/v1/query/requests/${rid}`, { key: org.api_key });
    expect(status.status).toBe(200);
    expect(status.body.data.status).toBe('succeeded');
    expect(status.body.data.receipt).toEqual(res.body.data.receipt);
    const routing = status.body.data.routing;
    expect(routing.router).toMatch(/^(offline|llm)$/);
    expect(routing.search_credits).toBe(5);
    expect(routing.score).toBeGreaterThan(0);
    expect(routing.score).toBeLessThanOrEqual(1);
    expect(routing.candidates[0]).toEqual({ api: '@weather', operation: 'current_weather', label: expect.any(String), score: routing.score });
    expect(routing.candidates.length).toBeLessThanOrEqual(5);
  });

  it('a direct query has no routing in its status', async () => {
    const org = await newOrg(5);
    const res = await query(org.api_key, { api: '@weather', operation: 'current_weather', input: { city: 'London' } });
    expect(res.status, res.text).toBe(200);
    const status = await call('GET', `/v1/query/requests/${res.body.data.receipt.request_id}`, { key: org.api_key });
    expect(status.body.data.routing).toBeNull();
  });

  it('a prompt that names an API routes within it and costs the same 5 credits', async () => {
    const org = await newOrg(20);
    const res = await query(org.api_key, { prompt: LONDON, api: '@weather', visibility: 'public' });
    expect(res.status, res.text).toBe(200);
    expect(res.body.data.receipt.api).toBe('@weather');
    expect(res.body.data.receipt.billing).toEqual({ status: 'settled', reserved_credits: PRICE, charged_credits: PRICE });
    const status = await call('GET', `/v1/query/requests/${res.body.data.receipt.request_id}`, { key: org.api_key });
    for (const c of status.body.data.routing.candidates) expect(c.api).toBe('@weather');
  });

  it('allowed_apis keeps routing within the listed APIs', async () => {
    const org = await newOrg(20);
    const inside = await query(org.api_key, { prompt: LONDON, allowed_apis: ['@weather', '@books'] });
    expect(inside.status, inside.text).toBe(200);
    expect(inside.body.data.receipt.api).toBe('@weather');
    // The weather is out of reach: whatever the router answers, nothing outside @books is considered.
    const outside = await query(org.api_key, { prompt: LONDON, allowed_apis: ['@books'] });
    const considered = outside.status === 200 ? [outside.body.data.receipt] : outside.body.error.details.candidates;
    if (outside.status !== 200) expect(outside.body.error.code).toBe('prompt_unroutable');
    for (const c of considered) expect(c.api).toBe('@books');
  });

  it('blocked_apis keeps routing away from the listed APIs', async () => {
    const org = await newOrg(20);
    const res = await query(org.api_key, { prompt: LONDON, blocked_apis: ['@weather'] });
    // Whatever the router answers (another API, or an abstention), @weather is never considered.
    if (res.status === 200) {
      expect(res.body.data.receipt.api).not.toBe('@weather');
      const status = await call('GET', `/v1/query/requests/${res.body.data.receipt.request_id}`, { key: org.api_key });
      expect(status.body.data.routing.candidates.map((c: { api: string }) => c.api)).not.toContain('@weather');
    } else {
      expect(res.body.error.code, res.text).toBe('prompt_unroutable');
      expect(res.body.error.details.candidates.map((c: { api: string }) => c.api)).not.toContain('@weather');
    }
    // Unblocked, the same prompt runs on @weather: the block is what kept it away.
    const open = await query(org.api_key, { prompt: LONDON, blocked_apis: ['@books'], allowed_apis: DEMO.filter((h) => h !== '@books') });
    expect(open.status, open.text).toBe(200);
    expect(open.body.data.receipt.api).toBe('@weather');
  });

  it('streams a prompt query: progress events, then one result naming the routed operation', async () => {
    const org = await newOrg(20);
    const res = await fetch(`${stack().baseUrl}/v1/query`, {
      method: 'POST',
      headers: { authorization: `Bearer ${org.api_key}`, 'content-type': 'application/json', accept: 'text/event-stream' },
      body: JSON.stringify({ prompt: LONDON, allowed_apis: DEMO, stream: true }),
    });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/event-stream/);
    const events: EventSourceMessage[] = [];
    const parser = createParser({ onEvent: (e) => events.push(e) });
    parser.feed(await res.text());
    const terminal = events.filter((e) => e.event === 'result' || e.event === 'error');
    expect(terminal.map((e) => e.event)).toEqual(['result']);
    expect(events.filter((e) => e.event === 'progress').length).toBeGreaterThan(0);
    const result = JSON.parse(terminal[0]!.data);
    expect(result.data.output.city).toBe('London');
    expect(result.data.receipt).toMatchObject({ api: '@weather', operation: 'current_weather', billing: { status: 'settled', charged_credits: PRICE } });
    expect(await balanceOf(org.org_id)).toMatchObject({ available: 20 - PRICE, charged: PRICE });
  });
});

describe('response shaping and attachments apply to the routed operation', () => {
  it('response.include is checked against the routed operation and shapes its output', async () => {
    const org = await newOrg(20);
    const bad = await query(org.api_key, { prompt: LONDON, allowed_apis: DEMO, response: { include: ['city', 'no_such_field'] } });
    await expectFree(bad, org.org_id, 400, 'invalid_input');
    expect(bad.body.error.param).toBe('response.include.1');
    const res = await query(org.api_key, { prompt: LONDON, allowed_apis: DEMO, response: { include: ['city'] } });
    expect(res.status, res.text).toBe(200);
    expect(res.body.data.output).toEqual({ city: 'London' });
  });

  it("the organization's own text file as context goes along; the run is the same", async () => {
    const org = await newOrg(20);
    const notes = await createFile(db(), { orgId: org.org_id, name: 'trip.txt', contentType: 'text/plain', bytes: Buffer.from('Packing list for a trip') });
    const res = await query(org.api_key, { prompt: LONDON, allowed_apis: DEMO, attachments: [{ id: notes.id, purpose: 'context' }] });
    expect(res.status, res.text).toBe(200);
    expect(res.body.data.receipt).toMatchObject({ api: '@weather', operation: 'current_weather', billing: { charged_credits: PRICE } });
  });

  it('a file listed more than once is taken (read once, test/prompt-validation.test.ts); the run is the same', async () => {
    const org = await newOrg(20);
    const notes = await createFile(db(), { orgId: org.org_id, name: 'trip.txt', contentType: 'text/plain', bytes: Buffer.from('Packing list for a trip') });
    const attachments = (['context', 'input', 'input', 'context'] as const).map((purpose) => ({ id: notes.id, purpose }));
    const res = await query(org.api_key, { prompt: LONDON, allowed_apis: DEMO, attachments });
    expect(res.status, res.text).toBe(200);
    expect(res.body.data.output.city).toBe('London');
    expect(res.body.data.receipt).toMatchObject({ api: '@weather', operation: 'current_weather', billing: { charged_credits: PRICE } });
  });
});

describe('idempotency: the prompt is part of the request identity', () => {
  it('the same key and prompt replays without charging again; another prompt under it is a conflict', async () => {
    const org = await newOrg(20);
    const k = key();
    const first = await query(org.api_key, { prompt: LONDON, allowed_apis: DEMO }, { 'idempotency-key': k });
    expect(first.status, first.text).toBe(200);
    const again = await query(org.api_key, { prompt: LONDON, allowed_apis: DEMO }, { 'idempotency-key': k });
    expect(again.status, again.text).toBe(200);
    expect(again.headers.get('idempotency-replayed')).toBe('true');
    expect(again.body).toEqual(first.body);
    // `stream` is not part of the identity: a streamed retry replays too.
    const streamed = await fetch(`${stack().baseUrl}/v1/query`, {
      method: 'POST',
      headers: { authorization: `Bearer ${org.api_key}`, 'content-type': 'application/json', 'idempotency-key': k },
      body: JSON.stringify({ prompt: LONDON, allowed_apis: DEMO, stream: true }),
    });
    expect(await streamed.text()).toContain(first.body.data.receipt.request_id);

    // The key is met before routing: a different prompt is a conflict whether or not it would route.
    const other = await query(org.api_key, { prompt: 'What is the current weather in Paris?' }, { 'idempotency-key': k });
    expect(other.status, other.text).toBe(409);
    expect(other.body.error.code).toBe('idempotency_key_conflict');
    const scoped = await query(org.api_key, { prompt: LONDON, allowed_apis: ['@weather'] }, { 'idempotency-key': k });
    expect(scoped.status, scoped.text).toBe(409);
    expect(scoped.body.error.code).toBe('idempotency_key_conflict');
    const nonsense = await query(org.api_key, { prompt: 'Translate this poem into Klingon and sing it to me' }, { 'idempotency-key': k });
    expect(nonsense.status, nonsense.text).toBe(409);
    expect(nonsense.body.error.code).toBe('idempotency_key_conflict');
    // A routable prompt under a key of its own runs once more.
    const fresh = await query(org.api_key, { prompt: LONDON, allowed_apis: DEMO }, { 'idempotency-key': key() });
    expect(fresh.status, fresh.text).toBe(200);
    expect(fresh.body.data.receipt.request_id).not.toBe(first.body.data.receipt.request_id);

    const rid = first.body.data.receipt.request_id;
    const rid2 = fresh.body.data.receipt.request_id;
    expect(await ledgerOf(org.org_id)).toEqual([
      { request_id: rid, kind: 'reserve', amount: PRICE },
      { request_id: rid, kind: 'settle', amount: PRICE },
      { request_id: rid2, kind: 'reserve', amount: PRICE },
      { request_id: rid2, kind: 'settle', amount: PRICE },
    ]);
  });
});

describe('one organization never routes to another one\'s private workflow', () => {
  it('a private operation is a candidate for its owner only', async () => {
    const [owner, stranger] = await Promise.all([newOrg(0), newOrg(20)]);
    const handle = `@tides-${Math.random().toString(36).slice(2, 8)}`;
    await publishApi(
      db(),
      {
        handle,
        name: 'Harbour tides',
        description: 'Tide tables of the harbour',
        category: 'other',
        website_url: null,
        sites: [],
        operations: [
          {
            name: 'tide_times',
            label: 'Tide times',
            description: 'High and low tide times at the harbour today',
            cost_credits: 1,
            default_version: 1,
            versions: [{ version: 1, input_schema: { type: 'object', additionalProperties: false, properties: {} }, output_schema: {}, examples: [], recipe: {} }],
          },
        ],
      },
      { ownerOrgId: owner.org_id },
    );
    const prompt = 'Tide times at the harbour today: high and low tide';
    // The owner's prompt reaches it (and stops at the owner's empty balance: nothing runs).
    const own = await query(owner.api_key, { prompt });
    expect(own.status, own.text).toBe(402);
    expect(own.body.error.receipt).toMatchObject({ api: handle, operation: 'tide_times', billing: { status: 'not_started', charged_credits: 0 } });
    // Nobody else's prompt sees it, even naming it in the scope.
    for (const body of [{ prompt }, { prompt, allowed_apis: [handle] }]) {
      const res = await query(stranger.api_key, body);
      const seen = res.status === 200 ? [res.body.data.receipt] : res.body.error.details?.candidates ?? [];
      expect(seen.map((c: { api: string }) => c.api), res.text).not.toContain(handle);
      expect(res.text).not.toContain('tide_times');
    }
    expect(await query(stranger.api_key, { prompt, api: handle })).toMatchObject({ status: 404, body: { error: { code: 'unknown_api_slug' } } });
  });
});

describe('MCP', () => {
  it('svc_get_run reads a prompt run like any run: what ran, its output, billed once', async () => {
    const org = await newOrg(20);
    const res = await query(org.api_key, { prompt: LONDON, allowed_apis: DEMO }, { 'idempotency-key': key() });
    expect(res.status, res.text).toBe(200);
    const rid = res.body.data.receipt.request_id;
    const client = new Client({ name: 'prompt-test', version: '1.0.0' });
    await client.connect(new StreamableHTTPClientTransport(new URL(`${stack().baseUrl}/mcp`), { requestInit: { headers: { authorization: `Bearer ${org.api_key}` } } }));
    try {
      const got = (await client.callTool({ name: 'svc_get_run', arguments: { request_id: rid } })) as CallToolResult;
      expect(got.isError).toBeFalsy();
      expect(got.structuredContent).toMatchObject({ status: 'succeeded', request_id: rid, api: '@weather', operation: 'current_weather', output: { city: 'London' } });
    } finally {
      await client.close();
    }
    expect(await balanceOf(org.org_id)).toMatchObject({ available: 20 - PRICE, charged: PRICE });
  });
});

describe('what costs nothing', () => {
  it('a prompt no operation serves abstains: 422 prompt_unroutable with candidates for direct mode', async () => {
    const org = await newOrg(20);
    const res = await query(org.api_key, { prompt: 'Translate this poem into Klingon and sing it to me' });
    await expectFree(res, org.org_id, 422, 'prompt_unroutable');
    expect(res.body.error.param).toBe('prompt');
    expect(res.body.error.retryable).toBe(false);
    expect(Array.isArray(res.body.error.details.candidates)).toBe(true);
    for (const c of res.body.error.details.candidates) {
      expect(Object.keys(c).sort()).toEqual(['api', 'label', 'operation', 'score']);
      expect(c.score).toBeGreaterThanOrEqual(0);
      expect(c.score).toBeLessThanOrEqual(1);
    }
  });

  it('with stream: true a refused prompt is still a JSON error (the stream never opened)', async () => {
    const org = await newOrg(20);
    const res = await query(org.api_key, { prompt: 'Translate this poem into Klingon and sing it to me', stream: true }, { accept: 'text/event-stream' });
    expect(res.headers.get('content-type')).toMatch(/^application\/json/);
    await expectFree(res, org.org_id, 422, 'prompt_unroutable');
  });

  it('hostile prompts get an ordinary answer, never a 5xx: 10,000 characters, search operators, control characters', async () => {
    const org = await newOrg(20);
    const words = Array.from({ length: 1250 }, (_, i) => ['zq', 'weather', 'x', 'l0ndon', '&|!', "o'brien"][i % 6]).join(' ').slice(0, 10_000);
    for (const prompt of [words, "weather & | ! ( ) : * ' \\ <-> London", '%_%\u0000\u202e weather in London', 'é'.repeat(10_000)]) {
      const res = await query(org.api_key, { prompt });
      expect(res.status, `${res.status} ${res.text.slice(0, 300)}`).toBeLessThan(500);
      expect(res.body.success === true || typeof res.body.error.code === 'string').toBe(true);
    }
  });

  it('an action is never chosen for a prompt that does not ask for it', async () => {
    const org = await newOrg(20);
    for (const prompt of ['show my shop orders', 'shop', 'what does the shop sell?']) {
      const res = await query(org.api_key, { prompt });
      // Wherever the answer shows the chosen operation, it is not the one that places orders.
      if (res.status === 200) expect(res.body.data.receipt.operation, prompt).not.toBe('place_order');
      else if (res.body.error.code === 'prompt_input_missing') expect(res.body.error.details.operation, prompt).not.toBe('place_order');
      else expect(res.body.error.message, prompt).not.toContain('place_order');
    }
    expect((await db().query(`SELECT count(*)::int AS n FROM requests WHERE org_id = $1 AND operation = 'place_order'`, [org.org_id])).rows[0].n).toBe(0);
  });

  // docs/contract-decisions.md, "Actions need an explicit request": each of these names a booking or
  // an order with every input it needs, yet asks for neither (a hedge, a negation, a question).
  it('an action named without being asked for abstains: 422 prompt_unroutable, nothing booked, ordered or charged', async () => {
    for (const prompt of [
      'Is 20261124-DERM-1500 still free? I might want to book it for Chris Evans chris@evans.org',
      "I don't want to order 2 NW-MUG-STL",
      'Is it possible to order 2 NW-MUG-STL?',
    ]) {
      const org = await newOrg(20);
      const res = await query(org.api_key, { prompt, allowed_apis: DEMO });
      await expectFree(res, org.org_id, 422, 'prompt_unroutable');
      expect(res.body.error.param, prompt).toBe('prompt');
      const acted = await db().query(`SELECT count(*)::int AS n FROM requests WHERE org_id = $1 AND operation IN ('book_appointment', 'place_order')`, [org.org_id]);
      expect(acted.rows[0].n, prompt).toBe(0);
      expect(await balanceOf(org.org_id), prompt).toEqual({ granted: 20, available: 20, reserved: 0, charged: 0 });
    }
  });

  it('a required input the prompt does not give: 422 prompt_input_missing listing each field', async () => {
    const org = await newOrg(20);
    const res = await query(org.api_key, { prompt: 'What is the current weather?', api: '@weather' });
    await expectFree(res, org.org_id, 422, 'prompt_input_missing');
    expect(res.body.error.param).toBe('prompt');
    expect(res.body.error.details.api).toBe('@weather');
    expect(res.body.error.details.missing).toEqual([{ field: '/city', description: expect.any(String) }]);
    expect(res.body.error.details.missing[0].description.length).toBeGreaterThan(0);
  });

  it('a failed run releases everything, the 5 included', async () => {
    const org = await newOrg(20);
    const res = await query(org.api_key, { prompt: 'What is the current weather in Atlantis?', allowed_apis: DEMO });
    expect(res.status, res.text).toBe(404);
    expect(res.body.error.code).toBe('not_found');
    const rid = res.body.error.request_id;
    expect(res.body.error.receipt).toEqual({
      request_id: rid,
      api: '@weather',
      operation: 'current_weather',
      billing: { status: 'released', reserved_credits: PRICE, charged_credits: 0 },
    });
    expect(await ledgerOf(org.org_id)).toEqual([
      { request_id: rid, kind: 'reserve', amount: PRICE },
      { request_id: rid, kind: 'release', amount: PRICE },
    ]);
    expect(await balanceOf(org.org_id)).toEqual({ granted: 20, available: 20, reserved: 0, charged: 0 });
    const status = await call('GET', `/v1/query/requests/${rid}`, { key: org.api_key });
    expect(status.body.data.status).toBe('failed');
    expect(status.body.data.routing.candidates[0]).toMatchObject({ api: '@weather', operation: 'current_weather' });
  });

  it('too few credits for 5 + the price is 402 with the total required, nothing reserved', async () => {
    const org = await newOrg(PRICE - 1);
    const res = await query(org.api_key, { prompt: LONDON, allowed_apis: DEMO });
    expect(res.status, res.text).toBe(402);
    expect(res.body.error.code).toBe('insufficient_credits');
    expect(res.body.error.details).toEqual({ required: PRICE, available: PRICE - 1 });
    expect(await ledgerOf(org.org_id)).toEqual([]);
  });
});
