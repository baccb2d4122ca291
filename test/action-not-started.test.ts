// An action that never began on the website is the ordinary execution_timeout (nothing charged, the
// reservation released), never action_unconfirmed ("check the website"): whether no worker took its
// step from the browser task queue, or its worker's only Chromium page stayed busy until the action's
// start bound (a browser worker takes a step only when a page is there for it: apps/worker/
// browser-task-slots.ts). One that began and was cut off by its deadline stays action_unconfirmed.
// Pairs of this file's own, with a 10 s deadline and one Chromium page per worker.
import { describe, expect, it } from 'vitest';
import { decodeTimeoutType } from '@temporalio/common';
import { loadConfig } from '../shared/config.ts';
import { addConnection, loadKeyring } from '../shared/db/connections.ts';
import { ACTION_NOT_STARTED_MESSAGE } from '../shared/workflow-contract.ts';
import { balanceOf, db, demo, ledgerOf, newOrg, query, until, type Call } from './helpers/stack.ts';
import { ownPairPool, withTemporal } from './helpers/own-pair.ts';

const DEADLINE_MS = 10_000;
const pool = ownPairPool('action-start', { QUERY_DEADLINE_MS: String(DEADLINE_MS), BROWSER_CONCURRENCY: '1', EXECUTE_HEARTBEAT_TIMEOUT_MS: '2000' });

const SHOP = 'shop.example.test';
const order = { api: '@shop', operation: 'place_order', input: { sku: 'NW-MUG-STL', quantity: 1 } };
const jobSearch = { api: '@jobs', operation: 'search_jobs', input: { keywords: 'typescript', location: 'london' } };

/** An organization with 5 credits and the demo shop's account connected (place_order needs it). */
async function shopOrg() {
  const org = await newOrg(5, 'Shop org');
  await addConnection(db(), await loadKeyring(loadConfig()), { orgId: org.org_id, kind: 'account', name: 'shop_account', site: SHOP, secret: { email: 'demo@shop.example.test', password: 'correct-horse' } });
  return org;
}

async function requestRow(requestId: string) {
  const r = await db().query('SELECT status, billing_status, error_code, workflow_id FROM requests WHERE id = $1', [requestId]);
  return r.rows[0] as { status: string; billing_status: string; error_code: string | null; workflow_id: string };
}

const historyOf = (workflowId: string) => withTemporal(async (c) => (await c.workflow.getHandle(workflowId).fetchHistory()).events ?? []);

/** What the caller, the ledger and the site show of an action that never began: released, uncharged, untouched. */
async function expectNotStarted(res: Call, orgId: string, ordersBefore: number) {
  expect(res.status, res.text).toBe(504);
  expect(res.body.error).toMatchObject({ code: 'execution_timeout', retryable: true, message: ACTION_NOT_STARTED_MESSAGE });
  expect(res.body.error.receipt.billing).toEqual({ status: 'released', reserved_credits: 1, charged_credits: 0 });
  expect(res.headers.get('x-svc-cost-credits')).toBe('0');
  expect(res.headers.get('x-svc-billing-status')).toBeNull();
  const requestId = res.body.error.request_id as string;
  const row = await requestRow(requestId);
  expect({ status: row.status, billing_status: row.billing_status, error_code: row.error_code }).toEqual({ status: 'failed', billing_status: 'released', error_code: 'execution_timeout' });
  expect(await ledgerOf(orgId)).toEqual([
    { request_id: requestId, kind: 'reserve', amount: 1 },
    { request_id: requestId, kind: 'release', amount: 1 },
  ]);
  expect(await balanceOf(orgId)).toEqual({ granted: 5, available: 5, reserved: 0, charged: 0 });
  const state = await demo('/__demo/state');
  expect(state.requests?.[SHOP] ?? 0).toBe(0);
  expect(state.orders).toBe(ordersBefore);
  return row;
}

