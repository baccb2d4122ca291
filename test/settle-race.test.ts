// A settlement that comes too late: the read-only fused step (reserve, execute, settle + finalize in
// one local activity) outlives its own timeout while its settlement waits on a lock; the workflow
// has meanwhile given up on it, failed the query and begun giving the reservation back. That late
// settlement must not charge a query whose answer is a failure.
import { describe, expect, it } from 'vitest';
import { balanceOf, db, demo, ledgerOf, newOrg, query, until } from './helpers/stack.ts';
import { ownPairPool } from './helpers/own-pair.ts';

const london = { api: '@weather', operation: 'current_weather', input: { city: 'London' } };

// A short deadline of our own (6 s), so the fused step's backstop (deadline + 5 s) comes soon.
const pool = ownPairPool('settle-race', { QUERY_DEADLINE_MS: '6000' });

describe('a settlement that arrives after compensation began', () => {
  it('never charges a query whose answer is a failure: either the settlement lands with its success, or the release wins', async () => {
    const [api] = await Promise.all([pool.spawn('api'), pool.spawn('worker')]);
    const org = await newOrg(5);
    // The site answers within the deadline; the settlement after it is what gets held up.
    await demo('/__demo/faults', { host: 'weather.example.test', path_prefix: '/api/v1/current', latency_ms: 2500, times: 1 });
    const pending = query(org.api_key, london, {}, String(api.started.url));
    const row = await until(async () => {
      const r = await db().query(`SELECT id, created_at FROM requests WHERE org_id = $1 AND status = 'processing'`, [org.org_id]);
      return r.rows[0] as { id: string; created_at: Date } | undefined;
    });
    // Another transaction holds the organization's balance row (a slow publish, a stalled disk): the
    // fused step's settlement waits on it past the step's timeout (deadline + 5 s), and the workflow
    // goes on without it: the deadline has passed, so it fails the query and compensates.
    const holder = await db().connect();
    try {
      await holder.query('BEGIN');
      await holder.query('SELECT * FROM credit_balances WHERE org_id = $1 FOR UPDATE', [org.org_id]);
      // Held until the workflow began its compensation, or (when the late settlement holds the
      // request row, so the compensation waits behind it) until well past the step's timeout.
      const heldUntil = row.created_at.getTime() + 6_000 + 5_000 + 3_000;
      await until(
        async () =>
          Date.now() > heldUntil || (await db().query(`SELECT status FROM requests WHERE id = $1`, [row.id])).rows[0]?.status === 'refund_pending',
        30_000,
        50,
      );
    } finally {
      await holder.query('ROLLBACK').catch(() => {});
      holder.release();
    }
    await pending;
    const done = await until(async () => {
      const r = await db().query(`SELECT status, error_code, billing_status, charged_credits, result FROM requests WHERE id = $1`, [row.id]);
      return r.rows[0]?.result ? r.rows[0] : undefined;
    });
    const ledger = await ledgerOf(org.org_id);
    if (done.status === 'succeeded') {
      // The settlement came first and wrote its envelope with it: the caller's output, charged once.
      expect(done).toMatchObject({ billing_status: 'settled', charged_credits: 1 });
      expect(done.result.data.receipt.billing).toEqual({ status: 'settled', reserved_credits: 1, charged_credits: 1 });
      expect(ledger).toEqual([
        { request_id: row.id, kind: 'reserve', amount: 1 },
        { request_id: row.id, kind: 'settle', amount: 1 },
      ]);
      expect(await balanceOf(org.org_id)).toEqual({ granted: 5, available: 4, reserved: 0, charged: 1 });
    } else {
      // The query failed: released, never charged (before: failed execution_timeout, settled, charged 1).
      expect(done).toMatchObject({ status: 'failed', billing_status: 'released', charged_credits: 0 });
      expect(done.result.error.receipt.billing).toEqual({ status: 'released', reserved_credits: 1, charged_credits: 0 });
      expect(ledger).toEqual([
        { request_id: row.id, kind: 'reserve', amount: 1 },
        { request_id: row.id, kind: 'release', amount: 1 },
      ]);
      expect(await balanceOf(org.org_id)).toEqual({ granted: 5, available: 5, reserved: 0, charged: 0 });
    }
  }, 60_000);
});
