// A workflow's completed runs are counted for the catalog (`completed_runs`, the `popular` order)
// without any organization's answer waiting on a row another organization's runs share: a query's
// own transaction only appends its run (catalog_run_pending), and the API folds what is pending into
// the counters every CATALOG_RUN_FOLD_MS (shared/db/catalog.ts, migration 1700000002300).
import { randomBytes } from 'node:crypto';
import { afterAll, describe, expect, it } from 'vitest';
import { weatherApi } from '../shared/catalog/demo/weather.ts';
import { publishApi } from '../shared/db/catalog.ts';
import { createPool } from '../shared/db/pool.ts';
import { foldAllRuns } from './helpers/run-counts.ts';
import { call, closeDb, db, newOrg, query, stack, until, weatherOperationsWithoutAlerts } from './helpers/stack.ts';

afterAll(closeDb);

const runsShown = async (handle: string): Promise<number> => {
  const res = await call('GET', `/v1/catalog?api=${encodeURIComponent(handle)}`);
  expect(res.status).toBe(200);
  return res.body.data.items[0].completed_runs as number;
};

describe('counting completed runs', () => {
  it("one organization's answer never waits on the API's run counter; the run is counted once, shown within the fold interval", async () => {
    const handle = `@zrc${randomBytes(4).toString('hex').replace(/[0-9]/g, 'q')}`;
    await publishApi(db(), { ...weatherApi, handle, operations: weatherOperationsWithoutAlerts(), name: `${handle.slice(1)} weather`, description: 'Synthetic run-count fixture.' });
    const body = { api: handle, operation: 'current_weather', input: { city: 'London' } };
    const a = await newOrg(5);
    const b = await newOrg(5);
    // A first run makes the API's counter row.
    expect((await query(a.api_key, body)).status).toBe(200);
    await foldAllRuns(db());
    expect(await runsShown(handle)).toBe(1);

    // Someone holds that counter row (a rating's transaction, a slow statement, a fold): another
    // organization's query of the same API is answered all the same.
    const holder = createPool(stack().databaseUrl, 1);
    const held = await holder.connect();
    try {
      await held.query('BEGIN');
      await held.query(`SELECT 1 FROM catalog_api_stats st JOIN apis x ON x.id = st.api_id WHERE x.handle = $1 FOR UPDATE OF st`, [handle]);
      const started = Date.now();
      const answer = await Promise.race([query(b.api_key, body), new Promise<'held'>((r) => setTimeout(() => r('held'), 10_000))]);
      expect(answer, 'the query waited on the counter row').not.toBe('held');
      expect((answer as Awaited<ReturnType<typeof query>>).status).toBe(200);
      expect(Date.now() - started).toBeLessThan(10_000);
      // Not counted yet: the fold waits for the row like anyone else.
      expect(await runsShown(handle)).toBe(1);
    } finally {
      await held.query('ROLLBACK').catch(() => undefined);
      held.release();
      await holder.end();
    }
    // The API's own fold counts it, once, within a few of its intervals (no fold from the test).
    await until(async () => (await runsShown(handle)) === 2, 15_000, 200);
    await foldAllRuns(db());
    expect(await runsShown(handle)).toBe(2);
    // Completion times for `popular` cursors: summed per 10-second bucket, one row per bucket.
    const events = await db().query(
      `SELECT count(*)::int AS rows, sum(n)::int AS n FROM catalog_run_buckets e JOIN apis x ON x.id = e.api_id WHERE x.handle = $1`,
      [handle],
    );
    expect(events.rows[0].n).toBe(2);
    expect(events.rows[0].rows).toBeLessThanOrEqual(2);
  });
});
