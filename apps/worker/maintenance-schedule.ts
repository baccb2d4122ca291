// The Temporal Schedule that runs maintenance (workflows/maintenance-workflow.ts): the reconciler
// and result retention. Like the health Schedule, every worker ensures it at start-up: created, or
// brought in line with this worker's configuration; an operator's pause survives restarts.
import type { Client, ScheduleOptionsStartWorkflowAction } from '@temporalio/client';
import type { Config } from '../../shared/config.ts';
import type { maintenanceWorkflow } from '../../workflows/maintenance-workflow.ts';
import { ensureSchedule, ensureScheduleAtStart } from './schedules.ts';
import type { PayloadKeyConfig } from '../../shared/temporal/payload-keys.ts';

/** One Schedule per task queue; fixed, so creation is idempotent. */
export const maintenanceScheduleId = (taskQueue: string) => `maintenance:${taskQueue}`;

type MaintenanceConfig = Pick<
  Config,
  | 'TEMPORAL_NAMESPACE'
  | 'TEMPORAL_TASK_QUEUE'
  | 'QUERY_DEADLINE_MS'
  | 'RESULT_RETENTION_HOURS'
  | 'RECONCILE_INTERVAL_SECONDS'
  | 'RECONCILE_MARGIN_MS'
  | 'RECONCILE_BATCH_SIZE'
  | 'RECONCILE_PER_ORG'
  | 'RETENTION_BATCH_SIZE'
>;

function action(config: MaintenanceConfig): ScheduleOptionsStartWorkflowAction<typeof maintenanceWorkflow> {
  const olderThan = config.QUERY_DEADLINE_MS + config.RECONCILE_MARGIN_MS;
  return {
    type: 'startWorkflow',
    workflowType: 'maintenanceWorkflow',
    workflowId: `maintenance-${config.TEMPORAL_TASK_QUEUE}`,
    taskQueue: config.TEMPORAL_TASK_QUEUE,
    args: [
      {
        reconcileOlderThanMs: olderThan,
        // Ten deadlines late is no slow site any more: worth an operator's look.
        overdueAfterMs: olderThan + 9 * config.QUERY_DEADLINE_MS,
        batchSize: config.RECONCILE_BATCH_SIZE,
        perOrg: config.RECONCILE_PER_ORG,
        resultRetentionMs: config.RESULT_RETENTION_HOURS * 3_600_000,
        retentionBatchSize: config.RETENTION_BATCH_SIZE,
      },
    ],
    // A run takes seconds; this only bounds one stuck without workers.
    workflowExecutionTimeout: '1 hour',
  };
}

/** Create or update the maintenance Schedule; a new one runs at once, an existing one is only updated. */
export function ensureMaintenanceSchedule(client: Client, config: MaintenanceConfig): Promise<'created' | 'updated'> {
  return ensureSchedule(client, {
    scheduleId: maintenanceScheduleId(config.TEMPORAL_TASK_QUEUE),
    spec: { intervals: [{ every: `${config.RECONCILE_INTERVAL_SECONDS} seconds` }] },
    action: action(config),
    note: 'Created by the worker: reconciles unresolved requests and deletes expired results',
  });
}

/** Worker start-up step: never stops the worker from starting. */
export async function ensureMaintenanceScheduleAtStart(config: MaintenanceConfig & PayloadKeyConfig & { TEMPORAL_ADDRESS: string; RECONCILE_ENABLED: boolean }): Promise<void> {
  if (!config.RECONCILE_ENABLED) return;
  await ensureScheduleAtStart(config, 'maintenance', (client) => ensureMaintenanceSchedule(client, config));
}
