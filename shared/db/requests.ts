// The one owner of the `requests` row: claims, status transitions, the terminal envelope, reads.
// Every status move is a conditional UPDATE from its allowed sources, so two actors (the workflow,
// an API's stale-claim check, an ambiguous start) can never both win: the loser learns it did not move.
import type { LlmFallback } from '../router/llm-client.ts';
import type { Db, DbClient } from './pool.ts';
import type { ErrorEnvelope } from '../errors.ts';
import type { QueryResult } from '../workflow-contract.ts';

export type RequestStatus = 'reserving' | 'processing' | 'succeeded' | 'rejected' | 'refund_pending' | 'failed' | 'interrupted';
export type BillingStatus = 'not_started' | 'pending' | 'settled' | 'released';

export interface RequestRow {
  id: string;
  org_id: string;
  idempotency_key_hash: string | null;
  fingerprint: string | null;
  workflow_id: string;
  api: string | null;
  operation: string | null;
  status: RequestStatus;
  billing_status: BillingStatus;
  reserved_credits: number;
  charged_credits: number | null;
  response_status: number | null;
  /** The retained terminal envelope's body. */
  result: QueryResult | ErrorEnvelope | null;
  result_expires_at: Date | null;
  error_code: string | null;
  feedback: number | null;
  performs_actions: boolean;
  is_public_api: boolean;
  /** Prompt mode only: how the request was routed (null in direct mode). */
  routing: RoutingAudit | null;
  created_at: Date;
  completed_at: Date | null;
}

/** A prompt-mode request's routing, as recorded with its claim and shown in its status. */
export interface RoutingAudit {
  router: 'offline' | 'llm';
  /** The chosen operation's score (0..1). */
  score: number;
  /** The best candidates considered, best first. */
  candidates: { api: string; operation: string; label: string; score: number }[];
  /** The prompt-search fee included in the receipt's credits. */
  search_credits: number;
  /** With an LLM endpoint configured: why the offline router answered instead of the model. */
  llm_fallback?: LlmFallback;
}

/** Allowed source states of each target state. */
export const TRANSITIONS = {
  processing: ['reserving'],
  refund_pending: ['processing'],
  succeeded: ['processing'],
  failed: ['processing', 'refund_pending'],
  rejected: ['reserving'],
  // refund_pending too: a run stopped mid-compensation must not stay open for ever.
  interrupted: ['reserving', 'processing', 'refund_pending'],
} as const satisfies Record<string, readonly RequestStatus[]>;

export type Target = keyof typeof TRANSITIONS;

/** PostgreSQL channel on which a request id is sent when its terminal envelope is written (apps/api/services/result-listener.ts). */
export const REQUEST_FINAL_CHANNEL = 'wqs_request_final';

/** Did the row move? When not, `current` is the row as it is (undefined: no such row). */
export type Moved = { moved: true; row: RequestRow } | { moved: false; current: RequestRow | undefined };

type Q = Db | DbClient;

export interface ClaimFields {
  id: string;
  orgId: string;
  keyHash: string | null;
  fingerprint: string | null;
  workflowId: string;
  api: string;
  operation: string;
  operationId: number;
  version: number;
  performsActions: boolean;
  isPublicApi: boolean;
  /** Prompt mode: recorded with the claim so the status shows it from the first moment. */
  routing?: RoutingAudit;
}

/** The plan's limits, as admission_state (migration 1700000003000) applies them. */
export interface PlanLimits {
  requestsPerMinute: number;
  concurrency: number;
  unresolvedKeyed: number;
}

/** The plan limit that refuses a new request, in the order admission_state checks them. */
export type Refusal = 'rate_limited' | 'organization_concurrency_limit' | 'unresolved_query_limit';

/**
 * What admission decides on: the organization's open requests (at most its concurrency limit, read
 * through the partial index of open requests), its requests in the last 60 whole seconds (at most
 * 60 per-second counters, kept by a trigger on `requests`), and the limit that refuses one more.
 * Neither read grows with the organization's history or its rate.
 */
export interface AdmissionState {
  running: number;
  unresolved: number;
  lastMinute: number;
  oldest: Date | null;
  refusal: Refusal | null;
}

interface StateColumns {
  adm_running: number;
  adm_unresolved: number;
  adm_last_minute: number;
  adm_oldest: number | null;
  adm_refusal: Refusal | null;
}

