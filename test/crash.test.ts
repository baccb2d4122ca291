// Operators must trust that a run survives a crash: kill the worker or the API mid-query.
import { describe, expect, it } from 'vitest';
import { defaultPayloadConverter } from '@temporalio/common';
import { balanceOf, dataConverter, db, demo, ledgerOf, newOrg, query, until } from './helpers/stack.ts';
import { ownPairPool, withTemporal } from './helpers/own-pair.ts';
import { jobsApi } from '../shared/catalog/demo/jobs.ts';

const london = { api: '@weather', operation: 'current_weather', input: { city: 'London' } };
const jobSearch = { api: '@jobs', operation: 'search_jobs', input: { keywords: 'typescript', location: 'london' } };

// A task queue of our own, so killing these processes disturbs no other test.
const pool = ownPairPool('crash', { EXECUTE_HEARTBEAT_TIMEOUT_MS: '4000', QUERY_DEADLINE_MS: '60000' });
const spawn = (kind: 'api' | 'worker') => pool.spawn(kind);

async function waitProcessing(orgId: string) {
  return until(async () => {
    const r = await db().query(`SELECT id, workflow_id FROM requests WHERE org_id = $1 AND status = 'processing'`, [orgId]);
    return r.rows[0] as { id: string; workflow_id: string } | undefined;
  });
}

