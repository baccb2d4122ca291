// Maintenance on the real stack: an API/worker pair of our own whose worker runs the maintenance
// Schedule every 2 s. Requests left unresolved are settled from their workflow's real state
// (released and `interrupted`, or the completed workflow's envelope written); running ones are left
// alone; retained results are deleted after their retention and their key can run again.
import { createHash } from 'node:crypto';
import { Client, Connection, ScheduleOverlapPolicy } from '@temporalio/client';
import { ApplicationFailure } from '@temporalio/common';
import { NativeConnection, Worker } from '@temporalio/worker';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { maintenanceScheduleId } from '../apps/worker/maintenance-schedule.ts';
import { envelopeOf, type ReconciledRequest } from '../activities/maintenance.ts';
import type { MaintenanceSummary, maintenanceWorkflow } from '../workflows/maintenance-workflow.ts';
import type { MaintenanceActivities } from '../activities/maintenance.ts';
import { grantCredits, release, releaseAndInterrupt, reserve } from '../shared/db/credits.ts';
import { listStaleUnresolved } from '../shared/db/requests.ts';
import { newRequestId, queryWorkflowId, sha256Hex } from '../shared/ids.ts';
import { balanceOf, call, closeDb, dataConverter, db, demo, ledgerDb, ledgerOf, newOrg, ownPair, query, until } from './helpers/stack.ts';
import { processPool, type ServiceProcess } from './helpers/processes.ts';
import { signedIn } from './helpers/console-http.ts';

const sha256Base64url = (v: string) => createHash('sha256').update(v).digest('base64url');

const london = { api: '@weather', operation: 'current_weather', input: { city: 'London' } };
const INTERVAL_SECONDS = 2;

let pair: ReturnType<typeof ownPair>;
const pool = processPool(() => pair);
let api: ServiceProcess;
let connection: Connection;
let client: Client;
const orgs: string[] = [];
const key = () => `reconciler-${Date.now()}-${Math.random().toString(36).slice(2, 8)}`;

beforeAll(async () => {
  // The query deadline stays 170 s: rows are aged past it by moving created_at back, so only the
  // rows a test ages (never one of another test still running) are due.
  pair = ownPair('reconciler', {
    RECONCILE_ENABLED: 'true',
    RECONCILE_INTERVAL_SECONDS: String(INTERVAL_SECONDS),
    RECONCILE_MARGIN_MS: '1000',
    PLAN_CONCURRENCY: '2',
  });
  connection = await Connection.connect({ address: pair.temporalAddress });
  client = new Client({ connection, dataConverter: await dataConverter() });
  [api] = await Promise.all([pool.spawn('api'), pool.spawn('worker')]);
});
afterAll(async () => {
  await pool.killAll();
  // The Schedule outlives the worker: without it, it would keep starting runs nobody picks up.
  await client?.schedule.getHandle(maintenanceScheduleId(pair.taskQueue)).delete().catch(() => {});
  await connection?.close();
  await demo('/__demo/reset');
  await closeDb();
});

async function org(credits = 5) {
  const o = await newOrg(credits, 'Reconciler org');
  orgs.push(o.org_id);
  return o;
}

const schedule = () => client.schedule.getHandle(maintenanceScheduleId(pair.taskQueue));

/** Summaries of the Schedule's recent finished runs, newest first. */
async function recentSummaries(): Promise<Array<{ takenAt: Date; summary: MaintenanceSummary }>> {
  const actions = (await schedule().describe()).info.recentActions;
  const out: Array<{ takenAt: Date; summary: MaintenanceSummary }> = [];
  for (const a of actions) {
    const h = client.workflow.getHandle(a.action.workflow.workflowId, a.action.workflow.firstExecutionRunId);
    if ((await h.describe()).status.name !== 'COMPLETED') continue;
    out.push({ takenAt: a.takenAt, summary: (await h.result()) as MaintenanceSummary });
  }
  return out.sort((x, y) => y.takenAt.getTime() - x.takenAt.getTime());
}

/** The first run taken after now, awaited: everything changed before the call is in its view. */
async function nextRun(): Promise<MaintenanceSummary> {
  const t0 = Date.now();
  await schedule().trigger();
  const action = await until(async () => (await schedule().describe()).info.recentActions.find((a) => a.takenAt.getTime() >= t0), 60_000, 300);
  return (await client.workflow.getHandle(action.action.workflow.workflowId, action.action.workflow.firstExecutionRunId).result()) as MaintenanceSummary;
}

const entriesOf = (s: MaintenanceSummary, requestId: string): ReconciledRequest[] =>
  'requests' in s.reconcile ? s.reconcile.requests.filter((r) => r.request_id === requestId) : [];