const STATE_COLUMNS = `a.running AS adm_running, a.unresolved AS adm_unresolved, a.last_minute AS adm_last_minute,
            a.oldest AS adm_oldest, a.refusal AS adm_refusal`;

function stateOf(row: StateColumns): AdmissionState {
  return {
    running: row.adm_running,
    unresolved: row.adm_unresolved,
    lastMinute: row.adm_last_minute,
    oldest: row.adm_oldest === null ? null : new Date(row.adm_oldest * 1000),
    refusal: row.adm_refusal,
  };
}

/**
 * The organization's admission state. `lock`: under its admission lock, held to the end of the
 * caller's transaction (the counts are then read after the lock is granted); without it, a look
 * that admits nothing. `alreadyCounted`: calls of this request already in the minute.
 */
export async function admissionState(
  c: Q,
  orgId: string,
  limits: PlanLimits,
  o: { keyed: boolean; lock: boolean; alreadyCounted?: number },
): Promise<AdmissionState> {
  const r = await c.query<StateColumns>({
    name: 'admission_state',
    text: `SELECT ${STATE_COLUMNS} FROM admission_state($1, $2, $3, $4, $5, $6, $7) a`,
    values: [orgId, limits.requestsPerMinute, limits.concurrency, limits.unresolvedKeyed, o.keyed, o.alreadyCounted ?? 0, o.lock],
  });
  return stateOf(r.rows[0]!);
}

/**
 * Admission and the claim in ONE statement (one round trip; on its own, its own transaction): the
 * organization's admission lock, its counts read after it, and the claim inserted in `reserving`
 * only when no plan limit refuses it. `request` is undefined when a limit refused it (`refusal`
 * says which) or when the organization already holds the key. Inside a transaction the lock is
 * held to its end (a routed prompt takes its routing count back there).
 */
export async function admitClaim(
  c: Q,
  f: ClaimFields,
  limits: PlanLimits,
  alreadyCounted = 0,
): Promise<{ state: AdmissionState; request: RequestRow | undefined }> {
  const r = await c.query<StateColumns & { id: string | null }>({
    name: 'admit_claim',
    text: `WITH a AS MATERIALIZED (
       SELECT * FROM admission_state($2, $13, $14, $15, $3::text IS NOT NULL, $16, true)
     ), ins AS (
       INSERT INTO requests (id, org_id, idempotency_key_hash, fingerprint, workflow_id, api, operation, operation_id, version,
                             performs_actions, is_public_api, routing, status)
       SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, 'reserving' FROM a WHERE a.refusal IS NULL
       ON CONFLICT DO NOTHING RETURNING *
     )
     SELECT ${STATE_COLUMNS}, ins.* FROM a LEFT JOIN ins ON true`,
    values: [
      f.id, f.orgId, f.keyHash, f.fingerprint, f.workflowId, f.api, f.operation, f.operationId, f.version, f.performsActions, f.isPublicApi,
      f.routing ? JSON.stringify(f.routing) : null,
      limits.requestsPerMinute, limits.concurrency, limits.unresolvedKeyed, alreadyCounted,
    ],
  });
  const first = r.rows[0]!;
  // The request is the row's other columns (all null when nothing was inserted).
  const { adm_running: _r, adm_unresolved: _u, adm_last_minute: _m, adm_oldest: _o, adm_refusal: _f, ...row } = first;
  return { state: stateOf(first), request: row.id === null ? undefined : (row as unknown as RequestRow) };
}

/**
 * One call of the organization counted in its per-minute quota without a request row (a prompt,
 * counted when it is admitted to routing), by the function the trigger on `requests` calls for the
 * others. Returns the second it was counted in (for uncountCall).
 */
export async function countCall(c: Q, orgId: string): Promise<number> {
  const r = await c.query('SELECT count_request_call($1, now()), floor(extract(epoch FROM now()))::float8 AS second', [orgId]);
  return r.rows[0].second as number;
}

/**
 * Take back one call counted by countCall in `second` (its call went on to make a request row,
 * which the trigger counts, or failed on the service's side). A second that has left the window
 * is no longer read, so taking it back there changes nothing.
 */
export async function uncountCall(c: Q, orgId: string, second: number): Promise<void> {
  // An emptied second is deleted, so it is never the window's oldest (X-RateLimit-Reset).
  await c.query('UPDATE request_second_counts SET n = n - 1 WHERE org_id = $1 AND second = $2 AND n > 0', [orgId, second]);
  await c.query('DELETE FROM request_second_counts WHERE org_id = $1 AND second = $2 AND n <= 0', [orgId, second]);
}

