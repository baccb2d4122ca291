// Maintenance, run by a Temporal Schedule (apps/worker/maintenance-schedule.ts):
// 1. Reconcile: requests still unresolved (`reserving`, `processing`, `refund_pending`) well past
//    their deadline are settled from their workflow's real state: left alone while it runs; the
//    envelope written when it completed with one; otherwise released and `interrupted`.
// 2. Retention: retained results are deleted once their retention ended; old catalog run events go.
// The summary (counts by outcome, credits released, rows deleted) is the workflow's result, so an
// operator reads each run in its history. One failing step does not stop the other.
import { ActivityFailure, ApplicationFailure, proxyActivities } from '@temporalio/workflow';
import type { MaintenanceActivities, ReconcileSummary, RetentionSummary } from '../activities/maintenance.ts';

export interface MaintenanceInput {
  /** Unresolved requests older than this are reconciled (the query deadline plus a margin). */
  reconcileOlderThanMs: number;
  /** A request still running this long after it was accepted is reported as overdue. */
  overdueAfterMs: number;
  /** Requests reconciled per run, and per organization within that. */
  batchSize: number;
  perOrg: number;
  /** Retention of an envelope the reconciler writes (RESULT_RETENTION_HOURS). */
  resultRetentionMs: number;
  /** Expired results (and old run events) deleted per run. */
  retentionBatchSize: number;
}

export interface MaintenanceSummary {
  reconcile: ReconcileSummary | { failed: string };
  retention: RetentionSummary | { failed: string };
}

/** Completion times feed `popular` cursors, which live 24 hours; an hour of slack. */
const RUN_EVENTS_HOURS = 25;

const maintenance = proxyActivities<MaintenanceActivities>({
  // One Temporal describe per row, sequentially; the heartbeat shows it is moving.
  startToCloseTimeout: '10 minutes',
  heartbeatTimeout: '1 minute',
  retry: { initialInterval: '2 seconds', backoffCoefficient: 2, maximumInterval: '30 seconds', maximumAttempts: 3 },
});

const failure = (err: unknown) => {
  const cause = err instanceof ActivityFailure ? err.cause : err;
  return { failed: cause instanceof ApplicationFailure || cause instanceof Error ? cause.message : String(cause) };
};

export async function maintenanceWorkflow(input: MaintenanceInput): Promise<MaintenanceSummary> {
  let reconcile: MaintenanceSummary['reconcile'];
  try {
    reconcile = await maintenance.reconcileUnresolved({
      olderThanMs: input.reconcileOlderThanMs,
      overdueAfterMs: input.overdueAfterMs,
      batchSize: input.batchSize,
      perOrg: input.perOrg,
      retentionMs: input.resultRetentionMs,
    });
  } catch (err) {
    reconcile = failure(err);
  }
  let retention: MaintenanceSummary['retention'];
  try {
    retention = await maintenance.applyRetention({ batchSize: input.retentionBatchSize, runEventsHours: RUN_EVENTS_HOURS });
  } catch (err) {
    retention = failure(err);
  }
  return { reconcile, retention };
}