/** What the run that settled `requestId` reported about it. */
async function reportedFor(requestId: string, outcome: ReconciledRequest['outcome']): Promise<ReconciledRequest> {
  return until(async () => {
    for (const { summary } of await recentSummaries()) {
      const hit = entriesOf(summary, requestId).find((e) => e.outcome === outcome);
      if (hit) return hit;
    }
    return undefined;
  }, 60_000, 500);
}

async function row(id: string) {
  const r = await db().query('SELECT * FROM requests WHERE id = $1', [id]);
  return r.rows[0];
}

async function ageRequest(id: string) {
  await db().query(`UPDATE requests SET created_at = now() - interval '10 minutes' WHERE id = $1`, [id]);
}

/** A claim inserted exactly as the API inserts it, whose workflow is never started (the API died). */
async function insertClaim(orgId: string, o: { keyHash?: string; fingerprint?: string; workflowId?: string; aged?: boolean } = {}) {
  const id = newRequestId();
  const workflowId = o.workflowId ?? queryWorkflowId(orgId, id, o.keyHash ?? null);
  await db().query(
    `INSERT INTO requests (id, org_id, idempotency_key_hash, fingerprint, workflow_id, api, operation, performs_actions, is_public_api, status, created_at)
     VALUES ($1, $2, $3, $4, $5, '@weather', 'current_weather', false, true, 'reserving', now() - $6::int * interval '1 minute')`,
    [id, orgId, o.keyHash ?? null, o.fingerprint ?? null, workflowId, o.aged ? 10 : 0],
  );
  return { id, workflowId };
}

describe('maintenance schedule', () => {
  it('the worker created the Schedule: interval from config, overlap SKIP, maintenance workflow on its task queue', async () => {
    const d = await schedule().describe();
    expect(d.spec.intervals?.map((i) => i.every)).toEqual([INTERVAL_SECONDS * 1000]);
    expect(d.policies.overlap).toBe(ScheduleOverlapPolicy.SKIP);
    expect(d.action.type).toBe('startWorkflow');
    if (d.action.type !== 'startWorkflow') return;
    expect(d.action.workflowType).toBe('maintenanceWorkflow');
    expect(d.action.taskQueue).toBe(pair.taskQueue);
    // Deadline (default 170 s) plus the configured margin.
    expect(d.action.args?.[0]).toMatchObject({ reconcileOlderThanMs: 171_000, resultRetentionMs: 24 * 3_600_000 });
    const run = await nextRun();
    expect(run.reconcile).toHaveProperty('counts');
    expect(run.retention).toHaveProperty('results_deleted');
  });
});

