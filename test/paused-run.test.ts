// A run an operator pauses (Temporal's workflow pause) is not a stopped run: it can still reserve,
// run the site and settle once unpaused. A keyed retry meeting it must say request_in_progress, not
// take it for closed, release its reservation under it and interrupt its request (the run then
// ran the site anyway, uncharged, and its caller was told it would never run).
import { randomUUID } from 'node:crypto';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Connection } from '@temporalio/client';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { startTemporalDevServer, type TemporalDevServer } from '../shared/infra/temporal-dev-server.ts';
import { balanceOf, closeDb, db, demo, ledgerOf, newOrg, ownPair, query, until } from './helpers/stack.ts';
import { processPool } from './helpers/processes.ts';
import { addConnection, loadKeyring } from '../shared/db/connections.ts';
import { loadConfig } from '../shared/config.ts';

const jobSearch = { api: '@jobs', operation: 'search_jobs', input: { keywords: 'typescript', location: 'london' } };
// An action on the browser engine: reserved in the run's first workflow task, then its execute step
// waits on the browser task queue (a read-only browser operation reserves inside its one browser step).
const order = { api: '@shop', operation: 'place_order', input: { sku: 'NW-MUG-STL', quantity: 1 } };
const SHOP = 'shop.example.test';

// Workflow pause is experimental and off by default: a Temporal server of this file's own with it on.
let temporal: TemporalDevServer;
let dataDir: string;
let connection: Connection;
let pair: ReturnType<typeof ownPair>;
const pool = processPool(() => pair);

beforeAll(async () => {
  dataDir = await fs.mkdtemp(path.join(os.tmpdir(), 'wqs-paused-'));
  temporal = await startTemporalDevServer({ dataDir, dynamicConfig: { 'frontend.WorkflowPauseEnabled': true } });
  connection = await Connection.connect({ address: temporal.address });
  pair = { ...ownPair('paused'), temporalAddress: temporal.address };
});
beforeEach(async () => {
  await demo('/__demo/reset');
});
afterEach(() => pool.killAll());
afterAll(async () => {
  await connection?.close();
  await temporal?.stop();
  await fs.rm(dataDir, { recursive: true, force: true }).catch(() => {});
  await closeDb();
});

const pauseRequest = (workflowId: string) => ({ namespace: 'default', workflowId, identity: 'paused-run test', reason: 'operator pause', requestId: randomUUID() });

