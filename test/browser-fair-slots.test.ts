// Browser runs of one organization never keep another's waiting inside a worker, on the real stack.
// A browser worker takes a task only when a Chromium page is there for it (apps/worker/
// browser-task-slots.ts): the rest wait in Temporal's queue, where the organization is the fairness
// key. With spare task slots, one organization's queued runs would sit in the worker waiting for the
// page, and another's query, taken only when a slot freed, would wait for the page behind them.
// One page here; organization A's queries each hold it for several seconds (a slow website).
import { describe, expect, it } from 'vitest';
import { ownPairPool } from './helpers/own-pair.ts';
import { demo, newOrg, query, sleep } from './helpers/stack.ts';

const pool = ownPairPool('browser-fair', { BROWSER_CONCURRENCY: '1' });

/** The slow site's latency on every request (a search makes several): long enough that the order
 *  of runs, not the machine's load, decides. */
const LATENCY_MS = 4_000;
const slow = (i: number) => ({ api: '@jobs', operation: 'search_jobs', input: { keywords: i % 2 ? 'typescript' : 'python', location: 'london' } });
const fast = { api: '@clinic', operation: 'find_appointments', input: { date: '2026-12-01' } };

describe('browser pages between organizations', () => {
  it("another organization's query gets the page next, ahead of the queries one organization keeps waiting", async () => {
    await pool.spawn('worker');
    const url = String((await pool.spawn('api')).started.url);
    const a = await newOrg(1000, 'A');
    const b = await newOrg(100, 'B');
    // Chromium up and both operations' versions loaded before anything is timed.
    expect((await query(b.api_key, fast, {}, url)).status).toBe(200);
    expect((await query(a.api_key, slow(0), {}, url)).status).toBe(200);

    await demo('/__demo/faults', { host: 'jobs.example.test', path_prefix: '/', latency_ms: LATENCY_MS, times: 1000 });
    const t0 = performance.now();
    const burst = Array.from({ length: 5 }, (_, i) => query(a.api_key, slow(i), {}, url).then((r) => ({ status: r.status, at: performance.now() })));
    await sleep(1_500); // A's first run holds the page; the other four are queued
    const late = await query(b.api_key, fast, {}, url);
    const bDone = performance.now();
    const as = await Promise.all(burst);

    console.log(`B ${Math.round(bDone - t0)} ms; A ${as.map((r) => Math.round(r.at - t0)).join(', ')} ms`);
    expect(late.status, late.text).toBe(200);
    expect(as.map((r) => r.status)).toEqual([200, 200, 200, 200, 200]);
    const aDone = as.map((r) => r.at).sort((x, y) => x - y);
    // B's query waited in Temporal's queue, which serves organizations in turn: at most the run
    // holding the page and the one Temporal had lined up before B went ahead of it, never A's whole
    // queue (with spare task slots, A's runs waited inside the worker, and B's query got the page only
    // when A's third run gave it up). A run of A takes several latencies (a search makes several
    // requests): one latency of margin.
    expect(bDone).toBeLessThan(aDone[2]! - LATENCY_MS);
  }, 240_000);
});
