// Receipts, billing states, the ledger and its invariant, on the real stack.
import { afterAll, describe, expect, it } from 'vitest';
import { balanceOf, call, closeDb, db, ledgerDb, ledgerOf, newOrg, query } from './helpers/stack.ts';
import { LedgerStateError, RESERVE_STATEMENT_TIMEOUT_MS, release, reserve, settle, settleAndFinalize } from '../shared/db/credits.ts';
import { transition } from '../shared/db/requests.ts';

afterAll(closeDb);

const london = { api: '@weather', operation: 'current_weather', input: { city: 'London' } };

async function invariantHolds(orgId: string) {
  const b = await balanceOf(orgId);
  expect(b.granted).toBe(b.available + b.reserved + b.charged);
  for (const v of Object.values(b)) expect(v).toBeGreaterThanOrEqual(0);
  return b;
}

describe('billing', () => {
  it('a completed run reserves the full price, then settles it; headers say so', async () => {
    const org = await newOrg(10);
    const res = await query(org.api_key, london);
    expect(res.status).toBe(200);
    const rid = res.body.data.receipt.request_id;
    expect(res.body.data.receipt).toEqual({
      request_id: rid,
      api: '@weather',
      operation: 'current_weather',
      billing: { status: 'settled', reserved_credits: 1, charged_credits: 1 },
    });
    expect(res.headers.get('x-request-id')).toBe(rid);
    expect(res.headers.get('location')).toBe(`/v1/query/requests/${rid}`);
    expect(res.headers.get('idempotency-replayed')).toBe('false');
    expect(res.headers.get('x-svc-billing-status')).toBe('settled');
    expect(res.headers.get('x-svc-cost-credits')).toBe('1');
    expect(res.headers.get('x-svc-api')).toBe('@weather');
    for (const h of ['x-ratelimit-limit', 'x-ratelimit-remaining', 'x-ratelimit-reset']) expect(Number(res.headers.get(h))).toBeGreaterThan(0);
    expect(await ledgerOf(org.org_id)).toEqual([
      { request_id: rid, kind: 'reserve', amount: 1 },
      { request_id: rid, kind: 'settle', amount: 1 },
    ]);
    expect(await invariantHolds(org.org_id)).toEqual({ granted: 10, available: 9, reserved: 0, charged: 1 });
  });

  it('a failure after the reservation releases it: no charge, receipt released', async () => {
    const org = await newOrg(10);
    const res = await query(org.api_key, { ...london, input: { city: 'Atlantis' } });
    expect(res.status).toBe(404);
    expect(res.body.error.code).toBe('not_found');
    const rid = res.body.error.request_id;
    expect(res.body.error.receipt).toEqual({
      request_id: rid,
      api: '@weather',
      operation: 'current_weather',
      billing: { status: 'released', reserved_credits: 1, charged_credits: 0 },
    });
    expect(await ledgerOf(org.org_id)).toEqual([
      { request_id: rid, kind: 'reserve', amount: 1 },
      { request_id: rid, kind: 'release', amount: 1 },
    ]);
    expect(await invariantHolds(org.org_id)).toEqual({ granted: 10, available: 10, reserved: 0, charged: 0 });
    const status = await call('GET', `/v1/query/requests/${rid}`, { key: org.api_key });
    expect(status.body.data.status).toBe('failed');
    expect(status.body.data.error_code).toBe('not_found');
  });

  it('too few credits is 402 with billing not_started and nothing reserved', async () => {
    const org = await newOrg(0);
    const res = await query(org.api_key, london);
    expect(res.status).toBe(402);
    expect(res.body.error.code).toBe('insufficient_credits');
    expect(res.body.error.receipt.billing).toEqual({ status: 'not_started', reserved_credits: 0, charged_credits: 0 });
    expect(await ledgerOf(org.org_id)).toEqual([]);
    const status = await call('GET', `/v1/query/requests/${res.body.error.request_id}`, { key: org.api_key });
    expect(status.body.data.status).toBe('rejected');
  });

  it('20 concurrent queries on an organization that can afford 7: exactly 7 charged, never negative', async () => {
    const org = await newOrg(7);
    const results = await Promise.all(Array.from({ length: 20 }, () => query(org.api_key, london)));
    const statuses = results.map((r) => r.status).sort();
    expect(statuses.filter((s) => s === 200)).toHaveLength(7);
    expect(statuses.filter((s) => s === 402)).toHaveLength(13);
    expect(await invariantHolds(org.org_id)).toEqual({ granted: 7, available: 0, reserved: 0, charged: 7 });
    const ledger = await ledgerOf(org.org_id);
    expect(ledger.filter((l) => l.kind === 'reserve')).toHaveLength(7);
    expect(ledger.filter((l) => l.kind === 'settle')).toHaveLength(7);
    // Each request id appears in the ledger at most once per kind.
    const keys = ledger.map((l) => `${l.request_id}/${l.kind}`);
    expect(new Set(keys).size).toBe(keys.length);
  });

  it('the database itself refuses a balance that would break the invariant', async () => {
    const org = await newOrg(1);
    await expect(db().query('UPDATE credit_balances SET available = available - 5 WHERE org_id = $1', [org.org_id])).rejects.toThrow();
    await expect(db().query('UPDATE credit_balances SET charged = charged + 1 WHERE org_id = $1', [org.org_id])).rejects.toThrow(/credit_invariant/);
  });

  it('a repeated POST without a key is a new billable request', async () => {
    const org = await newOrg(5);
    const a = await query(org.api_key, london);
    const b = await query(org.api_key, london);
    expect(a.status).toBe(200);
    expect(b.status).toBe(200);
    expect(a.body.data.receipt.request_id).not.toBe(b.body.data.receipt.request_id);
    expect((await balanceOf(org.org_id)).charged).toBe(2);
  });
});

