// Health checks on the real stack: the worker's Schedule, the health-check workflow against the demo
// sites, and what the catalog shows: healthy → failing while a site is down → healthy again.
import { Client, Connection, ScheduleOverlapPolicy } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { healthScheduleId } from '../apps/worker/health-schedule.ts';
import { firstDifference, skipReason } from '../activities/health.ts';
import { OPERATIONS_LISTED, listInSummary, summarize, type HealthCheckInput, type HealthCheckSummary, type healthCheckWorkflow } from '../workflows/health-check-workflow.ts';
import { demoCatalog } from '../shared/catalog/demo/index.ts';
import type { Recipe } from '../shared/recipes/schema.ts';
import { STACK_HEALTH_INTERVAL_SECONDS, call, closeDb, dataConverter, db, demo, stack, until } from './helpers/stack.ts';

const WEATHER = 'weather.example.test';
let connection: Connection;
let client: Client;

beforeAll(async () => {
  connection = await Connection.connect({ address: stack().temporalAddress });
  client = new Client({ connection, dataConverter: await dataConverter() });
  await demo('/__demo/reset');
});
afterAll(async () => {
  await demo('/__demo/reset');
  await connection?.close();
  await closeDb();
});

/** One health run on the stack's worker, started directly (not through the Schedule). */
async function runHealth(input: HealthCheckInput): Promise<HealthCheckSummary> {
  return client.workflow.execute<typeof healthCheckWorkflow>('healthCheckWorkflow', {
    taskQueue: stack().taskQueue,
    workflowId: `health-test-${Date.now()}-${Math.random().toString(36).slice(2, 8)}`,
    args: [{ exampleTimeoutMs: 5_000, concurrency: 4, ...input }],
  });
}

type Health = { status: string; verified_at: string | null };
/** Operation name → health, as the public catalog shows it. */
async function catalogHealth(api: string): Promise<Record<string, Health>> {
  const res = await call('GET', `/v1/catalog/detail?api=${encodeURIComponent(api)}`);
  expect(res.status, res.text).toBe(200);
  return Object.fromEntries((res.body.data.operations as Array<{ operation: string; health: Health }>).map((o) => [o.operation, o.health]));
}

async function detailOf(api: string, operation: string): Promise<string | null> {
  const r = await db().query(
    'SELECT o.health_detail FROM operations o JOIN apis a ON a.id = o.api_id WHERE a.handle = $1 AND a.visibility = $2 AND o.name = $3',
    [api, 'public', operation],
  );
  return r.rows[0]?.health_detail ?? null;
}

const READ_ONLY_WEATHER = ['current_weather', 'forecast', 'weather_alerts'];

