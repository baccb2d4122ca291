// What one organization's burst of feedback calls can cost the others (apps/api/routes/feedback.ts,
// shared/db/feedback.ts): an organization's feedback calls reach PostgreSQL at most
// FEEDBACK_WRITES_PER_ORG at once per API process; one more waits its turn in memory, then gets 429
// organization_concurrency_limit with Retry-After, while other organizations are served. An unknown
// id, another organization's, a refusal and a value already stored are answered without waiting on
// the organization's rating lock; only a change waits for it.
import { randomBytes } from 'node:crypto';
import { afterAll, describe, expect, it } from 'vitest';
import { call, closeDb, db, newOrg, query, sleep, stack, until, type Call } from './helpers/stack.ts';
import { processPool } from './helpers/processes.ts';
import { startPgProxy } from './helpers/pg-proxy.ts';
import { pruneRatingChanges } from '../shared/db/feedback.ts';

const s = () => stack();
const pool = processPool(() => ({ databaseUrl: s().databaseUrl, temporalAddress: s().temporalAddress, hostMap: s().hostMap, taskQueue: 'feedback-flood-unused' }));
afterAll(async () => {
  await pool.killAll();
  await closeDb();
});

const unknownId = () => `req_${randomBytes(9).toString('hex')}`;
const rate = (key: string, id: string, body: unknown, baseUrl?: string) => call('POST', `/v1/query/requests/${id}/feedback`, { key, body, baseUrl });
const status = (key: string, id: string, baseUrl?: string) => call('GET', `/v1/query/requests/${id}`, { key, baseUrl });

/** The answer with the time it took, or 'pending' when it took longer than `ms`. */
async function within(ms: number, p: Promise<Call>): Promise<(Call & { ms: number }) | 'pending'> {
  const t = Date.now();
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<'pending'>((r) => (timer = setTimeout(() => r('pending'), ms)));
  try {
    return await Promise.race([p.then((r) => ({ ...r, ms: Date.now() - t })), late]);
  } finally {
    clearTimeout(timer);
  }
}

/** A query on the shared stack, waited on until its request record is terminal; its id. */
async function run(key: string, input: Record<string, unknown> = { city: 'London' }): Promise<string> {
  const res = await query(key, { api: '@weather', operation: 'current_weather', input });
  const id = (res.body.data?.receipt ?? res.body.error?.receipt)?.request_id ?? res.headers.get('x-request-id');
  expect(id).toMatch(/^req_/);
  await until(async () => {
    const st = await status(key, id);
    return st.body.data && !['reserving', 'processing', 'refund_pending'].includes(st.body.data.status);
  });
  return id;
}