describe('an action that never began', () => {
  it('no worker takes its browser step (the browser queue unpolled): execution_timeout before the deadline, released, the site untouched', async () => {
    // The worker polls the main queue only: the browser step stays in its task queue.
    const httpOnly = { ...pool.pair, taskQueue: `${pool.pair.taskQueue}-http`, env: { ...pool.pair.env, WORKER_ROLE: 'http' } };
    const [api] = await Promise.all([pool.spawn('api', httpOnly), pool.spawn('worker', httpOnly)]);
    const org = await shopOrg();
    const ordersBefore = (await demo('/__demo/state')).orders as number;
    const key = `never-taken-${Date.now()}`;
    const started = Date.now();
    const res = await query(org.api_key, order, { 'idempotency-key': key }, String(api.started.url));
    const elapsed = Date.now() - started;
    const row = await expectNotStarted(res, org.org_id, ordersBefore);
    expect(elapsed).toBeLessThan(DEADLINE_MS);
    // The server timed the task out SCHEDULE_TO_START, on its first and only attempt; nothing started it.
    const events = await historyOf(row.workflow_id);
    expect(events.filter((e) => e.activityTaskStartedEventAttributes)).toHaveLength(0);
    const timedOut = events.flatMap((e) => (e.activityTaskTimedOutEventAttributes ? [e.activityTaskTimedOutEventAttributes.failure] : []));
    expect(timedOut.map((f) => decodeTimeoutType(f?.timeoutFailureInfo?.timeoutType))).toEqual(['SCHEDULE_TO_START']);
    expect(timedOut[0]?.cause ?? null).toBeNull();
    // As any execution_timeout after reserving, the key keeps its answer.
    const again = await query(org.api_key, order, { 'idempotency-key': key }, String(api.started.url));
    expect(again.status).toBe(504);
    expect(again.headers.get('idempotency-replayed')).toBe('true');
    expect(again.body).toEqual(res.body);
    expect(await ledgerOf(org.org_id)).toHaveLength(2);
  });

  it("the worker's only Chromium page held past the action's start bound: the step waits in the task queue, never taken; execution_timeout before the deadline, released, the site untouched", async () => {
    // One worker (one page); a second API with a long deadline sends the read that holds the page,
    // so it outlives the action's start bound.
    const long = { ...pool.pair, env: { ...pool.pair.env, QUERY_DEADLINE_MS: '60000' } };
    const [api, holdApi] = await Promise.all([pool.spawn('api'), pool.spawn('api', long), pool.spawn('worker')]);
    const [org, holder] = await Promise.all([shopOrg(), newOrg(50, 'Holder org')]);
    const ordersBefore = (await demo('/__demo/state')).orders as number;
    // The job board's listings answer 30 s late: the read holds the page on its wait step.
    await demo('/__demo/faults', { host: 'jobs.example.test', path_prefix: '/api/jobs', latency_ms: 30_000, times: 1 });
    void query(holder.api_key, jobSearch, {}, String(holdApi.started.url)).catch(() => undefined);
    await until(async () => (await demo('/__demo/state')).requests?.['jobs.example.test'] >= 1, 30_000, 100);
    const started = Date.now();
    const res = await query(org.api_key, order, {}, String(api.started.url));
    const elapsed = Date.now() - started;
    const row = await expectNotStarted(res, org.org_id, ordersBefore);
    expect(elapsed).toBeLessThan(DEADLINE_MS);
    // No page, so the worker never took the step: the server timed it out SCHEDULE_TO_START, on its first and only attempt.
    const events = await historyOf(row.workflow_id);
    expect(events.filter((e) => e.activityTaskStartedEventAttributes)).toHaveLength(0);
    const timedOut = events.flatMap((e) => (e.activityTaskTimedOutEventAttributes ? [e.activityTaskTimedOutEventAttributes.failure] : []));
    expect(timedOut.map((f) => decodeTimeoutType(f?.timeoutFailureInfo?.timeoutType))).toEqual(['SCHEDULE_TO_START']);
  });
});

describe('an action that began', () => {
  it('cut off by its deadline while the order is being placed: still action_unconfirmed, released', async () => {
    const [api] = await Promise.all([pool.spawn('api'), pool.spawn('worker')]);
    const org = await shopOrg();
    const ordersBefore = (await demo('/__demo/state')).orders as number;
    // The shop places the order at once but answers only after the deadline.
    await demo('/__demo/faults', { host: SHOP, path_prefix: '/orders', method: 'POST', latency_ms: 20_000, times: 1 });
    const res = await query(org.api_key, order, {}, String(api.started.url));
    expect(res.status, res.text).toBe(422);
    expect(res.body.error).toMatchObject({ code: 'action_unconfirmed', retryable: false });
    expect(res.body.error.receipt.billing).toEqual({ status: 'released', reserved_credits: 1, charged_credits: 0 });
    // It did happen: the order is on the site, and the caller was told to check there.
    expect((await demo('/__demo/state')).orders).toBe(ordersBefore + 1);
    const row = await requestRow(res.body.error.request_id);
    expect({ status: row.status, billing_status: row.billing_status, error_code: row.error_code }).toEqual({ status: 'failed', billing_status: 'released', error_code: 'action_unconfirmed' });
    expect(await balanceOf(org.org_id)).toEqual({ granted: 5, available: 5, reserved: 0, charged: 0 });
    // It started on its first attempt and was cut off by the server's timeout at the deadline.
    const events = await historyOf(row.workflow_id);
    const timedOut = events.flatMap((e) => (e.activityTaskTimedOutEventAttributes ? [decodeTimeoutType(e.activityTaskTimedOutEventAttributes.failure?.timeoutFailureInfo?.timeoutType)] : []));
    expect(timedOut).toHaveLength(1);
    expect(timedOut[0]).not.toBe('SCHEDULE_TO_START');
  });
});
