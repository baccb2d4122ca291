// Limits that keep one organization from using up what every organization shares, on API/worker
// pairs of this file's own (small plan limits would disturb other files on the shared pair).
// Each case sends its burst at once and checks counts, never timings.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { describe, expect, it } from 'vitest';
import { db, demo, newOrg, query, sleep, until } from './helpers/stack.ts';
import { ownPairPool } from './helpers/own-pair.ts';
import { startPgProxy } from './helpers/pg-proxy.ts';
import { openUpload } from './helpers/open-upload.ts';

const pool = ownPairPool('org-limits');

const unroutable = { prompt: 'Translate this poem into Klingon and sing it to me' };

async function upload(url: string, key: string, bytes: Buffer, name = 'f.bin') {
  const res = await fetch(`${url}/v1/files`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/octet-stream', 'x-file-name': name },
    body: new Uint8Array(bytes),
  });
  const text = await res.text();
  return { status: res.status, headers: res.headers, body: JSON.parse(text), text };
}

async function countedThisMinute(orgId: string): Promise<number> {
  const r = await db().query(
    `SELECT coalesce(sum(n), 0)::int AS n FROM request_second_counts WHERE org_id = $1 AND second > floor(extract(epoch FROM now()))::bigint - 60`,
    [orgId],
  );
  return r.rows[0].n;
}

