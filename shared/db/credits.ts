// The credit ledger. Every movement is a row keyed by request id, so each happens once;
// the balance row is updated in the same transaction and its CHECKs keep
// granted = available + reserved + charged, never negative.
import { createPool, tx, type Db, type DbClient } from './pool.ts';
import {
  REQUEST_FINAL_CHANNEL,
  TRANSITIONS,
  finalize,
  findById,
  interruptUnresolved,
  recordBilling,
  storableJson,
  type Finalization,
  type Finalized,
  type FinalizedRow,
  type RequestStatus,
} from './requests.ts';

export async function grantCredits(c: Db | DbClient, orgId: string, amount: number, note: string): Promise<void> {
  await c.query(`INSERT INTO credit_ledger (org_id, kind, amount, note) VALUES ($1, 'grant', $2, $3)`, [orgId, amount, note]);
  await c.query('UPDATE credit_balances SET granted = granted + $2, available = available + $2 WHERE org_id = $1', [orgId, amount]);
}

/**
 * Progress notices for SSE streams (apps/api/services/result-listener.ts): "<request id> <stage>",
 * sent by the transaction that reaches the stage, so they arrive exactly when it commits.
 */
export const REQUEST_PROGRESS_CHANNEL = 'wqs_request_progress';
export type ProgressNotice = 'executing';

/** Longest any statement of one reservation attempt may take (lock waits included). */
export const RESERVE_STATEMENT_TIMEOUT_MS = 2_000;

/**
 * A pool whose every statement ends within RESERVE_STATEMENT_TIMEOUT_MS: what reservations run on.
 * A ledger that is locked or slow fails a reservation attempt within seconds (the workflow counts
 * attempts and then answers billing_unavailable) instead of holding the query until its deadline.
 * The bound is the connections' own, so a reservation is one statement in one round trip, not a
 * transaction that sets a local timeout first (three round trips).
 */
export type LedgerDb = Db & { readonly statementTimeoutMs: typeof RESERVE_STATEMENT_TIMEOUT_MS };

export function createLedgerPool(databaseUrl: string, max: number): LedgerDb {
  const pool = createPool(databaseUrl, max, { statementTimeoutMs: RESERVE_STATEMENT_TIMEOUT_MS });
  return Object.assign(pool, { statementTimeoutMs: RESERVE_STATEMENT_TIMEOUT_MS } as const);
}

export type ReserveResult =
  | { ok: true; reserved: number }
  | { ok: false; reason: 'insufficient_credits'; available: number }
  /** The request is no longer `reserving` (interrupted, rejected): it must never reserve or run. */
  | { ok: false; reason: 'request_closed'; status: RequestStatus | 'missing' };

/** A ledger step that can never succeed, whatever the retries: callers must handle it, not loop. */
export class LedgerStateError extends Error {
  constructor(
    readonly kind: 'no_reservation' | 'already_released' | 'already_settled',
    message: string,
  ) {
    super(message);
    this.name = 'LedgerStateError';
  }
}

/**
 * Reserve the full price once, only while the request is `reserving` (its row is locked, so an
 * interruption cannot slip in between). Repeating it for the same request returns the first outcome.
 * The common case is one statement on its own (autocommit): its transaction commits, and its
 * notice goes out, as it ends; the request row and the balance are locked no longer than that.
 */
export async function reserve(ledger: LedgerDb, orgId: string, requestId: string, amount: number): Promise<ReserveResult> {
  return reserveIn(ledger, orgId, requestId, amount);
}

/**
 * The common case in one statement: lock the request row, and only while it is still `reserving`
 * with no reservation take the credits with a conditional update, write the ledger row, move the
 * request to `processing` and notify SSE streams (sent at commit). The rare outcomes are read again afterwards in statements
 * of their own, whose snapshot follows the first statement's (a concurrent first attempt may have
 * committed while this one waited for the lock); a reservation, once made, is never taken back.
 */
