// The Temporal Schedule that runs the health check (workflows/health-check-workflow.ts).
// Every worker ensures it at start-up: create it, or, when it already exists, bring its spec,
// action and policies in line with this worker's configuration. Its state (paused, note) is kept,
// so an operator's `temporal schedule toggle --pause` survives worker restarts.
import { Client, Connection, ScheduleAlreadyRunning, ScheduleOverlapPolicy, type ScheduleOptionsStartWorkflowAction } from '@temporalio/client';
import type { Config } from '../../shared/config.ts';
import type { healthCheckWorkflow } from '../../workflows/health-check-workflow.ts';

/** One Schedule per task queue (a namespace may hold several deployments); fixed, so creation is idempotent. */
export const healthScheduleId = (taskQueue: string) => `health-check:${taskQueue}`;

type HealthConfig = Pick<
  Config,
  'TEMPORAL_NAMESPACE' | 'TEMPORAL_TASK_QUEUE' | 'HEALTH_CHECK_INTERVAL_SECONDS' | 'HEALTH_CHECK_EXAMPLE_TIMEOUT_MS' | 'HEALTH_CHECK_CONCURRENCY'
>;

function action(config: HealthConfig): ScheduleOptionsStartWorkflowAction<typeof healthCheckWorkflow> {
  return {
    type: 'startWorkflow',
    workflowType: 'healthCheckWorkflow',
    workflowId: `health-check-${config.TEMPORAL_TASK_QUEUE}`,
    taskQueue: config.TEMPORAL_TASK_QUEUE,
    args: [{ exampleTimeoutMs: config.HEALTH_CHECK_EXAMPLE_TIMEOUT_MS, concurrency: config.HEALTH_CHECK_CONCURRENCY }],
    // Every example has its own time limit; this only bounds a run stuck without workers.
    workflowExecutionTimeout: '1 hour',
  };
}

const spec = (config: HealthConfig) => ({ intervals: [{ every: `${config.HEALTH_CHECK_INTERVAL_SECONDS} seconds` }] });

// SKIP: a run still going when the next is due is not doubled up; the next interval picks up.
// A short catch-up window: after an outage one run is enough, not one per missed interval.
const policies = { overlap: ScheduleOverlapPolicy.SKIP, catchupWindow: '1 minute', pauseOnFailure: false };

/**
 * Create or update the health Schedule. A newly created Schedule runs once at once
 * (`triggerImmediately`), so a fresh deployment shows real health within minutes instead of
 * `unknown` until the first interval; an existing one is only updated, never triggered.
 */
export async function ensureHealthSchedule(client: Client, config: HealthConfig): Promise<'created' | 'updated'> {
  const scheduleId = healthScheduleId(config.TEMPORAL_TASK_QUEUE);
  try {
    await client.schedule.create({
      scheduleId,
      spec: spec(config),
      action: action(config),
      policies,
      state: { triggerImmediately: true, note: 'Created by the worker: runs verified examples and records operation health' },
    });
    return 'created';
  } catch (err) {
    if (!(err instanceof ScheduleAlreadyRunning)) throw err;
  }
  await client.schedule.getHandle(scheduleId).update((prev) => ({
    spec: spec(config),
    action: action(config),
    policies,
    state: { paused: prev.state.paused, note: prev.state.note, remainingActions: prev.state.remainingActions },
  }));
  return 'updated';
}

/** Worker start-up step: its own short-lived client connection; never stops the worker from starting. */
export async function ensureHealthScheduleAtStart(config: HealthConfig & { TEMPORAL_ADDRESS: string; HEALTH_CHECKS_ENABLED: boolean }): Promise<void> {
  if (!config.HEALTH_CHECKS_ENABLED) return;
  let connection: Connection | undefined;
  try {
    connection = await Connection.connect({ address: config.TEMPORAL_ADDRESS });
    await ensureHealthSchedule(new Client({ connection, namespace: config.TEMPORAL_NAMESPACE }), config);
  } catch (err) {
    console.warn('health schedule: could not create or update it; health checks will not run until a worker does', String(err));
  } finally {
    await connection?.close().catch(() => {});
  }
}
