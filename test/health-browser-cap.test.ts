// Health checks never hold every browser page, on the real stack: a worker with two Chromium pages,
// health checks of two browser operations whose website holds its pages open until the test lets
// go, and a customer's query of a browser operation meanwhile. The browser pool's Semaphore caps
// the health party at pages − 1 (activities/engines/browser-engine.ts, HEALTH_PARTY): one health
// check holds a page, the other waits for one, and the query takes the page left while no health
// check has finished. The demo site counts the held pages itself (`/__probe/hold`, a key of this
// test's own: apps/demo-sites/lib/holds.ts), so nothing here depends on timing to pass.
import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import type { ApiDefinition } from '../shared/catalog/types.ts';
import { validateOperationVersion } from '../shared/catalog/validate.ts';
import { publishApi } from '../shared/db/catalog.ts';
import type { Recipe } from '../shared/recipes/schema.ts';
import type { healthCheckWorkflow } from '../workflows/health-check-workflow.ts';
import { ownPairPool, withTemporal } from './helpers/own-pair.ts';
import { db, newOrg, query, sleep, stack, until } from './helpers/stack.ts';

/** Chromium pages of the worker: the fewest with one for health checks and one kept for queries. */
const PAGES = 2;
// A shorter query deadline: a query stuck behind the health checks fails in 30 s, not 170 (a query
// on the free page takes a second or two, under load a few more).
// Health lanes as many as the worker's task slots for pages (2 × pages): the third test shows the
// worker keeps slots for queries anyway.
const HEALTH_LANES = 2 * PAGES;
const pool = ownPairPool('health-cap', { BROWSER_CONCURRENCY: String(PAGES), QUERY_DEADLINE_MS: '30000', HEALTH_CHECK_CONCURRENCY: String(HEALTH_LANES) });

const HOST = 'news.example.test';
/** PendingActivityState STARTED (temporal.api.enums.v1): a worker has taken the activity task. */
const ACTIVITY_STARTED = 2;

interface Hold {
  armed: boolean;
  released: boolean;
  requests: number;
  waiting: number;
  max_waiting: number;
}

async function holdControl(path: string, body: unknown): Promise<Hold> {
  const res = await fetch(`${stack().demoOrigin}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  expect(res.ok, await res.clone().text()).toBe(true);
  return (await res.json()) as Hold;
}
const arm = (key: string) => holdControl('/__demo/holds', { key });
const release = (key: string) => holdControl('/__demo/holds/release', { key });
/** What the site saw of `key`'s pages (nothing yet: requests 0). */
async function hold(key: string): Promise<Hold> {
  const res = await fetch(`${stack().demoOrigin}/__demo/holds?key=${key}`);
  if (res.status === 404) return { armed: false, released: false, requests: 0, waiting: 0, max_waiting: 0 };
  return (await res.json()) as Hold;
}

/** A private browser workflow of `orgId`: each operation opens the held page of its input's key; its example uses `healthKey`. */
async function heldWorkflow(orgId: string, handle: string, healthKey: string, operations: string[]): Promise<void> {
  const recipe: Recipe = {
    engine: 'browser',
    hosts: [HOST],
    steps: [
      { type: 'navigate', name: 'Open the held page', url: `http://${HOST}/__probe/hold?key={{input.key}}` },
      { type: 'extract', fields: { key: { type: 'text', selector: '#key' } }, save_as: 'page' },
    ],
    output: '{{vars.page}}',
  };
  const key = { type: 'string', pattern: '^[A-Za-z0-9_-]{1,100}$' };
  const def: ApiDefinition = {
    handle,
    name: 'Held pages',
    description: 'A website whose pages stay loading until the test lets them go.',
    category: 'other',
    website_url: `http://${HOST}/`,
    sites: [{ name: 'Held pages', host: HOST }],
    operations: operations.map((name) => ({
      name,
      label: name,
      description: 'Opens the held page of a key in the browser.',
      cost_credits: 1,
      default_version: 1,
      versions: [
        {
          version: 1,
          input_schema: { type: 'object', additionalProperties: false, required: ['key'], properties: { key } },
          output_schema: { type: 'object', additionalProperties: false, required: ['key'], properties: { key } },
          examples: [{ title: 'The held page', input: { key: healthKey }, output: { key: healthKey } }],
          recipe,
        },
      ],
    })),
  };
  await publishApi(db(), def, { ownerOrgId: orgId, validateRecipe: validateOperationVersion });
}