describe('crash safety', () => {
  it('a worker killed with SIGKILL mid-execution: a new worker finishes the query, reserved once and charged once', async () => {
    const [api, worker] = await Promise.all([spawn('api'), spawn('worker')]);
    const org = await newOrg(5);
    await demo('/__demo/faults', { host: 'weather.example.test', path_prefix: '/api/v1/current', latency_ms: 5000, times: 1 });
    const pending = query(org.api_key, london, { 'idempotency-key': `crash-w-${Date.now()}` }, String(api.started.url));
    const row = await waitProcessing(org.org_id);
    await until(async () => (await demo('/__demo/state')).requests?.['weather.example.test'] >= 1);
    await worker.kill('SIGKILL');
    await spawn('worker');
    const res = await pending;
    expect(res.status, res.text).toBe(200);
    expect(res.body.data.output.city).toBe('London');
    expect(res.body.data.receipt.billing).toEqual({ status: 'settled', reserved_credits: 1, charged_credits: 1 });
    expect(await ledgerOf(org.org_id)).toEqual([
      { request_id: row.id, kind: 'reserve', amount: 1 },
      { request_id: row.id, kind: 'settle', amount: 1 },
    ]);
    expect(await balanceOf(org.org_id)).toEqual({ granted: 5, available: 4, reserved: 0, charged: 1 });
    // A read-only HTTP operation runs reserve, execute and settle as local activities inside one
    // workflow task: the dead worker's task timed out and the new worker ran it again, site request
    // included (the site saw it twice), while the ledger moved once.
    expect((await demo('/__demo/state')).requests?.['weather.example.test']).toBeGreaterThanOrEqual(2);
    const history = await withTemporal((c) => c.workflow.getHandle(row.workflow_id).fetchHistory());
    const events = history.events ?? [];
    expect(events.filter((e) => e.activityTaskStartedEventAttributes)).toHaveLength(0);
    expect(events.some((e) => e.workflowTaskTimedOutEventAttributes || e.workflowTaskFailedEventAttributes)).toBe(true);
    expect(events.some((e) => e.workflowExecutionCompletedEventAttributes)).toBe(true);
  });

  it('a browser run shows the step it is on while it runs; its worker killed mid-step: the heartbeats stop, a new worker runs it again, charged once', async () => {
    const [api, worker] = await Promise.all([spawn('api'), spawn('worker')]);
    const org = await newOrg(50);
    // The job board's first listing answers 4 s late, so the run waits on its second step.
    await demo('/__demo/faults', { host: 'jobs.example.test', path_prefix: '/api/jobs', latency_ms: 4000, times: 1 });
    const pending = query(org.api_key, jobSearch, { 'idempotency-key': `crash-b-${Date.now()}` }, String(api.started.url));
    const row = await waitProcessing(org.org_id);
    // What an operator sees of the run (Web UI, `temporal workflow describe`): the pending execute
    // activity's heartbeat details name the step, decoded with the service's payload keys. (An
    // earlier beat may still show the navigation when the worker's first browser launch is slow.)
    const codec = (await dataConverter()).payloadCodecs![0]!;
    const step = await withTemporal((c) =>
      until(async () => {
        const d = await c.workflow.getHandle(row.workflow_id).describe();
        const payloads = d.raw.pendingActivities?.find((a) => a.activityType?.name === 'runReadQuery')?.heartbeatDetails?.payloads;
        if (!payloads?.length) return undefined;
        const details = defaultPayloadConverter.fromPayload<{ step?: string } | undefined>((await codec.decode(payloads))[0]!);
        return details?.step === '1' ? details : undefined;
      }, 20_000, 100),
    );
    expect(step).toEqual({ step: '1', type: 'wait', name: 'Wait for the first listings' });
    await worker.kill('SIGKILL');
    await spawn('worker');
    const res = await pending;
    expect(res.status, res.text).toBe(200);
    const example = jobsApi.operations.find((o) => o.name === 'search_jobs')!.versions[0]!.examples.find((e) => JSON.stringify(e.input) === JSON.stringify(jobSearch.input))!;
    expect(res.body.data.output).toEqual(example.output);
    const price = res.body.data.receipt.billing.reserved_credits as number;
    expect(res.body.data.receipt.billing).toEqual({ status: 'settled', reserved_credits: price, charged_credits: price });
    expect(await ledgerOf(org.org_id)).toEqual([
      { request_id: row.id, kind: 'reserve', amount: price },
      { request_id: row.id, kind: 'settle', amount: price },
    ]);
    // A browser read is one normal activity with heartbeats (reserve, execute, settle): it timed out
    // on its heartbeat (4 s here: 2 s let a loaded machine's new worker miss a beat too) once its
    // worker was gone, and the ordinary execute step answered on the new worker.
    const history = await withTemporal((c) => c.workflow.getHandle(row.workflow_id).fetchHistory());
    const events = history.events ?? [];
    const typeOf = (id: unknown) => events.find((e) => String(e.eventId) === String(id))?.activityTaskScheduledEventAttributes?.activityType?.name;
    const closed = events.flatMap((e) => {
      const t = e.activityTaskTimedOutEventAttributes ?? e.activityTaskCompletedEventAttributes;
      return t ? [[typeOf(t.scheduledEventId), e.activityTaskTimedOutEventAttributes ? 'timed out' : 'completed']] : [];
    });
    expect(closed).toEqual([
      ['runReadQuery', 'timed out'],
      ['executeOperation', 'completed'],
    ]);
  });

  it('an API killed mid-request: a keyed retry on a new API returns the finished result', async () => {
    const [api] = await Promise.all([spawn('api'), spawn('worker')]);
    const org = await newOrg(5);
    const key = `crash-a-${Date.now()}`;
    await demo('/__demo/faults', { host: 'weather.example.test', path_prefix: '/api/v1/current', latency_ms: 3000, times: 1 });
    const pending = query(org.api_key, london, { 'idempotency-key': key }, String(api.started.url)).catch((err: Error) => err);
    const row = await waitProcessing(org.org_id);
    await api.kill('SIGKILL');
    expect(await pending).toBeInstanceOf(Error);
    const api2 = await spawn('api');
    const res = await until(async () => {
      const r = await query(org.api_key, london, { 'idempotency-key': key }, String(api2.started.url));
      if (r.status === 409) expect(r.body.error.code).toBe('request_in_progress');
      return r.status === 200 ? r : undefined;
    }, 60_000, 500);
    expect(res.headers.get('idempotency-replayed')).toBe('true');
    expect(res.body.data.receipt.request_id).toBe(row.id);
    expect(res.body.data.receipt.billing.status).toBe('settled');
    expect(await ledgerOf(org.org_id)).toHaveLength(2);
    expect((await balanceOf(org.org_id)).charged).toBe(1);
  });

  it('a worker killed after reserving and replaced only after the deadline: the reservation goes back, the request is failed, never left processing', async () => {
    // The first workflow task reserved (inside the fused local step) and its worker died mid-site;
    // the task's retry starts past the deadline, where the run takes the "never started" branch.
    // That branch wrote `rejected` only from `reserving`: the row stayed `processing` with its
    // credit reserved for ever (the reconciler then wrote the run's not_started envelope, releasing nothing).
    const short = { ...pool.pair, taskQueue: `${pool.pair.taskQueue}-late`, env: { ...pool.pair.env, QUERY_DEADLINE_MS: '4000' } };
    const [api, worker] = await Promise.all([pool.spawn('api', short), pool.spawn('worker', short)]);
    const org = await newOrg(5);
    await demo('/__demo/faults', { host: 'weather.example.test', path_prefix: '/api/v1/current', latency_ms: 10_000, times: 1 });
    const pending = query(org.api_key, london, {}, String(api.started.url));
    const row = await waitProcessing(org.org_id);
    await until(async () => (await demo('/__demo/state')).requests?.['weather.example.test'] >= 1);
    await worker.kill('SIGKILL');
    const created = (await db().query('SELECT created_at FROM requests WHERE id = $1', [row.id])).rows[0].created_at as Date;
    await until(async () => Date.now() > created.getTime() + 4_000 + 500, 10_000, 100);
    await pool.spawn('worker', short);
    const res = await pending;
    expect(res.status, res.text).toBe(504);
    expect(res.body.error.code).toBe('execution_timeout');
    const final = await until(async () => {
      const r = (await db().query('SELECT status, billing_status, error_code FROM requests WHERE id = $1', [row.id])).rows[0];
      // refund_pending passes by: the reservation is back, the failure not written yet.
      return r.status === 'processing' || r.status === 'refund_pending' ? undefined : r;
    }, 30_000).catch(async () => (await db().query('SELECT status, billing_status, error_code FROM requests WHERE id = $1', [row.id])).rows[0]);
    expect(final).toEqual({ status: 'failed', billing_status: 'released', error_code: 'execution_timeout' });
    expect(await ledgerOf(org.org_id)).toEqual([
      { request_id: row.id, kind: 'reserve', amount: 1 },
      { request_id: row.id, kind: 'release', amount: 1 },
    ]);
    expect(await balanceOf(org.org_id)).toEqual({ granted: 5, available: 5, reserved: 0, charged: 0 });
  });

  it('a query that outlives its deadline is execution_timeout and released', async () => {
    const short = { ...pool.pair, taskQueue: `${pool.pair.taskQueue}-short`, env: { ...pool.pair.env, QUERY_DEADLINE_MS: '3000' } };
    const [api] = await Promise.all([pool.spawn('api', short), pool.spawn('worker', short)]);
    const org = await newOrg(5);
    await demo('/__demo/faults', { host: 'weather.example.test', path_prefix: '/api/v1/current', latency_ms: 8000, times: 1 });
    const started = Date.now();
    const res = await query(org.api_key, london, {}, String(api.started.url));
    expect(Date.now() - started).toBeLessThan(7000);
    expect(res.status).toBe(504);
    expect(res.body.error.code).toBe('execution_timeout');
    expect(res.body.error.retryable).toBe(true);
    expect(res.body.error.receipt.billing).toEqual({ status: 'released', reserved_credits: 1, charged_credits: 0 });
    expect(await balanceOf(org.org_id)).toEqual({ granted: 5, available: 5, reserved: 0, charged: 0 });
  });
});