/** The row holding a key; `has_result`: an envelope is retained (its `result` is read only for a replay). */
export type KeyedRow = RequestRow & { has_result: boolean };

/**
 * The row holding `keyHash`. Its retained result (up to ~1.5 MB) is read only when the caller
 * may replay it: the same body (`fingerprint`) and within retention. A conflicting body, an expired
 * result or a retry while the original runs reads none; `has_result` says whether one is retained.
 */
export async function findByKey(c: Q, orgId: string, keyHash: string, fingerprint: string): Promise<KeyedRow | undefined> {
  const r = await c.query({
    name: 'find_by_key',
    text: `SELECT id, org_id, idempotency_key_hash, fingerprint, workflow_id, api, operation, status, billing_status,
                  reserved_credits, charged_credits, response_status, result_expires_at, error_code, feedback,
                  performs_actions, is_public_api, routing, created_at, completed_at,
                  result IS NOT NULL AS has_result,
                  CASE WHEN fingerprint = $3 AND (result_expires_at IS NULL OR result_expires_at > now()) THEN result END AS result
             FROM requests WHERE org_id = $1 AND idempotency_key_hash = $2`,
    values: [orgId, keyHash, fingerprint],
  });
  return r.rows[0] as KeyedRow | undefined;
}

// A retained result may be ~1.5 MB of jsonb. The readers below name their columns and select the
// result only in a CASE that holds when they show it: otherwise PostgreSQL neither detoasts nor
// sends it (`result IS NOT NULL` reads the row's null bitmap, never the value). The retention is
// judged by PostgreSQL's clock there; callers judge it again by theirs, as they always did.
const WITHIN_RETENTION_SQL = '(result_expires_at IS NULL OR result_expires_at > now())';

/** What svc_get_run reads of a request (findRunForOrg). */
export interface RunRow
  extends Pick<RequestRow, 'id' | 'workflow_id' | 'api' | 'operation' | 'status' | 'response_status' | 'result_expires_at' | 'completed_at'> {
  /** Whether the terminal envelope is stored, expired or not (told without reading it). */
  has_result: boolean;
  /** The stored envelope's body within its retention; null past it (or with none). */
  result: RequestRow['result'];
}

/**
 * svc_get_run's read: the run's record, with its retained result only while it is kept (the tool
 * shows any run's result, keyed or not). A result past its retention, or a run still going (no
 * result yet), costs the row's few small columns.
 */
export async function findRunForOrg(c: Q, orgId: string, requestId: string): Promise<RunRow | undefined> {
  const r = await c.query(
    `SELECT id, workflow_id, api, operation, status, response_status, result_expires_at, completed_at,
            result IS NOT NULL AS has_result,
            CASE WHEN ${WITHIN_RETENTION_SQL} THEN result END AS result
       FROM requests WHERE id = $1 AND org_id = $2`,
    [requestId, orgId],
  );
  return r.rows[0] as RunRow | undefined;
}

/** What GET /v1/query/requests/{request_id} and the console's request page show of a request (findStatusForOrg). */
export interface StatusRow
  extends Pick<
    RequestRow,
    | 'id'
    | 'fingerprint'
    | 'api'
    | 'operation'
    | 'status'
    | 'billing_status'
    | 'reserved_credits'
    | 'charged_credits'
    | 'response_status'
    | 'result_expires_at'
    | 'error_code'
    | 'routing'
    | 'created_at'
    | 'completed_at'
  > {
  /**
   * The retained envelope as PostgreSQL's own JSON text of it (never parsed here), only for a keyed
   * request whose retention has not ended: the one case the status shows it. Otherwise null.
   */
  result_text: string | null;
}

/**
 * The status route's read (and the console's request page's): every column they show, and the
 * retained result only when it is shown.
 * Agents poll this route, and a result may be ~1.5 MB: read with the row (SELECT *), it was sent,
 * parsed and dropped on every poll of an unkeyed request, and parsed and serialized again on every
 * poll of a keyed one. Here an unkeyed or expired request's result is never detoasted nor sent, and
 * a shown one comes as text the route splices into its answer unparsed.
 */
