// Each organization's request bucket in one API process (apps/api/services/org-rate.ts): reads,
// feedback, uploads, tool listings, MCP messages and queries refused before admission of one
// organization cannot take what every organization's requests share. The bucket as pure
// arithmetic, then on API processes of this file's own with a small bucket (other files' pairs
// keep the generous defaults). A slow rate (a token every 20 s) makes the counts exact whatever the
// machine's load; the refill case uses a faster one.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { describe, expect, it } from 'vitest';
import { OrgRate, take, tokensAt, type Bucket } from '../apps/api/services/org-rate.ts';
import { messagesIn } from '../apps/api/routes/mcp.ts';
import { createKey, revokeKey } from '../shared/db/orgs.ts';
import { balanceOf, call, db, ledgerOf, newOrg, query, sleep, type Call } from './helpers/stack.ts';
import { ownPairPool } from './helpers/own-pair.ts';

const pool = ownPairPool('org-rate');

/** An API of this file's own whose organizations each get `burst` requests and then one every 1/perSecond s. */
async function apiWith(burst: number, perSecond: number, worker = false) {
  const api = await pool.spawn('api', { ...pool.pair, env: { ...pool.pair.env, ORG_REQUEST_BURST: String(burst), ORG_REQUESTS_PER_SECOND: String(perSecond) } });
  if (worker) await pool.spawn('worker');
  return String(api.started.url);
}

const london = { api: '@weather', operation: 'current_weather', input: { city: 'London' } };
const unknownRequest = () => `/v1/query/requests/req_${Math.random().toString(36).slice(2, 14).padEnd(12, '0')}`;
const MCP_ACCEPT = { accept: 'application/json, text/event-stream' };
const ping = (id: number) => ({ jsonrpc: '2.0', id, method: 'ping' });

