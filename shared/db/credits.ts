// The credit ledger. Every movement is a row keyed by request id, so each happens once;
// the balance row is updated in the same transaction and its CHECKs keep
// granted = available + reserved + charged, never negative.
import { tx, type Db, type DbClient } from './pool.ts';

export async function grantCredits(c: Db | DbClient, orgId: string, amount: number, note: string): Promise<void> {
  await c.query(`INSERT INTO credit_ledger (org_id, kind, amount, note) VALUES ($1, 'grant', $2, $3)`, [orgId, amount, note]);
  await c.query('UPDATE credit_balances SET granted = granted + $2, available = available + $2 WHERE org_id = $1', [orgId, amount]);
}

export type ReserveResult = { ok: true; reserved: number } | { ok: false; reason: 'insufficient_credits'; available: number };

/** Reserve the full price once. Repeating it for the same request returns the first outcome. */
export async function reserve(db: Db, orgId: string, requestId: string, amount: number): Promise<ReserveResult> {
  return tx(db, async (c) => {
    const prev = await c.query(`SELECT amount FROM credit_ledger WHERE request_id = $1 AND kind = 'reserve'`, [requestId]);
    if (prev.rowCount) return { ok: true, reserved: prev.rows[0].amount as number };
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
    await c.query(
      `UPDATE requests SET status = 'processing', billing_status = 'pending', reserved_credits = $2, updated_at = now() WHERE id = $1`,
      [requestId, amount],
    );
    return { ok: true, reserved: amount };
  });
}

/** Charge `amount` of the reservation and give back the rest; once per request. */
export async function settle(db: Db, orgId: string, requestId: string, amount: number): Promise<{ charged: number }> {
  return tx(db, async (c) => {
    const res = await c.query(`SELECT amount FROM credit_ledger WHERE request_id = $1 AND kind = 'reserve' FOR UPDATE`, [requestId]);
    if (res.rowCount === 0) throw new Error(`no reservation for ${requestId}`);
    const reserved = res.rows[0].amount as number;
    const charge = Math.min(amount, reserved);
    const ins = await c.query(
      `INSERT INTO credit_ledger (org_id, request_id, kind, amount) VALUES ($1, $2, 'settle', $3)
       ON CONFLICT DO NOTHING RETURNING id`,
      [orgId, requestId, charge],
    );
    if (ins.rowCount === 0) {
      const prev = await c.query(`SELECT kind, amount FROM credit_ledger WHERE request_id = $1 AND kind IN ('settle', 'release')`, [requestId]);
      if (prev.rows[0].kind !== 'settle') throw new Error(`request ${requestId} was already released`);
      return { charged: prev.rows[0].amount as number };
    }
    await c.query(
      `UPDATE credit_balances SET reserved = reserved - $2, charged = charged + $3, available = available + ($2 - $3) WHERE org_id = $1`,
      [orgId, reserved, charge],
    );
    await c.query(`UPDATE requests SET billing_status = 'settled', charged_credits = $2, updated_at = now() WHERE id = $1`, [requestId, charge]);
    return { charged: charge };
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
      if (prev.rows[0].kind !== 'release') throw new Error(`request ${requestId} was already settled`);
      return { released: reserved };
    }
    await c.query('UPDATE credit_balances SET reserved = reserved - $2, available = available + $2 WHERE org_id = $1', [orgId, reserved]);
    await c.query(`UPDATE requests SET billing_status = 'released', charged_credits = 0, updated_at = now() WHERE id = $1`, [requestId]);
    return { released: reserved };
  });
}

export async function balance(db: Db, orgId: string) {
  const r = await db.query('SELECT granted, available, reserved, charged FROM credit_balances WHERE org_id = $1', [orgId]);
  return r.rows[0] as { granted: number; available: number; reserved: number; charged: number } | undefined;
}
