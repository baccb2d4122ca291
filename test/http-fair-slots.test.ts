// HTTP runs are shared out between organizations inside a worker, on the real stack. Read-only HTTP
// queries are local activities, whose slots the Temporal SDK hands out first come first served; the
// runner's fair semaphore (activities/engines/index.ts, HTTP_CONCURRENCY and
// HTTP_CONCURRENCY_PER_ORG) bounds how many run at once and how many of them one organization holds.
// Here: four at once, two per organization, and a query deadline short enough that a run kept
// waiting past it ends as the deadline says.
import { describe, expect, it } from 'vitest';
import { ownPairPool } from './helpers/own-pair.ts';
import { balanceOf, db, demo, newOrg, query, sleep } from './helpers/stack.ts';

const DEADLINE_MS = 10_000;
const pool = ownPairPool('http-fair', { HTTP_CONCURRENCY: '4', HTTP_CONCURRENCY_PER_ORG: '2', QUERY_DEADLINE_MS: String(DEADLINE_MS) });

/** The slow site's latency: one round of A's runs answers within the deadline, a second cannot. */
const LATENCY_MS = 6_000;
const slow = (i: number) => ({ api: '@weather', operation: 'current_weather', input: { city: i % 2 ? 'London' : 'Paris' } });
const fast = { api: '@books', operation: 'get_book', input: { isbn13: '9782918455943' } };

describe('HTTP runs between organizations', () => {
  it("one organization's slow runs hold at most its share: another's query runs at once; a run kept waiting past its deadline is execution_timeout, released", async () => {
    await pool.spawn('worker');
    const url = String((await pool.spawn('api')).started.url);
    const a = await newOrg(1000, 'A');
    const b = await newOrg(100, 'B');
    // Both versions loaded before anything is timed.
    expect((await query(b.api_key, fast, {}, url)).status).toBe(200);
    expect((await query(a.api_key, slow(0), {}, url)).status).toBe(200);
    const before = await balanceOf(a.org_id);

    await demo('/__demo/faults', { host: 'weather.example.test', path_prefix: '/api/v1/current', latency_ms: LATENCY_MS, times: 1000 });
    const started = performance.now();
    const burst = Array.from({ length: 6 }, (_, i) => query(a.api_key, slow(i), {}, url));
    await sleep(1_500);
    const late = await query(b.api_key, fast, {}, url);
    const bDone = performance.now();
    const as = await Promise.all(burst);

    // B's run took a free slot at once: it answered before A's first round did.
    expect(late.status, late.text).toBe(200);
    expect(bDone - started).toBeLessThan(LATENCY_MS);
    // A ran two at a time: the first two answered; the rest could not within the deadline (the
    // second round's website answers after it, the third never got a slot before it).
    const statuses = as.map((r) => r.status).sort();
    expect(statuses).toEqual([200, 200, 504, 504, 504, 504]);
    for (const r of as.filter((x) => x.status === 504)) expect(r.body.error.code).toBe('execution_timeout');
    // Nothing is left reserved; only the two answered runs were charged.
    const after = await balanceOf(a.org_id);
    expect(after.reserved).toBe(0);
    const ids = as.filter((r) => r.status === 504).map((r) => r.body.error.request_id as string);
    const rows = await db().query(`SELECT billing_status FROM requests WHERE id = ANY($1)`, [ids]);
    expect(rows.rows.map((r: { billing_status: string }) => r.billing_status)).toEqual(['released', 'released', 'released', 'released']);
    expect(before.charged).toBeGreaterThan(0); // the warm-up run: one run's cost
    expect(after.charged - before.charged).toBe(2 * before.charged);
  }, 240_000);
});