describe('reconciler', () => {
  it('a running query terminated by an operator while no API waits: released once and interrupted', async () => {
    // The site answers after 20 s (long enough to stop the run first; a pending reply keeps the
    // demo server, and so the test run, from closing until then, so it runs early in the file).
    const o = await org();
    const ownApi = await pool.spawn('api');
    await demo('/__demo/faults', { host: 'weather.example.test', path_prefix: '/api/v1/current', latency_ms: 20_000, times: 1 });
    const pending = query(o.api_key, london, { 'idempotency-key': key() }, String(ownApi.started.url)).catch(() => null);
    const r0 = await until(async () => {
      const r = await db().query(`SELECT id, workflow_id FROM requests WHERE org_id = $1 AND status = 'processing'`, [o.org_id]);
      return r.rows[0] as { id: string; workflow_id: string } | undefined;
    });
    // Nobody waits for it any more, then an operator stops the run.
    await ownApi.kill('SIGKILL');
    await pending;
    await client.workflow.getHandle(r0.workflow_id).terminate('test: operator stopped the run');
    expect(await balanceOf(o.org_id)).toEqual({ granted: 5, available: 4, reserved: 1, charged: 0 });
    // Within its deadline the reconciler does not touch it.
    await nextRun();
    expect((await row(r0.id)).status).toBe('processing');

    await ageRequest(r0.id);
    const e = await reportedFor(r0.id, 'interrupted');
    expect(e).toMatchObject({ workflow: 'TERMINATED', released_credits: 1 });
    const r = await row(r0.id);
    expect([r.status, r.error_code, r.billing_status, Number(r.charged_credits)]).toEqual(['interrupted', 'request_interrupted', 'released', 0]);
    expect(await ledgerOf(o.org_id)).toEqual([
      { request_id: r0.id, kind: 'reserve', amount: 1 },
      { request_id: r0.id, kind: 'release', amount: 1 },
    ]);
    expect(await balanceOf(o.org_id)).toEqual({ granted: 5, available: 5, reserved: 0, charged: 0 });
    // Later runs change nothing: released once.
    await nextRun();
    expect(await ledgerOf(o.org_id)).toHaveLength(2);
    await demo('/__demo/reset');
  });

  it('claims stuck in `reserving` with no workflow lock the organization out until they are interrupted; then it runs again', async () => {
    const o = await org();
    // The body's fingerprint, as the API stores it with a key.
    const ref = await query(o.api_key, london, { 'idempotency-key': key() }, String(api.started.url));
    expect(ref.status, ref.text).toBe(200);
    const { fingerprint } = await row(ref.body.data.receipt.request_id);
    const k = key();
    const keyed = await insertClaim(o.org_id, { keyHash: sha256Hex(k), fingerprint });
    const unkeyed = await insertClaim(o.org_id);

    // Two unresolved rows fill the plan's two running slots.
    const locked = await query(o.api_key, london, {}, String(api.started.url));
    expect(locked.status, locked.text).toBe(429);
    expect(locked.body.error.code).toBe('organization_concurrency_limit');
    // Younger than the deadline plus margin: a run leaves them alone.
    const early = await nextRun();
    expect(entriesOf(early, keyed.id)).toEqual([]);
    expect((await row(keyed.id)).status).toBe('reserving');

    await ageRequest(keyed.id);
    await ageRequest(unkeyed.id);
    for (const c of [keyed, unkeyed]) {
      const e = await reportedFor(c.id, 'interrupted');
      expect(e).toMatchObject({ org_id: o.org_id, workflow: 'NOT_FOUND', released_credits: 0 });
      const r = await row(c.id);
      expect([r.status, r.error_code, r.billing_status, r.result]).toEqual(['interrupted', 'request_interrupted', 'not_started', null]);
    }
    const st = await call('GET', `/v1/query/requests/${keyed.id}`, { key: o.api_key });
    expect(st.body.data).toMatchObject({ status: 'interrupted', error_code: 'request_interrupted', result: null });
    expect(st.body.data.receipt.billing).toEqual({ status: 'not_started', reserved_credits: 0, charged_credits: 0 });
    // The key is never dispatched again.
    const retry = await query(o.api_key, london, { 'idempotency-key': k }, String(api.started.url));
    expect(retry.status, retry.text).toBe(409);
    expect(retry.body.error.code).toBe('request_interrupted');
    // The slots are free again.
    const again = await query(o.api_key, london, {}, String(api.started.url));
    expect(again.status, again.text).toBe(200);
    expect(await balanceOf(o.org_id)).toEqual({ granted: 5, available: 3, reserved: 0, charged: 2 });
    expect((await ledgerOf(o.org_id)).filter((l) => l.request_id === keyed.id || l.request_id === unkeyed.id)).toEqual([]);
  });

  it('a request whose workflow still runs is left alone (reservation kept); once it is stopped it is released', async () => {
    const o = await org();
    const workflowId = `query-${o.org_id}-stillrunning-${Date.now()}`;
    const c = await insertClaim(o.org_id, { workflowId });
    // A workflow no worker polls for: it stays running.
    await client.workflow.start('queryWorkflow', { taskQueue: `${pair.taskQueue}-nobody`, workflowId, args: [{ requestId: c.id }] });
    try {
      expect(await reserve(ledgerDb(), o.org_id, c.id, 1)).toEqual({ ok: true, reserved: 1 });
      await ageRequest(c.id);
      const run = await nextRun();
      expect(entriesOf(run, c.id)).toMatchObject([{ workflow: 'RUNNING', outcome: 'running', released_credits: 0 }]);
      const r = await row(c.id);
      expect([r.status, r.error_code, r.billing_status]).toEqual(['processing', null, 'pending']);
      expect(r.reconcile_checked_at).not.toBeNull();
      expect(await balanceOf(o.org_id)).toEqual({ granted: 5, available: 4, reserved: 1, charged: 0 });
    } finally {
      await client.workflow.getHandle(workflowId).terminate('test done');
    }
    await reportedFor(c.id, 'interrupted');
    expect(await balanceOf(o.org_id)).toEqual({ granted: 5, available: 5, reserved: 0, charged: 0 });
  });

  it('a stopped run whose reservation was already released (a release whose interruption was lost): interrupted, and no credits reported released again', async () => {
    const o = await org();
    const workflowId = `query-${o.org_id}-released-${Date.now()}`;
    const c = await insertClaim(o.org_id, { workflowId });
    await client.workflow.start('queryWorkflow', { taskQueue: `${pair.taskQueue}-nobody`, workflowId, args: [{ requestId: c.id }] });
    await client.workflow.getHandle(workflowId).terminate('test: operator stopped the run');
    expect(await reserve(ledgerDb(), o.org_id, c.id, 1)).toEqual({ ok: true, reserved: 1 });
    // An API's interruptClosed released, then died before moving the row.
    await release(db(), o.org_id, c.id);
    await ageRequest(c.id);
    const e = await reportedFor(c.id, 'interrupted');
    expect(e).toMatchObject({ workflow: 'TERMINATED', released_credits: 0 });
    expect((await row(c.id)).status).toBe('interrupted');
    expect(await ledgerOf(o.org_id)).toEqual([
      { request_id: c.id, kind: 'reserve', amount: 1 },
      { request_id: c.id, kind: 'release', amount: 1 },
    ]);
    expect(await balanceOf(o.org_id)).toEqual({ granted: 5, available: 5, reserved: 0, charged: 0 });
  });

  it('a completed workflow whose envelope never reached the row: the envelope is written, the ledger untouched', async () => {
    const o = await org();
    const k = key();
    const first = await query(o.api_key, london, { 'idempotency-key': k }, String(api.started.url));
    expect(first.status, first.text).toBe(200);
    const id = first.body.data.receipt.request_id as string;
    // As if the workflow's finalize step had been lost.
    await db().query(
      `UPDATE requests SET status = 'processing', result = NULL, response_status = NULL, result_expires_at = NULL, completed_at = NULL,
              created_at = now() - interval '10 minutes' WHERE id = $1`,
      [id],
    );
    const e = await reportedFor(id, 'finalized');
    expect(e.workflow).toBe('COMPLETED');
    const st = await call('GET', `/v1/query/requests/${id}`, { key: o.api_key });
    expect(st.body.data).toMatchObject({ status: 'succeeded', response_status: 200, error_code: null });
    expect(st.body.data.result).toEqual(first.body);
    expect(Date.parse(st.body.data.result_expires_at)).toBeGreaterThan(Date.now() + 23 * 3_600_000);
    const replay = await query(o.api_key, london, { 'idempotency-key': k }, String(api.started.url));
    expect(replay.headers.get('idempotency-replayed')).toBe('true');
    expect(replay.body).toEqual(first.body);
    expect(await ledgerOf(o.org_id)).toEqual([
      { request_id: id, kind: 'reserve', amount: 1 },
      { request_id: id, kind: 'settle', amount: 1 },
    ]);
  });

  it('a completed workflow that left its reservation open (a run from before late-start-releases): released, then its envelope written', async () => {
    const o = await org(0);
    const first = await query(o.api_key, london, {}, String(api.started.url));
    expect(first.status, first.text).toBe(402);
    const id = first.body.error.request_id as string;
    // As such a run left it: its lost first task had reserved, the retry answered not_started
    // (written only from `reserving`, so never written) and completed.
    await grantCredits(db(), o.org_id, 5, 'test');
    await db().query(
      `UPDATE requests SET status = 'reserving', result = NULL, response_status = NULL, result_expires_at = NULL, completed_at = NULL, error_code = NULL WHERE id = $1`,
      [id],
    );
    expect(await reserve(ledgerDb(), o.org_id, id, 1)).toEqual({ ok: true, reserved: 1 });
    await ageRequest(id);
    const e = await reportedFor(id, 'finalized');
    expect(e).toMatchObject({ workflow: 'COMPLETED', released_credits: 1 });
    const r = await row(id);
    expect([r.status, r.error_code, r.billing_status, r.response_status]).toEqual(['rejected', 'insufficient_credits', 'released', 402]);
    expect(await ledgerOf(o.org_id)).toEqual([
      { request_id: id, kind: 'reserve', amount: 1 },
      { request_id: id, kind: 'release', amount: 1 },
    ]);
    expect(await balanceOf(o.org_id)).toEqual({ granted: 5, available: 5, reserved: 0, charged: 0 });
  });

  it('one organization\'s backlog cannot fill a batch: at most perOrg rows of each, least recently checked and oldest first', async () => {
    // Inside a transaction that is rolled back: the running Schedule never sees these rows.
    const c = await db().connect();
    try {
      await c.query('BEGIN');
      const a = await org();
      const b = await org();
      const ids: Record<string, string> = {};
      const add = async (name: string, orgId: string, daysAgo: number, checked = false) => {
        ids[name] = newRequestId();
        await c.query(
          `INSERT INTO requests (id, org_id, workflow_id, status, created_at, reconcile_checked_at)
           VALUES ($1, $2, $3, 'processing', now() - $4::int * interval '1 day', CASE WHEN $5 THEN now() END)`,
          [ids[name], orgId, `wf-${ids[name]}`, daysAgo, checked],
        );
      };
      for (let i = 0; i < 5; i++) await add(`a${i}`, a.org_id, 100 - i);
      await add('b0', b.org_id, 90);
      await add('b-checked', b.org_id, 200, true);
      // Only rows older than 50 days: none of any other test.
      const got = await listStaleUnresolved(c, { olderThanMs: 50 * 86_400_000, limit: 4, perOrg: 2 });
      expect(got.map((g) => g.id)).toEqual([ids.a0, ids.a1, ids.b0, ids['b-checked']]);
      // One per organization: b's single row comes right after a's oldest, not after all five.
      const one = await listStaleUnresolved(c, { olderThanMs: 50 * 86_400_000, limit: 3, perOrg: 1 });
      expect(one.map((g) => g.id)).toEqual([ids.a0, ids.b0]);
    } finally {
      await c.query('ROLLBACK');
      c.release();
    }
  });
});