describe('ledger steps', () => {
  /** A request row of `orgId` in `reserving`, as the API claims it. */
  async function claim(orgId: string) {
    const id = `req_ledger${Date.now()}${Math.random().toString(36).slice(2, 8)}`;
    await db().query(`INSERT INTO requests (id, org_id, workflow_id, status) VALUES ($1, $2, $3, 'reserving')`, [id, orgId, `test-${id}`]);
    return id;
  }

  it('an interrupted request never reserves; a repeated reserve returns the first outcome', async () => {
    const org = await newOrg(5);
    const stopped = await claim(org.org_id);
    expect(await transition(db(), stopped, 'interrupted', { error_code: 'request_interrupted' }, ['reserving'])).toMatchObject({ moved: true });
    expect(await reserve(ledgerDb(), org.org_id, stopped, 1)).toEqual({ ok: false, reason: 'request_closed', status: 'interrupted' });
    const running = await claim(org.org_id);
    expect(await reserve(ledgerDb(), org.org_id, running, 2)).toEqual({ ok: true, reserved: 2 });
    expect(await reserve(ledgerDb(), org.org_id, running, 2)).toEqual({ ok: true, reserved: 2 });
    // Once reserved it is processing: an ambiguous start's interruption (only from reserving) does not move it.
    expect(await transition(db(), running, 'interrupted', {}, ['reserving'])).toMatchObject({ moved: false, current: { status: 'processing' } });
    expect(await ledgerOf(org.org_id)).toEqual([{ request_id: running, kind: 'reserve', amount: 2 }]);
    await release(db(), org.org_id, running);
    expect(await invariantHolds(org.org_id)).toEqual({ granted: 5, available: 5, reserved: 0, charged: 0 });
  });

  it("a reservation waiting on a locked ledger gives up within the ledger pool's statement timeout and leaves nothing; other pools keep their own", async () => {
    const org = await newOrg(5);
    const id = await claim(org.org_id);
    // The service's pools cut statements off at 30 s: only the ledger pool's 2 s can end this wait.
    const holder = await db().connect();
    try {
      await holder.query('BEGIN');
      await holder.query('SELECT * FROM credit_balances WHERE org_id = $1 FOR UPDATE', [org.org_id]);
      const t0 = Date.now();
      await expect(reserve(ledgerDb(), org.org_id, id, 1)).rejects.toThrow(/statement timeout/);
      const took = Date.now() - t0;
      expect(took).toBeGreaterThanOrEqual(RESERVE_STATEMENT_TIMEOUT_MS - 50);
      expect(took).toBeLessThan(RESERVE_STATEMENT_TIMEOUT_MS + 3_000);
    } finally {
      await holder.query('ROLLBACK').catch(() => {});
      holder.release();
    }
    expect(await ledgerOf(org.org_id)).toEqual([]);
    expect((await db().query('SELECT status FROM requests WHERE id = $1', [id])).rows[0].status).toBe('reserving');
    // The bound is the ledger pool's alone: the general pool's connections keep 30 s.
    const clients = await Promise.all([1, 2, 3, 4].map(() => db().connect()));
    try {
      for (const c of clients) expect((await c.query('SHOW statement_timeout')).rows[0].statement_timeout).toBe('30s');
    } finally {
      for (const c of clients) c.release();
    }
    expect((await ledgerDb().query('SHOW statement_timeout')).rows[0].statement_timeout).toBe(`${RESERVE_STATEMENT_TIMEOUT_MS / 1000}s`);
    expect(await reserve(ledgerDb(), org.org_id, id, 1)).toEqual({ ok: true, reserved: 1 });
    expect(await invariantHolds(org.org_id)).toEqual({ granted: 5, available: 4, reserved: 1, charged: 0 });
  });

  it('settle after release and release after settle are explicit dead ends, not retryable errors', async () => {
    const org = await newOrg(5);
    const released = await claim(org.org_id);
    await reserve(ledgerDb(), org.org_id, released, 1);
    expect(await release(db(), org.org_id, released)).toEqual({ released: 1 });
    expect(await release(db(), org.org_id, released)).toEqual({ released: 1 }); // idempotent
    await expect(settle(db(), org.org_id, released, 1)).rejects.toMatchObject({ name: 'LedgerStateError', kind: 'already_released' });
    const settled = await claim(org.org_id);
    await reserve(ledgerDb(), org.org_id, settled, 1);
    expect(await settle(db(), org.org_id, settled, 1)).toEqual({ charged: 1 });
    expect(await settle(db(), org.org_id, settled, 1)).toEqual({ charged: 1 }); // idempotent
    await expect(release(db(), org.org_id, settled)).rejects.toMatchObject({ kind: 'already_settled' });
    const never = await claim(org.org_id);
    const err = await settle(db(), org.org_id, never, 1).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(LedgerStateError);
    expect(err).toMatchObject({ kind: 'no_reservation' });
    expect(await invariantHolds(org.org_id)).toEqual({ granted: 5, available: 4, reserved: 0, charged: 1 });
  });

  it('settle and finalize: once, atomically, whichever way it runs (first time, again after a crash, after a release, on a closed request)', async () => {
    const org = await newOrg(10);
    const envelope = (n: number) => ({ status: 200, body: { success: true, n } });
    const fin = (requestId: string, n: number) => ({ requestId, status: 'succeeded' as const, envelope: envelope(n), errorCode: null, retentionMs: 60_000 });
    const row = async (id: string) =>
      (await db().query(`SELECT status, billing_status, charged_credits, response_status, result FROM requests WHERE id = $1`, [id])).rows[0];

    // The first settlement of an open request: charged, envelope written, billing settled, all at once.
    const first = await claim(org.org_id);
    await reserve(ledgerDb(), org.org_id, first, 3);
    const a = await settleAndFinalize(db(), org.org_id, 2, fin(first, 1));
    expect(a.charged).toBe(2);
    expect(a.finalized).toMatchObject({ moved: true, row: { id: first, status: 'succeeded', billing_status: 'settled', charged_credits: 2, response_status: 200 } });
    expect(await row(first)).toEqual({ status: 'succeeded', billing_status: 'settled', charged_credits: 2, response_status: 200, result: { success: true, n: 1 } });
    // The first settlement is one statement (credits.ts firstSettlement): it writes every column
    // finalize writes, its retention counted from the write.
    const kept = (await db().query(`SELECT error_code, completed_at IS NOT NULL AS completed, round(extract(epoch FROM result_expires_at - completed_at)) AS retention_s FROM requests WHERE id = $1`, [first])).rows[0];
    expect(kept).toEqual({ error_code: null, completed: true, retention_s: '60' });
    // Again (a retried step whose answer was lost): the first charge, the first envelope, nothing new.
    const again = await settleAndFinalize(db(), org.org_id, 2, fin(first, 2));
    expect(again.charged).toBe(2);
    expect(again.finalized).toMatchObject({ moved: false, current: { status: 'succeeded', result: { success: true, n: 1 } } });

    // A request closed meanwhile (interrupted while it ran): charged as before, its envelope untouched.
    const closed = await claim(org.org_id);
    await reserve(ledgerDb(), org.org_id, closed, 1);
    expect(await transition(db(), closed, 'interrupted', { error_code: 'request_interrupted' }, ['processing'])).toMatchObject({ moved: true });
    const c = await settleAndFinalize(db(), org.org_id, 1, fin(closed, 3));
    expect(c).toMatchObject({ charged: 1, finalized: { moved: false, current: { status: 'interrupted', result: null } } });

    // A released reservation is a dead end, and nothing is written.
    const released = await claim(org.org_id);
    await reserve(ledgerDb(), org.org_id, released, 1);
    await release(db(), org.org_id, released);
    await expect(settleAndFinalize(db(), org.org_id, 1, fin(released, 4))).rejects.toMatchObject({ kind: 'already_released' });
    expect(await row(released)).toMatchObject({ status: 'processing', result: null });

    expect(await ledgerOf(org.org_id)).toEqual([
      { request_id: first, kind: 'reserve', amount: 3 },
      { request_id: first, kind: 'settle', amount: 2 },
      { request_id: closed, kind: 'reserve', amount: 1 },
      { request_id: closed, kind: 'settle', amount: 1 },
      { request_id: released, kind: 'reserve', amount: 1 },
      { request_id: released, kind: 'release', amount: 1 },
    ]);
    expect(await invariantHolds(org.org_id)).toEqual({ granted: 10, available: 7, reserved: 0, charged: 3 });
  });

  it('ledger rows reference an existing request; only grants have none', async () => {
    const org = await newOrg(5);
    await expect(
      db().query(`INSERT INTO credit_ledger (org_id, request_id, kind, amount) VALUES ($1, 'req_doesnotexist000', 'reserve', 1)`, [org.org_id]),
    ).rejects.toThrow(/credit_ledger_request_fk/);
    await expect(db().query(`INSERT INTO credit_ledger (org_id, kind, amount) VALUES ($1, 'reserve', 1)`, [org.org_id])).rejects.toThrow(/credit_ledger_request_kind/);
    expect(await invariantHolds(org.org_id)).toEqual({ granted: 5, available: 5, reserved: 0, charged: 0 });
  });
});