/** The spec's error envelope of this limit, with its headers; `remaining` tokens left in the bucket. */
function expectRefused(r: Call, burst: number, remaining = 0) {
  expect(r.status, r.text).toBe(429);
  expect(r.body).toMatchObject({
    success: false,
    error: { type: 'rate_limit_error', code: 'organization_rate_limit', status: 429, retryable: true, doc_url: expect.stringMatching(/\/docs\/errors#organization_rate_limit$/) },
  });
  expect(r.body.error.details).toMatchObject({ burst });
  const retryAfter = Number(r.headers.get('retry-after'));
  expect(r.headers.get('retry-after')).toMatch(/^[1-9][0-9]*$/);
  expect(r.headers.get('x-ratelimit-limit')).toBe(String(burst));
  expect(r.headers.get('x-ratelimit-remaining')).toBe(String(remaining));
  // Reset is the second the refused request would pass: now + Retry-After.
  expect(Math.abs(Number(r.headers.get('x-ratelimit-reset')) - (Math.floor(Date.now() / 1000) + retryAfter))).toBeLessThanOrEqual(2);
  return retryAfter;
}

async function countedThisMinute(orgId: string): Promise<number> {
  const r = await db().query(
    `SELECT coalesce(sum(n), 0)::int AS n FROM request_second_counts WHERE org_id = $1 AND second > floor(extract(epoch FROM now()))::bigint - 60`,
    [orgId],
  );
  return r.rows[0].n;
}

const rowsOf = async (table: 'requests' | 'files', orgId: string) =>
  Number((await db().query(`SELECT count(*)::int AS n FROM ${table} WHERE org_id = $1`, [orgId])).rows[0].n);

describe('the bucket (pure)', () => {
  const limits = { perSecond: 2, burst: 4 };

  it('a new bucket is full; each take spends its cost; an empty one refuses with the wait for what is needed', () => {
    let b: Bucket | undefined;
    for (let i = 0; i < 4; i++) {
      const r = take(b, 1, 0, limits);
      expect(r.result.ok).toBe(true);
      b = r.bucket;
    }
    const refused = take(b, 1, 0, limits);
    expect(refused.result).toEqual({ ok: false, tokens: 0, waitMs: 500 });
    // Refills at the rate, never above the burst.
    expect(tokensAt(refused.bucket, 250, limits)).toBe(0.5);
    expect(tokensAt(refused.bucket, 500, limits)).toBe(1);
    expect(tokensAt(refused.bucket, 60_000, limits)).toBe(4);
    expect(take(refused.bucket, 1, 500, limits).result.ok).toBe(true);
    // A clock that steps back adds nothing.
    expect(tokensAt({ tokens: 1, at: 1_000 }, 0, limits)).toBe(1);
  });

  it('a batch needs its whole cost; one above the burst waits for a full bucket and leaves a debt the rate pays back', () => {
    const three = take({ tokens: 2, at: 0 }, 3, 0, limits);
    expect(three.result).toEqual({ ok: false, tokens: 2, waitMs: 500 });
    const big = take({ tokens: 3, at: 0 }, 10, 0, limits);
    expect(big.result).toEqual({ ok: false, tokens: 3, waitMs: 500 });
    const passed = take(undefined, 10, 0, limits);
    expect(passed.result).toEqual({ ok: true, tokens: -6 });
    // 6 s of debt, then one request's token.
    expect(take(passed.bucket, 1, 3_000, limits).result).toEqual({ ok: false, tokens: 0, waitMs: 500 });
    expect(take(passed.bucket, 1, 3_500, limits).result.ok).toBe(true);
  });

  it('organizations have buckets of their own; a given-back token never lifts a bucket above the burst; full buckets are forgotten', () => {
    let now = 0;
    const rate = new OrgRate({ perSecond: 1, burst: 2 }, () => now);
    rate.admit('org_a');
    rate.admit('org_a');
    expect(() => rate.admit('org_a')).toThrow(expect.objectContaining({ code: 'organization_rate_limit' }));
    rate.admit('org_b');
    rate.admit('org_b');
    rate.giveBack('org_a');
    rate.admit('org_a');
    rate.giveBack('org_b', 5);
    rate.admit('org_b');
    rate.admit('org_b');
    expect(() => rate.admit('org_b')).toThrow(expect.objectContaining({ code: 'organization_rate_limit' }));
    const refusal = (() => {
      try {
        rate.admit('org_b');
      } catch (err) {
        return err as { headers: Record<string, string>; details: unknown };
      }
    })()!;
    expect(refusal.headers).toMatchObject({ 'retry-after': '1', 'x-ratelimit-limit': '2', 'x-ratelimit-remaining': '0' });
    expect(refusal.details).toEqual({ per_second: 1, burst: 2, cost: 1 });
    expect(rate.size).toBe(2);
    // Idle for a full refill: the next request's sweep drops both (and this one starts afresh).
    now = 2_500;
    rate.admit('org_c');
    expect(rate.size).toBe(1);
    // At the next sweep, a bucket still refilling is kept (org_d: 1.9 of 2), a full one is not (org_c).
    now = 2_600;
    rate.admit('org_d', 2);
    now = 4_500;
    rate.admit('org_e');
    expect(rate.size).toBe(2);
    expect(() => rate.admit('org_d', 2)).toThrow(expect.objectContaining({ code: 'organization_rate_limit' }));
  });

  it('an MCP exchange costs its messages: one for a single message (or none at all), the batch size, at most the SDK batch limit', () => {
    expect(messagesIn({ jsonrpc: '2.0', id: 1, method: 'ping' })).toBe(1);
    expect(messagesIn(undefined)).toBe(1);
    expect(messagesIn([])).toBe(1);
    expect(messagesIn([ping(1), ping(2), ping(3)])).toBe(3);
    expect(messagesIn(Array.from({ length: 5000 }, (_, i) => ping(i)))).toBe(100);
  });
});

describe('per-organization request rate on an API process', () => {
  it('an organization past its bucket gets 429 organization_rate_limit on every keyed route; another organization at the same moment does not; nothing is charged or counted', async () => {
    const BURST = 5;
    const url = await apiWith(BURST, 0.05);
    const a = await newOrg(10);
    const b = await newOrg(10);
    const before = await balanceOf(a.org_id);

    // A burst of status reads: the bucket's five pass (404, no such request), the rest are refused.
    const burst = await Promise.all(Array.from({ length: 8 }, () => call('GET', unknownRequest(), { key: a.api_key, baseUrl: url })));
    expect(burst.map((r) => r.status).sort(), burst.map((r) => r.text).join('\n')).toEqual([404, 404, 404, 404, 404, 429, 429, 429]);
    for (const r of burst.filter((x) => x.status === 429)) expect(expectRefused(r, BURST)).toBeGreaterThanOrEqual(15);

    // The other organization on the same process, at the same moment, is served.
    expect((await call('GET', '/v1/auth', { key: b.api_key, baseUrl: url })).status).toBe(200);
    expect((await call('GET', unknownRequest(), { key: b.api_key, baseUrl: url })).body.error.code).toBe('request_not_found');
    expect((await call('GET', '/v1/catalog/tools', { key: b.api_key, baseUrl: url })).status).toBe(200);
    const theirMcp = await call('POST', '/mcp', { key: b.api_key, baseUrl: url, body: ping(1), headers: MCP_ACCEPT });
    expect(theirMcp.status, theirMcp.text).toBe(200);

    // Every route that takes the organization's key refuses the same way, before any work.
    const keyed: Array<[string, () => Promise<Call>]> = [
      ['GET /v1/auth', () => call('GET', '/v1/auth', { key: a.api_key, baseUrl: url })],
      ['feedback', () => call('POST', `${unknownRequest()}/feedback`, { key: a.api_key, baseUrl: url, body: { value: 1 } })],
      ['tools', () => call('GET', '/v1/catalog/tools', { key: a.api_key, baseUrl: url })],
      ['upload', () => call('POST', '/v1/files', { key: a.api_key, baseUrl: url, rawBody: 'hello', headers: { 'content-type': 'application/octet-stream', 'x-file-name': 'a.txt' } })],
      ['a query that would run', () => query(a.api_key, london, {}, url)],
      ['a query refused by validation', () => query(a.api_key, { api: '@weather' }, {}, url)],
      ['a keyed query', () => query(a.api_key, london, { 'idempotency-key': 'org-rate-1' }, url)],
      ['MCP POST', () => call('POST', '/mcp', { key: a.api_key, baseUrl: url, body: ping(1), headers: MCP_ACCEPT })],
      ['MCP GET', () => call('GET', '/mcp', { key: a.api_key, baseUrl: url, headers: MCP_ACCEPT })],
    ];
    for (const [what, send] of keyed) {
      const r = await send();
      expect(r.status, `${what}: ${r.text}`).toBe(429);
      expectRefused(r, BURST);
    }
    // Another key of the same organization shares its bucket.
    const second = await createKey(db(), a.org_id);
    expectRefused(await call('GET', '/v1/auth', { key: second.api_key, baseUrl: url }), BURST);

    // Nobody learns anything new without the organization's credential: the key is checked first.
    await revokeKey(db(), second.api_key);
    expect((await call('GET', '/v1/auth', { key: second.api_key, baseUrl: url })).body.error.code).toBe('revoked_api_key');
    expect((await call('GET', '/v1/auth', { key: `svc_sk_${'x'.repeat(40)}`, baseUrl: url })).body.error.code).toBe('invalid_api_key');
    expect((await call('GET', '/v1/auth', { baseUrl: url })).body.error.code).toBe('api_key_required');
    // Key-free routes are not the bucket's.
    expect((await call('GET', '/v1/catalog?limit=1', { baseUrl: url })).status).toBe(200);

    // Free and uncounted: no credits, no ledger rows, no request or file rows, nothing in the plan's minute.
    expect(await balanceOf(a.org_id)).toEqual(before);
    expect(await ledgerOf(a.org_id)).toEqual([]);
    expect(await rowsOf('requests', a.org_id)).toBe(0);
    expect(await rowsOf('files', a.org_id)).toBe(0);
    expect(await countedThisMinute(a.org_id)).toBe(0);
  }, 120_000);

  it('the bucket refills at its rate: after Retry-After the organization is served again', async () => {
    const BURST = 3;
    const url = await apiWith(BURST, 1);
    const a = await newOrg(1);
    const burst = await Promise.all(Array.from({ length: 8 }, () => call('GET', '/v1/auth', { key: a.api_key, baseUrl: url })));
    const refused = burst.filter((r) => r.status === 429);
    // Three at once, and perhaps one more the rate added while the burst was answered.
    expect(burst.length - refused.length, burst.map((r) => r.status).join(' ')).toBeGreaterThanOrEqual(BURST);
    expect(burst.length - refused.length, burst.map((r) => r.status).join(' ')).toBeLessThanOrEqual(BURST + 1);
    const retryAfter = Math.max(...refused.map((r) => expectRefused(r, BURST)));
    expect(retryAfter).toBe(1);
    await sleep(retryAfter * 1000 + 100);
    const again = await call('GET', '/v1/auth', { key: a.api_key, baseUrl: url });
    expect(again.status, again.text).toBe(200);
  }, 120_000);

  it('MCP: each JSON-RPC message of an exchange takes a token; a batch the bucket cannot hold is refused whole, before the transport, with the envelope', async () => {
    const BURST = 5;
    const url = await apiWith(BURST, 0.05);
    const a = await newOrg(1);
    const b = await newOrg(1);
    const mcp = (key: string, body: unknown) => call('POST', '/mcp', { key, baseUrl: url, body, headers: MCP_ACCEPT });

    const batch = await mcp(a.api_key, [ping(1), ping(2), ping(3)]);
    expect(batch.status, batch.text).toBe(200);
    expect(batch.text.match(/"id":\s*[123]\b/g)?.length, batch.text).toBe(3);
    // Two tokens left: a batch of three is refused whole (none of its messages handled).
    const refused = await mcp(a.api_key, [ping(4), ping(5), ping(6)]);
    expectRefused(refused, BURST, 2);
    expect(refused.body.error.details.cost).toBe(3);
    expect(refused.body.error.message).toMatch(/3 messages/);
    expect((await mcp(a.api_key, ping(7))).status).toBe(200);
    expect((await mcp(a.api_key, ping(8))).status).toBe(200);
    expectRefused(await mcp(a.api_key, ping(9)), BURST);
    // The bucket is met before the body is read: an empty one refuses even a body that is not JSON
    // (429, unparsed), and reading and parsing a body is the organization's work: it takes a token.
    const notJson = (key: string) => call('POST', '/mcp', { key, baseUrl: url, rawBody: '{bad', headers: { ...MCP_ACCEPT, 'content-type': 'application/json' } });
    expectRefused(await notJson(a.api_key), BURST);
    const c = await newOrg(1);
    for (let i = 0; i < BURST; i++) expect((await notJson(c.api_key)).body.error.code).toBe('invalid_input');
    expectRefused(await notJson(c.api_key), BURST);

    // The SDK's client hears an HTTP 429 (its connect fails), not a hung or garbled exchange.
    const client = new Client({ name: 'org-rate', version: '1' });
    await expect(client.connect(new StreamableHTTPClientTransport(new URL(`${url}/mcp`), { requestInit: { headers: { authorization: `Bearer ${a.api_key}` } } }))).rejects.toMatchObject({
      code: 429,
    });
    // Another organization's exchanges go on, SDK client included.
    const theirs = new Client({ name: 'org-rate', version: '1' });
    await theirs.connect(new StreamableHTTPClientTransport(new URL(`${url}/mcp`), { requestInit: { headers: { authorization: `Bearer ${b.api_key}` } } }));
    try {
      expect((await theirs.listTools()).tools.length).toBeGreaterThan(0);
    } finally {
      await theirs.close();
    }
    expect(await ledgerOf(a.org_id)).toEqual([]);
  }, 120_000);

  it("a query counted by the plan's minute gives its token back (limited once); replays and refusals keep theirs", async () => {
    const BURST = 3;
    const url = await apiWith(BURST, 0.05, true);
    const a = await newOrg(20);
    // More queries than the bucket holds, one after another: each is claimed and runs.
    const runs: Call[] = [];
    for (let i = 0; i < 5; i++) runs.push(await query(a.api_key, london, i === 0 ? { 'idempotency-key': 'org-rate-q' } : {}, url));
    for (const r of runs) {
      expect(r.status, r.text).toBe(200);
      // The plan's headers, as always on a query.
      expect(r.headers.get('x-ratelimit-limit')).toBe('600');
    }
    expect(await countedThisMinute(a.org_id)).toBe(5);
    // A replay is not counted by the plan: it keeps its token. So do a status read and a refused query.
    const replay = await query(a.api_key, london, { 'idempotency-key': 'org-rate-q' }, url);
    expect(replay.headers.get('idempotency-replayed')).toBe('true');
    expect((await call('GET', `/v1/query/requests/${runs[0]!.body.data.receipt.request_id}`, { key: a.api_key, baseUrl: url })).status).toBe(200);
    expect((await query(a.api_key, { ...london, api: '@nowhere' }, {}, url)).body.error.code).toBe('unknown_api_slug');
    // The bucket is empty now: the next query is refused before anything is claimed, counted or charged.
    const charged = await ledgerOf(a.org_id);
    expectRefused(await query(a.api_key, { ...london, input: { city: 'Paris' } }, {}, url), BURST);
    expect(await countedThisMinute(a.org_id)).toBe(5);
    expect(await rowsOf('requests', a.org_id)).toBe(5);
    expect(await ledgerOf(a.org_id)).toEqual(charged);
  }, 150_000);
});
