// The Temporal worker. By WORKER_ROLE: `all` polls the main task queue (workflows, every activity)
// and the browser queue; `http` the main queue only; `browser` the browser queue only (activities).
import fs from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import v8 from 'node:v8';
import { NativeConnection, Worker, bundleWorkflowCode, type WorkflowBundleWithSourceMap } from '@temporalio/worker';
import { createActivities } from '../../activities/index.ts';
import { loadKeyring } from '../../shared/db/connections.ts';
import { createRecipeRunner } from '../../activities/engines/index.ts';
import { browserTaskQueue, httpConcurrencyPerOrg, type Config } from '../../shared/config.ts';
import type { LocalResults } from '../../shared/local-results.ts';
import { createPool, poolTimeouts } from '../../shared/db/pool.ts';
import { createLedgerPool } from '../../shared/db/credits.ts';
import { FAILURE_CONVERTER_PATH, createDataConverter } from '../../shared/temporal/data-converter.ts';
import { ensureHealthScheduleAtStart } from './health-schedule.ts';
import { BrowserTaskSlots } from './browser-task-slots.ts';
import { createMaintenanceActivities } from '../../activities/maintenance.ts';
import { ensureMaintenanceScheduleAtStart } from './maintenance-schedule.ts';
import { startTracing, type Tracing } from '../../shared/telemetry/tracing.ts';

const WORKFLOWS_PATH = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../workflows/index.ts');

const bundles = new Map<string, Promise<WorkflowBundleWithSourceMap>>();
/** Bundling the workflows is part of start-up, so a non-deterministic import fails here, not in production.
 *  With tracing on, the bundle also holds the OpenTelemetry workflow interceptors. The failure
 *  converter is bundled too: failures the workflow code itself sends keep their message and stack
 *  trace in an encrypted payload, as the worker's own do (shared/temporal/failure-converter.cjs). */
export function workflowBundle(workflowInterceptorModules: string[] = []): Promise<WorkflowBundleWithSourceMap> {
  const key = workflowInterceptorModules.join('\n');
  let bundle = bundles.get(key);
  if (!bundle) bundles.set(key, (bundle = bundleWorkflowCode({ workflowsPath: WORKFLOWS_PATH, workflowInterceptorModules, failureConverterPath: FAILURE_CONVERTER_PATH, logger: quietLogger })));
  return bundle;
}

/** The prebuilt bundle when it was built with tracing as this process has it (`npm run
 *  build:workflows` follows OTEL_TRACES_EXPORTER), else a bundle made now: a prebuilt bundle
 *  without the interceptors would drop the workflow's spans, one with them would call a missing sink. */
async function workflowCode(config: Config, tracing: Tracing | undefined) {
  if (config.WORKFLOW_BUNDLE_PATH) {
    const traced = (await fs.readFile(config.WORKFLOW_BUNDLE_PATH, 'utf8')).includes('interceptors-opentelemetry/lib/workflow-interceptors');
    if (traced === (tracing !== undefined)) return { codePath: config.WORKFLOW_BUNDLE_PATH };
    console.warn(`WORKFLOW_BUNDLE_PATH was built with tracing ${traced ? 'on' : 'off'} and this worker has it ${traced ? 'off' : 'on'}: bundling the workflows now.`);
  }
  return workflowBundle(tracing?.workflowInterceptorModules);
}

const quietLogger = {
  log() {},
  trace() {},
  debug() {},
  info() {},
  warn(message: string, meta?: unknown) {
    console.warn(message, meta ?? '');
  },
  error(message: string, meta?: unknown) {
    console.error(message, meta ?? '');
  },
};

/**
 * The SDK's own default workflow cache size for this process (@temporalio/worker 1.24,
 * worker-options.js, with `reuseV8Context`): about 600 workflows per GiB of V8 heap above 200 MiB,
 * at least 10.
 */
export function sdkDefaultCachedWorkflows(heapLimitBytes = v8.getHeapStatistics().heap_size_limit): number {
  const heapMiB = heapLimitBytes / (1024 * 1024);
  return Math.max(Math.floor((Math.max(heapMiB - 200, 0) * 600) / 1024), 10);
}

