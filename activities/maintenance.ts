// Maintenance activities, run by workflows/maintenance-workflow.ts on a Temporal Schedule:
// the reconciler settles unresolved requests from their workflow's real state, retention deletes
// what is no longer kept. Every step is a conditional update or an idempotent ledger move, so a
// retried or doubled run changes nothing twice.
import { Context } from '@temporalio/activity';
import { Client, Connection, WorkflowNotFoundError } from '@temporalio/client';
import type { DataConverter } from '@temporalio/common';
import { ledgerClosure, release, releaseAndInterrupt } from '../shared/db/credits.ts';
import { purgeExpiredFiles } from '../shared/db/files.ts';
import type { Db } from '../shared/db/pool.ts';
import {
  deleteExpiredResults,
  finalizeUnresolved,
  listStaleUnresolved,
  markReconcileChecked,
  type StaleRequest,
} from '../shared/db/requests.ts';
import { pruneRunEvents } from '../shared/db/catalog.ts';
import { deleteIdleClients } from '../shared/oauth/clients.ts';

/**
 * What the reconciler did with one request:
 * - `running`: its workflow still runs; left alone (looked at again in a later run).
 * - `finalized`: its workflow completed with a terminal envelope the row had missed; written (a
 *   reservation a failed run left open is released first).
 * - `interrupted`: its workflow closed without an envelope (failed, terminated, timed out,
 *   cancelled) or never started; the reservation was released and the row is `interrupted`.
 * - `resolved_meanwhile`: the row got its outcome while we looked; nothing changed.
 * - `error`: the workflow's state could not be read or a step failed; tried again next run.
 */
export type ReconcileOutcome = 'running' | 'finalized' | 'interrupted' | 'resolved_meanwhile' | 'error';

export interface ReconciledRequest {
  request_id: string;
  org_id: string;
  /** Temporal's status of the row's workflow (`RUNNING`, `TERMINATED`, …) or `NOT_FOUND`. */
  workflow: string;
  outcome: ReconcileOutcome;
  /** Credits the ledger gave back for this request in this run. */
  released_credits: number;
  /** Still running far past its deadline (logged for an operator). */
  overdue?: boolean;
  detail?: string;
}

export interface ReconcileSummary {
  examined: number;
  counts: Record<ReconcileOutcome, number>;
  released_credits: number;
  requests: ReconciledRequest[];
}

export interface RetentionSummary {
  results_deleted: number;
  run_events_deleted: number;
  /** Uploaded files past their 30 days. */
  files_deleted: number;
  /** MCP OAuth clients idle past OAUTH_CLIENT_IDLE_HOURS with no live grant (shared/oauth/clients.ts). */
  oauth_clients_deleted: number;
}

export interface MaintenanceActivities {
  /** Settle unresolved requests older than `olderThanMs` from their workflow's state. */
  reconcileUnresolved(a: { olderThanMs: number; overdueAfterMs: number; batchSize: number; perOrg: number; retentionMs: number }): Promise<ReconcileSummary>;
  /** Delete expired retained results, old catalog run events and idle OAuth clients, up to `batchSize` of each. */
  applyRetention(a: { batchSize: number; runEventsHours: number }): Promise<RetentionSummary>;
}

type Finalized = { status: 'succeeded' | 'rejected' | 'failed'; envelope: { status: number; body: Record<string, unknown> }; errorCode: string | null };

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * The terminal envelope a query workflow returned, when it is one and belongs to `requestId`
 * (a keyed workflow id is reused once its key expired: an older run's result is not this row's).
 * Row status and error code follow the query workflow's own finish step.
 */
export function envelopeOf(result: unknown, requestId: string): Finalized | null {
  if (!isObject(result) || typeof result.status !== 'number' || !isObject(result.body)) return null;
  const body = result.body;
  const envelope = { status: result.status, body };
  if (body.success === true) {
    const data = body.data;
    const receipt = isObject(data) && isObject(data.receipt) ? data.receipt : undefined;
    return receipt?.request_id === requestId ? { status: 'succeeded', envelope, errorCode: null } : null;
  }
  const error = body.error;
  if (body.success !== false || !isObject(error) || error.request_id !== requestId || typeof error.code !== 'string') return null;
  const billing = isObject(error.receipt) && isObject(error.receipt.billing) ? error.receipt.billing : undefined;
  return { status: billing?.status === 'not_started' ? 'rejected' : 'failed', envelope, errorCode: error.code };
}

type Fate = { workflow: string; running: boolean; finalized: Finalized | null };

const CLOSED = new Set(['COMPLETED', 'FAILED', 'CANCELLED', 'TERMINATED', 'TIMED_OUT', 'CONTINUED_AS_NEW']);