export async function findStatusForOrg(c: Q, orgId: string, requestId: string): Promise<StatusRow | undefined> {
  const r = await c.query(
    `SELECT id, fingerprint, api, operation, status, billing_status, reserved_credits, charged_credits, response_status,
            result_expires_at, error_code, routing, created_at, completed_at,
            CASE WHEN fingerprint IS NOT NULL AND ${WITHIN_RETENTION_SQL} THEN result::text END AS result_text
       FROM requests WHERE id = $1 AND org_id = $2`,
    [requestId, orgId],
  );
  return r.rows[0] as StatusRow | undefined;
}

/** A request's retained envelope (its status and body), without the rest of the row; undefined: no row. */
export async function storedEnvelope(c: Q, requestId: string): Promise<Pick<RequestRow, 'response_status' | 'result'> | undefined> {
  const r = await c.query({ name: 'stored_envelope', text: 'SELECT response_status, result FROM requests WHERE id = $1', values: [requestId] });
  return r.rows[0] as Pick<RequestRow, 'response_status' | 'result'> | undefined;
}

export async function findById(c: Q, requestId: string): Promise<RequestRow | undefined> {
  const r = await c.query('SELECT * FROM requests WHERE id = $1', [requestId]);
  return r.rows[0] as RequestRow | undefined;
}

/** The row, locked until the transaction ends: the reserve step decides on a status nobody can move meanwhile. */
export async function lockForUpdate(c: DbClient, requestId: string): Promise<RequestRow | undefined> {
  const r = await c.query('SELECT * FROM requests WHERE id = $1 FOR UPDATE', [requestId]);
  return r.rows[0] as RequestRow | undefined;
}

/** Columns a transition may set besides the status. */
export interface TransitionSet {
  billing_status?: BillingStatus;
  reserved_credits?: number;
  charged_credits?: number;
  error_code?: string | null;
  /** null frees the Idempotency-Key in the same statement as the move (never a moment later). */
  idempotency_key_hash?: null;
}

/**
 * Move `requestId` to `to` if it is in one of `to`'s allowed sources (or the narrower `from`) and
 * has no terminal envelope yet.
 */
export async function transition<T extends Target>(
  c: Q,
  requestId: string,
  to: T,
  set: TransitionSet = {},
  from: readonly (typeof TRANSITIONS)[T][number][] = TRANSITIONS[to],
): Promise<Moved> {
  const cols = Object.entries(set).filter(([, v]) => v !== undefined);
  const assign = cols.map(([k], i) => `, ${k} = $${i + 4}`).join('');
  const r = await c.query(
    `UPDATE requests SET status = $2, updated_at = now()${assign}
      WHERE id = $1 AND status = ANY($3) AND result IS NULL RETURNING *`,
    [requestId, to, from, ...cols.map(([, v]) => v)],
  );
  if (r.rowCount) return { moved: true, row: r.rows[0] as RequestRow };
  return { moved: false, current: await findById(c, requestId) };
}

/** Billing columns only (settlement, release): no status change. */
export async function recordBilling(c: Q, requestId: string, billing: BillingStatus, chargedCredits: number): Promise<void> {
  await c.query('UPDATE requests SET billing_status = $2, charged_credits = $3, updated_at = now() WHERE id = $1', [requestId, billing, chargedCredits]);
}

export interface Finalization {
  requestId: string;
  status: 'succeeded' | 'rejected' | 'failed';
  envelope: { status: number; body: unknown };
  errorCode: string | null;
  retentionMs: number;
  /**
   * Free the Idempotency-Key with the envelope: for an answer that ran nothing and charged nothing
   * and invites a retry (billing_unavailable), so a retry with the same key runs as a new request
   * instead of replaying the 503. The row and its envelope stay for the status route.
   */
  freeKey?: boolean;
}

/**
 * The envelope as JSON text jsonb can store. jsonb refuses NUL (\u0000) and a lone UTF-16
 * surrogate, both of which a site's JSON or an input echoed into an output or a message can carry;
 * refused, the write failed on every retry and the run never ended (credits reserved, slot held).
 * Each becomes U+FFFD, the replacement character. JSON.stringify writes a well-formed surrogate
 * pair as itself and only a lone one as an escape, so every such escape it writes is lone.
 */
export function storableJson(value: unknown): string {
  // An escape starts after an even run of backslashes (`\\u0000` is the text "\u0000", not NUL).
  return JSON.stringify(value).replace(/(?<!\\)((?:\\\\)*)\\u(?:0000|d[89a-f][0-9a-f]{2})/gi, '$1\\ufffd');
}