describe('retention', () => {
  it('results past their retention are deleted, row and receipt kept; a keyed retry then claims the key again', async () => {
    const o = await org();
    const k = key();
    const keyed = await query(o.api_key, london, { 'idempotency-key': k }, String(api.started.url));
    const unkeyed = await query(o.api_key, london, {}, String(api.started.url));
    expect([keyed.status, unkeyed.status]).toEqual([200, 200]);
    const ids = [keyed.body.data.receipt.request_id as string, unkeyed.body.data.receipt.request_id as string];
    // A kept result is not touched by a run.
    await nextRun();
    expect((await row(ids[0]!)).result).toEqual(keyed.body);

    await db().query(`UPDATE requests SET result_expires_at = now() - interval '1 second', completed_at = now() - interval '25 hours' WHERE id = ANY($1)`, [ids]);
    for (const id of ids) {
      const r = await until(async () => {
        const x = await row(id);
        return x.result === null ? x : undefined;
      }, 60_000, 500);
      expect([r.status, r.response_status, r.idempotency_key_hash, r.error_code, r.billing_status]).toEqual(['succeeded', null, null, null, 'settled']);
    }
    expect((await row(ids[0]!)).fingerprint).not.toBeNull();
    const st = await call('GET', `/v1/query/requests/${ids[0]}`, { key: o.api_key });
    expect(st.status).toBe(200);
    expect(st.body.data).toMatchObject({ status: 'succeeded', result: null, response_status: null, result_expires_at: null });
    expect(st.body.data.receipt.billing).toEqual({ status: 'settled', reserved_credits: 1, charged_credits: 1 });
    const deleted = (await recentSummaries()).map((s) => ('results_deleted' in s.summary.retention ? s.summary.retention.results_deleted : 0));
    expect(deleted.some((n) => n >= 1)).toBe(true);

    // The key runs anew: a new request, charged again.
    const later = await query(o.api_key, london, { 'idempotency-key': k }, String(api.started.url));
    expect(later.status, later.text).toBe(200);
    expect(later.headers.get('idempotency-replayed')).toBe('false');
    expect(later.body.data.receipt.request_id).not.toBe(ids[0]);
    expect(await balanceOf(o.org_id)).toEqual({ granted: 5, available: 2, reserved: 0, charged: 3 });
  });

  it('uploaded files are deleted 30 days after upload; younger files stay', async () => {
    const o = await org();
    const upload = async (name: string) => {
      const res = await fetch(`${String(api.started.url)}/v1/files`, {
        method: 'POST',
        headers: { authorization: `Bearer ${o.api_key}`, 'content-type': 'application/octet-stream', 'x-file-name': name },
        body: `contents of ${name}`,
      });
      expect(res.status).toBe(201);
      return ((await res.json()) as { data: { id: string } }).data.id;
    };
    const [old, young] = [await upload('old.txt'), await upload('young.txt')];
    await db().query(`UPDATE files SET created_at = now() - interval '31 days', expires_at = now() - interval '1 day' WHERE id = $1`, [old]);
    const count = async (id: string) => (await db().query('SELECT count(*)::int AS n FROM files WHERE id = $1', [id])).rows[0].n as number;
    await until(async () => (await count(old)) === 0, 60_000, 500);
    await nextRun();
    expect(await count(young)).toBe(1);
    const files = (await recentSummaries()).map((s) => ('files_deleted' in s.summary.retention ? s.summary.retention.files_deleted : 0));
    expect(files.some((n) => n >= 1)).toBe(true);
  });

  it('catalog run events older than 25 hours are pruned; recent ones stay', async () => {
    // Marker api ids no API has (the table has no foreign key), so no catalog order sees them.
    const [OLD, RECENT] = [-(Date.now() % 1_000_000_000) - 1, -(Date.now() % 1_000_000_000) - 2];
    // Per-run rows (written before migration 1700000002800) and 10-second buckets alike.
    await db().query(
      `INSERT INTO catalog_run_events (api_id, at) VALUES ($1, now() - interval '26 hours'), ($1, now() - interval '30 days'), ($2, now() - interval '2 hours')`,
      [OLD, RECENT],
    );
    await db().query(
      `INSERT INTO catalog_run_buckets (api_id, at, n) VALUES ($1, catalog_event_bucket(now() - interval '26 hours'), 40), ($1, catalog_event_bucket(now() - interval '30 days'), 3), ($2, catalog_event_bucket(now() - interval '2 hours'), 7)`,
      [OLD, RECENT],
    );
    const rows = async (id: number) =>
      (await db().query('SELECT (SELECT count(*) FROM catalog_run_events WHERE api_id = $1)::int + (SELECT count(*) FROM catalog_run_buckets WHERE api_id = $1)::int AS n', [id])).rows[0].n;
    try {
      await until(async () => (await rows(OLD)) === 0, 60_000, 500);
      await nextRun();
      expect(await rows(RECENT)).toBe(2);
    } finally {
      await db().query('DELETE FROM catalog_run_events WHERE api_id IN ($1, $2)', [OLD, RECENT]);
      await db().query('DELETE FROM catalog_run_buckets WHERE api_id IN ($1, $2)', [OLD, RECENT]);
    }
  });
});

