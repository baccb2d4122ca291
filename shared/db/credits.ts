// The credit ledger. Every movement is a row keyed by request id, so each happens once;
// the balance row is updated in the same transaction and its CHECKs keep
// granted = available + reserved + charged, never negative.
import { tx, type Db, type DbClient } from './pool.ts';
import { finalize, lockForUpdate, recordBilling, transition, type Finalization, type Moved, type RequestStatus } from './requests.ts';

export async function grantCredits(c: Db | DbClient, orgId: string, amount: number, note: string): Promise<void> {
  await c.query(`INSERT INTO credit_ledger (org_id, kind, amount, note) VALUES ($1, 'grant', $2, $3)`, [orgId, amount, note]);
  await c.query('UPDATE credit_balances SET granted = granted + $2, available = available + $2 WHERE org_id = $1', [orgId, amount]);
}

/** Longest any statement of one reservation attempt may take (lock waits included). */
export const RESERVE_STATEMENT_TIMEOUT_MS = 2_000;

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
 */
export async function reserve(db: Db, orgId: string, requestId: string, amount: number): Promise<ReserveResult> {
  return tx(db, async (c) => {
    // A ledger that is locked or slow fails this attempt within seconds (the workflow counts attempts
    // and then answers billing_unavailable) instead of holding the query until its deadline.
    await c.query(`SET LOCAL statement_timeout = ${RESERVE_STATEMENT_TIMEOUT_MS}`);
    const row = await lockForUpdate(c, requestId);
    const prev = await c.query(`SELECT amount FROM credit_ledger WHERE request_id = $1 AND kind = 'reserve'`, [requestId]);
    if (prev.rowCount) return { ok: true, reserved: prev.rows[0].amount as number };
    if (!row || row.status !== 'reserving') return { ok: false, reason: 'request_closed', status: row?.status ?? 'missing' };
    // One conditional statement: it cannot take credits that are not there, whatever runs beside it.
    const upd = await c.query(
      `UPDATE credit_balances SET available = available - $2, reserved = reserved + $2
        WHERE org_id = $1 AND available >= $2 RETURNING available`,
      [orgId, amount],
    );
    if (upd.rowCount === 0) {
      const bal = await c.query('SELECT available FROM credit_balances WHERE org_id = $1', [orgId]);
      return { ok: false, reason: 'insufficient_credits', available: (bal.rows[0]?.available as number) ?? 0 };
    }
    // A concurrent duplicate would violate credit_ledger_reserve_once and roll the whole move back.
    await c.query(`INSERT INTO credit_ledger (org_id, request_id, kind, amount) VALUES ($1, $2, 'reserve', $3)`, [orgId, requestId, amount]);
    const moved = await transition(c, requestId, 'processing', { billing_status: 'pending', reserved_credits: amount });
    if (!moved.moved) throw new Error(`request ${requestId} left reserving while locked`); // cannot happen: the row is locked
    return { ok: true, reserved: amount };
  });
}

async function settleIn(c: DbClient, orgId: string, requestId: string, amount: number): Promise<{ charged: number }> {
  const res = await c.query(`SELECT amount FROM credit_ledger WHERE request_id = $1 AND kind = 'reserve' FOR UPDATE`, [requestId]);
  if (res.rowCount === 0) throw new LedgerStateError('no_reservation', `no reservation for ${requestId}`);
  const reserved = res.rows[0].amount as number;
  const charge = Math.min(amount, reserved);
  const ins = await c.query(
    `INSERT INTO credit_ledger (org_id, request_id, kind, amount) VALUES ($1, $2, 'settle', $3)
     ON CONFLICT DO NOTHING RETURNING id`,
    [orgId, requestId, charge],
  );
  if (ins.rowCount === 0) {
    const prev = await c.query(`SELECT kind, amount FROM credit_ledger WHERE request_id = $1 AND kind IN ('settle', 'release')`, [requestId]);
    if (prev.rows[0].kind !== 'settle') throw new LedgerStateError('already_released', `request ${requestId} was already released`);
    return { charged: prev.rows[0].amount as number };
  }
  await c.query(
    `UPDATE credit_balances SET reserved = reserved - $2, charged = charged + $3, available = available + ($2 - $3) WHERE org_id = $1`,
    [orgId, reserved, charge],
  );
  await recordBilling(c, requestId, 'settled', charge);
  return { charged: charge };
}

/** Charge `amount` of the reservation and give back the rest; once per request. */
export async function settle(db: Db, orgId: string, requestId: string, amount: number): Promise<{ charged: number }> {
  return tx(db, (c) => settleIn(c, orgId, requestId, amount));
}

/**
 * Settle and write the terminal envelope in one transaction (one round trip fewer). Both halves are
 * idempotent, so a re-run after a crash returns the first charge and leaves the envelope alone.
 */
export async function settleAndFinalize(
  db: Db,
  orgId: string,
  amount: number,
  f: Finalization,
): Promise<{ charged: number; finalized: Moved }> {
  return tx(db, async (c) => {
    const { charged } = await settleIn(c, orgId, f.requestId, amount);
    return { charged, finalized: await finalize(c, f) };
  });
}

/** Compensation: give the whole reservation back; once per request; a no-op when nothing was reserved. */
export async function release(db: Db, orgId: string, requestId: string): Promise<{ released: number }> {
  return tx(db, async (c) => {
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
