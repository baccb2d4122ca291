// The query saga on the real Temporal dev server, with STUB activities: the workflow is the unit.
// A Worker of this file's own (the stack's workflow bundle, a task queue of its own) runs each
// branch; the stubs record every call, so each test asserts the terminal envelope the workflow
// returns AND the steps it took (order, arguments), and where it matters its history.
import { Client, Connection } from '@temporalio/client';
import { ApplicationFailure, decodeTimeoutType } from '@temporalio/common';
import { DefaultLogger, NativeConnection, Runtime, Worker } from '@temporalio/worker';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ACTION_NOT_STARTED_MESSAGE, ACTION_START_MARGIN_MS, type QueryWorkflowInput, type TerminalEnvelope } from '../shared/workflow-contract.ts';
import type { queryWorkflow } from '../workflows/query-workflow.ts';
import { BASE_URL, COST, ORG, OUTPUT, calls, sagaInput as input, scenarios, stubs, type Scenario } from './helpers/saga-stubs.ts';
import { sleep, stack } from './helpers/stack.ts';

let nc: NativeConnection;
let connection: Connection;
let client: Client;
let worker: Worker;
let running: Promise<void>;
let browserWorker: Worker;
let browserRunning: Promise<void>;
const taskQueue = `query-workflow-stubs-${Date.now()}-${Math.random().toString(36).slice(2, 6)}`;
const browserQueue = `${taskQueue}-browser`;

beforeAll(async () => {
  // Worker state changes at info are noise here; the workflow's own warnings and errors stay.
  Runtime.install({ logger: new DefaultLogger('WARN') });
  nc = await NativeConnection.connect({ address: stack().temporalAddress });
  connection = await Connection.connect({ address: stack().temporalAddress });
  client = new Client({ connection });
  worker = await Worker.create({
    connection: nc,
    taskQueue,
    workflowBundle: { codePath: stack().workflowBundlePath },
    activities: stubs,
    shutdownGraceTime: '1 second',
  });
  running = worker.run();
  // Browser execute steps have a task queue of their own, polled by activity-only workers.
  browserWorker = await Worker.create({ connection: nc, taskQueue: browserQueue, activities: stubs, shutdownGraceTime: '1 second' });
  browserRunning = browserWorker.run();
});
afterAll(async () => {
  if (worker?.getState() === 'RUNNING') worker.shutdown();
  if (browserWorker?.getState() === 'RUNNING') browserWorker.shutdown();
  await running;
  await browserRunning;
  await connection?.close();
  await nc?.close();
});

/** Runs the workflow to its end; its result, the stubs' calls and its history's events. */
async function run(q: QueryWorkflowInput, scenario: Scenario = {}) {
  scenarios.set(q.requestId, scenario);
  const workflowId = `query-workflow-test-${q.requestId}`;
  const result = await client.workflow.execute<typeof queryWorkflow>('queryWorkflow', { taskQueue, workflowId, args: [q] });
  const history = await client.workflow.getHandle(workflowId).fetchHistory();
  const events = history.events ?? [];
  return {
    result,
    calls: calls.get(q.requestId) ?? [],
    steps: (calls.get(q.requestId) ?? []).map((c) => c.step),
    /** Normal (task-queue) activities scheduled, by type: local activities are markers, not these. */
    scheduled: events.flatMap((e) => (e.activityTaskScheduledEventAttributes ? [e.activityTaskScheduledEventAttributes.activityType?.name] : [])),
    /** Task queues of the normal activities scheduled. */
    queues: events.flatMap((e) => (e.activityTaskScheduledEventAttributes ? [e.activityTaskScheduledEventAttributes.taskQueue?.name] : [])),
    /** Workflow tasks the run took (started events). */
    workflowTasks: events.filter((e) => e.workflowTaskStartedEventAttributes).length,
    /** patched() ids recorded as markers. */
    patches: events.flatMap((e) => {
      const m = e.markerRecordedEventAttributes;
      if (m?.markerName !== 'core_patch') return [];
      const id = m.details?.['patch-data']?.payloads?.[0]?.data;
      return [id ? JSON.parse(Buffer.from(id).toString()).id : undefined];
    }),
    events,
  };
}