describe('OAuth client expiry', () => {
  const REDIRECT = 'http://127.0.0.1:40177/cb';
  const apiBase = () => String(api.started.url).replace(/\/$/, '');
  const post = async (path: string, body: Record<string, string>, json = false) => {
    const res = await fetch(`${apiBase()}${path}`, {
      method: 'POST',
      headers: { 'content-type': json ? 'application/json' : 'application/x-www-form-urlencoded' },
      body: json ? JSON.stringify(body) : new URLSearchParams(body),
    });
    const text = await res.text();
    return { status: res.status, body: text ? JSON.parse(text) : undefined };
  };
  async function register(name: string) {
    const res = await fetch(`${apiBase()}/oauth/register`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ client_name: name, redirect_uris: [REDIRECT] }) });
    expect(res.status).toBe(201);
    return ((await res.json()) as { client_id: string }).client_id;
  }
  const authorizeParams = (clientId: string, challenge: string) => ({
    response_type: 'code', client_id: clientId, redirect_uri: REDIRECT, code_challenge: challenge, code_challenge_method: 'S256', state: 's', resource: `${apiBase()}/mcp`,
  });
  /** A person consents and the client exchanges the code, as a real client would: a grant with live tokens. */
  async function signInWith(clientId: string) {
    const who = await signedIn('member', undefined, apiBase());
    const verifier = `v-${Math.random().toString(36).slice(2)}-${'x'.repeat(43)}`;
    const challenge = sha256Base64url(verifier);
    const params = authorizeParams(clientId, challenge);
    const answer = await who.client.submit(`/console/oauth/authorize?${new URLSearchParams(params)}`, '/console/oauth/authorize', { ...params, org_id: who.org.org_id, decision: 'approve' });
    expect(answer.status).toBe(303);
    const code = new URL(answer.location!).searchParams.get('code')!;
    const tokens = await post('/oauth/token', { grant_type: 'authorization_code', code, code_verifier: verifier, redirect_uri: REDIRECT, client_id: clientId, resource: `${apiBase()}/mcp` });
    expect(tokens.status).toBe(200);
    return tokens.body as { access_token: string; refresh_token: string };
  }
  const clientRow = async (id: string) => (await db().query('SELECT id, last_used_at FROM oauth_clients WHERE id = $1', [id])).rows[0] as { id: string; last_used_at: Date | null } | undefined;
  /** Registered (and, unless said, last used) 25 hours ago: past the default OAUTH_CLIENT_IDLE_HOURS (24). */
  const age = (id: string, o: { lastUse?: boolean } = {}) =>
    db().query(
      `UPDATE oauth_clients SET created_at = now() - interval '25 hours', last_used_at = CASE WHEN $2 THEN last_used_at - interval '25 hours' ELSE last_used_at END WHERE id = $1`,
      [id, o.lastUse ?? true],
    );

  it('removes a registration never completed, and a client whose grants all ended, once idle 24 h; never one with a live grant', async () => {
    const neverUsed = await register('Never used');
    const fresh = await register('Registered just now');
    const live = await register('Signed in, grant live');
    const revoked = await register('Signed in, then revoked');
    const expired = await register('Signed in, refresh token expired');
    const recentlyUsed = await register('Registered long ago, revoked after recent use');

    const liveTokens = await signInWith(live);
    expect((await clientRow(live))?.last_used_at).toBeInstanceOf(Date); // a grant made is a use
    expect((await clientRow(fresh))?.last_used_at).toBeNull();
    const revokedTokens = await signInWith(revoked);
    expect((await post('/oauth/revoke', { token: revokedTokens.refresh_token, client_id: revoked })).status).toBe(200);
    const expiredTokens = await signInWith(expired);
    await db().query(
      `UPDATE oauth_tokens SET expires_at = now() - interval '1 minute' WHERE grant_id = (SELECT grant_id FROM oauth_tokens WHERE token_hash = $1)`,
      [createHash('sha256').update(expiredTokens.refresh_token).digest()],
    );
    const recentTokens = await signInWith(recentlyUsed);
    expect((await post('/oauth/revoke', { token: recentTokens.refresh_token, client_id: recentlyUsed })).status).toBe(200);

    for (const id of [neverUsed, live, revoked, expired]) await age(id);
    await age(recentlyUsed, { lastUse: false });
    await until(async () => (await clientRow(neverUsed)) === undefined, 60_000, 500);
    await nextRun();

    expect(await clientRow(revoked)).toBeUndefined();
    expect(await clientRow(expired)).toBeUndefined();
    for (const kept of [fresh, live, recentlyUsed]) expect(await clientRow(kept), kept).toBeDefined();
    // The live grant still works: its refresh token rotates.
    const refreshed = await post('/oauth/token', { grant_type: 'refresh_token', refresh_token: liveTokens.refresh_token, client_id: live });
    expect(refreshed.status).toBe(200);

    // A removed client_id is unknown: the token endpoint's invalid_client, the consent page's refusal (never a 500).
    const token = await post('/oauth/token', { grant_type: 'refresh_token', refresh_token: revokedTokens.refresh_token, client_id: revoked });
    expect(token.status).toBe(401);
    expect(token.body).toMatchObject({ error: 'invalid_client' });
    const code = await post('/oauth/token', { grant_type: 'authorization_code', code: 'wqs_ac_x', code_verifier: 'x'.repeat(43), redirect_uri: REDIRECT, client_id: neverUsed, resource: `${apiBase()}/mcp` });
    expect(code.status).toBe(401);
    expect(code.body).toMatchObject({ error: 'invalid_client' });
    const who = await signedIn('member', undefined, apiBase());
    const page = await who.client.get(`/console/oauth/authorize?${new URLSearchParams(authorizeParams(neverUsed, sha256Base64url('y'.repeat(43))))}`);
    expect(page.status).toBe(400);
    expect(page.location).toBeNull();
    expect(page.text).toContain('This client is not registered with this service.');
    expect((await post('/oauth/revoke', { token: 'wqs_rt_x', client_id: expired })).status).toBe(401);
  });
});

