// The Temporal Schedule that runs the health check (workflows/health-check-workflow.ts).
// Every worker ensures it at start-up (apps/worker/schedules.ts: create, or update keeping its state).
import type { Client, ScheduleOptionsStartWorkflowAction } from '@temporalio/client';
import { browserTaskQueue, type Config } from '../../shared/config.ts';
import type { healthCheckWorkflow } from '../../workflows/health-check-workflow.ts';
import { ensureSchedule, ensureScheduleAtStart } from './schedules.ts';
import type { PayloadKeyConfig } from '../../shared/temporal/payload-keys.ts';

/** One Schedule per task queue (a namespace may hold several deployments); fixed, so creation is idempotent. */
export const healthScheduleId = (taskQueue: string) => `health-check:${taskQueue}`;

type HealthConfig = Pick<
  Config,
  'TEMPORAL_NAMESPACE' | 'TEMPORAL_TASK_QUEUE' | 'TEMPORAL_BROWSER_TASK_QUEUE' | 'HEALTH_CHECK_INTERVAL_SECONDS' | 'HEALTH_CHECK_EXAMPLE_TIMEOUT_MS' | 'HEALTH_CHECK_CONCURRENCY'
>;

function action(config: HealthConfig): ScheduleOptionsStartWorkflowAction<typeof healthCheckWorkflow> {
  return {
    type: 'startWorkflow',
    workflowType: 'healthCheckWorkflow',
    workflowId: `health-check-${config.TEMPORAL_TASK_QUEUE}`,
    taskQueue: config.TEMPORAL_TASK_QUEUE,
    args: [{ exampleTimeoutMs: config.HEALTH_CHECK_EXAMPLE_TIMEOUT_MS, concurrency: config.HEALTH_CHECK_CONCURRENCY, browserTaskQueue: browserTaskQueue(config) }],
    // Every example has its own time limit; this only bounds a run stuck without workers.
    workflowExecutionTimeout: '1 hour',
  };
}

/** Create or update the health Schedule (a new one runs at once, so real health shows within minutes). */
export function ensureHealthSchedule(client: Client, config: HealthConfig): Promise<'created' | 'updated'> {
  return ensureSchedule(client, {
    scheduleId: healthScheduleId(config.TEMPORAL_TASK_QUEUE),
    spec: { intervals: [{ every: `${config.HEALTH_CHECK_INTERVAL_SECONDS} seconds` }] },
    action: action(config),
    note: 'Created by the worker: runs verified examples and records operation health',
  });
}

/** Worker start-up step: never stops the worker from starting. */
export async function ensureHealthScheduleAtStart(config: HealthConfig & PayloadKeyConfig & { TEMPORAL_ADDRESS: string; HEALTH_CHECKS_ENABLED: boolean }): Promise<void> {
  if (!config.HEALTH_CHECKS_ENABLED) return;
  await ensureScheduleAtStart(config, 'health', (client) => ensureHealthSchedule(client, config));
}