/** Local activities the run recorded (their markers), by type. */
function localActivities(r: { events: Awaited<ReturnType<typeof run>>['events'] }): string[] {
  return r.events.flatMap((e) => {
    const m = e.markerRecordedEventAttributes;
    if (m?.markerName !== 'core_local_activity') return [];
    const data = m.details?.data?.payloads?.[0]?.data;
    return data ? [JSON.parse(Buffer.from(data).toString()).activity_type as string] : [];
  });
}

const receipt = (q: QueryWorkflowInput, status: string, reserved: number, charged: number | null) => ({
  request_id: q.requestId,
  api: q.api,
  operation: q.operation,
  billing: { status, reserved_credits: reserved, charged_credits: charged },
});

/** The error envelope a caller would see: status, catalog fields, receipt. */
function expectError(env: TerminalEnvelope, q: QueryWorkflowInput, code: string, status: number, r: ReturnType<typeof receipt>) {
  expect(env.status).toBe(status);
  expect(env.body.success).toBe(false);
  if (env.body.success) return;
  expect(env.body.error).toMatchObject({ code, status, request_id: q.requestId, doc_url: expect.stringContaining(BASE_URL) });
  expect(env.body.error.receipt).toEqual(r);
}

const executeArgs = (q: QueryWorkflowInput) => ({
  requestId: q.requestId,
  orgId: q.orgId,
  operationId: q.operationId,
  version: q.version,
  input: q.input,
  deadlineAt: q.deadlineAt,
  performsActions: q.performsActions,
});