describe('health checks and the browser pages', () => {
  it(`with ${PAGES} pages, health checks wanting them all hold ${PAGES - 1}: a query meanwhile runs on the page left, before any health check ends`, async () => {
    const [api] = await Promise.all([pool.spawn('api'), pool.spawn('worker')]);
    const apiUrl = String(api.started.url);
    const org = await newOrg(10, 'Health cap org');
    const tag = `${Date.now().toString(36)}-${randomBytes(3).toString('hex')}`;
    const healthKey = `health-cap-${tag}`;
    const queryKey = `query-cap-${tag}`;
    const handle = `@held-${tag}`;
    // As many operations as pages, checked all at once: the health checks want every page.
    const operations = Array.from({ length: PAGES }, (_, i) => `held_page_${i + 1}`);
    await heldWorkflow(org.org_id, handle, healthKey, operations);
    await arm(healthKey);
    const workflowId = `health-cap-${tag}`;
    try {
      await withTemporal(async (client) => {
        // (An example's time limit starts once it has its page; the test below shows it.)
        const run = await client.workflow.start<typeof healthCheckWorkflow>('healthCheckWorkflow', {
          taskQueue: pool.pair.taskQueue,
          workflowId,
          args: [{ apis: [handle], concurrency: PAGES, exampleTimeoutMs: 90_000, browserTaskQueue: `${pool.pair.taskQueue}-browser` }],
        });
        const startedChecks = async () =>
          ((await run.describe()).raw.pendingActivities ?? []).filter((a) => a.activityType?.name === 'runHealthExample' && a.state === ACTIVITY_STARTED).length;

        // Every health check is in the browser worker, and the site holds PAGES − 1 of them open ...
        await until(async () => (await startedChecks()) === PAGES && (await hold(healthKey)).waiting >= PAGES - 1, 30_000, 100);
        // ... and no more: the last one waits for a page (without the cap it takes the last page at once).
        for (const end = Date.now() + 1_500; ; await sleep(100)) {
          expect((await hold(healthKey)).max_waiting, 'health checks held every page').toBe(PAGES - 1);
          if (Date.now() > end) break;
        }

        // A customer's browser query: it runs on the page kept for queries, while the health checks are held.
        const res = await query(org.api_key, { api: handle, operation: operations[0], input: { key: queryKey } }, {}, apiUrl);
        expect(res.status, res.text).toBe(200);
        expect(res.body.data.output).toEqual({ key: queryKey });
        // Its page was loaded from the site, and no health check had ended (none could: all held or waiting).
        expect((await hold(queryKey)).requests).toBe(1);
        expect(await hold(healthKey)).toMatchObject({ requests: PAGES - 1, waiting: PAGES - 1, max_waiting: PAGES - 1 });
        expect(await startedChecks()).toBe(PAGES);
        expect((await run.describe()).status.name).toBe('RUNNING');

        // Let go: the held check ends, the waiting one gets its page, and both are recorded healthy.
        await release(healthKey);
        const summary = await run.result();
        expect(summary.operations.map((o) => ({ operation: o.operation, status: o.status, recorded: o.recorded }))).toEqual(
          operations.map((operation) => ({ operation, status: 'healthy', recorded: true })),
        );
        // Each example loaded its page once; never more than PAGES − 1 at a time.
        expect(await hold(healthKey)).toMatchObject({ requests: PAGES, waiting: 0, max_waiting: PAGES - 1 });
        const rows = await db().query(
          `SELECT o.name, o.health_status, o.verified_at FROM operations o JOIN apis a ON a.id = o.api_id WHERE a.handle = $1 AND a.owner_org_id = $2 ORDER BY o.name`,
          [handle, org.org_id],
        );
        expect(rows.rows.map((r) => [r.name, r.health_status, r.verified_at !== null])).toEqual(operations.map((o) => [o, 'healthy', true]));
      });
    } finally {
      await release(healthKey);
      await withTemporal((c) => c.workflow.getHandle(workflowId).terminate('test over').catch(() => undefined));
      // Out of later health runs of the shared stack.
      await db().query(`UPDATE apis SET status = 'inactive' WHERE handle = $1 AND owner_org_id = $2`, [handle, org.org_id]);
    }
  });

  it(`with ${HEALTH_LANES} health lanes, health examples waiting for a page never take the task slots a query needs`, async () => {
    const [api] = await Promise.all([pool.spawn('api'), pool.spawn('worker')]);
    const org = await newOrg(10, 'Health slots org');
    const tag = `${Date.now().toString(36)}-${randomBytes(3).toString('hex')}`;
    const healthKey = `health-slots-${tag}`;
    const queryKey = `query-slots-${tag}`;
    const handle = `@slots-${tag}`;
    // As many operations as the worker has task slots for its pages, all checked at once.
    const operations = Array.from({ length: HEALTH_LANES }, (_, i) => `held_page_${i + 1}`);
    await heldWorkflow(org.org_id, handle, healthKey, operations);
    await arm(healthKey);
    const workflowId = `health-slots-${tag}`;
    try {
      await withTemporal(async (client) => {
        const run = await client.workflow.start<typeof healthCheckWorkflow>('healthCheckWorkflow', {
          taskQueue: pool.pair.taskQueue,
          workflowId,
          args: [{ apis: [handle], concurrency: HEALTH_LANES, exampleTimeoutMs: 90_000, browserTaskQueue: `${pool.pair.taskQueue}-browser` }],
        });
        const startedChecks = async () =>
          ((await run.describe()).raw.pendingActivities ?? []).filter((a) => a.activityType?.name === 'runHealthExample' && a.state === ACTIVITY_STARTED).length;
        // Every health example is in the worker: one on its page, the others waiting for a page.
        await until(async () => (await startedChecks()) === HEALTH_LANES && (await hold(healthKey)).waiting === PAGES - 1, 30_000, 100);

        // A query meanwhile: the worker takes it (without slots of the health checks' own, they held
        // every slot and the query stayed in Temporal's queue until its deadline) and runs it on the free page.
        const res = await query(org.api_key, { api: handle, operation: operations[0], input: { key: queryKey } }, {}, String(api.started.url));
        expect(res.status, res.text).toBe(200);
        expect(res.body.data.output).toEqual({ key: queryKey });
        expect(await hold(healthKey)).toMatchObject({ requests: PAGES - 1, max_waiting: PAGES - 1 });
        expect(await startedChecks()).toBe(HEALTH_LANES);

        await release(healthKey);
        const summary = await run.result();
        expect(summary.operations.map((o) => o.status)).toEqual(operations.map(() => 'healthy'));
      });
    } finally {
      await release(healthKey);
      await withTemporal((c) => c.workflow.getHandle(workflowId).terminate('test over').catch(() => undefined));
      await db().query(`UPDATE apis SET status = 'inactive' WHERE handle = $1 AND owner_org_id = $2`, [handle, org.org_id]);
    }
  });

  it("a browser example's time limit starts when it has a page: the one that waited behind the other is not timed out", async () => {
    await Promise.all([pool.spawn('api'), pool.spawn('worker')]);
    const org = await newOrg(10, 'Health wait org');
    const tag = `${Date.now().toString(36)}-${randomBytes(3).toString('hex')}`;
    const healthKey = `health-wait-${tag}`;
    const handle = `@wait-${tag}`;
    const operations = ['held_page_1', 'held_page_2'];
    await heldWorkflow(org.org_id, handle, healthKey, operations);
    await arm(healthKey);
    const LIMIT_MS = 20_000;
    const workflowId = `health-wait-${tag}`;
    try {
      await withTemporal(async (client) => {
        const t0 = Date.now();
        const run = await client.workflow.start<typeof healthCheckWorkflow>('healthCheckWorkflow', {
          taskQueue: pool.pair.taskQueue,
          workflowId,
          args: [{ apis: [handle], concurrency: 2, exampleTimeoutMs: LIMIT_MS, browserTaskQueue: `${pool.pair.taskQueue}-browser` }],
        });
        // The first example holds the one page health checks may take; the second waits for it.
        await until(async () => (await hold(healthKey)).waiting === 1, 30_000, 100);
        // Half the limit in, the first is let go (arming the key afresh answers it) and the second,
        // once it has the page, is held in its turn until the limit has passed since both started.
        await sleep(Math.max(0, t0 + LIMIT_MS / 2 - Date.now()));
        await arm(healthKey);
        await until(async () => (await hold(healthKey)).waiting === 1, 30_000, 100);
        await sleep(Math.max(0, t0 + LIMIT_MS + 3_000 - Date.now()));
        await release(healthKey);
        const summary = await run.result();
        // Both healthy: the second ran about 13 s of its 20, after some 10 s of waiting for a page.
        expect(summary.operations.map((o) => ({ operation: o.operation, status: o.status, detail: o.detail }))).toEqual(
          operations.map((operation) => ({ operation, status: 'healthy', detail: '1/1 examples returned their documented output' })),
        );
        expect(Date.now() - t0).toBeGreaterThan(LIMIT_MS);
      });
    } finally {
      await release(healthKey);
      await withTemporal((c) => c.workflow.getHandle(workflowId).terminate('test over').catch(() => undefined));
      await db().query(`UPDATE apis SET status = 'inactive' WHERE handle = $1 AND owner_org_id = $2`, [handle, org.org_id]);
    }
  });
});