describe('ledger after maintenance', () => {
  it('granted = available + reserved + charged for every organization here, and nothing stays reserved', async () => {
    const r = await db().query(
      `SELECT b.org_id, b.granted, b.available, b.reserved, b.charged,
              (SELECT count(*)::int FROM credit_ledger l WHERE l.org_id = b.org_id AND l.kind = 'reserve'
                  AND NOT EXISTS (SELECT 1 FROM credit_ledger c WHERE c.request_id = l.request_id AND c.kind IN ('settle', 'release'))) AS open
         FROM credit_balances b WHERE b.org_id = ANY($1)`,
      [orgs],
    );
    expect(r.rowCount).toBeGreaterThanOrEqual(5);
    for (const b of r.rows) {
      expect(b.granted, b.org_id).toBe(b.available + b.reserved + b.charged);
      expect([b.reserved, b.open], b.org_id).toEqual([0, 0]);
    }
    const unresolved = await db().query(`SELECT count(*)::int AS n FROM requests WHERE org_id = ANY($1) AND status IN ('reserving', 'processing', 'refund_pending')`, [orgs]);
    expect(unresolved.rows[0].n).toBe(0);
  });
});

describe('closing a request nothing will finish', () => {
  it('a late first attempt that reserves while the reconciler closes the request: released with it, never left open', async () => {
    const o = await org(5);
    const c = await insertClaim(o.org_id);
    // A workflow start arriving very late reserves, as reserving does: the request row locked,
    // credits moved, the reservation written, the request `processing`. Not committed yet.
    const late = await db().connect();
    try {
      await late.query('BEGIN');
      await late.query('SELECT 1 FROM requests WHERE id = $1 FOR UPDATE', [c.id]);
      await late.query('UPDATE credit_balances SET available = available - 1, reserved = reserved + 1 WHERE org_id = $1', [o.org_id]);
      await late.query(`INSERT INTO credit_ledger (org_id, request_id, kind, amount) VALUES ($1, $2, 'reserve', 1)`, [o.org_id, c.id]);
      await late.query(`UPDATE requests SET status = 'processing', billing_status = 'pending', reserved_credits = 1 WHERE id = $1`, [c.id]);
      // The reconciler found no workflow and closes the request meanwhile.
      const closing = releaseAndInterrupt(db(), o.org_id, c.id);
      await until(async () => (await db().query(`SELECT 1 FROM pg_locks WHERE locktype = 'transactionid' AND NOT granted`)).rowCount! > 0, 10_000, 20);
      await late.query('COMMIT');
      expect(await closing).toEqual({ released: 1, interrupted: true });
    } finally {
      late.release();
    }
    expect((await row(c.id)).status).toBe('interrupted');
    expect(await balanceOf(o.org_id)).toEqual({ granted: 5, available: 5, reserved: 0, charged: 0 });
    expect((await ledgerOf(o.org_id)).filter((l) => l.request_id === c.id).map((l) => [l.kind, l.amount])).toEqual([
      ['reserve', 1],
      ['release', 1],
    ]);
  });
});

