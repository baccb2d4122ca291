// `npm run record-histories`: record the histories test/replay.test.ts replays. Needs a running
// `npm start` (same DATA_DIR / TEMPORAL_TASK_QUEUE): it reads `$DATA_DIR/runtime.json`, makes real
// runs of every workflow type the worker registers through the real API, worker and demo sites,
// and writes each run's full history to test/histories/<name>.json (Temporal's JSON form, the
// one `temporal workflow show --output json` prints; nothing stripped).
//
// It creates two small organizations of its own and RESETS THE DEMO SITES' STATE (bookings,
// faults) first, so the action books a free slot and the injected fault is the only one.
// `npm run record-histories -- builder-test-run health-check-browser` records only those files (no other run is made);
// the saga's branches below can be named the same way (`-- query-deadline-passed`).
//
// The saga's branches a real stack cannot produce on demand (deadline passed, ledger unreachable,
// an action timing out, a request closed or released under the run) are recorded from the same
// workflow code run by a worker of the script's own, on a task queue of its own, with the stub
// activities of test/query-workflow.test.ts: the history is the workflow's, whatever the stubs did.
import fs from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client, Connection } from '@temporalio/client';
import { ApplicationFailure } from '@temporalio/common';
import { DefaultLogger, NativeConnection, Runtime, Worker } from '@temporalio/worker';
import type { QueryWorkflowInput } from '../shared/workflow-contract.ts';
import type { queryWorkflow } from '../workflows/query-workflow.ts';
import { maintenanceScheduleId } from '../apps/worker/maintenance-schedule.ts';
import { workflowBundle } from '../apps/worker/worker.ts';
import { browserTaskQueue, loadConfig } from '../shared/config.ts';
import { createOrg } from '../shared/db/orgs.ts';
import { createPool } from '../shared/db/pool.ts';
import { historyToJson } from '../test/helpers/history-json.ts';
import { createDataConverter } from '../shared/temporal/data-converter.ts';
import { decryptPayloadsIn } from '../shared/temporal/payload-codec.ts';
import { loadPayloadKeyring } from '../shared/temporal/payload-keys.ts';
import { OUTPUT, sagaInput, scenarios, stubs, type Scenario } from '../test/helpers/saga-stubs.ts';
import { testRun, testRunWorkflowId, workflowTemplate } from '../shared/builder/index.ts';

const OUT_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../test/histories');
/** A history above this is a sign the run did far more than a recording needs. */
const MAX_BYTES = 100_000;

interface StackRuntime {
  base_url: string;
  database_url: string;
  temporal_address: string;
  demo_sites: string;
}

const config = loadConfig();
const runtimeFile = path.join(config.dataDir, 'runtime.json');
const runtime = JSON.parse(await fs.readFile(runtimeFile, 'utf8').catch(() => {
  throw new Error(`no running stack: ${runtimeFile} not found (start one with \`npm start\`, same DATA_DIR)`);
})) as StackRuntime;
const taskQueue = config.TEMPORAL_TASK_QUEUE;
const db = createPool(runtime.database_url, 2);
const connection = await Connection.connect({ address: runtime.temporal_address });
// The stack encrypts payloads (shared/temporal/payload-codec.ts): the script's client and stub worker use the same keys.
const dataConverter = await createDataConverter(config);
const client = new Client({ connection, namespace: config.TEMPORAL_NAMESPACE, dataConverter });
const payloadKeys = await loadPayloadKeyring(config);
const log = (event: string, fields: Record<string, unknown> = {}) => console.error(JSON.stringify({ event, ...fields }));