/**
 * The Worker.create tuning of the query task queue (config.ts WORKER_*); unset ones keep the SDK's
 * defaults, except two. Local activities always (see there). And workflow-task slots: a read-only
 * HTTP query runs as a local activity inside its first workflow task, which holds its slot for the
 * whole run, waiting for an HTTP_CONCURRENCY slot included. The SDK hands these slots out first
 * come, first served, 40 by default: fewer than one organization's running queries may be
 * (PLAN_CONCURRENCY), so one organization's slow runs took them all and another's query waited in
 * Temporal's queue until one ended, and under load one start in eight missed eager start
 * (test/http-workflow-slots.test.ts; bench/results/2026-12-04-issue-11-session45.md). Unset, they
 * are as many as the local-activity slots (at most WORKER_MAX_CACHED_WORKFLOWS, when that is set),
 * and the cache, unless set, holds at least as many workflows as there are slots: a workflow whose
 * task is in progress cannot be evicted, so a cache smaller than the slots leaves some unusable.
 */
export function workerTuning(c: Config, sdkCache = sdkDefaultCachedWorkflows()) {
  const ownCache = c.WORKER_MAX_CACHED_WORKFLOWS;
  const localActivities = c.WORKER_MAX_CONCURRENT_LOCAL_ACTIVITIES;
  // A cache of 0 (disabled) bounds nothing.
  const workflowTasks = c.WORKER_MAX_CONCURRENT_WORKFLOW_TASKS ?? (ownCache ? Math.min(ownCache, localActivities) : localActivities);
  const cache = ownCache ?? Math.max(sdkCache, workflowTasks);
  const set = {
    maxCachedWorkflows: cache,
    maxConcurrentWorkflowTaskExecutions: workflowTasks,
    maxConcurrentWorkflowTaskPolls: c.WORKER_MAX_CONCURRENT_WORKFLOW_TASK_POLLS,
    maxConcurrentActivityTaskPolls: c.WORKER_MAX_CONCURRENT_ACTIVITY_TASK_POLLS,
    maxConcurrentLocalActivityExecutions: localActivities,
  };
  return Object.fromEntries(Object.entries(set).filter(([, v]) => v !== undefined));
}

export interface RunningWorker {
  /** Stops polling, finishes in-flight tasks, closes the browser and the pool. */
  shutdown(): Promise<void>;
  done: Promise<void>;
  /**
   * The connection the workers poll with. An API in the same process starts workflows through it
   * with eager start: the first workflow task comes back in the start response, to this worker.
   */
  connection: NativeConnection;
}

/** WORKER_DB_POOL_SIZE split between the worker's pool and its ledger pool (at least one each). */
export function workerPoolSizes(total: number): { main: number; ledger: number } {
  const ledger = Math.max(1, Math.floor(total / 4));
  return { main: Math.max(1, total - ledger), ledger };
}

export interface StartWorkerOptions {
  /** An API in this process waiting for envelopes (apps/dev/stack.ts): each one written is handed to it. */
  localResults?: LocalResults;
}

