// A wait for a run's envelope that ends before the run (a 202 after `wait`, an agent's short poll)
// leaves nothing behind on the API's Temporal connection: the SDK's `result()` long-polls the
// history again and again until the run closes, so every such wait used to keep a call open for
// as long as its run lasted; and a caller who leaves (a closed connection, a closed stream) ends
// its wait at once. Measured here on the real server, by the calls the connection has open.
import { randomUUID } from 'node:crypto';
import { InterceptingCall, type Interceptor } from '@grpc/grpc-js';
import { Client, Connection } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RunWatch } from '../apps/api/services/run-watch.ts';
import { closeDb, dataConverter, db, sleep, stack, until } from './helpers/stack.ts';

const HISTORY = '/temporal.api.workflowservice.v1.WorkflowService/GetWorkflowExecutionHistory';

describe('a wait that ends before its run', () => {
  let open = 0;
  let polls = 0;
  const counting: Interceptor = (options, nextCall) =>
    new InterceptingCall(nextCall(options), {
      start(metadata, _listener, next) {
        const counted = options.method_definition.path === HISTORY;
        if (counted) {
          open++;
          polls++;
        }
        next(metadata, {
          onReceiveStatus(status, nextStatus) {
            if (counted) open--;
            nextStatus(status);
          },
        });
      },
    });
  let connection: Connection;
  let client: Client;
  const running: string[] = [];

  beforeAll(async () => {
    connection = await Connection.connect({ address: stack().temporalAddress, interceptors: [counting] });
    client = new Client({ connection, dataConverter: await dataConverter() });
  });

  afterAll(async () => {
    for (const id of running) await client.workflow.getHandle(id).terminate('test: done').catch(() => {});
    await connection?.close();
    await closeDb();
  });

  /** A run that stays open: its task queue has no worker, so its first workflow task never starts. */
  async function openRun(): Promise<string> {
    const workflowId = `run-watch-${randomUUID()}`;
    await client.workflow.start('queryWorkflow', { taskQueue: `nobody-polls-${randomUUID()}`, workflowId, args: [{}] });
    running.push(workflowId);
    return workflowId;
  }

  function watch(RESULT_WAIT: 'history' | 'notify') {
    return new RunWatch({
      db: db(),
      temporal: async () => client,
      baseUrl: () => 'http://127.0.0.1',
      config: { RESULT_WAIT, RESULT_NOTIFY_FALLBACK_MS: 100, DATABASE_URL: stack().databaseUrl },
    });
  }

  /** A wait of `ms` on a run that stays open: it answers null after `ms`, having long-polled, and
   *  leaves no history call open behind it, nor starts one later. */
  async function waitsAndLeavesNothing(w: RunWatch, workflowId: string, ms: number) {
    const before = polls;
    const t0 = Date.now();
    expect(await w.awaitResult(workflowId, randomUUID(), ms)).toBeNull();
    expect(Date.now() - t0).toBeGreaterThanOrEqual(ms - 10);
    expect(polls).toBeGreaterThan(before);
    await until(async () => open === 0, 2_000, 20);
    const after = polls;
    await sleep(300);
    expect(polls).toBe(after);
    expect(open).toBe(0);
  }

  it('a history long-poll that ran out is cancelled (RESULT_WAIT=history)', async () => {
    await waitsAndLeavesNothing(watch('history'), await openRun(), 400);
  });

  it('the fallback long-poll beside a notification still to come is cancelled (RESULT_WAIT=notify)', async () => {
    const workflowId = await openRun();
    const w = watch('notify');
    try {
      await w.startListening();
      // The fallback begins after 100 ms without a notification, and ends with the wait.
      await waitsAndLeavesNothing(w, workflowId, 600);
    } finally {
      await w.close();
    }
  });

  it.each(['history', 'notify'] as const)('a caller who leaves ends a long wait at once, its long-poll with it (RESULT_WAIT=%s)', async (mode) => {
    const workflowId = await openRun();
    const w = watch(mode);
    try {
      if (mode === 'notify') await w.startListening();
      const left = new AbortController();
      const waiting = w.awaitResult(workflowId, randomUUID(), 30_000, undefined, left.signal);
      // Long-polling (after the 100 ms notify fallback), then the caller goes away.
      await until(async () => open > 0, 5_000, 20);
      const t0 = Date.now();
      left.abort();
      expect(await waiting).toBeNull();
      expect(Date.now() - t0).toBeLessThan(500);
      await until(async () => open === 0, 2_000, 20);
      const after = polls;
      await sleep(300);
      expect(polls).toBe(after);
      // A caller already gone never starts a wait.
      expect(await w.awaitResult(workflowId, randomUUID(), 30_000, undefined, left.signal)).toBeNull();
      await sleep(200);
      expect(polls).toBe(after);
    } finally {
      await w.close();
    }
  });

  it('the history long-poll still answers a run that closes during the wait', async () => {
    const workflowId = await openRun();
    const requestId = randomUUID();
    const waiting = watch('history').awaitResult(workflowId, requestId, 30_000);
    await until(async () => open > 0, 5_000, 20);
    await client.workflow.getHandle(workflowId).terminate('test: stopped during the wait');
    // No request row: the run closed without an envelope, and the caller hears it was interrupted.
    const env = await waiting;
    expect(env?.status).toBe(409);
    expect((env?.body as { error: { code: string; request_id: string } }).error).toMatchObject({ code: 'request_interrupted', request_id: requestId });
    await until(async () => open === 0, 2_000, 20);
  });
});