describe('query workflow saga (stub activities on the real server)', () => {
  it('deadline passed before start: execution_timeout, nothing reserved, not_started receipt written', async () => {
    const q = input({ deadlineAt: Date.now() - 1_000 });
    const r = await run(q);
    expectError(r.result, q, 'execution_timeout', 504, receipt(q, 'not_started', 0, 0));
    expect(r.result.body).toMatchObject({ error: { retryable: true, message: 'The query could not start within its deadline' } });
    expect(r.steps).toEqual(['finalizeRequest']);
    expect(r.calls[0]!.args).toEqual({ requestId: q.requestId, status: 'rejected', envelope: r.result, errorCode: 'execution_timeout', retentionMs: q.retentionMs });
    expect(r.scheduled).toEqual([]);
  });

  it('deadline passed when a first task lost mid-run is retried (row found processing: its lost attempt reserved): released, execution_timeout with a released receipt', async () => {
    const q = input({ deadlineAt: Date.now() - 1_000 });
    const r = await run(q, { finalize: (f) => (f.status === 'rejected' ? { moved: false, status: 'processing' } : { moved: true, status: f.status }) });
    expectError(r.result, q, 'execution_timeout', 504, receipt(q, 'released', COST, 0));
    expect(r.steps).toEqual(['finalizeRequest', 'markRefundPending', 'releaseCredits', 'finalizeRequest']);
    expect(r.calls[2]!.args).toEqual({ orgId: ORG, requestId: q.requestId });
    expect(r.calls[3]!.args).toMatchObject({ status: 'failed', errorCode: 'execution_timeout', envelope: r.result });
    expect(r.calls[3]!.args.freeKey).toBeUndefined();
    expect(r.patches).toEqual(['late-start-releases']);
    expect(r.scheduled).toEqual([]);
  });

  it('too few credits: 402 insufficient_credits with required/available, nothing executed', async () => {
    const q = input();
    const r = await run(q, { reserve: async () => ({ ok: false, reason: 'insufficient_credits', available: 1 }) });
    expectError(r.result, q, 'insufficient_credits', 402, receipt(q, 'not_started', 0, 0));
    expect(r.result.body).toMatchObject({ error: { retryable: false, details: { required: COST, available: 1 } } });
    expect(r.steps).toEqual(['reserveCredits', 'finalizeRequest']);
    expect(r.calls[0]!.args).toEqual({ orgId: ORG, requestId: q.requestId, amount: COST });
    expect(r.calls[1]!.args).toMatchObject({ status: 'rejected', errorCode: 'insufficient_credits', envelope: r.result });
    expect(r.scheduled).toEqual([]);
  });

  it('execute fails with a non-retryable site code: tried once, released, then the error with a released receipt', async () => {
    const q = input();
    const r = await run(q, {
      execute: async () => {
        // Thrown as retryable on purpose: the workflow's policy, not the activity, must stop retries.
        throw ApplicationFailure.create({ type: 'upstream_not_found', message: 'The website returned 404', details: [{ upstream_status: 404 }] });
      },
    });
    expectError(r.result, q, 'upstream_not_found', 502, receipt(q, 'released', COST, 0));
    expect(r.result.body).toMatchObject({ error: { message: 'The website returned 404', details: { upstream_status: 404 } } });
    expect(r.steps).toEqual(['reserveCredits', 'executeOperation', 'markRefundPending', 'releaseCredits', 'finalizeRequest']);
    expect(r.calls[1]!.args).toEqual(executeArgs(q));
    expect(r.calls[2]!.args).toEqual({ requestId: q.requestId });
    expect(r.calls[3]!.args).toEqual({ orgId: ORG, requestId: q.requestId });
    expect(r.calls[4]!.args).toMatchObject({ status: 'failed', errorCode: 'upstream_not_found', envelope: r.result });
    // The site ran: the key keeps its answer (a retry with it replays the 502).
    expect(r.calls[4]!.args).not.toHaveProperty('freeKey');
    expect(r.scheduled).toEqual(['executeOperation']);
  });

  it('a retryable site failure is retried for a read-only operation, and success then settles', async () => {
    const q = input();
    let attempts = 0;
    const r = await run(q, {
      execute: async () => {
        attempts += 1;
        if (attempts === 1) throw ApplicationFailure.create({ type: 'upstream_http_error', message: 'The website returned 503' });
        return OUTPUT;
      },
    });
    expect(r.result.status).toBe(200);
    expect(r.steps).toEqual(['reserveCredits', 'executeOperation', 'executeOperation', 'settleAndFinalize']);
  });

  /** The timeout type of the execute activity's timed-out event, if it timed out. */
  const timedOut = (r: Awaited<ReturnType<typeof run>>) =>
    r.events.flatMap((e) => (e.activityTaskTimedOutEventAttributes ? [decodeTimeoutType(e.activityTaskTimedOutEventAttributes.failure?.timeoutFailureInfo?.timeoutType)] : []));

  // Deadlines here are generous (the workflow must start before them on a loaded machine); the stub
  // outlives them, and its late answer is dropped by the server.
  const outlive = (deadlineAt: number, answer: unknown) => async () => {
    await sleep(deadlineAt - Date.now() + 2_000);
    return answer;
  };

  it('an action whose execute activity times out: action_unconfirmed, tried once, released', async () => {
    const deadlineAt = Date.now() + 12_000;
    const q = input({ api: '@clinic', operation: 'book_appointment', performsActions: true, deadlineAt });
    const r = await run(q, { execute: outlive(deadlineAt, { status: 'confirmed' }) });
    expectError(r.result, q, 'action_unconfirmed', 422, receipt(q, 'released', COST, 0));
    expect(r.result.body).toMatchObject({ error: { retryable: false } });
    // Never repeated: one attempt, then the compensation.
    expect(r.steps).toEqual(['reserveCredits', 'executeOperation', 'markRefundPending', 'releaseCredits', 'finalizeRequest']);
    expect(r.calls[4]!.args).toMatchObject({ status: 'failed', errorCode: 'action_unconfirmed' });
    expect(timedOut(r)).toHaveLength(1);
    expect(timedOut(r)[0]).not.toBe('HEARTBEAT');
    // It was taken and began: told by when at the latest it could begin, it did, and was cut off.
    expect(r.calls[1]!.args).toEqual({ ...executeArgs(q), startBy: deadlineAt - ACTION_START_MARGIN_MS });
    expect(timedOut(r)[0]).not.toBe('SCHEDULE_TO_START');
    expect(r.patches).toEqual([]);
  });

  it('an action no worker takes before its start bound (its task queue unpolled): execution_timeout before the deadline, released, never run', async () => {
    const deadlineAt = Date.now() + 10_000;
    const unpolled = `${taskQueue}-unpolled`;
    const q = input({ api: '@shop', operation: 'place_order', performsActions: true, engine: 'browser', browserTaskQueue: unpolled, deadlineAt });
    const r = await run(q);
    // Certainly not done on the site: the ordinary timeout (retryable), the reservation given back,
    // answered before the deadline.
    expectError(r.result, q, 'execution_timeout', 504, receipt(q, 'released', COST, 0));
    expect(Date.now()).toBeLessThan(deadlineAt);
    expect(r.result.body).toMatchObject({ error: { retryable: true, message: ACTION_NOT_STARTED_MESSAGE } });
    expect(r.steps).toEqual(['reserveCredits', 'markRefundPending', 'releaseCredits', 'finalizeRequest']);
    expect(r.calls[1]!.args).toEqual({ requestId: q.requestId });
    expect(r.calls[2]!.args).toEqual({ orgId: ORG, requestId: q.requestId });
    expect(r.calls[3]!.args).toMatchObject({ status: 'failed', errorCode: 'execution_timeout', envelope: r.result });
    // As any execution_timeout after reserving, the key keeps its answer.
    expect(r.calls[3]!.args).not.toHaveProperty('freeKey');
    expect(r.scheduled).toEqual(['executeOperation']);
    expect(r.queues).toEqual([unpolled]);
    expect(r.events.filter((e) => e.activityTaskStartedEventAttributes)).toHaveLength(0);
    expect(timedOut(r)).toEqual(['SCHEDULE_TO_START']);
    expect(r.patches).toEqual(['action-never-started']);
  });

  it('a replay-safe action whose first attempt was lost, its retry taken by no worker: action_unconfirmed (the lost attempt may have acted)', async () => {
    // A worker of one slot, held by a first attempt that never heartbeats and outlives the deadline
    // (a stuck worker): the server retries it, and nobody takes the retry, which then times out
    // SCHEDULE_TO_START with the lost attempt as its cause.
    const oneSlot = `${taskQueue}-one-slot`;
    const stuck = await Worker.create({ connection: nc, taskQueue: oneSlot, activities: stubs, maxConcurrentActivityTaskExecutions: 1, shutdownGraceTime: '1 second' });
    const stuckRunning = stuck.run();
    try {
      const deadlineAt = Date.now() + 10_000;
      const q = input({ api: '@shop', operation: 'place_order', performsActions: true, actionsReplaySafe: true, engine: 'browser', browserTaskQueue: oneSlot, heartbeatTimeoutMs: 300, deadlineAt });
      const r = await run(q, { execute: outlive(deadlineAt, { order_id: 'ORD-100101' }) });
      expectError(r.result, q, 'action_unconfirmed', 422, receipt(q, 'released', COST, 0));
      expect(r.steps).toEqual(['reserveCredits', 'executeOperation', 'markRefundPending', 'releaseCredits', 'finalizeRequest']);
      expect(timedOut(r)).toEqual(['SCHEDULE_TO_START']);
      const failure = r.events.find((e) => e.activityTaskTimedOutEventAttributes)!.activityTaskTimedOutEventAttributes!.failure;
      expect(decodeTimeoutType(failure?.cause?.timeoutFailureInfo?.timeoutType)).toBe('HEARTBEAT');
      expect(r.patches).toEqual([]);
    } finally {
      stuck.shutdown();
      await stuckRunning;
    }
  });

  it('an action whose worker stops heartbeating (lost mid-action): action_unconfirmed, not run again', async () => {
    const q = input({ api: '@clinic', operation: 'book_appointment', performsActions: true, heartbeatTimeoutMs: 1_000 });
    // Never heartbeats, as a worker killed mid-action would.
    const r = await run(q, { execute: async () => sleep(4_000).then(() => ({ status: 'confirmed' })) });
    expectError(r.result, q, 'action_unconfirmed', 422, receipt(q, 'released', COST, 0));
    expect(timedOut(r)).toEqual(['HEARTBEAT']);
    expect(r.steps).toEqual(['reserveCredits', 'executeOperation', 'markRefundPending', 'releaseCredits', 'finalizeRequest']);
  });

  it('a read-only operation that times out is execution_timeout, released', async () => {
    const deadlineAt = Date.now() + 12_000;
    const q = input({ deadlineAt });
    const r = await run(q, { execute: outlive(deadlineAt, OUTPUT) });
    expectError(r.result, q, 'execution_timeout', 504, receipt(q, 'released', COST, 0));
    expect(r.steps).toEqual(['reserveCredits', 'executeOperation', 'markRefundPending', 'releaseCredits', 'finalizeRequest']);
    expect(timedOut(r)).toHaveLength(1);
  });

  it('ledger unreachable at reserve: three bounded attempts, then billing_unavailable, nothing executed', async () => {
    const q = input();
    const r = await run(q, {
      reserve: async () => {
        throw new Error('connect ECONNREFUSED 127.0.0.1:5432');
      },
    });
    expectError(r.result, q, 'billing_unavailable', 503, receipt(q, 'not_started', 0, 0));
    expect(r.result.body).toMatchObject({ error: { retryable: true } });
    expect(r.steps).toEqual(['reserveCredits', 'reserveCredits', 'reserveCredits', 'finalizeRequest']);
    expect(r.calls[3]!.args).toMatchObject({ status: 'rejected', errorCode: 'billing_unavailable', freeKey: true });
    expect(r.scheduled).toEqual([]);
  });

  it('reserve committed but its answer was lost (row found processing): released, billing_unavailable with a released receipt', async () => {
    const q = input();
    const r = await run(q, {
      reserve: async () => {
        throw new Error('Connection terminated unexpectedly');
      },
      finalize: (f) => (f.status === 'rejected' ? { moved: false, status: 'processing' } : { moved: true, status: f.status }),
    });
    expectError(r.result, q, 'billing_unavailable', 503, receipt(q, 'released', COST, 0));
    expect(r.steps).toEqual(['reserveCredits', 'reserveCredits', 'reserveCredits', 'finalizeRequest', 'markRefundPending', 'releaseCredits', 'finalizeRequest']);
    // Nothing ran and nothing is charged: the key goes with the envelope, as a rejection's does, so
    // a retry with it runs rather than replaying this retryable 503.
    expect(r.calls[6]!.args).toMatchObject({ status: 'failed', errorCode: 'billing_unavailable', envelope: r.result, freeKey: true });
    expect(r.scheduled).toEqual([]);
  });

  it('success: reserved, executed once, settled and finalized once in one step; 200 with a settled receipt', async () => {
    const q = input();
    const r = await run(q);
    expect(r.result).toEqual({ status: 200, body: { success: true, data: { output: OUTPUT, receipt: receipt(q, 'settled', COST, COST) } } });
    expect(r.steps).toEqual(['reserveCredits', 'executeOperation', 'settleAndFinalize']);
    expect(r.calls[0]!.args).toEqual({ orgId: ORG, requestId: q.requestId, amount: COST });
    expect(r.calls[1]!.args).toEqual(executeArgs(q));
    expect(r.calls[2]!.args).toEqual({
      orgId: ORG,
      amount: COST,
      finalize: { requestId: q.requestId, status: 'succeeded', errorCode: null, retentionMs: q.retentionMs, envelope: r.result },
    });
    expect(r.scheduled).toEqual(['executeOperation']);
  });

  it('success with a response spec: the shaped output is what is settled and returned', async () => {
    const q = input({ response: { format: 'json', include: ['temperature_c'] } });
    const r = await run(q);
    expect(r.result.status).toBe(200);
    expect(r.result.body).toMatchObject({ success: true, data: { output: { temperature_c: 11.5 } } });
    expect(r.result.body).not.toHaveProperty('data.output.city');
    expect(r.calls.at(-1)!.args.finalize.envelope).toEqual(r.result);
  });

  it('a request closed before reserve (request_closed): request_interrupted, no row written, nothing run', async () => {
    const q = input();
    const r = await run(q, { reserve: async () => ({ ok: false, reason: 'request_closed', status: 'interrupted' }) });
    expectError(r.result, q, 'request_interrupted', 409, receipt(q, 'not_started', 0, 0));
    // The interrupted row is the API's: the workflow writes no envelope over it.
    expect(r.steps).toEqual(['reserveCredits']);
    expect(r.scheduled).toEqual([]);
  });

  it('a reservation released while the site ran (settle finds already_released): request_interrupted, released receipt', async () => {
    const q = input();
    const r = await run(q, {
      settle: async () => {
        throw ApplicationFailure.nonRetryable('the reservation was released', 'already_released');
      },
    });
    expectError(r.result, q, 'request_interrupted', 409, receipt(q, 'released', COST, 0));
    expect(r.steps).toEqual(['reserveCredits', 'executeOperation', 'settleAndFinalize']);
  });

  it('a release refused because the request was settled: the charge stands and the receipt says so', async () => {
    const q = input();
    const r = await run(q, {
      execute: async () => {
        throw ApplicationFailure.nonRetryable('The website returned 404', 'upstream_not_found');
      },
      release: async () => {
        throw ApplicationFailure.nonRetryable('already settled', 'already_settled');
      },
    });
    expectError(r.result, q, 'upstream_not_found', 502, receipt(q, 'settled', COST, COST));
    expect(r.steps).toEqual(['reserveCredits', 'executeOperation', 'markRefundPending', 'releaseCredits', 'finalizeRequest']);
    expect(r.calls[4]!.args).toMatchObject({ status: 'failed', errorCode: 'upstream_not_found' });
  });
});