async function reserveIn(c: LedgerDb, orgId: string, requestId: string, amount: number): Promise<ReserveResult> {
  const r = await c.query<{ status: RequestStatus | null; prev: number | null; reserved: boolean }>({
    // Named, as the settlement: prepared once per pooled connection (no parse or plan per query).
    name: 'reserve_credits',
    text: `WITH req AS (
       SELECT status FROM requests WHERE id = $2 FOR UPDATE
     ), prev AS (
       SELECT amount FROM credit_ledger WHERE request_id = $2 AND kind = 'reserve'
     ), bal AS (
       UPDATE credit_balances SET available = available - $3, reserved = reserved + $3
        WHERE org_id = $1 AND available >= $3
          AND EXISTS (SELECT 1 FROM req WHERE status = 'reserving') AND NOT EXISTS (SELECT 1 FROM prev)
       RETURNING org_id
     ), led AS (
       -- A concurrent duplicate would violate credit_ledger_reserve_once and roll the whole move back.
       INSERT INTO credit_ledger (org_id, request_id, kind, amount) SELECT $1, $2, 'reserve', $3 FROM bal RETURNING request_id
     ), moved AS (
       UPDATE requests SET status = 'processing', billing_status = 'pending', reserved_credits = $3, updated_at = now()
        WHERE id = $2 AND status = 'reserving' AND result IS NULL AND EXISTS (SELECT 1 FROM led)
       RETURNING id
     )
     SELECT (SELECT status FROM req) AS status,
            (SELECT amount FROM prev) AS prev,
            EXISTS (SELECT 1 FROM moved WHERE pg_notify('${REQUEST_PROGRESS_CHANNEL}', id || ' executing') IS NOT NULL) AS reserved`,
    values: [orgId, requestId, amount],
  });
  const row = r.rows[0]!;
  if (row.reserved) return { ok: true, reserved: amount };
  if (row.prev !== null) return { ok: true, reserved: row.prev };
  // Nothing moved and no reservation in that statement's snapshot: look again in a later one.
  const prev = await c.query(`SELECT amount FROM credit_ledger WHERE request_id = $1 AND kind = 'reserve'`, [requestId]);
  if (prev.rowCount) return { ok: true, reserved: prev.rows[0].amount as number };
  if (row.status !== 'reserving') return { ok: false, reason: 'request_closed', status: row.status ?? 'missing' };
  const bal = await c.query('SELECT available FROM credit_balances WHERE org_id = $1', [orgId]);
  return { ok: false, reason: 'insufficient_credits', available: (bal.rows[0]?.available as number) ?? 0 };
}

// The settlement's ledger writes, shared by settleIn and firstSettlement so the two never differ
// ($1 organization, $2 request, $3 amount; `req` is the request row, locked after `res`): the
// reservation locked, then the settlement row (once, never for a request being released) and the
// balance moved with it.
const SETTLE_LOCK_RESERVATION = `res AS (
       SELECT amount FROM credit_ledger WHERE request_id = $2 AND kind = 'reserve' FOR UPDATE
     )`;
const SETTLE_WRITES = `ins AS (
       INSERT INTO credit_ledger (org_id, request_id, kind, amount)
       SELECT $1, $2, 'settle', LEAST($3::int, amount) FROM res
        WHERE NOT EXISTS (SELECT 1 FROM req WHERE status = 'refund_pending')
       ON CONFLICT DO NOTHING RETURNING amount
     ), bal AS (
       UPDATE credit_balances b SET reserved = b.reserved - res.amount, charged = b.charged + ins.amount, available = b.available + (res.amount - ins.amount)
         FROM res, ins WHERE b.org_id = $1 RETURNING 1
     )`;

/**
 * One statement in the common case: lock the reservation, write the settlement once, move the
 * balance and the request's billing columns. A request already closed (settled or released) reads
 * its closure in a second statement.
 *
 * A request whose compensation has begun (`refund_pending`: its workflow failed it and is giving the
 * reservation back) is never charged. Only a step the workflow no longer waits for settles that
 * late: the fused read-only step outliving its timeout while its settlement waited on a lock, after
 * which the workflow answered execution_timeout and went on to release. The request row is locked
 * after the reservation, the order release takes, so whichever comes second sees the other's outcome.
 */