describe('a burst of one organization\'s feedback calls', () => {
  it('with its statements held back, at most FEEDBACK_WRITES_PER_ORG reach PostgreSQL; the rest wait, then 429 organization_concurrency_limit; another organization is served at once', async () => {
    const flooder = await newOrg(1);
    const other = await newOrg(1);
    // Every statement that names the flooding organization (its lookups, its lock) is held: a slow
    // database for exactly that organization's feedback calls.
    const proxy = await startPgProxy(s().databaseUrl, () => false, (bind) => bind.includes(flooder.org_id));
    try {
      const p = await pool.spawn('api', {
        databaseUrl: proxy.url,
        temporalAddress: s().temporalAddress,
        hostMap: s().hostMap,
        taskQueue: 'feedback-flood-unused',
        env: { WQS_SKIP_MIGRATIONS: '1', FEEDBACK_WRITES_PER_ORG: '2', FEEDBACK_WRITE_WAIT_MS: '800' },
      });
      const url = String(p.started.url);
      // Both keys seen once, nothing held.
      expect((await call('GET', '/v1/auth', { key: flooder.api_key, baseUrl: url })).status).toBe(200);
      expect((await call('GET', '/v1/auth', { key: other.api_key, baseUrl: url })).status).toBe(200);
      expect((await rate(flooder.api_key, unknownId(), { value: null }, url)).status).toBe(404);

      proxy.hold();
      const started = Date.now();
      let flood: Array<Call & { ms: number }> = [];
      let served: Array<(Call & { ms: number }) | 'pending'> = [];
      let heldDuring = 0;
      let heldAfterWait = 0;
      try {
        // 40 at once: twice the API's 20 pooled connections.
        const id = unknownId();
        let answered = 0;
        const sent = Array.from({ length: 40 }, () =>
          rate(flooder.api_key, id, { value: null }, url).then((r) => {
            answered++;
            return { ...r, ms: Date.now() - started };
          }),
        );
        await until(async () => proxy.held() >= 2, 10_000, 20);
        await sleep(200); // room for more to arrive, had they been let through
        heldDuring = proxy.held();
        // Another organization meanwhile: its key check, its feedback and its request status.
        served = [
          await within(1_500, call('GET', '/v1/auth', { key: other.api_key, baseUrl: url })),
          await within(1_500, rate(other.api_key, unknownId(), { value: 1 }, url)),
          await within(1_500, status(other.api_key, unknownId(), url)),
        ];
        // Past the wait, all but the two in PostgreSQL have been answered (or, without the bound, none).
        await until(async () => answered >= 38, 10_000, 20).catch(() => undefined);
        heldAfterWait = proxy.held();
        proxy.release();
        flood = await Promise.all(sent);
      } finally {
        proxy.release();
      }
      const [auth, feedback, lookup] = served;
      expect(auth).not.toBe('pending');
      expect(feedback).not.toBe('pending');
      expect(lookup).not.toBe('pending');
      if (auth === 'pending' || feedback === 'pending' || lookup === 'pending') return;
      expect(auth.status, auth.text).toBe(200);
      expect(feedback.status, feedback.text).toBe(404);
      expect(feedback.body.error).toMatchObject({ code: 'request_not_found', param: 'request_id' });
      expect(lookup.status, lookup.text).toBe(404);
      // No more than the bound reached PostgreSQL, then or after the others' wait.
      expect(heldDuring).toBe(2);
      expect(heldAfterWait).toBe(2);

      // The two that reached PostgreSQL: answered once released (an unknown id).
      const found = flood.filter((r) => r.status === 404);
      expect(found).toHaveLength(2);
      for (const r of found) expect(r.body.error).toMatchObject({ code: 'request_not_found', param: 'request_id' });
      // The rest: refused after their wait, with the retryable 429 and Retry-After.
      const refused = flood.filter((r) => r.status !== 404);
      expect(refused).toHaveLength(38);
      for (const r of refused) {
        expect(r.status, r.text).toBe(429);
        expect(r.body).toMatchObject({
          success: false,
          error: { code: 'organization_concurrency_limit', type: 'rate_limit_error', status: 429, retryable: true, details: { feedback_in_flight: 2 } },
        });
        expect(r.headers.get('retry-after')).toBe('1');
        expect(r.text).not.toMatch(/postgres|pg_|select |stack/i);
        expect(r.ms).toBeGreaterThanOrEqual(750);
        expect(r.ms).toBeLessThan(3_000);
      }
      // Released: the organization's next call goes through.
      expect((await rate(flooder.api_key, unknownId(), { value: 1 }, url)).status).toBe(404);
    } finally {
      await proxy.close();
    }
  }, 120_000);
});