async function demo(p: string, body: unknown = {}) {
  const res = await fetch(`${runtime.demo_sites}${p}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  if (!res.ok) throw new Error(`demo ${p}: ${res.status}`);
}

/** One query through the API; the workflow id of its run, read from its request row. */
async function query(apiKey: string, body: unknown, expectStatus: number, expectBilling?: string): Promise<string> {
  const res = await fetch(`${runtime.base_url}/v1/query`, {
    method: 'POST',
    headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  const text = await res.text();
  if (res.status !== expectStatus) throw new Error(`query answered ${res.status}, wanted ${expectStatus}: ${text}`);
  type Receipt = { request_id: string; billing: { status: string } };
  const parsed = JSON.parse(text) as { data?: { receipt: Receipt }; error?: { request_id: string; receipt?: Receipt } };
  const receipt = parsed.data?.receipt ?? parsed.error?.receipt;
  if (expectBilling && receipt?.billing.status !== expectBilling) throw new Error(`query billing ${receipt?.billing.status}, wanted ${expectBilling}: ${text}`);
  const requestId = receipt?.request_id ?? parsed.error?.request_id;
  const r = await db.query<{ workflow_id: string }>('SELECT workflow_id FROM requests WHERE id = $1', [requestId]);
  if (!r.rows[0]) throw new Error(`no request row for ${requestId}`);
  return r.rows[0].workflow_id;
}

/** `-- builder-test-run`: record only the builder's test-run history. */
// Names given on the command line record only those files (no other run is made).
const only = process.argv.slice(2);
const want = (name: string) => only.length === 0 || only.includes(name);

async function save(name: string, workflowId: string, runId?: string) {
  const handle = client.workflow.getHandle(workflowId, runId);
  await handle.result(); // a history is recorded only once the run is closed
  const history = await handle.fetchHistory();
  // Recorded histories are committed and replayed with no key: their payloads are stored decrypted
  // (demo data of the script's own organizations; replay passes plain payloads through).
  decryptPayloadsIn(payloadKeys, history);
  const text = `${JSON.stringify(historyToJson(history), null, 1)}\n`;
  if (Buffer.byteLength(text) > MAX_BYTES) throw new Error(`${name}: history is ${Buffer.byteLength(text)} bytes (over ${MAX_BYTES})`);
  await fs.writeFile(path.join(OUT_DIR, `${name}.json`), text);
  log('history_recorded', { name, workflowId, events: history.events?.length, bytes: Buffer.byteLength(text) });
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const unreachable = async (): Promise<never> => {
  throw new Error('connect ECONNREFUSED 127.0.0.1:5432');
};
interface Branch {
  name: string;
  /** Input changes, made when the run starts. */
  input?: () => Partial<QueryWorkflowInput>;
  /** What the stubs do. */
  scenario: Scenario;
  /** The envelope's error code, or null for a 200: a run that ended otherwise is not recorded. */
  outcome: string | null;
}

const fail = (type: string, message: string) => async (): Promise<never> => {
  throw ApplicationFailure.nonRetryable(message, type);
};
const closed: Scenario['reserve'] = async () => ({ ok: false, reason: 'request_closed', status: 'interrupted' });
const lostReservation: Scenario['finalize'] = (f) => (f.status === 'rejected' ? { moved: false, status: 'processing' } : { moved: true, status: f.status });

function branches(stubQueue: string): Branch[] {
  let attempts = 0;
  const flaky = async () => {
    attempts += 1;
    if (attempts === 1) throw ApplicationFailure.create({ type: 'upstream_http_error', message: 'The website returned 503' });
    return OUTPUT;
  };
  let browserAttempts = 0;
  const flakyBrowser = async () => {
    browserAttempts += 1;
    if (browserAttempts === 1) throw ApplicationFailure.create({ type: 'upstream_http_error', message: 'The website returned 503' });
    return OUTPUT;
  };
  return [
    { name: 'query-deadline-passed', input: () => ({ deadlineAt: Date.now() - 1_000 }), scenario: {}, outcome: 'execution_timeout' },
    // The first task retried past the deadline after its lost attempt reserved (patched('late-start-releases')).
    { name: 'query-late-start-released', input: () => ({ deadlineAt: Date.now() - 1_000 }), scenario: { finalize: lostReservation }, outcome: 'execution_timeout' },
    { name: 'query-billing-unavailable', scenario: { reserve: unreachable }, outcome: 'billing_unavailable' },
    { name: 'query-billing-unavailable-released', scenario: { reserve: unreachable, finalize: lostReservation }, outcome: 'billing_unavailable' },
    { name: 'query-request-closed', scenario: { reserve: closed }, outcome: 'request_interrupted' },
    { name: 'query-retried-then-success', scenario: { execute: flaky }, outcome: null },
    { name: 'query-interrupted-at-settle', scenario: { settle: fail('already_released', 'the reservation was released') }, outcome: 'request_interrupted' },
    {
      name: 'query-release-refused',
      scenario: { execute: fail('upstream_not_found', 'The website returned 404'), release: fail('already_settled', 'already settled') },
      outcome: 'upstream_not_found',
    },
    // A read-only browser operation: reserve, execute and settle in one activity on the browser task
    // queue (a stub worker polls it; patched('browser-read-fused')).
    { name: 'query-browser-queue', input: () => ({ api: '@shop', operation: 'order_history', engine: 'browser', browserTaskQueue: `${stubQueue}-browser` }), scenario: {}, outcome: null },
    // The same with a retryable site failure: the fused step stops at execute, the ordinary execute
    // step (a normal activity on the browser queue) runs it again after the retry interval.
    {
      name: 'query-browser-retried',
      input: () => ({ api: '@shop', operation: 'order_history', engine: 'browser', browserTaskQueue: `${stubQueue}-browser` }),
      scenario: { execute: flakyBrowser },
      outcome: null,
    },
    // An action no worker takes (its task queue unpolled) times out SCHEDULE_TO_START on its first
    // attempt: certainly never run, so execution_timeout and released (patched('action-never-started')).
    {
      name: 'query-action-never-started',
      input: () => ({ api: '@shop', operation: 'place_order', performsActions: true, engine: 'browser', browserTaskQueue: `${stubQueue}-unpolled`, deadlineAt: Date.now() + 8_000 }),
      scenario: {},
      outcome: 'execution_timeout',
    },
    // The execute activity outlives the deadline (its start-to-close).
    {
      name: 'query-action-unconfirmed',
      input: () => ({ api: '@clinic', operation: 'book_appointment', performsActions: true, deadlineAt: Date.now() + 10_000 }),
      scenario: { execute: async () => sleep(12_000).then(() => ({})) },
      outcome: 'action_unconfirmed',
    },
  ];
}

async function recordBranches() {
  // The stub worker's state changes at info are noise; warnings and errors stay.
  Runtime.install({ logger: new DefaultLogger('WARN') });
  const nc = await NativeConnection.connect({ address: runtime.temporal_address });
  const stubQueue = `record-histories-${Date.now()}`;
  try {
    const worker = await Worker.create({ connection: nc, namespace: config.TEMPORAL_NAMESPACE, taskQueue: stubQueue, workflowBundle: await workflowBundle(), activities: stubs, dataConverter, shutdownGraceTime: '1 second' });
    const browser = await Worker.create({ connection: nc, namespace: config.TEMPORAL_NAMESPACE, taskQueue: `${stubQueue}-browser`, activities: stubs, dataConverter, shutdownGraceTime: '1 second' });
    const browserRun = browser.run();
    await worker.runUntil(async () => {
      // Read-only HTTP operations (the API sends the engine): the local execute path.
      for (const b of branches(stubQueue).filter((x) => want(x.name))) {
        const q = sagaInput({ engine: 'http', ...(b.input?.() ?? {}) });
        scenarios.set(q.requestId, b.scenario);
        const workflowId = `record-${b.name}-${q.requestId}`;
        const env = await client.workflow.execute<typeof queryWorkflow>('queryWorkflow', { taskQueue: stubQueue, workflowId, args: [q] });
        const code = env.body.success ? null : env.body.error.code;
        if (code !== b.outcome) throw new Error(`${b.name} ended with ${code ?? 'success'}, not ${b.outcome ?? 'success'}: not recorded`);
        await save(b.name, workflowId);
      }
    });
    browser.shutdown();
    await browserRun;
  } finally {
    await nc.close();
  }
}

const london = { api: '@weather', operation: 'current_weather', input: { city: 'London' } };

try {
  await fs.mkdir(OUT_DIR, { recursive: true });
  await demo('/__demo/reset');
  const org = await createOrg(db, `History recorder ${Date.now()}`, 10);
  const broke = await createOrg(db, `History recorder (no credits) ${Date.now()}`, 0);
  // builderTestRunWorkflow: the template's example on the real engine, outcome recorded.
  if (want('builder-test-run')) {
    const builderRun = await testRun({ db, temporal: client, taskQueue, browserTaskQueue: browserTaskQueue(config) }, org.org_id, workflowTemplate('@recorded-bookshop'));
    if (!builderRun.passed) throw new Error('the template test run did not pass: not recorded');
    await save('builder-test-run', testRunWorkflowId(org.org_id));
  }
  if (want('health-check-browser')) {
    // healthCheckWorkflow as its Schedule starts it now: a browser API's examples on the browser task queue.
    const healthId = `record-health-check-browser-${Date.now()}`;
    await client.workflow.start('healthCheckWorkflow', {
      taskQueue,
      workflowId: healthId,
      args: [{ apis: ['@jobs'], concurrency: 2, exampleTimeoutMs: 30_000, browserTaskQueue: browserTaskQueue(config) }],
    });
    await save('health-check-browser', healthId);
  }
  if (want('query-browser-success')) {
    // queryWorkflow for a read-only browser operation on the real engine: reserve, execute and settle
    // in one activity on the browser task queue (patched('browser-read-fused')).
    await save('query-browser-success', await query(org.api_key, { api: '@jobs', operation: 'search_jobs', input: { keywords: 'typescript', location: 'london' } }, 200));
  }
  if (want('health-check')) {
    // healthCheckWorkflow, limited to one API so the history stays small: one batch.
    const healthId = `record-health-check-${Date.now()}`;
    await client.workflow.start('healthCheckWorkflow', { taskQueue, workflowId: healthId, args: [{ apis: ['@weather'], concurrency: 2, exampleTimeoutMs: 30_000 }] });
    await save('health-check', healthId);
  }
  if (want('health-check-batches')) {
    // The first run of a chain of batches of two operations: it continues as new with its summary.
    const healthId = `record-health-check-batches-${Date.now()}`;
    const first = await client.workflow.start('healthCheckWorkflow', { taskQueue, workflowId: healthId, args: [{ apis: ['@weather'], concurrency: 2, exampleTimeoutMs: 30_000, batchSize: 2 }] });
    await save('health-check-batches', healthId, first.firstExecutionRunId);
  }
  if (only.length === 0) {
    // queryWorkflow: reserve → execute → settle + finalize.
    await save('query-success', await query(org.api_key, london, 200));
    // queryWorkflow, response shaping on the way.
    await save('query-shaped', await query(org.api_key, { ...london, response: { format: 'markdown' } }, 200));
    // queryWorkflow: the site answers 404 (the recipe's not_found, non-retryable) → refund pending,
    // release, failed envelope.
    await demo('/__demo/faults', { host: 'weather.example.test', path_prefix: '/api/v1/current', status: 404, times: 1 });
    await save('query-failure-released', await query(org.api_key, london, 404, 'released'));
    // queryWorkflow: too few credits → rejected with local activities only.
    await save('query-insufficient-credits', await query(broke.api_key, london, 402));
    // queryWorkflow for an action (performs_actions: one attempt, heartbeats).
    const booking = { api: '@clinic', operation: 'book_appointment', input: { slot_id: '20250610-REYE-0930', patient_name: 'Jordan Lee', email: 'jordan.lee@example.com' } };
    await save('query-action', await query(org.api_key, booking, 200));


    // maintenanceWorkflow, exactly as its Schedule starts it (the worker created the Schedule).
    const schedule = client.schedule.getHandle(maintenanceScheduleId(taskQueue));
    const t0 = Date.now();
    await schedule.trigger();
    let run: { workflowId: string; firstExecutionRunId: string } | undefined;
    for (const end = Date.now() + 60_000; !run && Date.now() < end; await new Promise((r) => setTimeout(r, 300))) {
      run = (await schedule.describe()).info.recentActions.find((a) => a.takenAt.getTime() >= t0)?.action.workflow;
    }
    if (!run) throw new Error('the maintenance Schedule did not start a run within 60 s');
    await save('maintenance', run.workflowId, run.firstExecutionRunId);
    await demo('/__demo/reset');
  }
  // The saga's branches (all of them, or those named on the command line).
  if (only.length === 0 || branches('').some((b) => only.includes(b.name))) await recordBranches();
} finally {
  await connection.close();
  await db.end();
}
