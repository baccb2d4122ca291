// Row transitions of the maintenance workflow (workflows/maintenance-workflow.ts): the reconciler
// settles requests left unresolved, retention deletes expired results. Each is one conditional
// statement, so a row that got its envelope meanwhile, or a second run doing the same, changes
// nothing. Meant to be folded into shared/db/requests.ts, the requests row's owner module.
import type { Db, DbClient } from './pool.ts';

/** Statuses of a request whose outcome is not known yet (they hold a running slot). */
export const UNRESOLVED_STATUSES = ['reserving', 'processing', 'refund_pending'] as const;
const UNRESOLVED_SQL = `('reserving', 'processing', 'refund_pending')`;

export interface StaleRequest {
  id: string;
  orgId: string;
  workflowId: string;
  status: (typeof UNRESOLVED_STATUSES)[number];
  createdAt: number;
}

/**
 * Unresolved requests without an envelope, older than `olderThanMs`. Rows never looked at come
 * first, then the least recently looked at, oldest first; at most `perOrg` of one organization,
 * so one organization's backlog cannot take a whole batch.
 */
export async function listStaleUnresolved(db: Db | DbClient, o: { olderThanMs: number; limit: number; perOrg: number }): Promise<StaleRequest[]> {
  const r = await db.query(
    `SELECT id, org_id, workflow_id, status, created_at FROM (
       SELECT id, org_id, workflow_id, status, created_at, reconcile_checked_at,
              row_number() OVER (PARTITION BY org_id ORDER BY reconcile_checked_at NULLS FIRST, created_at) AS nth
         FROM requests
        WHERE status IN ${UNRESOLVED_SQL} AND result IS NULL
          AND created_at < now() - $1::bigint * interval '1 millisecond'
     ) s
     WHERE nth <= $3
     ORDER BY reconcile_checked_at NULLS FIRST, created_at
     LIMIT $2`,
    [o.olderThanMs, o.limit, o.perOrg],
  );
  return r.rows.map((row) => ({ id: row.id, orgId: row.org_id, workflowId: row.workflow_id, status: row.status, createdAt: (row.created_at as Date).getTime() }));
}

/** The reconciler looked at this row and left it (its workflow still runs). */
export async function markReconcileChecked(db: Db, requestId: string): Promise<void> {
  await db.query(`UPDATE requests SET reconcile_checked_at = now() WHERE id = $1 AND status IN ${UNRESOLVED_SQL}`, [requestId]);
}

/** How the ledger closed a request's reservation: `settle`, `release`, or null (open, or never reserved). */
export async function ledgerClosure(db: Db, requestId: string): Promise<'settle' | 'release' | null> {
  const r = await db.query(`SELECT kind FROM credit_ledger WHERE request_id = $1 AND kind IN ('settle', 'release')`, [requestId]);
  return (r.rows[0]?.kind as 'settle' | 'release' | undefined) ?? null;
}

/** unresolved → interrupted (`request_interrupted`), only while the row has no envelope. */
export async function interruptUnresolved(db: Db, requestId: string): Promise<boolean> {
  const r = await db.query(
    `UPDATE requests SET status = 'interrupted', error_code = 'request_interrupted', updated_at = now()
      WHERE id = $1 AND result IS NULL AND status IN ${UNRESOLVED_SQL}`,
    [requestId],
  );
  return (r.rowCount ?? 0) > 0;
}

/** unresolved → the terminal envelope its completed workflow returned (its own write was lost). */
export async function finalizeUnresolved(
  db: Db,
  a: { requestId: string; status: 'succeeded' | 'rejected' | 'failed'; envelope: { status: number; body: unknown }; errorCode: string | null; retentionMs: number },
): Promise<boolean> {
  const r = await db.query(
    `UPDATE requests
        SET status = $2, response_status = $3, result = $4, error_code = $5,
            result_expires_at = now() + ($6::bigint * interval '1 millisecond'),
            completed_at = now(), updated_at = now()
      WHERE id = $1 AND result IS NULL AND status IN ${UNRESOLVED_SQL}`,
    [a.requestId, a.status, a.envelope.status, JSON.stringify(a.envelope.body), a.errorCode, a.retentionMs],
  );
  return (r.rowCount ?? 0) > 0;
}

/**
 * Retention: delete up to `limit` results whose retention ended (result and response_status set
 * NULL). The row, its status, error code and receipt stay for the status route. The
 * idempotency key is released in the same statement: a retry with it after expiry runs anew
 * (the API's claim never finds a keyed row without its result).
 */
export async function deleteExpiredResults(db: Db, limit: number): Promise<number> {
  const r = await db.query(
    `UPDATE requests r
        SET result = NULL, response_status = NULL, idempotency_key_hash = NULL, updated_at = now()
       FROM (SELECT id FROM requests
              WHERE result IS NOT NULL AND result_expires_at <= now()
              ORDER BY result_expires_at LIMIT $1
              FOR UPDATE SKIP LOCKED) expired
      WHERE r.id = expired.id AND r.result IS NOT NULL AND r.result_expires_at <= now()`,
    [limit],
  );
  return r.rowCount ?? 0;
}

/** Completion times for the catalog's `popular` cursors outlive their 24-hour cursors by an hour, no more. */
export async function pruneRunEvents(db: Db, olderThanHours: number, limit: number): Promise<number> {
  const r = await db.query(
    `DELETE FROM catalog_run_events
      WHERE ctid IN (SELECT ctid FROM catalog_run_events WHERE at < now() - $1::int * interval '1 hour' LIMIT $2)`,
    [olderThanHours, limit],
  );
  return r.rowCount ?? 0;
}