async function settleIn(c: DbClient, orgId: string, requestId: string, amount: number): Promise<{ charged: number }> {
  const r = await c.query<{ reserved: number | null; charged: number | null; status: RequestStatus | null }>({
    name: 'settle_credits',
    text: `WITH ${SETTLE_LOCK_RESERVATION}, req AS (
       SELECT status FROM requests WHERE id = $2 AND EXISTS (SELECT 1 FROM res) FOR UPDATE
     ), ${SETTLE_WRITES}, billed AS (
       UPDATE requests q SET billing_status = 'settled', charged_credits = ins.amount, updated_at = now() FROM ins WHERE q.id = $2 RETURNING 1
     )
     SELECT (SELECT amount FROM res) AS reserved, (SELECT amount FROM ins) AS charged, (SELECT status FROM req) AS status,
            (SELECT count(*) FROM bal) + (SELECT count(*) FROM billed) AS moved`,
    values: [orgId, requestId, amount],
  });
  const row = r.rows[0]!;
  if (row.reserved === null) throw new LedgerStateError('no_reservation', `no reservation for ${requestId}`);
  if (row.charged !== null) return { charged: row.charged };
  const prev = await c.query(`SELECT kind, amount FROM credit_ledger WHERE request_id = $1 AND kind IN ('settle', 'release')`, [requestId]);
  if (prev.rowCount === 0) {
    // Nothing closed it yet and nothing was written: its compensation has begun, the release follows.
    throw new LedgerStateError('already_released', `request ${requestId} is being released (${row.status ?? 'missing'}); it is not charged`);
  }
  if (prev.rows[0].kind !== 'settle') throw new LedgerStateError('already_released', `request ${requestId} was already released`);
  return { charged: prev.rows[0].amount as number };
}

/** Charge `amount` of the reservation and give back the rest; once per request. */
export async function settle(db: Db, orgId: string, requestId: string, amount: number): Promise<{ charged: number }> {
  return tx(db, (c) => settleIn(c, orgId, requestId, amount));
}

/**
 * Settle and write the terminal envelope, atomically. Both halves are idempotent, so a re-run after
 * a crash returns the first charge and leaves the envelope alone. The common case, the first
 * settlement of a request, is one statement on its own (one round trip, where the transaction takes
 * four); every other case (settled before, released, being released, no reservation) is the
 * transaction of settleIn and finalize, which changes nothing the statement did not.
 */
export async function settleAndFinalize(
  db: Db,
  orgId: string,
  amount: number,
  f: Finalization,
): Promise<{ charged: number; finalized: Finalized }> {
  const first = await firstSettlement(db, orgId, amount, f);
  if (first) return first;
  return tx(db, async (c) => {
    const { charged } = await settleIn(c, orgId, f.requestId, amount);
    return { charged, finalized: await finalize(c, f) };
  });
}

/**
 * settleIn's first settlement and finalize's write in one statement: the settlement row, the
 * balance, and one UPDATE of the request carrying its billing and, under finalize's own conditions
 * (no envelope yet, a status the target may follow), the envelope and its notice. Undefined when
 * there was nothing to settle for the first time: the statement then changed nothing.
 */
async function firstSettlement(db: Db, orgId: string, amount: number, f: Finalization): Promise<{ charged: number; finalized: Finalized } | undefined> {
  const storedBody = storableJson(f.envelope.body);
  const r = await db.query<FinalizedRow & { charged: number | null; finalized: boolean | null; notified: string | null }>({
    name: 'settle_and_finalize_first',
    text: `WITH ${SETTLE_LOCK_RESERVATION}, req AS (
       SELECT status, result IS NULL AND status = ANY($9) AS finalizable FROM requests WHERE id = $2 AND EXISTS (SELECT 1 FROM res) FOR UPDATE
     ), ${SETTLE_WRITES}, u AS (
       UPDATE requests q
          SET billing_status = 'settled', charged_credits = ins.amount, updated_at = now(),
              status = CASE WHEN req.finalizable THEN $4 ELSE q.status END,
              response_status = CASE WHEN req.finalizable THEN $5 ELSE q.response_status END,
              result = CASE WHEN req.finalizable THEN $6::jsonb ELSE q.result END,
              error_code = CASE WHEN req.finalizable THEN $7 ELSE q.error_code END,
              result_expires_at = CASE WHEN req.finalizable THEN now() + ($8::bigint * interval '1 millisecond') ELSE q.result_expires_at END,
              completed_at = CASE WHEN req.finalizable THEN now() ELSE q.completed_at END,
              idempotency_key_hash = CASE WHEN req.finalizable AND $10 THEN NULL ELSE q.idempotency_key_hash END
         FROM ins, req WHERE q.id = $2
       RETURNING q.id, q.status, q.billing_status, q.charged_credits, q.response_status, q.error_code, q.completed_at, req.finalizable
     )
     SELECT u.id, u.status, u.billing_status, u.charged_credits, u.response_status, u.error_code, u.completed_at,
            (SELECT amount FROM ins) AS charged, u.finalizable AS finalized,
            CASE WHEN u.finalizable THEN pg_notify('${REQUEST_FINAL_CHANNEL}', u.id)::text END AS notified
       FROM (SELECT 1) one LEFT JOIN u ON true`,
    values: [orgId, f.requestId, amount, f.status, f.envelope.status, storedBody, f.errorCode, f.retentionMs, TRANSITIONS[f.status], f.freeKey === true],
  });
  const row = r.rows[0];
  if (!row || row.charged === null || row.id === null) return undefined;
  const { charged, finalized, notified: _n, ...moved } = row;
  if (finalized) return { charged, finalized: { moved: true, row: moved, storedBody } };
  // Charged, but the request was closed meanwhile (interrupted while it ran): its envelope stays.
  return { charged, finalized: { moved: false, current: await findById(db, f.requestId) } };
}