describe("the organization's rating lock", () => {
  it('unknown and foreign ids, refusals and values already stored do not wait for it; a change does, and is applied once it is free', async () => {
    const o = await newOrg(5);
    const stranger = await newOrg(1);
    const id = await run(o.api_key);
    const rated = await run(o.api_key);
    const failed = await run(o.api_key, { city: 'Atlantis' });
    expect((await status(o.api_key, id)).body.data).toMatchObject({ status: 'succeeded', can_rate: true });
    expect((await status(o.api_key, failed)).body.data.status).toBe('failed');
    expect((await rate(o.api_key, rated, { value: 1 })).status).toBe(200);

    // Another transaction holds the organization's rating lock (a rating in progress, slowly).
    const holder = await db().connect();
    let change: Promise<Call> | undefined;
    try {
      await holder.query('BEGIN');
      await holder.query(`SELECT pg_advisory_xact_lock(hashtextextended('feedback:' || $1, 0))`, [o.org_id]);
      const unknown = await within(1_000, rate(o.api_key, unknownId(), { value: 1 }));
      const foreign = await within(1_000, rate(stranger.api_key, id, { value: 1 }));
      const removeNone = await within(1_000, rate(o.api_key, id, { value: null }));
      const same = await within(1_000, rate(o.api_key, rated, { value: 1 }));
      const refused = await within(1_000, rate(o.api_key, failed, { value: -1 }));
      for (const r of [unknown, foreign, removeNone, same, refused]) expect(r).not.toBe('pending');
      if (unknown === 'pending' || foreign === 'pending' || removeNone === 'pending' || same === 'pending' || refused === 'pending') return;
      // Unknown and another organization's: the same 404.
      for (const r of [unknown, foreign]) {
        expect(r.status, r.text).toBe(404);
        expect(r.body.error).toMatchObject({ code: 'request_not_found', status: 404, param: 'request_id' });
      }
      expect(removeNone.body).toEqual({ success: true, data: { request_id: id, value: null } });
      expect(same.body).toEqual({ success: true, data: { request_id: rated, value: 1 } });
      expect(refused.status).toBe(409);
      expect(refused.body.error).toMatchObject({ code: 'feedback_unavailable', param: 'value', details: { reason: 'request_incomplete' } });

      // A change waits for the lock...
      change = rate(o.api_key, id, { value: -1 });
      expect(await within(600, change)).toBe('pending');
      await holder.query('COMMIT');
      // ...and is applied once it is free.
      const done = await change;
      expect(done.body).toEqual({ success: true, data: { request_id: id, value: -1 } });
    } finally {
      await holder.query('ROLLBACK').catch(() => {});
      holder.release();
      await change?.catch(() => {});
    }
    expect((await status(o.api_key, id)).body.data.feedback).toBe(-1);
    const rows = await db().query('SELECT request_id, value FROM request_feedback WHERE org_id = $1 ORDER BY request_id', [o.org_id]);
    expect(rows.rows.map((r) => [r.request_id, Number(r.value)]).sort()).toEqual([[id, -1], [rated, 1]].sort());
  });
});

describe('pruning old rating changes', () => {
  it('deletes changes older than the cursors need, at most `limit` rows a table at a time, and keeps recent ones', async () => {
    const apiId = 9_000_000_000 + Math.floor(Math.random() * 1_000_000);
    await db().query(
      `INSERT INTO catalog_rating_buckets (api_id, at, points)
       SELECT $1::bigint, catalog_event_bucket(now() - interval '26 hours' - g * interval '10 seconds'), 5 FROM generate_series(0, 2) g
       UNION ALL SELECT $1::bigint, catalog_event_bucket(now() - interval '23 hours'), 5`,
      [apiId],
    );
    await db().query(`INSERT INTO catalog_rating_events (api_id, points, at) VALUES ($1, 5, now() - interval '26 hours'), ($1, 5, now() - interval '1 hour')`, [apiId]);
    const left = async () => {
      const b = await db().query('SELECT count(*)::int AS n FROM catalog_rating_buckets WHERE api_id = $1', [apiId]);
      const e = await db().query('SELECT count(*)::int AS n FROM catalog_rating_events WHERE api_id = $1', [apiId]);
      return [b.rows[0].n, e.rows[0].n];
    };
    expect(await left()).toEqual([4, 2]);
    expect(await pruneRatingChanges(db(), 25, 1)).toBeLessThanOrEqual(2);
    for (let i = 0; i < 20 && (await pruneRatingChanges(db(), 25, 1)) > 0; i++);
    expect(await left()).toEqual([1, 1]);
    await db().query('DELETE FROM catalog_rating_buckets WHERE api_id = $1', [apiId]);
    await db().query('DELETE FROM catalog_rating_events WHERE api_id = $1', [apiId]);
  });
});