describe('request status', () => {
  it('full RequestStatus; another organization gets 404; malformed id 400', async () => {
    const org = await newOrg(5);
    const res = await query(org.api_key, london, { 'idempotency-key': `status-${Date.now()}` });
    const rid = res.body.data.receipt.request_id;
    const st = await call('GET', `/v1/query/requests/${rid}`, { key: org.api_key });
    expect(st.status).toBe(200);
    expect(st.body.data).toMatchObject({
      request_id: rid,
      status: 'succeeded',
      result: res.body,
      response_status: 200,
      error_code: null,
      receipt: res.body.data.receipt,
      feedback: null,
      can_rate: true,
      feedback_unavailable_reason: null,
    });
    const expires = Date.parse(st.body.data.result_expires_at) - Date.now();
    expect(expires).toBeGreaterThan(23.9 * 3600_000);
    expect(expires).toBeLessThanOrEqual(24 * 3600_000);

    const other = await newOrg(1);
    const foreign = await call('GET', `/v1/query/requests/${rid}`, { key: other.api_key });
    expect(foreign.status).toBe(404);
    expect(foreign.body.error.code).toBe('request_not_found');
    expect(foreign.text).not.toContain('London');

    const bad = await call('GET', '/v1/query/requests/req_short', { key: org.api_key });
    expect(bad.status).toBe(400);
    expect(bad.body.error.code).toBe('invalid_input');
    expect(bad.body.error.param).toBe('request_id');
  });

  it('an unkeyed request does not retain its result in the status record', async () => {
    const org = await newOrg(5);
    const res = await query(org.api_key, london);
    const st = await call('GET', `/v1/query/requests/${res.body.data.receipt.request_id}`, { key: org.api_key });
    expect(st.body.data.status).toBe('succeeded');
    expect(st.body.data.result).toBeNull();
    expect(st.body.data.response_status).toBeNull();
  });
});