describe('maintenance workflow', () => {
  it('a failing step is reported in the summary and does not stop the other', async () => {
    // The real workflow bundle on the real server, with stub activities (one step failing for good).
    const nc = await NativeConnection.connect({ address: pair.temporalAddress });
    const taskQueue = `${pair.taskQueue}-stub`;
    const activities: MaintenanceActivities = {
      reconcileUnresolved: async () => {
        throw ApplicationFailure.nonRetryable('database unreachable', 'db_down');
      },
      applyRetention: async () => ({ results_deleted: 3, run_events_deleted: 1, files_deleted: 0, oauth_clients_deleted: 0 }),
    };
    try {
      const worker = await Worker.create({ connection: nc, taskQueue, workflowBundle: { codePath: pair.workflowBundlePath }, activities, dataConverter: await dataConverter() });
      const summary = await worker.runUntil(
        client.workflow.execute<typeof maintenanceWorkflow>('maintenanceWorkflow', {
          taskQueue,
          workflowId: `maintenance-stub-${Date.now()}`,
          args: [{ reconcileOlderThanMs: 1, overdueAfterMs: 1, batchSize: 1, perOrg: 1, resultRetentionMs: 1, retentionBatchSize: 1 }],
        }),
      );
      expect(summary).toEqual({ reconcile: { failed: 'database unreachable' }, retention: { results_deleted: 3, run_events_deleted: 1, files_deleted: 0, oauth_clients_deleted: 0 } });
    } finally {
      await nc.close();
    }
  });

  it('the histories of the Schedule\'s runs replay on the current workflow code', async () => {
    const actions = (await schedule().describe()).info.recentActions;
    expect(actions.length).toBeGreaterThan(0);
    for (const a of actions.slice(0, 3)) {
      const h = client.workflow.getHandle(a.action.workflow.workflowId, a.action.workflow.firstExecutionRunId);
      await h.result();
      await Worker.runReplayHistory({ workflowBundle: { codePath: pair.workflowBundlePath }, dataConverter: await dataConverter() }, await h.fetchHistory(), a.action.workflow.workflowId);
    }
  });
});

