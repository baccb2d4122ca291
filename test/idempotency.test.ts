// The spec's idempotency table, row by row, on the real stack.
import { Client, Connection } from '@temporalio/client';
import { afterAll, beforeEach, describe, expect, it } from 'vitest';
import { balanceOf, call, closeDb, db, demo, ledgerOf, newOrg, query, stack, until } from './helpers/stack.ts';
import { findByKey } from '../shared/db/requests.ts';
import { sha256Hex } from '../shared/ids.ts';

const london = { api: '@weather', operation: 'current_weather', input: { city: 'London' } };
const key = () => `idem-${Date.now()}-${Math.random().toString(36).slice(2)}`;

afterAll(closeDb);
beforeEach(async () => {
  await demo('/__demo/reset');
});

describe('idempotency', () => {
  it('an identical retry after completion replays the same status and body, without a second charge', async () => {
    const org = await newOrg(5);
    const k = key();
    const first = await query(org.api_key, london, { 'idempotency-key': k });
    expect(first.status).toBe(200);
    expect(first.headers.get('idempotency-replayed')).toBe('false');
    const again = await query(org.api_key, london, { 'idempotency-key': k });
    expect(again.status).toBe(200);
    expect(again.headers.get('idempotency-replayed')).toBe('true');
    expect(again.body).toEqual(first.body);
    expect(again.headers.get('x-request-id')).toBe(first.headers.get('x-request-id'));
    // Key order in the body does not change identity.
    const reordered = await query(org.api_key, { input: { city: 'London' }, operation: 'current_weather', api: '@weather' }, { 'idempotency-key': k });
    expect(reordered.headers.get('idempotency-replayed')).toBe('true');
    expect((await balanceOf(org.org_id)).charged).toBe(1);
    expect(await ledgerOf(org.org_id)).toHaveLength(2);
  });

  it('a failed request replays its error too', async () => {
    const org = await newOrg(5);
    const k = key();
    const first = await query(org.api_key, { ...london, input: { city: 'Atlantis' } }, { 'idempotency-key': k });
    expect(first.status).toBe(404);
    const again = await query(org.api_key, { ...london, input: { city: 'Atlantis' } }, { 'idempotency-key': k });
    expect(again.status).toBe(404);
    expect(again.headers.get('idempotency-replayed')).toBe('true');
    expect(again.body).toEqual(first.body);
  });

  it('the same key with a different body is idempotency_key_conflict', async () => {
    const org = await newOrg(5);
    const k = key();
    await query(org.api_key, london, { 'idempotency-key': k });
    const res = await query(org.api_key, { ...london, input: { city: 'Paris' } }, { 'idempotency-key': k });
    expect(res.status).toBe(409);
    expect(res.body.error.code).toBe('idempotency_key_conflict');
    expect(res.body.error.retryable).toBe(false);
    expect((await balanceOf(org.org_id)).charged).toBe(1);
  });

  it('a used key is met before the body is resolved: a body that would not resolve or validate is still a conflict', async () => {
    const org = await newOrg(5);
    const k = key();
    expect((await query(org.api_key, london, { 'idempotency-key': k })).status).toBe(200);
    for (const body of [
      { ...london, api: '@no-such-workflow' },
      { ...london, operation: 'no_such_operation' },
      { ...london, input: { city: 42 } },
    ]) {
      const res = await query(org.api_key, body, { 'idempotency-key': k });
      expect(res.status, JSON.stringify(body)).toBe(409);
      expect(res.body.error).toMatchObject({ code: 'idempotency_key_conflict', param: 'Idempotency-Key' });
    }
    expect(await ledgerOf(org.org_id)).toHaveLength(2);
  });

  it('keys are scoped to the organization', async () => {
    const a = await newOrg(5);
    const b = await newOrg(5);
    const k = key();
    const ra = await query(a.api_key, london, { 'idempotency-key': k });
    const rb = await query(b.api_key, { ...london, input: { city: 'Paris' } }, { 'idempotency-key': k });
    expect(ra.status).toBe(200);
    expect(rb.status).toBe(200);
    expect(rb.headers.get('idempotency-replayed')).toBe('false');
    expect(rb.body.data.output.city).toBe('Paris');
  });

  it('a retry while the original runs is 409 request_in_progress with Retry-After and Location; then it replays', async () => {
    const org = await newOrg(5);
    const k = key();
    await demo('/__demo/faults', { host: 'weather.example.test', path_prefix: '/api/v1/current', latency_ms: 3000, times: 1 });
    const original = query(org.api_key, london, { 'idempotency-key': k });
    const rid = await until(async () => {
      const r = await db().query('SELECT id FROM requests WHERE org_id = $1', [org.org_id]);
      return r.rows[0]?.id as string | undefined;
    });
    const during = await query(org.api_key, london, { 'idempotency-key': k });
    expect(during.status).toBe(409);
    expect(during.body.error.code).toBe('request_in_progress');
    expect(during.body.error.retryable).toBe(true);
    expect(during.body.error.request_id).toBe(rid);
    expect(Number(during.headers.get('retry-after'))).toBeGreaterThan(0);
    expect(during.headers.get('location')).toBe(`/v1/query/requests/${rid}`);
    const done = await original;
    expect(done.status).toBe(200);
    const after = await query(org.api_key, london, { 'idempotency-key': k });
    expect(after.headers.get('idempotency-replayed')).toBe('true');
    expect(after.body).toEqual(done.body);
    expect((await balanceOf(org.org_id)).charged).toBe(1);
  });

  it('concurrent identical keyed requests dispatch once', async () => {
    const org = await newOrg(20);
    const k = key();
    await demo('/__demo/faults', { host: 'weather.example.test', path_prefix: '/api/v1/current', latency_ms: 1500, times: 1 });
    const results = await Promise.all(Array.from({ length: 10 }, () => query(org.api_key, london, { 'idempotency-key': k })));
    const ok = results.filter((r) => r.status === 200);
    const busy = results.filter((r) => r.status === 409);
    expect(ok.length + busy.length).toBe(10);
    expect(ok.length).toBeGreaterThanOrEqual(1);
    for (const r of busy) expect(r.body.error.code).toBe('request_in_progress');
    const rows = await db().query('SELECT count(*)::int AS n FROM requests WHERE org_id = $1', [org.org_id]);
    expect(rows.rows[0].n).toBe(1);
    await until(async () => (await balanceOf(org.org_id)).charged === 1);
    expect((await ledgerOf(org.org_id)).filter((l) => l.kind === 'reserve')).toHaveLength(1);
  });

  it('an original stopped unfinished is request_interrupted and never dispatched again', async () => {
    const org = await newOrg(5);
    const k = key();
    await demo('/__demo/faults', { host: 'weather.example.test', path_prefix: '/api/v1/current', latency_ms: 5000, times: 1 });
    const original = query(org.api_key, london, { 'idempotency-key': k });
    const row = await until(async () => {
      const r = await db().query(`SELECT id, workflow_id FROM requests WHERE org_id = $1 AND status = 'processing'`, [org.org_id]);
      return r.rows[0] as { id: string; workflow_id: string } | undefined;
    });
    // An operator terminates the run: it stops without a result.
    const connection = await Connection.connect({ address: stack().temporalAddress });
    try {
      await new Client({ connection }).workflow.getHandle(row.workflow_id).terminate('test: operator stopped the run');
    } finally {
      await connection.close();
    }
    // The waiting client learns the run stopped unfinished; its reservation went back.
    const stopped = await original;
    expect(stopped.status, stopped.text).toBe(409);
    expect(stopped.body.error.code).toBe('request_interrupted');
    expect(stopped.body.error.request_id).toBe(row.id);
    expect(stopped.body.error.receipt.billing).toEqual({ status: 'released', reserved_credits: 1, charged_credits: 0 });
    for (let i = 0; i < 2; i++) {
      const retry = await query(org.api_key, london, { 'idempotency-key': k });
      expect(retry.status).toBe(409);
      expect(retry.body.error.code).toBe('request_interrupted');
      expect(retry.body.error.retryable).toBe(false);
      expect(retry.body.error.request_id).toBe(row.id);
    }
    const rows = await db().query('SELECT count(*)::int AS n FROM requests WHERE org_id = $1', [org.org_id]);
    expect(rows.rows[0].n).toBe(1);
    const st = await call('GET', `/v1/query/requests/${row.id}`, { key: org.api_key });
    expect(st.body.data.status).toBe('interrupted');
    // The reservation the terminated run left behind went back; nothing was charged.
    expect(st.body.data.receipt.billing).toEqual({ status: 'released', reserved_credits: 1, charged_credits: 0 });
    expect(await balanceOf(org.org_id)).toEqual({ granted: 5, available: 5, reserved: 0, charged: 0 });
  });

  it('a claim whose dispatch never happened goes stale: request_interrupted', async () => {
    const org = await newOrg(5);
    const k = key();
    // The first try gets a reference body fingerprint; then we forge a claim left by a crashed API.
    const first = await query(org.api_key, london, { 'idempotency-key': k });
    const fp = await db().query('SELECT fingerprint FROM requests WHERE id = $1', [first.body.data.receipt.request_id]);
    const k2 = key();
    const { createHash } = await import('node:crypto');
    const hash = createHash('sha256').update(k2).digest('hex');
    await db().query(
      `INSERT INTO requests (id, org_id, idempotency_key_hash, fingerprint, workflow_id, status, created_at)
       VALUES ($1, $2, $3, $4, $5, 'reserving', now() - interval '10 minutes')`,
      [`req_stale${Date.now()}`, org.org_id, hash, fp.rows[0].fingerprint, `query-${org.org_id}-key-${hash}`],
    );
    const retry = await query(org.api_key, london, { 'idempotency-key': k2 });
    expect(retry.status).toBe(409);
    expect(retry.body.error.code).toBe('request_interrupted');
    expect((await balanceOf(org.org_id)).charged).toBe(1);
  });

  it('after the 24-hour retention the key runs anew', async () => {
    const org = await newOrg(5);
    const k = key();
    const first = await query(org.api_key, london, { 'idempotency-key': k });
    await db().query(`UPDATE requests SET result_expires_at = now() - interval '1 second' WHERE id = $1`, [first.body.data.receipt.request_id]);
    const later = await query(org.api_key, london, { 'idempotency-key': k });
    expect(later.status).toBe(200);
    expect(later.headers.get('idempotency-replayed')).toBe('false');
    expect(later.body.data.receipt.request_id).not.toBe(first.body.data.receipt.request_id);
    expect((await balanceOf(org.org_id)).charged).toBe(2);
  });

  it("the key's row is read with its retained result only for a replay: same body, within retention", async () => {
    const org = await newOrg(5);
    const k = key();
    const first = await query(org.api_key, london, { 'idempotency-key': k });
    expect(first.status).toBe(200);
    const id = first.body.data.receipt.request_id;
    const { fingerprint } = (await db().query('SELECT fingerprint FROM requests WHERE id = $1', [id])).rows[0];
    const same = await findByKey(db(), org.org_id, sha256Hex(k), fingerprint);
    expect(same).toMatchObject({ id, has_result: true, response_status: 200 });
    expect(same?.result).toEqual(first.body);
    // A conflicting body: the row, not its result.
    expect(await findByKey(db(), org.org_id, sha256Hex(k), 'another body')).toMatchObject({ id, has_result: true, result: null });
    // Past retention: the row, not its result; the API then frees the key and runs anew.
    await db().query(`UPDATE requests SET result_expires_at = now() - interval '1 second' WHERE id = $1`, [id]);
    expect(await findByKey(db(), org.org_id, sha256Hex(k), fingerprint)).toMatchObject({ id, has_result: true, result: null });
    const later = await query(org.api_key, london, { 'idempotency-key': k });
    expect(later.status).toBe(200);
    expect(later.headers.get('idempotency-replayed')).toBe('false');
    expect(later.body.data.receipt.request_id).not.toBe(id);
    // Another organization's key never finds it.
    const other = await newOrg(5);
    expect(await findByKey(db(), other.org_id, sha256Hex(k), fingerprint)).toBeUndefined();
  });
});