export async function startWorker(config: Config & { DATABASE_URL: string; TEMPORAL_ADDRESS: string }, options: StartWorkerOptions = {}): Promise<RunningWorker> {
  const dataConverter = await createDataConverter(config); // payloads encrypted at rest (shared/temporal/payload-codec.ts)
  const tracing = await startTracing('wqs-worker'); // undefined unless OTEL_TRACES_EXPORTER is set (shared/telemetry)
  // Reservations on connections of their own, whose statements end within seconds (credits.ts):
  // one round trip each, holding a connection for a few milliseconds. A quarter of the worker's
  // connections, so WORKER_DB_POOL_SIZE stays the worker's whole share of PostgreSQL.
  const { main, ledger: ledgerSize } = workerPoolSizes(config.WORKER_DB_POOL_SIZE);
  const db = createPool(config.DATABASE_URL, main, poolTimeouts(config));
  const ledger = createLedgerPool(config.DATABASE_URL, ledgerSize);
  const runner = createRecipeRunner({
    hostMap: config.siteHostMap,
    chromiumPath: config.CHROMIUM_PATH,
    chromiumSandbox: config.CHROMIUM_SANDBOX,
    browserConcurrency: config.BROWSER_CONCURRENCY,
    httpConcurrency: config.HTTP_CONCURRENCY,
    httpConcurrencyPerOrg: httpConcurrencyPerOrg(config),
  });
  const connection = await NativeConnection.connect({ address: config.TEMPORAL_ADDRESS });
  const activities = createActivities({ db, ledger, runner, keyring: () => loadKeyring(config), localResults: options.localResults });
  const role = config.WORKER_ROLE;
  const workers: Worker[] = [];
  if (role !== 'browser') {
    // Read by the patched SDK in each workflow thread, which copies the environment when it starts
    // (with Worker.create below): the stack-trace query's promise hook, config.ts.
    process.env.WORKER_WORKFLOW_STACK_TRACES = config.WORKER_WORKFLOW_STACK_TRACES;
    workers.push(
      await Worker.create({
        connection,
        namespace: config.TEMPORAL_NAMESPACE,
        taskQueue: config.TEMPORAL_TASK_QUEUE,
        dataConverter,
        // A prebuilt bundle starts a worker in a second instead of bundling again.
        workflowBundle: await workflowCode(config, tracing),
        activities: { ...activities, ...createMaintenanceActivities({ db, temporal: { address: config.TEMPORAL_ADDRESS, namespace: config.TEMPORAL_NAMESPACE, dataConverter }, oauthClientIdleHours: config.OAUTH_CLIENT_IDLE_HOURS }) },
        shutdownGraceTime: '10 seconds',
        ...workerTuning(config),
        ...tracing?.workerOptions, // activity spans, and the sink exporting the workflow's spans
      }),
    );
  }
  if (role !== 'http') {
    // Browser execute steps, and the examples of browser operations that health checks and builder
    // test runs run: no workflows here, so these workers scale with Chromium alone.
    workers.push(
      await Worker.create({
        connection,
        namespace: config.TEMPORAL_NAMESPACE,
        taskQueue: browserTaskQueue(config),
        dataConverter,
        activities: { executeOperation: activities.executeOperation, runReadQuery: activities.runReadQuery, runHealthExample: activities.runHealthExample, runDraftExample: activities.runDraftExample },
        shutdownGraceTime: '10 seconds',
        ...(config.WORKER_MAX_CONCURRENT_ACTIVITY_TASK_POLLS ? { maxConcurrentActivityTaskPolls: config.WORKER_MAX_CONCURRENT_ACTIVITY_TASK_POLLS } : {}),
        // A task only when a page is there for it (browser-task-slots.ts): browser runs wait in
        // Temporal's queue, ordered by their organization's fairness key, never inside this process
        // behind another organization's; health examples get task slots of their own on top, so
        // one waiting for a page never keeps a query out while a page is free.
        tuner: {
          activityTaskSlotSupplier: new BrowserTaskSlots(runner.browserPages),
          // No workflows, local activities or Nexus tasks on this queue: the SDK's sizes, unused.
          workflowTaskSlotSupplier: { type: 'fixed-size', numSlots: 100 },
          localActivityTaskSlotSupplier: { type: 'fixed-size', numSlots: 100 },
          nexusTaskSlotSupplier: { type: 'fixed-size', numSlots: 100 },
        },
        ...(tracing ? { interceptors: tracing.workerOptions.interceptors } : {}), // activity spans
      }),
    );
  }
  if (role !== 'browser') {
    // Health checks: create (or update to this config) the Schedule that runs the health-check
    // workflow on this task queue. Idempotent across workers and restarts; a failure only warns.
    await ensureHealthScheduleAtStart(config);
    await ensureMaintenanceScheduleAtStart(config); // reconciler and retention (apps/worker/maintenance-schedule.ts)
  }
  // One worker stopping (fatal error or shutdown) stops the others, so the process never half-polls.
  const runs = workers.map((w) =>
    w.run().finally(() => {
      for (const o of workers) if (o.getState() === 'RUNNING') o.shutdown();
    }),
  );
  const done = Promise.all(runs)
    .then(() => undefined)
    .finally(async () => {
      await runner.close().catch(() => {});
      await connection.close().catch(() => {});
      await db.end().catch(() => {});
      await ledger.end().catch(() => {});
      await tracing?.flush().catch(() => {});
    });
  return {
    done,
    connection,
    async shutdown() {
      for (const w of workers) if (w.getState() === 'RUNNING') w.shutdown();
      await done;
    },
  };
}