describe('a paused run', () => {
  it('a keyed retry while its run is paused after reserving: request_in_progress, nothing released; unpaused, it finishes and is charged once', async () => {
    // The worker polls the main queue only: the run reserves, and its browser step waits unpolled.
    const api = await pool.spawn('api');
    await pool.spawn('worker', { ...pair, env: { WORKER_ROLE: 'http' } });
    const url = String(api.started.url);
    const org = await newOrg(50);
    await addConnection(db(), await loadKeyring(loadConfig()), { orgId: org.org_id, kind: 'account', name: 'shop_account', site: SHOP, secret: { email: 'demo@shop.example.test', password: 'correct-horse' } });
    const key = `paused-${Date.now()}`;
    const pending = query(org.api_key, order, { 'idempotency-key': key }, url);
    pending.catch(() => undefined); // awaited below; a failed assertion before then kills the API under it
    const row = await until(async () => {
      const r = await db().query(`SELECT id, workflow_id, reserved_credits FROM requests WHERE org_id = $1 AND status = 'processing'`, [org.org_id]);
      return r.rows[0] as { id: string; workflow_id: string; reserved_credits: number } | undefined;
    }, 60_000);
    const price = Number(row.reserved_credits);

    await connection.workflowService.pauseWorkflowExecution(pauseRequest(row.workflow_id));
    const retry = await query(org.api_key, order, { 'idempotency-key': key }, url);
    expect(retry.status, retry.text).toBe(409);
    expect(retry.body.error.code).toBe('request_in_progress');
    const held = (await db().query('SELECT status, billing_status FROM requests WHERE id = $1', [row.id])).rows[0];
    expect(held).toEqual({ status: 'processing', billing_status: 'pending' });
    expect(await ledgerOf(org.org_id)).toEqual([{ request_id: row.id, kind: 'reserve', amount: price }]);

    await connection.workflowService.unpauseWorkflowExecution({ ...pauseRequest(row.workflow_id), reason: 'resume' });
    await pool.spawn('worker', { ...pair, env: { WORKER_ROLE: 'browser' } });
    const res = await pending;
    expect(res.status, res.text).toBe(200);
    expect(res.body.data.receipt.billing).toEqual({ status: 'settled', reserved_credits: price, charged_credits: price });
    const again = await query(org.api_key, order, { 'idempotency-key': key }, url);
    expect(again.status).toBe(200);
    expect(again.headers.get('idempotency-replayed')).toBe('true');
    expect(again.body).toEqual(res.body);
    expect(await ledgerOf(org.org_id)).toEqual([
      { request_id: row.id, kind: 'reserve', amount: price },
      { request_id: row.id, kind: 'settle', amount: price },
    ]);
    expect(await balanceOf(org.org_id)).toEqual({ granted: 50, available: 50 - price, reserved: 0, charged: price });
    expect((await demo('/__demo/state')).orders).toBe(1);
  });

  it('a keyed retry while a read-only browser run is paused before its one browser step: request_in_progress, nothing interrupted; unpaused, charged once', async () => {
    // The worker polls the main queue only: the run's one step (reserve, browser run, settle) waits unpolled.
    const api = await pool.spawn('api');
    await pool.spawn('worker', { ...pair, env: { WORKER_ROLE: 'http' } });
    const url = String(api.started.url);
    const org = await newOrg(50);
    const key = `paused-read-${Date.now()}`;
    const pending = query(org.api_key, jobSearch, { 'idempotency-key': key }, url);
    pending.catch(() => undefined);
    const row = await until(async () => {
      const r = await db().query(`SELECT id, workflow_id FROM requests WHERE org_id = $1`, [org.org_id]);
      return r.rows[0] as { id: string; workflow_id: string } | undefined;
    }, 60_000);
    // Its step scheduled on the browser queue, then the run paused.
    await until(async () => {
      // The claim's row comes before the workflow's start.
      const d = await connection.workflowService.describeWorkflowExecution({ namespace: 'default', execution: { workflowId: row.workflow_id } }).catch(() => null);
      return (d?.pendingActivities ?? []).some((a) => a.activityType?.name === 'runReadQuery');
    }, 30_000);
    await connection.workflowService.pauseWorkflowExecution(pauseRequest(row.workflow_id));
    const retry = await query(org.api_key, jobSearch, { 'idempotency-key': key }, url);
    expect(retry.status, retry.text).toBe(409);
    expect(retry.body.error.code).toBe('request_in_progress');
    expect((await db().query('SELECT status, billing_status FROM requests WHERE id = $1', [row.id])).rows[0]).toEqual({ status: 'reserving', billing_status: 'not_started' });
    expect(await ledgerOf(org.org_id)).toEqual([]);

    await connection.workflowService.unpauseWorkflowExecution({ ...pauseRequest(row.workflow_id), reason: 'resume' });
    await pool.spawn('worker', { ...pair, env: { WORKER_ROLE: 'browser' } });
    const res = await pending;
    expect(res.status, res.text).toBe(200);
    const price = res.body.data.receipt.billing.reserved_credits as number;
    expect(res.body.data.receipt.billing).toEqual({ status: 'settled', reserved_credits: price, charged_credits: price });
    expect(await ledgerOf(org.org_id)).toEqual([
      { request_id: row.id, kind: 'reserve', amount: price },
      { request_id: row.id, kind: 'settle', amount: price },
    ]);
  });
});