describe('health schedule', () => {
  it('the worker created the Schedule: interval from config, overlap SKIP, health-check workflow on the task queue', async () => {
    // The interval the shared worker was configured with (see test/helpers/global-setup.ts).
    const expected = STACK_HEALTH_INTERVAL_SECONDS * 1000;
    const d = await client.schedule.getHandle(healthScheduleId(stack().taskQueue)).describe();
    expect(d.spec.intervals?.map((i) => i.every)).toEqual([expected]);
    expect(d.policies.overlap).toBe(ScheduleOverlapPolicy.SKIP);
    expect(d.state.paused).toBe(false);
    expect(d.action.type).toBe('startWorkflow');
    if (d.action.type !== 'startWorkflow') return;
    expect(d.action.workflowType).toBe('healthCheckWorkflow');
    expect(d.action.taskQueue).toBe(stack().taskQueue);
    expect(d.action.args).toEqual([expect.objectContaining({ browserTaskQueue: `${stack().taskQueue}-browser` })]);
  });

  it("a browser operation's examples run on the browser task queue (the workers with Chromium), an HTTP operation's on the main queue", async () => {
    // Not @weather: its alerts endpoint is rate limited, and the tests below run its examples again.
    const apis = ['@jobs', '@air-quality'];
    const handle = await client.workflow.start<typeof healthCheckWorkflow>('healthCheckWorkflow', {
      taskQueue: stack().taskQueue,
      workflowId: `health-test-queues-${Date.now()}`,
      args: [{ exampleTimeoutMs: 20_000, concurrency: 4, apis, browserTaskQueue: `${stack().taskQueue}-browser` }],
    });
    const summary = await handle.result();
    const engineOf = (api: string, operation: string, version: number) =>
      (demoCatalog.find((a) => a.handle === api)!.operations.find((o) => o.name === operation)!.versions.find((v) => v.version === version)!.recipe as Recipe).engine;
    // Examples each operation ran, by engine (a healthy operation's detail starts "n/n examples").
    const expected = { http: 0, browser: 0 };
    for (const o of summary.operations) {
      if (o.status === 'unverifiable') continue;
      expect(o, o.detail).toMatchObject({ status: 'healthy' });
      expected[engineOf(o.api, o.operation, o.version)] += Number(/^(\d+)\//.exec(o.detail)![1]);
    }
    expect(expected.browser).toBeGreaterThan(0);
    expect(expected.http).toBeGreaterThan(0);
    const scheduled = (await handle.fetchHistory()).events!
      .map((e) => e.activityTaskScheduledEventAttributes)
      .filter((a) => a?.activityType?.name === 'runHealthExample');
    const onQueue = (q: string) => scheduled.filter((a) => a!.taskQueue?.name === q).length;
    expect({ http: onQueue(stack().taskQueue), browser: onQueue(`${stack().taskQueue}-browser`) }).toEqual(expected);
  });

  it('a triggered run records healthy with a recent verified_at in the catalog; action and connection operations are unverifiable', async () => {
    const handle = client.schedule.getHandle(healthScheduleId(stack().taskQueue));
    // Let the run the Schedule took at creation finish first: two runs would share the browsers.
    const earlier = (await handle.describe()).info.recentActions;
    for (const a of earlier) await client.workflow.getHandle(a.action.workflow.workflowId, a.action.workflow.firstExecutionRunId).result();
    const seen = new Set(earlier.map((a) => a.action.workflow.workflowId));
    const t0 = Date.now();
    await handle.trigger();
    // The run the trigger started, then its end.
    const action = await until(async () => (await handle.describe()).info.recentActions.find((a) => !seen.has(a.action.workflow.workflowId)), 30_000);
    const summary = (await client.workflow.getHandle(action.action.workflow.workflowId, action.action.workflow.firstExecutionRunId).result()) as HealthCheckSummary;
    expect(summary.checked).toBeGreaterThanOrEqual(10);

    const weather = await catalogHealth('@weather');
    for (const op of READ_ONLY_WEATHER) {
      expect(weather[op]?.status, `${op}: ${await detailOf('@weather', op)}`).toBe('healthy');
      expect(Date.parse(weather[op]!.verified_at!), op).toBeGreaterThanOrEqual(t0 - 1_000);
    }
    // Needs WEATHER_API_KEY: never run, never verified.
    expect(weather.weather_history).toEqual({ status: 'unverifiable', verified_at: null });
    for (const h of Object.values(await catalogHealth('@books'))) expect(h.status).toBe('healthy');
    // Operations that act on a website are never run by the health check.
    const shopOps = await db().query(
      `SELECT o.name, o.health_status, o.verified_at FROM operations o JOIN apis a ON a.id = o.api_id
        WHERE a.visibility = 'public' AND (o.performs_actions OR jsonb_array_length(o.access) > 0)`,
    );
    expect(shopOps.rowCount).toBeGreaterThan(0);
    for (const r of shopOps.rows) expect([r.name, r.health_status, r.verified_at]).toEqual([r.name, 'unverifiable', null]);
  });
});

describe('health follows the site', () => {
  it('a site answering 503 turns its operations failing (verified_at kept); other sites stay healthy; recovery turns them healthy again', async () => {
    const before = await catalogHealth('@weather');
    for (const op of READ_ONLY_WEATHER) expect(before[op]?.status, `${op}: ${await detailOf('@weather', op)}`).toBe('healthy');

    await demo('/__demo/faults', { host: WEATHER, status: 503 });
    const down = await runHealth({ apis: ['@weather', '@air-quality', '@books'] });
    expect(down.counts.failing).toBe(4);

    const weather = await catalogHealth('@weather');
    for (const op of READ_ONLY_WEATHER) {
      expect(weather[op]?.status, op).toBe('failing');
      // The last fully successful check stays the verified time.
      expect(weather[op]?.verified_at, op).toBe(before[op]!.verified_at);
    }
    expect((await catalogHealth('@air-quality')).air_quality?.status).toBe('failing');
    expect(await detailOf('@weather', 'current_weather')).toMatch(/^0\/2 examples passed; "London now": upstream_http_error/);
    for (const h of Object.values(await catalogHealth('@books'))) expect(h.status).toBe('healthy');

    await demo('/__demo/reset');
    const up = await runHealth({ apis: ['@weather', '@air-quality'] });
    expect(up.counts.failing + up.counts.degraded).toBe(0);
    const after = await catalogHealth('@weather');
    for (const op of READ_ONLY_WEATHER) {
      expect(after[op]?.status, op).toBe('healthy');
      expect(Date.parse(after[op]!.verified_at!), op).toBeGreaterThan(Date.parse(before[op]!.verified_at!));
    }
    // The flaky air-quality endpoint (every third call 503) is healthy thanks to the retries a query gets too.
    expect((await catalogHealth('@air-quality')).air_quality?.status).toBe('healthy');
  });

  it('one failing example of two is degraded', async () => {
    await demo('/__demo/reset');
    // The first current_weather example (London) gets a 404 once: not_found, not retried.
    await demo('/__demo/faults', { host: WEATHER, path_prefix: '/api/v1/current', status: 404, times: 1 });
    const run = await runHealth({ apis: ['@weather'] });
    const current = run.operations.find((o) => o.operation === 'current_weather');
    expect(current?.status).toBe('degraded');
    expect(current?.detail).toMatch(/^1\/2 examples passed; "London now": not_found/);
    expect((await catalogHealth('@weather')).current_weather?.status).toBe('degraded');
    await demo('/__demo/reset');
    await runHealth({ apis: ['@weather'] });
    expect((await catalogHealth('@weather')).current_weather?.status).toBe('healthy');
  });

  it('a website rate-limiting the checks leaves each status as it was: checked, not verified, not failing', async () => {
    await demo('/__demo/reset');
    const before = await catalogHealth('@weather');
    for (const op of READ_ONLY_WEATHER) expect(before[op]?.status, `${op}: ${await detailOf('@weather', op)}`).toBe('healthy');
    await demo('/__demo/faults', { host: WEATHER, status: 429 });
    const t0 = Date.now();
    const run = await runHealth({ apis: ['@weather'] });
    await demo('/__demo/reset');
    expect(run.counts).toMatchObject({ unknown: READ_ONLY_WEATHER.length, healthy: 0, degraded: 0, failing: 0 });
    const after = await catalogHealth('@weather');
    for (const op of READ_ONLY_WEATHER) {
      expect(after[op], op).toEqual(before[op]);
      expect(await detailOf('@weather', op), op).toMatch(/^Not verified: the website rate-limited all \d+ examples; the previous status stands$/);
    }
    // Checked all the same: the next run starts with the operations it did not reach.
    const checked = await db().query(
      `SELECT o.name, o.health_checked_at FROM operations o JOIN apis a ON a.id = o.api_id WHERE a.handle = '@weather' AND a.visibility = 'public' AND o.name = ANY($1)`,
      [READ_ONLY_WEATHER],
    );
    for (const r of checked.rows) expect((r.health_checked_at as Date).getTime(), r.name).toBeGreaterThanOrEqual(t0 - 1_000);
  });

  it('checks the catalog in batches, continuing as new: every operation once, one summary of them all', async () => {
    await demo('/__demo/reset');
    const apis = ['@weather', '@books'];
    const all = await db().query(
      `SELECT a.handle, o.name FROM operations o JOIN apis a ON a.id = o.api_id WHERE a.handle = ANY($1) AND a.status = 'active' AND a.availability = 'available'`,
      [apis],
    );
    expect(all.rowCount).toBeGreaterThan(4);
    const workflowId = `health-test-batches-${Date.now()}`;
    const handle = await client.workflow.start<typeof healthCheckWorkflow>('healthCheckWorkflow', {
      taskQueue: stack().taskQueue,
      workflowId,
      args: [{ apis, batchSize: 2, concurrency: 2, exampleTimeoutMs: 5_000 }],
    });
    const summary = await handle.result();
    // The chain from its first run: every run but the last continued as new.
    let runs = 0;
    for (let runId: string | undefined = handle.firstExecutionRunId; runId; runs++) {
      const history: { events?: Array<{ workflowExecutionContinuedAsNewEventAttributes?: { newExecutionRunId?: string | null } | null; workflowExecutionCompletedEventAttributes?: unknown }> | null } =
        await client.workflow.getHandle(workflowId, runId).fetchHistory();
      const last = history.events!.at(-1)!;
      runId = last.workflowExecutionContinuedAsNewEventAttributes?.newExecutionRunId ?? undefined;
      if (!runId) expect(last.workflowExecutionCompletedEventAttributes, 'the last run completed').toBeTruthy();
    }
    // Two operations a run: at least half as many runs as operations (one more ends on an empty list).
    expect(runs).toBeGreaterThanOrEqual(Math.ceil(all.rowCount! / 2));
    const names = summary.operations.map((o) => `${o.api} ${o.operation}`);
    expect(new Set(names).size).toBe(names.length);
    expect(names.sort()).toEqual(all.rows.map((r) => `${r.handle} ${r.name}`).sort());
    expect(summary.checked).toBe(all.rowCount);
    expect(summary.counts.failing + summary.counts.degraded).toBe(0);
  });

  it("neither an older run finishing late nor a check of a version publish replaced overwrites the operation's health", async () => {
    const r = await db().query(
      `SELECT o.id, o.health_checked_at, o.default_version FROM operations o JOIN apis a ON a.id = o.api_id
        WHERE a.handle = '@weather' AND a.visibility = 'public' AND o.name = 'forecast'`,
    );
    const { id, health_checked_at, default_version } = r.rows[0] as { id: number; health_checked_at: Date; default_version: number };
    const { createHealthActivities } = await import('../activities/health.ts');
    const acts = createHealthActivities({ db: db(), runner: { run: async () => null, close: async () => {} } });
    const failing = { operationId: Number(id), status: 'failing' as const, detail: 'stale', verified: false };
    expect(await acts.recordHealth({ ...failing, checkedAt: health_checked_at.getTime() - 60_000 })).toEqual({ recorded: false });
    expect(await acts.recordHealth({ ...failing, version: default_version + 1, checkedAt: Date.now() })).toEqual({ recorded: false });
    expect((await catalogHealth('@weather')).forecast?.status).toBe('healthy');
  });
});

describe('health helpers', () => {
  it('never runs operations that act or need connections', () => {
    const base = { performs_actions: false, access: [], examples: [{}], available: true };
    expect(skipReason(base)).toBeNull();
    expect(skipReason({ ...base, performs_actions: true })).toMatch(/Performs actions/);
    expect(skipReason({ ...base, access: [{ kind: 'access_key', name: 'K', site: 'x' }] })).toMatch(/Needs a connection \(K\)/);
    expect(skipReason({ ...base, examples: [] })).toMatch(/No verified examples/);
  });

  it('sets aside examples the website rate-limited: they neither pass nor fail, and alone leave the status as it was', () => {
    const target = { operationId: 1, api: '@x', operation: 'op', version: 1, exampleTitles: ['A', 'B'], skipReason: null };
    const ok = { ok: true, ms: 1 };
    const limited = { ok: false, ms: 1, code: 'source_rate_limited', detail: 'The website is rate-limiting' };
    const broken = { ok: false, ms: 1, code: 'upstream_http_error', detail: '500' };
    expect(summarize(target, [ok, ok])).toEqual({ status: 'healthy', detail: '2/2 examples returned their documented output', verified: true });
    // Healthy on the one conclusive example, but not every example was verified.
    expect(summarize(target, [limited, ok])).toEqual({ status: 'healthy', detail: '1/1 examples returned their documented output; 1 rate-limited by the website, not counted', verified: false });
    expect(summarize(target, [limited, broken])).toEqual({ status: 'failing', detail: '0/1 examples passed; "B": upstream_http_error (500); 1 rate-limited by the website, not counted', verified: false });
    expect(summarize(target, [ok, broken])).toMatchObject({ status: 'degraded', verified: false });
    expect(summarize(target, [limited, limited])).toEqual({ status: null, detail: 'Not verified: the website rate-limited all 2 examples; the previous status stands', verified: false });
  });

  it("a summary names at most OPERATIONS_LISTED operations, the ones not healthy before healthy ones", () => {
    const summary: HealthCheckSummary = { checked: 0, counts: { unknown: 0, healthy: 0, degraded: 0, failing: 0, unverifiable: 0 }, operations: [] };
    const op = (i: number, status: 'healthy' | 'failing') => ({ api: '@x', operation: `op${i}`, version: 1, status, detail: '', recorded: true });
    for (let i = 0; i < OPERATIONS_LISTED; i++) listInSummary(summary, op(i, 'healthy'));
    listInSummary(summary, op(OPERATIONS_LISTED, 'healthy'));
    listInSummary(summary, op(OPERATIONS_LISTED + 1, 'failing'));
    expect(summary.operations).toHaveLength(OPERATIONS_LISTED);
    expect(summary.omitted).toBe(2);
    expect(summary.operations.filter((o) => o.status === 'failing').map((o) => o.operation)).toEqual([`op${OPERATIONS_LISTED + 1}`]);
    expect(summary.operations.some((o) => o.operation === `op${OPERATIONS_LISTED}`)).toBe(false);
  });

  it('names the first difference of an output', () => {
    expect(firstDifference({ a: 1, b: [1, 2] }, { a: 1, b: [1, 2] })).toBeNull();
    expect(firstDifference({ a: 1, b: [1, 3] }, { a: 1, b: [1, 2] })).toBe('/b/1');
    expect(firstDifference({ a: 1 }, { a: 1, c: 2 })).toBe('/c');
  });
});

describe('health targets', () => {
  it('lists the least recently checked operations first, whatever their handle', async () => {
    const ops = `SELECT o.id FROM operations o JOIN apis a ON a.id = o.api_id WHERE a.handle = $1`;
    const saved = await db().query(`SELECT o.id, o.health_checked_at FROM operations o JOIN apis a ON a.id = o.api_id WHERE a.handle IN ('@books', '@weather')`);
    try {
      // @books sorts first by handle, but was checked just now; @weather a day ago.
      await db().query(`UPDATE operations SET health_checked_at = now() WHERE id IN (${ops})`, ['@books']);
      await db().query(`UPDATE operations SET health_checked_at = now() - interval '1 day' WHERE id IN (${ops})`, ['@weather']);
      const { createHealthActivities } = await import('../activities/health.ts');
      const acts = createHealthActivities({ db: db(), runner: { run: async () => null, close: async () => {} } });
      const apis = (await acts.listHealthTargets({ apis: ['@books', '@weather'] })).map((t) => t.api);
      expect(apis.length).toBeGreaterThan(2);
      const firstBooks = apis.indexOf('@books');
      expect(firstBooks).toBeGreaterThan(0);
      expect(apis.slice(0, firstBooks).every((a) => a === '@weather')).toBe(true);
      expect(apis.slice(firstBooks).every((a) => a === '@books')).toBe(true);
    } finally {
      for (const row of saved.rows) await db().query('UPDATE operations SET health_checked_at = $2 WHERE id = $1', [row.id, row.health_checked_at]);
    }
  });
});