describe('read-only HTTP operations in one workflow task; browser work on its own queue', () => {
  it('a read-only HTTP operation runs reserve, execute and settle in ONE local activity: one workflow task, one marker, patch recorded', async () => {
    const q = input({ engine: 'http' });
    const r = await run(q);
    expect(r.result).toEqual({ status: 200, body: { success: true, data: { output: OUTPUT, receipt: receipt(q, 'settled', COST, COST) } } });
    expect(r.steps).toEqual(['reserveCredits', 'executeOperation', 'settleAndFinalize']);
    expect(r.calls[0]!.args).toEqual({ orgId: ORG, requestId: q.requestId, amount: COST });
    expect(r.calls[1]!.args).toEqual(executeArgs(q));
    expect(r.calls[2]!.args).toEqual({
      orgId: ORG,
      amount: COST,
      finalize: { requestId: q.requestId, status: 'succeeded', errorCode: null, retentionMs: q.retentionMs, envelope: r.result },
    });
    expect(r.scheduled).toEqual([]);
    expect(r.workflowTasks).toBe(1);
    expect(r.patches).toEqual(['http-read-fused']);
    expect(localActivities(r)).toEqual(['runReadQuery']);
  });

  it('the fused step with a response spec settles and returns the shaped output', async () => {
    const q = input({ engine: 'http', response: { format: 'json', include: ['temperature_c'] } });
    const r = await run(q);
    expect(r.result.body).toMatchObject({ success: true, data: { output: { temperature_c: 11.5 } } });
    expect(r.result.body).not.toHaveProperty('data.output.city');
    expect(r.calls.at(-1)!.args.finalize.envelope).toEqual(r.result);
  });

  it('the fused step hands over where it stops: refused reservation, ledger unreachable, settle retried, reservation released', async () => {
    // Too few credits: 402, nothing executed.
    const q1 = input({ engine: 'http' });
    const r1 = await run(q1, { reserve: async () => ({ ok: false, reason: 'insufficient_credits', available: 1 }) });
    expectError(r1.result, q1, 'insufficient_credits', 402, receipt(q1, 'not_started', 0, 0));
    expect(r1.steps).toEqual(['reserveCredits', 'finalizeRequest']);
    // Request closed under the run: 409, no row written.
    const q2 = input({ engine: 'http' });
    const r2 = await run(q2, { reserve: async () => ({ ok: false, reason: 'request_closed', status: 'interrupted' }) });
    expectError(r2.result, q2, 'request_interrupted', 409, receipt(q2, 'not_started', 0, 0));
    expect(r2.steps).toEqual(['reserveCredits']);
    // Ledger unreachable: the ordinary reserve step's three bounded attempts follow the fused one.
    const q3 = input({ engine: 'http' });
    const r3 = await run(q3, {
      reserve: async () => {
        throw new Error('connect ECONNREFUSED 127.0.0.1:5432');
      },
    });
    expectError(r3.result, q3, 'billing_unavailable', 503, receipt(q3, 'not_started', 0, 0));
    expect(r3.steps).toEqual(['reserveCredits', 'reserveCredits', 'reserveCredits', 'reserveCredits', 'finalizeRequest']);
    // Settling failed once (ledger blip): the ordinary settle step retries it with the same output; charged once.
    let settles = 0;
    const q4 = input({ engine: 'http' });
    const r4 = await run(q4, {
      settle: async (f) => {
        settles += 1;
        if (settles === 1) throw new Error('Connection terminated unexpectedly');
        return { charged: COST, finalized: { moved: true, status: f.status } };
      },
    });
    expect(r4.result).toEqual({ status: 200, body: { success: true, data: { output: OUTPUT, receipt: receipt(q4, 'settled', COST, COST) } } });
    expect(r4.steps).toEqual(['reserveCredits', 'executeOperation', 'settleAndFinalize', 'settleAndFinalize']);
    expect(r4.calls[3]!.args).toEqual(r4.calls[2]!.args);
    // The reservation was released while the site ran: interrupted, uncharged.
    const q5 = input({ engine: 'http' });
    const r5 = await run(q5, {
      settle: async () => {
        throw ApplicationFailure.nonRetryable('the reservation was released', 'already_released');
      },
    });
    expectError(r5.result, q5, 'request_interrupted', 409, receipt(q5, 'released', COST, 0));
    expect(r5.steps).toEqual(['reserveCredits', 'executeOperation', 'settleAndFinalize', 'settleAndFinalize']);
    for (const r of [r1, r2, r3, r4, r5]) expect(r.scheduled).toEqual([]);
  });

  it('the local execute step keeps the retry policy: a retryable failure retried, a non-retryable one released', async () => {
    let attempts = 0;
    const q1 = input({ engine: 'http' });
    const r1 = await run(q1, {
      execute: async () => {
        attempts += 1;
        if (attempts === 1) throw ApplicationFailure.create({ type: 'upstream_http_error', message: 'The website returned 503' });
        return OUTPUT;
      },
    });
    expect(r1.result.status).toBe(200);
    expect(r1.steps).toEqual(['reserveCredits', 'executeOperation', 'executeOperation', 'settleAndFinalize']);
    // The fused step tried once; the site then waits the retry interval, as the step's own retries do.
    const timers = r1.events.flatMap((e) => (e.timerStartedEventAttributes ? [e.timerStartedEventAttributes.startToFireTimeout] : []));
    expect(timers.map((d) => Number(d?.seconds ?? 0) * 1000 + (d?.nanos ?? 0) / 1e6)).toEqual([500]);
    expect(r1.patches).toEqual(['http-read-fused', 'http-read-fused-retry-wait']);
    const q2 = input({ engine: 'http' });
    const r2 = await run(q2, { execute: async () => Promise.reject(ApplicationFailure.create({ type: 'upstream_not_found', message: 'The website returned 404' })) });
    expectError(r2.result, q2, 'upstream_not_found', 502, receipt(q2, 'released', COST, 0));
    expect(r2.steps).toEqual(['reserveCredits', 'executeOperation', 'markRefundPending', 'releaseCredits', 'finalizeRequest']);
    expect(r2.scheduled).toEqual([]);
  });

  it('a local execute step that reaches the deadline (and stops itself, as execute.ts does) is execution_timeout, released once', async () => {
    const deadlineAt = Date.now() + 8_000;
    const q = input({ engine: 'http', deadlineAt });
    const r = await run(q, {
      execute: async () => {
        await sleep(deadlineAt - Date.now());
        throw ApplicationFailure.create({ type: 'execution_timeout', message: 'The workflow did not finish within its time limit', nonRetryable: true });
      },
    });
    expectError(r.result, q, 'execution_timeout', 504, receipt(q, 'released', COST, 0));
    expect(r.steps).toEqual(['reserveCredits', 'executeOperation', 'markRefundPending', 'releaseCredits', 'finalizeRequest']);
  });

  it('an HTTP action stays a normal activity (one attempt, heartbeats): never local, never patched', async () => {
    const q = input({ engine: 'http', api: '@clinic', operation: 'book_appointment', performsActions: true });
    const r = await run(q, { execute: async () => ({ status: 'confirmed' }) });
    expect(r.result.status).toBe(200);
    expect(r.scheduled).toEqual(['executeOperation']);
    expect(r.queues).toEqual([taskQueue]);
    expect(r.patches).toEqual([]);
  });

  it('a read-only browser operation runs reserve, execute and settle in ONE normal activity on the browser task queue, patch recorded', async () => {
    const q = input({ engine: 'browser', browserTaskQueue: browserQueue });
    const r = await run(q);
    expect(r.result).toEqual({ status: 200, body: { success: true, data: { output: OUTPUT, receipt: receipt(q, 'settled', COST, COST) } } });
    expect(r.steps).toEqual(['reserveCredits', 'executeOperation', 'settleAndFinalize']);
    expect(r.calls[1]!.args).toEqual(executeArgs(q));
    expect(r.calls[2]!.args.finalize).toEqual({ requestId: q.requestId, status: 'succeeded', errorCode: null, retentionMs: q.retentionMs, envelope: r.result });
    expect(r.scheduled).toEqual(['runReadQuery']);
    expect(r.queues).toEqual([browserQueue]);
    expect(localActivities(r)).toEqual([]);
    expect(r.patches).toEqual(['browser-read-fused']);
    // With heartbeats, bounded by the query's deadline, tried once (the ordinary steps retry).
    const attrs = r.events.find((e) => e.activityTaskScheduledEventAttributes)!.activityTaskScheduledEventAttributes!;
    expect(Number(attrs.heartbeatTimeout?.seconds ?? 0)).toBe(q.heartbeatTimeoutMs / 1000);
    expect(attrs.retryPolicy?.maximumAttempts).toBe(1);
  });

  it('the fused browser step hands over where it stops: refused reservation, non-retryable failure released, retryable failure retried on the browser queue', async () => {
    const q1 = input({ engine: 'browser', browserTaskQueue: browserQueue });
    const r1 = await run(q1, { reserve: async () => ({ ok: false, reason: 'insufficient_credits', available: 1 }) });
    expectError(r1.result, q1, 'insufficient_credits', 402, receipt(q1, 'not_started', 0, 0));
    expect(r1.steps).toEqual(['reserveCredits', 'finalizeRequest']);
    expect(r1.scheduled).toEqual(['runReadQuery']);
    const q2 = input({ engine: 'browser', browserTaskQueue: browserQueue });
    const r2 = await run(q2, { execute: async () => Promise.reject(ApplicationFailure.create({ type: 'upstream_not_found', message: 'The website returned 404' })) });
    expectError(r2.result, q2, 'upstream_not_found', 502, receipt(q2, 'released', COST, 0));
    expect(r2.steps).toEqual(['reserveCredits', 'executeOperation', 'markRefundPending', 'releaseCredits', 'finalizeRequest']);
    expect(r2.scheduled).toEqual(['runReadQuery']);
    let attempts = 0;
    const q3 = input({ engine: 'browser', browserTaskQueue: browserQueue });
    const r3 = await run(q3, {
      execute: async () => {
        attempts += 1;
        if (attempts === 1) throw ApplicationFailure.create({ type: 'upstream_http_error', message: 'The website returned 503' });
        return OUTPUT;
      },
    });
    expect(r3.result).toEqual({ status: 200, body: { success: true, data: { output: OUTPUT, receipt: receipt(q3, 'settled', COST, COST) } } });
    expect(r3.steps).toEqual(['reserveCredits', 'executeOperation', 'executeOperation', 'settleAndFinalize']);
    // The ordinary execute step, a normal activity on the browser queue, after the retry interval.
    expect(r3.scheduled).toEqual(['runReadQuery', 'executeOperation']);
    expect(r3.queues).toEqual([browserQueue, browserQueue]);
    const timers = r3.events.flatMap((e) => (e.timerStartedEventAttributes ? [e.timerStartedEventAttributes.startToFireTimeout] : []));
    expect(timers.map((d) => Number(d?.seconds ?? 0) * 1000 + (d?.nanos ?? 0) / 1e6)).toEqual([500]);
  });

  it('a fused browser step whose worker stops heartbeating (lost): the ordinary steps run it again, reserved and settled once per request', async () => {
    let attempts = 0;
    const q = input({ engine: 'browser', browserTaskQueue: browserQueue, heartbeatTimeoutMs: 1_000 });
    const r = await run(q, {
      execute: async () => {
        attempts += 1;
        // The first attempt hangs without a beat, as on a worker that died, and never answers in time.
        if (attempts === 1) await sleep(4_000).then(() => Promise.reject(new Error('lost')));
        return OUTPUT;
      },
    });
    expect(r.result).toEqual({ status: 200, body: { success: true, data: { output: OUTPUT, receipt: receipt(q, 'settled', COST, COST) } } });
    // Reserving again returns the first reservation (once per request, credits.ts); settled once.
    expect(r.steps).toEqual(['reserveCredits', 'executeOperation', 'reserveCredits', 'executeOperation', 'settleAndFinalize']);
    expect(r.scheduled).toEqual(['runReadQuery', 'executeOperation']);
    const timedOut = r.events.flatMap((e) => (e.activityTaskTimedOutEventAttributes ? [e.activityTaskTimedOutEventAttributes.failure?.timeoutFailureInfo?.timeoutType] : []));
    expect(timedOut.map((t) => decodeTimeoutType(t ?? undefined))).toEqual(['HEARTBEAT']);
  });

  it('a browser operation from before the fused step (no browser queue in its input) runs the ordinary steps', async () => {
    const q = input({ engine: 'browser' });
    const r = await run(q);
    expect(r.result.status).toBe(200);
    expect(r.steps).toEqual(['reserveCredits', 'executeOperation', 'settleAndFinalize']);
    expect(r.scheduled).toEqual(['executeOperation']);
    expect(r.queues).toEqual([taskQueue]);
    expect(r.patches).toEqual([]);
  });
});