describe('envelopeOf', () => {
  const receipt = (status: string) => ({ request_id: 'req_abcdefghijkl', api: '@x', operation: 'y', billing: { status, reserved_credits: 1, charged_credits: 0 } });
  it('accepts only a terminal envelope of this request and derives the row status', () => {
    expect(envelopeOf({ status: 200, body: { success: true, data: { output: {}, receipt: receipt('settled') } } }, 'req_abcdefghijkl')).toMatchObject({ status: 'succeeded', errorCode: null });
    const err = (billing: string) => ({ status: 402, body: { success: false, error: { code: 'insufficient_credits', request_id: 'req_abcdefghijkl', receipt: receipt(billing) } } });
    expect(envelopeOf(err('not_started'), 'req_abcdefghijkl')).toMatchObject({ status: 'rejected', errorCode: 'insufficient_credits' });
    expect(envelopeOf(err('released'), 'req_abcdefghijkl')).toMatchObject({ status: 'failed', errorCode: 'insufficient_credits' });
    // Another request's result (a reused keyed workflow id), or not an envelope at all.
    expect(envelopeOf(err('released'), 'req_otherrequest')).toBeNull();
    expect(envelopeOf({ status: 200, body: { success: true, data: { receipt: receipt('settled') } } }, 'req_otherrequest')).toBeNull();
    expect(envelopeOf(null, 'req_abcdefghijkl')).toBeNull();
    expect(envelopeOf({ status: '200', body: {} }, 'req_abcdefghijkl')).toBeNull();
  });
});