describe('per-organization limits', () => {
  it('prompts sent at once are admitted atomically: no more are routed than the minute allows, the rest are 429 rate_limited before routing', async () => {
    const LIMIT = 4;
    const api = await pool.spawn('api', { ...pool.pair, env: { ...pool.pair.env, PLAN_REQUESTS_PER_MINUTE: String(LIMIT) } });
    const url = String(api.started.url);
    const org = await newOrg(100);
    const other = await newOrg(100);
    // The router is loaded by another organization's prompt first, so the burst's prompts are
    // routed at the speed of a warm router (a cold one would serialise them on its start-up).
    const warm = await query(other.api_key, unroutable, {}, url);
    expect(warm.status, warm.text).toBe(422);

    const burst = await Promise.all(Array.from({ length: 3 * LIMIT }, () => query(org.api_key, unroutable, {}, url)));
    const routed = burst.filter((r) => r.status === 422);
    const refused = burst.filter((r) => r.status === 429);
    expect(routed.length + refused.length, burst.map((r) => r.status).join(' ')).toBe(burst.length);
    // Each prompt routed took one request of the minute; the check and that count are one step.
    expect(routed.length, burst.map((r) => r.status).join(' ')).toBe(LIMIT);
    for (const r of routed) expect(r.body.error.code).toBe('prompt_unroutable');
    for (const r of refused) {
      expect(r.body.error.code).toBe('rate_limited');
      expect(r.headers.get('retry-after')).toMatch(/^[1-9][0-9]*$/);
      expect(r.headers.get('x-ratelimit-limit')).toBe(String(LIMIT));
      expect(r.headers.get('x-ratelimit-remaining')).toBe('0');
      expect(Number(r.headers.get('x-ratelimit-reset'))).toBeGreaterThan(Date.now() / 1000);
    }
    expect(await countedThisMinute(org.org_id)).toBe(LIMIT);
    // The other organization's minute is its own: one prompt counted.
    expect(await countedThisMinute(other.org_id)).toBe(1);
  }, 120_000);

  it('prompts of one organization being routed at once are bounded: past PROMPT_ROUTINGS_PER_ORG they wait, then 429 organization_concurrency_limit before they are counted; another organization is routed meanwhile', async () => {
    const flooder = await newOrg(100);
    const other = await newOrg(100);
    // Every statement naming the flooding organization (its admission lock first) is held: its
    // prompts stop inside the routing bound, as a slow router or database would keep them there.
    const proxy = await startPgProxy(pool.pair.databaseUrl, () => false, (bind) => bind.includes(flooder.org_id));
    try {
      const api = await pool.spawn('api', {
        ...pool.pair,
        databaseUrl: proxy.url,
        env: { ...pool.pair.env, WQS_SKIP_MIGRATIONS: '1', PROMPT_ROUTINGS_PER_ORG: '2', PROMPT_ROUTING_WAIT_MS: '800' },
      });
      const url = String(api.started.url);
      // The router warmed by the other organization; the flooder's key seen pass once.
      expect((await query(other.api_key, unroutable, {}, url)).status).toBe(422);
      expect((await fetch(`${url}/v1/auth`, { headers: { authorization: `Bearer ${flooder.api_key}` } })).status).toBe(200);
      proxy.hold();
      let burst: Array<Awaited<ReturnType<typeof query>>> = [];
      let heldDuring = 0;
      let theirs: Awaited<ReturnType<typeof query>> | undefined;
      try {
        let answered = 0;
        const sent = Array.from({ length: 10 }, () => query(flooder.api_key, unroutable, {}, url).then((r) => (answered++, r)));
        await until(async () => proxy.held() >= 2, 10_000, 20);
        await sleep(200); // room for more to reach PostgreSQL, had they been let through
        heldDuring = proxy.held();
        theirs = await query(other.api_key, unroutable, {}, url);
        await until(async () => answered >= 8, 10_000, 20);
        proxy.release();
        burst = await Promise.all(sent);
      } finally {
        proxy.release();
      }
      expect(heldDuring).toBe(2);
      expect(theirs!.status, theirs!.text).toBe(422);
      const statuses = burst.map((r) => r.status).join(' ');
      const refused = burst.filter((r) => r.status === 429);
      expect(refused.length, statuses).toBe(8);
      for (const r of refused) {
        expect(r.body.error).toMatchObject({ code: 'organization_concurrency_limit', status: 429, retryable: true, details: { prompts_routing: 2 } });
        expect(r.headers.get('retry-after')).toBe('1');
      }
      expect(burst.filter((r) => r.status === 422).length, statuses).toBe(2);
      // The refused ones were never counted: only the two routed are in the minute.
      expect(await countedThisMinute(flooder.org_id)).toBe(2);
    } finally {
      await proxy.close();
    }
  }, 120_000);

  it('a prompt that runs is counted once in the minute, not at routing and again at its claim', async () => {
    const api = await pool.spawn('api', { ...pool.pair, env: { ...pool.pair.env, PLAN_REQUESTS_PER_MINUTE: '10' } });
    await pool.spawn('worker');
    const url = String(api.started.url);
    const org = await newOrg(100);
    const r = await query(org.api_key, { prompt: 'What is the weather in London right now?', allowed_apis: ['@weather'] }, {}, url);
    expect(r.status, r.text).toBe(200);
    expect(r.headers.get('x-ratelimit-remaining')).toBe('9');
    expect(await countedThisMinute(org.org_id)).toBe(1);
    const second = await query(org.api_key, { api: '@weather', operation: 'current_weather', input: { city: 'Paris' } }, {}, url);
    expect(second.status, second.text).toBe(200);
    expect(second.headers.get('x-ratelimit-remaining')).toBe('8');
  }, 120_000);

  it("an organization's stored files are bounded, atomically: uploads sent at once never pass the limit together; another organization is not affected", async () => {
    const api = await pool.spawn('api', {
      ...pool.pair,
      env: { ...pool.pair.env, FILES_MAX_BYTES_PER_ORG: '1000000', FILES_MAX_PER_ORG: '5', FILES_UPLOADS_PER_ORG: '16' },
    });
    const url = String(api.started.url);
    const org = await newOrg(100);
    const other = await newOrg(100);
    const big = Buffer.alloc(300_000, 0x61);
    const burst = await Promise.all(Array.from({ length: 8 }, (_, i) => upload(url, org.api_key, big, `big-${i}.bin`)));
    const stored = burst.filter((r) => r.status === 201);
    const refused = burst.filter((r) => r.status === 429);
    expect(stored.length + refused.length, burst.map((r) => r.status).join(' ')).toBe(8);
    expect(stored.length, burst.map((r) => r.status).join(' ')).toBe(3);
    for (const r of refused) {
      expect(r.body.error.code).toBe('file_storage_limit');
      expect(r.body.error.retryable).toBe(false);
      expect(Number(r.headers.get('retry-after'))).toBeGreaterThan(0);
      expect(r.body.error.details).toMatchObject({ files: 3, bytes: 900_000, max_bytes: 1_000_000, max_files: 5 });
      // About the file as a whole: no field to name.
      expect(r.body.error).not.toHaveProperty('param');
    }
    // The number of files is bounded too: two small ones fit, the sixth file does not.
    for (let i = 0; i < 2; i++) expect((await upload(url, org.api_key, Buffer.from(`note ${i}`))).status).toBe(201);
    const sixth = await upload(url, org.api_key, Buffer.from('one too many'));
    expect(sixth.status, sixth.text).toBe(429);
    expect(sixth.body.error.code).toBe('file_storage_limit');
    const n = await db().query('SELECT count(*)::int AS n, sum(size)::int AS bytes FROM files WHERE org_id = $1', [org.org_id]);
    expect(n.rows[0]).toEqual({ n: 5, bytes: 900_000 + 12 });
    // Another organization's room is its own.
    expect((await upload(url, other.api_key, big)).status).toBe(201);
  }, 120_000);

  it('an organization has a bounded number of uploads in flight per API process: one more is 429 organization_concurrency_limit before its body is read', async () => {
    // Its share of the process's in-flight bytes (16 MiB by default: one chunked upload, which
    // reserves 10 MiB) is raised so that the count, not the bytes, is what refuses here.
    const api = await pool.spawn('api', { ...pool.pair, env: { ...pool.pair.env, FILES_UPLOADS_PER_ORG: '2', FILES_UPLOADS_IN_FLIGHT_MAX_BYTES_PER_ORG: String(32 * 1024 * 1024) } });
    const url = String(api.started.url);
    const org = await newOrg(100);
    const other = await newOrg(100);
    // Three begun at once and none finished: the organization's only uploads. One is refused (429,
    // answered before its body ended), which says the other two are being received.
    const begun = [openUpload(url, org.api_key), openUpload(url, org.api_key), openUpload(url, org.api_key)];
    const early = await until(async () => begun.find((b) => b.status() !== undefined), 20_000);
    expect(early.status()).toBe(429);
    expect((await early.finish())?.status).toBe(429);
    const held = begun.filter((b) => b !== early);
    expect(held.map((b) => b.status())).toEqual([undefined, undefined]);
    // A fourth waits for neither: it is refused at once, with the catalog's code and Retry-After.
    const refused = await upload(url, org.api_key, Buffer.from('fourth'));
    expect(refused.status, refused.text).toBe(429);
    expect(refused.body.error.code).toBe('organization_concurrency_limit');
    expect(refused.headers.get('retry-after')).toBe('1');
    // Another organization uploads meanwhile.
    expect((await upload(url, other.api_key, Buffer.from('theirs'))).status).toBe(201);
    // A finished upload and a dropped one both give their place back.
    expect((await held[0]!.finish())?.status).toBe(201);
    held[1]!.abort();
    await until(async () => {
      const both = [openUpload(url, org.api_key), openUpload(url, org.api_key)];
      const answers = await Promise.all(both.map((b) => b.finish()));
      return answers.every((a) => a?.status === 201);
    }, 20_000);
  }, 120_000);

  it("uploads of all organizations in flight are bounded in bytes per API process: past it 503 admission_unavailable before the body is read, nothing stored; finished and dropped uploads give their bytes back", async () => {
    const MIB = 1024 * 1024;
    // The least the setting allows (the largest upload, 10 MiB); one upload per organization at once.
    const api = await pool.spawn('api', { ...pool.pair, env: { ...pool.pair.env, FILES_UPLOADS_IN_FLIGHT_MAX_BYTES: String(10 * MIB), FILES_UPLOADS_PER_ORG: '1' } });
    const url = String(api.started.url);
    const [a, b, c, d, e, f, probe] = await Promise.all(Array.from({ length: 7 }, () => newOrg(100)));
    // Two organizations' uploads, 4 MB declared each, begun and left open: 8 MB of the 10 MiB held.
    // Held once 2.5 MB more is refused; a probe let in before that is stored, and one that raced
    // them may have taken the room of one (answered early): then both are dropped and begun again.
    let attempt = 0;
    const [heldA, heldB] = await until(async () => {
      const held = [openUpload(url, a!.api_key, { declared: 4_000_000 }), openUpload(url, b!.api_key, { declared: 4_000_000 })];
      // Give them time to be let in before the probe races them (longer at each try: a busy
      // machine took longer than the probe's own upload, every time, for 30 s).
      await sleep(Math.min(2_000, 250 * ++attempt));
      const lost = () => held.some((h) => h.status() !== undefined);
      const refused = await until(async () => lost() || (await upload(url, probe!.api_key, Buffer.alloc(2_500_000, 0x70))).status === 503, 10_000, 100);
      if (refused && !lost()) return held;
      for (const h of held) h.abort();
      return undefined;
    }, 30_000, 500);
    // Uploads of other organizations sent at once: those past the bound are refused, the one within it is stored.
    const three = Buffer.alloc(3_000_000, 0x63);
    const [rc, rd, re, rf] = await Promise.all([
      upload(url, c!.api_key, three),
      upload(url, d!.api_key, three),
      upload(url, e!.api_key, three),
      upload(url, f!.api_key, Buffer.alloc(2_000_000, 0x66)),
    ]);
    expect(rf.status, rf.text).toBe(201);
    for (const r of [rc, rd, re]) {
      expect(r.status, r.text).toBe(503);
      expect(r.body.success).toBe(false);
      expect(r.body.error).toMatchObject({ code: 'admission_unavailable', type: 'service_error', retryable: true, details: { reason: 'uploads_in_flight' } });
      expect(r.body.error).not.toHaveProperty('param');
      expect(r.headers.get('retry-after')).toBe('2');
      // Nothing about other organizations' uploads.
      expect(r.text).not.toMatch(/8000000|4000000|slow\.bin/);
    }
    // Without Content-Length an upload counts as the largest file: refused before its body ends.
    const chunked = openUpload(url, c!.api_key);
    expect(await until(async () => chunked.status(), 20_000, 50)).toBe(503);
    expect((await chunked.finish())?.status).toBe(503);
    // An organization past its own limit is told that (429), not the process's bound.
    const own = await upload(url, a!.api_key, three);
    expect(own.status, own.text).toBe(429);
    expect(own.body.error.code).toBe('organization_concurrency_limit');
    // The refused organizations stored nothing.
    const stored = await db().query('SELECT count(*)::int AS n FROM files WHERE org_id = ANY($1)', [[c!.org_id, d!.org_id, e!.org_id]]);
    expect(stored.rows[0].n).toBe(0);
    // One held upload finishes, the other's client drops its connection mid-body: both give back
    // their bytes, so the largest upload (all 10 MiB) is then let in, as are the dropped
    // organization's next upload and one without Content-Length.
    expect(heldA.status()).toBeUndefined();
    expect(heldB.status()).toBeUndefined();
    expect((await heldA.finish())?.status).toBe(201);
    heldB.abort();
    await until(async () => (await upload(url, c!.api_key, Buffer.alloc(10 * MIB, 0x63))).status === 201, 20_000, 100);
    expect((await upload(url, b!.api_key, Buffer.from('after the drop'))).status).toBe(201);
    expect((await openUpload(url, d!.api_key).finish())?.status).toBe(201);
    const after = await db().query('SELECT org_id, size::int AS size FROM files WHERE org_id = ANY($1) ORDER BY size', [[a!.org_id, b!.org_id, c!.org_id, d!.org_id, e!.org_id]]);
    expect(after.rows.map((r) => [r.org_id, r.size])).toEqual([
      [b!.org_id, 14],
      [d!.org_id, 1034],
      [a!.org_id, 4_000_000],
      [c!.org_id, 10 * MIB],
    ]);
  }, 120_000);

  it('svc_get_run waits of one organization are bounded per API process: one more fails at once with organization_concurrency_limit; another organization still waits', async () => {
    const api = await pool.spawn('api', { ...pool.pair, env: { ...pool.pair.env, MCP_GET_RUN_WAITS_PER_ORG: '2' } });
    await pool.spawn('worker');
    const url = String(api.started.url);
    const org = await newOrg(100);
    const other = await newOrg(100);
    const clients: Client[] = [];
    const connect = async (key: string) => {
      const client = new Client({ name: 'org-limits', version: '1.0.0' });
      await client.connect(new StreamableHTTPClientTransport(new URL(`${url}/mcp`), { requestInit: { headers: { authorization: `Bearer ${key}` } } }));
      clients.push(client);
      return client;
    };
    const callTool = async (client: Client, name: string, args: Record<string, unknown>) => {
      const r = (await client.callTool({ name, arguments: args }, undefined, { timeout: 120_000 })) as CallToolResult;
      return { isError: r.isError, sc: r.structuredContent as any };
    };
    try {
      // Two slow runs (the site answers after 25 s), one per organization, left running.
      await demo('/__demo/faults', { host: 'weather.example.test', path_prefix: '/api/v1/current?city=Madrid', latency_ms: 25_000, times: 2 });
      const mine = await connect(org.api_key);
      const theirs = await connect(other.api_key);
      const madrid = { api: '@weather', operation: 'current_weather', input: { city: 'Madrid' }, wait_seconds: 1 };
      const [run, otherRun] = await Promise.all([callTool(mine, 'svc_run_workflow', madrid), callTool(theirs, 'svc_run_workflow', madrid)]);
      expect(run.sc.status, JSON.stringify(run.sc)).toBe('running');
      expect(otherRun.sc.status, JSON.stringify(otherRun.sc)).toBe('running');
      // Three waits on the same run at once: two wait, the third is refused without waiting.
      const waits = [1, 2, 3].map(() => callTool(mine, 'svc_get_run', { request_id: run.sc.request_id, wait_seconds: 120 }));
      const first = await Promise.race(waits.map((w, i) => w.then(() => i)));
      const refused = await waits[first]!;
      expect(refused.isError).toBe(true);
      expect(refused.sc.status).toBe('failed');
      expect(refused.sc.error.code).toBe('organization_concurrency_limit');
      expect(refused.sc.message).toMatch(/retry after 1 s/);
      // The other organization's wait is its own: it waits for its run and gets the result.
      const theirsWait = await callTool(theirs, 'svc_get_run', { request_id: otherRun.sc.request_id, wait_seconds: 120 });
      expect(theirsWait.sc.status, JSON.stringify(theirsWait.sc)).toBe('succeeded');
      // The two waits that were let in get the run's result.
      const rest = await Promise.all(waits.filter((_, i) => i !== first));
      expect(rest.map((r) => r.sc.status)).toEqual(['succeeded', 'succeeded']);
      // Their places are given back: the next wait is answered (at once, the run being done).
      expect((await callTool(mine, 'svc_get_run', { request_id: run.sc.request_id })).sc.status).toBe('succeeded');
    } finally {
      for (const c of clients) await c.close().catch(() => {});
    }
  }, 150_000);
});