/** The real state of a request's workflow, from Temporal. */
async function fateOf(client: Client, row: StaleRequest): Promise<Fate> {
  let d;
  try {
    d = await client.workflow.getHandle(row.workflowId).describe();
  } catch (err) {
    if (err instanceof WorkflowNotFoundError) return { workflow: 'NOT_FOUND', running: false, finalized: null };
    throw err;
  }
  const workflow = d.status.name;
  if (!CLOSED.has(workflow)) return { workflow, running: true, finalized: null };
  if (workflow !== 'COMPLETED') return { workflow, running: false, finalized: null };
  const result: unknown = await client.workflow.getHandle(row.workflowId, d.runId).result();
  return { workflow, running: false, finalized: envelopeOf(result, row.id) };
}

export function createMaintenanceActivities(deps: {
  db: Db;
  temporal: { address: string; namespace: string; dataConverter: DataConverter };
  /** OAUTH_CLIENT_IDLE_HOURS: a worker setting, not the workflow's input, so the workflow code and its histories stay as they are. */
  oauthClientIdleHours: number;
}): MaintenanceActivities {
  const { db } = deps;

  async function reconcileOne(client: Client, row: StaleRequest, a: { overdueAfterMs: number; retentionMs: number }): Promise<ReconciledRequest> {
    const base = { request_id: row.id, org_id: row.orgId, released_credits: 0 };
    let fate: Fate;
    try {
      fate = await fateOf(client, row);
    } catch (err) {
      return { ...base, workflow: 'UNKNOWN', outcome: 'error', detail: `workflow state unavailable: ${String(err)}`.slice(0, 300) };
    }
    if (fate.running) {
      await markReconcileChecked(db, row.id);
      const overdue = Date.now() - row.createdAt > a.overdueAfterMs;
      if (overdue) Context.current().log.warn('request still running far past its deadline', { requestId: row.id, workflowId: row.workflowId, status: fate.workflow });
      return { ...base, workflow: fate.workflow, outcome: 'running', overdue };
    }
    if (fate.finalized) {
      // The workflow finished its saga; only the row missed it. A completed run never touches the
      // ledger again, so a reservation it left open goes back first: runs from before
      // patched('late-start-releases') answered not_started over a reservation their lost first
      // task had made, and writing that envelope alone closed the row with the credits still held.
      let released = 0;
      if (fate.finalized.status !== 'succeeded' && (await ledgerClosure(db, row.id)) === null) ({ released } = await release(db, row.orgId, row.id));
      const written = await finalizeUnresolved(db, { requestId: row.id, ...fate.finalized, retentionMs: a.retentionMs });
      return { ...base, workflow: fate.workflow, outcome: written ? 'finalized' : 'resolved_meanwhile', released_credits: released };
    }
    // Closed without an envelope, or never started: nothing will finish this request any more.
    // A reservation still open goes back; one already closed stays as it is: settled (stopped
    // between settle and finalize: the work was done and billed, only its result was lost), or
    // released (a release whose interruption was lost), which is not reported as released again.
    const { released, interrupted } = await releaseAndInterrupt(db, row.orgId, row.id);
    return { ...base, workflow: fate.workflow, outcome: interrupted ? 'interrupted' : 'resolved_meanwhile', released_credits: released };
  }

  return {
    async reconcileUnresolved({ olderThanMs, overdueAfterMs, batchSize, perOrg, retentionMs }) {
      const rows = await listStaleUnresolved(db, { olderThanMs, limit: batchSize, perOrg });
      const summary: ReconcileSummary = {
        examined: rows.length,
        counts: { running: 0, finalized: 0, interrupted: 0, resolved_meanwhile: 0, error: 0 },
        released_credits: 0,
        requests: [],
      };
      if (rows.length === 0) return summary;
      const connection = await Connection.connect({ address: deps.temporal.address });
      try {
        const client = new Client({ connection, namespace: deps.temporal.namespace, dataConverter: deps.temporal.dataConverter });
        for (const row of rows) {
          Context.current().heartbeat(row.id);
          let done: ReconciledRequest;
          try {
            done = await reconcileOne(client, row, { overdueAfterMs, retentionMs });
          } catch (err) {
            // One row's failure (a ledger conflict, a lost connection) must not stop the others.
            done = { request_id: row.id, org_id: row.orgId, workflow: 'UNKNOWN', outcome: 'error', released_credits: 0, detail: String(err).slice(0, 300) };
          }
          summary.counts[done.outcome] += 1;
          summary.released_credits += done.released_credits;
          summary.requests.push(done);
        }
      } finally {
        await connection.close().catch(() => {});
      }
      return summary;
    },

    async applyRetention({ batchSize, runEventsHours }) {
      return {
        results_deleted: await deleteExpiredResults(db, batchSize),
        run_events_deleted: await pruneRunEvents(db, runEventsHours, batchSize),
        // In batches (RETENTION_BATCH_SIZE rows, 256 MiB), for at most 20 s: a backlog of large
        // files in one statement could pass the statement timeout every run.
        files_deleted: await purgeExpiredFiles(db, new Date(), { batchSize, onBatch: () => Context.current().heartbeat('files') }),
        oauth_clients_deleted: await deleteIdleClients(db, { idleHours: deps.oauthClientIdleHours, batchSize }),
      };
    },
  };
}