/** Compensation: give the whole reservation back; once per request; a no-op when nothing was reserved. */
export async function release(db: Db, orgId: string, requestId: string): Promise<{ released: number }> {
  return tx(db, (c) => releaseIn(c, orgId, requestId));
}

async function releaseIn(c: DbClient, orgId: string, requestId: string): Promise<{ released: number }> {
  const res = await c.query(`SELECT amount FROM credit_ledger WHERE request_id = $1 AND kind = 'reserve' FOR UPDATE`, [requestId]);
  if (res.rowCount === 0) return { released: 0 };
  const reserved = res.rows[0].amount as number;
  const ins = await c.query(
    `INSERT INTO credit_ledger (org_id, request_id, kind, amount) VALUES ($1, $2, 'release', $3)
     ON CONFLICT DO NOTHING RETURNING id`,
    [orgId, requestId, reserved],
  );
  if (ins.rowCount === 0) {
    const prev = await c.query(`SELECT kind FROM credit_ledger WHERE request_id = $1 AND kind IN ('settle', 'release')`, [requestId]);
    if (prev.rows[0].kind !== 'release') throw new LedgerStateError('already_settled', `request ${requestId} was already settled`);
    return { released: reserved };
  }
  await c.query('UPDATE credit_balances SET reserved = reserved - $2, available = available + $2 WHERE org_id = $1', [orgId, reserved]);
  await recordBilling(c, requestId, 'released', 0);
  return { released: reserved };
}

/**
 * The reconciler's end of a request nothing will finish (its workflow closed without an envelope,
 * or was never found): a reservation still open goes back and the request becomes `interrupted`,
 * in one transaction under the request row's lock. Reserving takes the same lock and only from
 * `reserving`, so a workflow start arriving late either reserved before (released here) or finds
 * the request closed; never a reservation made between the release and the interruption.
 * A reservation already closed stays as it is and is not reported as released.
 */
export async function releaseAndInterrupt(db: Db, orgId: string, requestId: string): Promise<{ released: number; interrupted: boolean }> {
  return tx(db, async (c) => {
    await c.query('SELECT 1 FROM requests WHERE id = $1 FOR UPDATE', [requestId]);
    const { released } = (await ledgerClosure(c, requestId)) === null ? await releaseIn(c, orgId, requestId) : { released: 0 };
    return { released, interrupted: await interruptUnresolved(c, requestId) };
  });
}

export async function balance(db: Db, orgId: string) {
  const r = await db.query('SELECT granted, available, reserved, charged FROM credit_balances WHERE org_id = $1', [orgId]);
  return r.rows[0] as { granted: number; available: number; reserved: number; charged: number } | undefined;
}

/** How the ledger closed a request's reservation: `settle`, `release`, or null (open, or never reserved). */
export async function ledgerClosure(db: Db | DbClient, requestId: string): Promise<'settle' | 'release' | null> {
  const r = await db.query(`SELECT kind FROM credit_ledger WHERE request_id = $1 AND kind IN ('settle', 'release')`, [requestId]);
  return (r.rows[0]?.kind as 'settle' | 'release' | undefined) ?? null;
}
