// The Temporal SDK's stack-trace query is paid for on every workflow task: its promise hook captures
// and source-maps a stack trace for each promise a workflow makes. Workers leave the hook out unless
// WORKER_WORKFLOW_STACK_TRACES=on (shared/config.ts; the SDK patched by patches/, applied by
// `npm ci`). On the real stack: the default worker answers the query "not enabled" and the query
// itself is unchanged (the answer, the progress query); a worker with `on` answers it with a
// stack.
import { Client, Connection, QueryNotRegisteredError } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { processPool } from './helpers/processes.ts';
import { progressQuery } from '../shared/workflow-contract.ts';
import { closeDb, dataConverter, newOrg, ownPair, query, stack, workflowIdOf } from './helpers/stack.ts';

const weather = { api: '@weather', operation: 'current_weather', input: { city: 'London' } };

let pair: ReturnType<typeof ownPair>;
const pool = processPool(() => pair);
let connection: Connection;
let client: Client;

beforeAll(async () => {
  pair = ownPair('stack-traces', { WORKER_WORKFLOW_STACK_TRACES: 'on' });
  connection = await Connection.connect({ address: stack().temporalAddress });
  client = new Client({ connection, dataConverter: await dataConverter() });
});
afterAll(async () => {
  await pool.killAll();
  await connection?.close();
  await closeDb();
});

/** A query through the API at `baseUrl` (the stack's own when unset), its run closed. */
async function closedRun(baseUrl?: string) {
  const org = await newOrg(10);
  const res = await query(org.api_key, weather, {}, baseUrl);
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  expect(res.body.data.receipt.billing.status).toBe('settled');
  const handle = client.workflow.getHandle(await workflowIdOf(res.body.data.receipt.request_id));
  await handle.result();
  return handle;
}

describe('the workflow stack-trace query', () => {
  it('is off by default: the worker answers it "not enabled", and the run and its progress query are as before', async () => {
    const handle = await closedRun();
    // The worker fails the query ("Workflow stack traces are not enabled on this worker": its text is
    // encrypted by the failure converter, so the client reads "Encoded failure"); the client reports
    // a query the worker refuses as INVALID_ARGUMENT, QueryNotRegisteredError.
    await expect(handle.query('__stack_trace')).rejects.toBeInstanceOf(QueryNotRegisteredError);
    // The service's own query on the same run, answered by the same worker replaying it.
    expect(await handle.query(progressQuery)).toMatchObject({ stage: 'done', message: 'Completed' });
  });

  it('answers with WORKER_WORKFLOW_STACK_TRACES=on', async () => {
    const [api] = await Promise.all([pool.spawn('api'), pool.spawn('worker')]);
    const handle = await closedRun(String(api.started.url));
    // A closed run has no pending promise: the stack is empty, but it is an answer, not a refusal.
    expect(typeof (await handle.query('__stack_trace'))).toBe('string');
    expect(await handle.query(progressQuery)).toMatchObject({ stage: 'done' });
  });
});