/** What a finalize that moved the row returns: its outcome, not the envelope the caller just sent. */
export type FinalizedRow = Pick<RequestRow, 'id' | 'status' | 'billing_status' | 'charged_credits' | 'response_status' | 'error_code' | 'completed_at'>;
/** `storedBody`: the JSON text the statement stored as the result (shared/local-results.ts hands it on). */
export type Finalized = { moved: true; row: FinalizedRow; storedBody: string } | { moved: false; current: RequestRow | undefined };

/**
 * Write the terminal envelope, once, with the terminal status (a conditional transition).
 * A re-run after a crash finds the envelope already there and does nothing; an interrupted
 * request is never finalized over.
 */
export async function finalize(c: Q, f: Finalization): Promise<Finalized> {
  // The NOTIFY is part of the statement, so it is sent when (and only if) the envelope commits:
  // at once on a pool connection, at COMMIT inside settleAndFinalize's transaction. Named (prepared
  // once per connection), and it returns the row's outcome only: the envelope, up to 1.5 MB, is
  // the caller's own (issue 11).
  const storedBody = storableJson(f.envelope.body);
  const r = await c.query<FinalizedRow & { notified: string }>({
    name: 'finalize_request',
    text: `WITH u AS (
       UPDATE requests
          SET status = $2, response_status = $3, result = $4, error_code = $5,
              result_expires_at = now() + ($6::bigint * interval '1 millisecond'),
              completed_at = now(), updated_at = now(),
              idempotency_key_hash = CASE WHEN $8 THEN NULL ELSE idempotency_key_hash END
        WHERE id = $1 AND result IS NULL AND status = ANY($7)
        RETURNING id, status, billing_status, charged_credits, response_status, error_code, completed_at)
     SELECT u.*, pg_notify('${REQUEST_FINAL_CHANNEL}', u.id)::text AS notified FROM u`,
    values: [f.requestId, f.status, f.envelope.status, storedBody, f.errorCode, f.retentionMs, TRANSITIONS[f.status], f.freeKey === true],
  });
  if (r.rowCount) {
    const { notified: _n, ...row } = r.rows[0]!;
    return { moved: true, row, storedBody };
  }
  return { moved: false, current: await findById(c, f.requestId) };
}

/** A retained result past its retention frees its key, so the key may run anew (as a new request). */
export async function releaseKey(c: Q, requestId: string): Promise<void> {
  await c.query('UPDATE requests SET idempotency_key_hash = NULL, updated_at = now() WHERE id = $1', [requestId]);
}

// --- maintenance: the reconciler settles rows left unresolved, retention deletes expired results ---
// (activities/maintenance.ts). Each is one conditional statement: a row that got its envelope
// meanwhile, or a second run doing the same, changes nothing.

const UNRESOLVED_SQL = `('reserving', 'processing', 'refund_pending')`;

export interface StaleRequest {
  id: string;
  orgId: string;
  workflowId: string;
  status: 'reserving' | 'processing' | 'refund_pending';
  createdAt: number;
}

/**
 * Unresolved requests without an envelope, older than `olderThanMs`. Rows never looked at come
 * first, then the least recently looked at, oldest first; at most `perOrg` of one organization,
 * so one organization's backlog cannot take a whole batch.
 */
export async function listStaleUnresolved(db: Q, o: { olderThanMs: number; limit: number; perOrg: number }): Promise<StaleRequest[]> {
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
export async function markReconcileChecked(db: Q, requestId: string): Promise<void> {
  await db.query(`UPDATE requests SET reconcile_checked_at = now() WHERE id = $1 AND status IN ${UNRESOLVED_SQL}`, [requestId]);
}

/** unresolved → interrupted (`request_interrupted`), only while the row has no envelope. */
export async function interruptUnresolved(db: Q, requestId: string): Promise<boolean> {
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
      WHERE id = $1 AND result IS NULL AND status IN ${UNRESOLVED_SQL}
      RETURNING pg_notify('${REQUEST_FINAL_CHANNEL}', id)::text`,
    [a.requestId, a.status, a.envelope.status, storableJson(a.envelope.body), a.errorCode, a.retentionMs],
  );
  return (r.rowCount ?? 0) > 0;
}

/**
 * Retention: delete up to `limit` results whose retention ended (result and response_status set
 * NULL). The row, its status, error code and receipt stay for the status route. The
 * idempotency key is released in the same statement: a retry with it after expiry runs anew
 * (the API's claim never finds a keyed row without its result).
 */
export async function deleteExpiredResults(db: Q, limit: number): Promise<number> {
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

