// Fairness between organizations on a shared worker: a browser worker with one Chromium page (one
// task slot for queries, browser-task-slots.ts) on a pair of this file's own, one organization's
// burst queued on its browser task queue, and another organization's single query sent after it.
// Every query starts with its organization as the fairness key (apps/api/services/dispatch.ts) and
// the stack's Temporal server runs with matching.enableFairness
// (shared/infra/temporal-dev-server.ts), so the backlog is dispatched round-robin between the two:
// the late query does not wait for the whole burst.
import { describe, expect, it } from 'vitest';
import { newOrg, query, sleep } from './helpers/stack.ts';
import { ownPairPool, withTemporal } from './helpers/own-pair.ts';

const search = (n: number) => ({ api: '@jobs', operation: 'search_jobs', input: { keywords: n % 2 ? 'typescript' : 'python', location: 'london' } });
const BURST = 8;

const pool = ownPairPool('fairness', { BROWSER_CONCURRENCY: '1' });

describe('fairness between organizations', () => {
  it("one organization's burst on the browser queue does not make another's query wait behind all of it", async () => {
    await pool.spawn('worker');
    const url = String((await pool.spawn('api')).started.url);
    const busy = await newOrg(100, 'Busy');
    const other = await newOrg(100, 'Other');

    const finished: string[] = [];
    const run = async (key: string, who: string, n: number) => {
      const r = await query(key, search(n), {}, url);
      expect(r.status, r.text).toBe(200);
      finished.push(who);
      return r;
    };
    const burst = Array.from({ length: BURST }, (_, i) => run(busy.api_key, `busy-${i}`, i));
    // The burst is queued (two run at a time) before the other organization asks.
    await sleep(1_500);
    const late = await run(other.api_key, 'other', 0);
    await Promise.all(burst);

    // First come, first served, it would finish last; round-robin, it is dispatched as soon as a
    // slot frees after it arrived, with at most a few of the burst ahead of it.
    const rank = finished.indexOf('other') + 1;
    expect(rank, finished.join(' ')).toBeLessThanOrEqual(5);

    // The fairness key is the organization's: on the run (its activities inherit it).
    const keys = await withTemporal(async (c) => {
      const out: string[] = [];
      for await (const wf of c.workflow.list({ query: `WorkflowType = 'queryWorkflow' AND TaskQueue = '${pool.pair.taskQueue}'` })) {
        const d = await c.workflow.getHandle(wf.workflowId, wf.runId).describe();
        out.push(`${d.priority?.fairnessKey}`);
      }
      return out;
    });
    expect(keys.sort()).toEqual([...Array<string>(BURST).fill(busy.org_id), other.org_id].sort());
  }, 120_000);
});
