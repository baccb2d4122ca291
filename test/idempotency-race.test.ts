// One Idempotency-Key, one final answer, even when a run's answer and its request row disagree.
// Found by `npm run chaos` (key chaos-mwte3t9y-130): PostgreSQL and Temporal restarted while a run
// reserved; its first attempt wrote `rejected` billing_unavailable and freed the key, the workflow
// task's completion was lost, the task ran again from the start (local activities included), the
// re-run reserve found the row closed and the run returned request_interrupted. The waiting caller
// was told "will not run again under this key"; the next retry with the key ran and was charged.
// Here the same interleaving is driven by hand on an API/worker pair of this file's own: the row is
// finalized as the first attempt did (shared finalize, freeKey) before any worker runs the workflow,
// so the run's reserve finds it closed exactly as the re-run did.
import { describe, expect, it } from 'vitest';
import { balanceOf, db, ledgerOf, newOrg, query, until } from './helpers/stack.ts';
import { ownPairPool, withTemporal } from './helpers/own-pair.ts';
import { errorEnvelope } from '../shared/errors.ts';
import { finalize } from '../shared/db/requests.ts';
import type { TerminalEnvelope } from '../shared/workflow-contract.ts';

const london = { api: '@weather', operation: 'current_weather', input: { city: 'London' } };
const key = () => `race-${Date.now()}-${Math.random().toString(36).slice(2)}`;

// The waiter follows the run's history (as it does when LISTEN is down, as in the chaos run):
// it hears the workflow's own return value, not the row's notification.
const pool = ownPairPool('idem-race', { RESULT_WAIT: 'history' });

describe('one key, one final answer', () => {
  it('a run that returns request_interrupted for a row it already rejected (billing_unavailable, key freed): the caller gets the row\'s 503, and the retry the 503 invites runs once', async () => {
    const api = await pool.spawn('api'); // no worker yet: the run waits on its task queue
    const url = String(api.started.url);
    const org = await newOrg(5);
    const k = key();
    const pending = query(org.api_key, london, { 'idempotency-key': k }, url);

    const claim = await until(async () => {
      const r = await db().query(`SELECT id, workflow_id, status FROM requests WHERE org_id = $1`, [org.org_id]);
      return r.rows[0] as { id: string; workflow_id: string; status: string } | undefined;
    }, 60_000);
    expect(claim.status).toBe('reserving');
    // The start has reached Temporal (so the API is now waiting on the run's history).
    await until(() => withTemporal(async (c) => (await c.workflow.getHandle(claim.workflow_id).describe().catch(() => undefined))?.status.name === 'RUNNING'), 60_000);

    // The first attempt's write: rejected with billing_unavailable, nothing charged, key freed.
    const rejected: TerminalEnvelope = {
      status: 503,
      body: errorEnvelope('billing_unavailable', {
        message: 'Credits cannot be reserved right now; nothing was charged',
        requestId: claim.id,
        receipt: { request_id: claim.id, api: '@weather', operation: 'current_weather', billing: { status: 'not_started', reserved_credits: 0, charged_credits: 0 } },
        baseUrl: url,
      }),
    };
    const w = await finalize(db(), { requestId: claim.id, status: 'rejected', envelope: rejected, errorCode: 'billing_unavailable', retentionMs: 60_000, freeKey: true });
    expect(w.moved).toBe(true);

    // The re-run: a worker picks the task up; its reserve finds the row closed.
    await pool.spawn('worker');
    const res = await pending;
    // What the run itself returned: the interleaving is the chaos run's.
    const returned = await withTemporal(async (c) => (await c.workflow.getHandle(claim.workflow_id).result()) as TerminalEnvelope);
    expect(returned.status).toBe(409);
    expect(returned.body.success ? undefined : returned.body.error.code).toBe('request_interrupted');

    // The caller hears the record: the row's 503, not the run's 409 (never "will not run again"
    // for a key that was freed).
    expect(res.status, res.text).toBe(503);
    expect(res.body).toEqual(rejected.body);
    expect(res.body.error.retryable).toBe(true);
    const row = (await db().query('SELECT status, error_code, idempotency_key_hash FROM requests WHERE id = $1', [claim.id])).rows[0];
    expect(row).toEqual({ status: 'rejected', error_code: 'billing_unavailable', idempotency_key_hash: null });
    expect(await ledgerOf(org.org_id)).toEqual([]);

    // The retry the 503 invites runs as a new request, charged once.
    const retry = await query(org.api_key, london, { 'idempotency-key': k }, url);
    expect(retry.status, retry.text).toBe(200);
    const second = retry.body.data.receipt.request_id as string;
    expect(second).not.toBe(claim.id);
    expect(await ledgerOf(org.org_id)).toEqual([
      { request_id: second, kind: 'reserve', amount: 1 },
      { request_id: second, kind: 'settle', amount: 1 },
    ]);
    // And from now on the key is that request's: a further retry replays it.
    const again = await query(org.api_key, london, { 'idempotency-key': k }, url);
    expect(again.status).toBe(200);
    expect(again.headers.get('idempotency-replayed')).toBe('true');
    expect(again.body.data.receipt.request_id).toBe(second);
    expect(await balanceOf(org.org_id)).toEqual({ granted: 5, available: 4, reserved: 0, charged: 1 });
  });

  it('a run that returns request_interrupted for a row still unresolved: the row is interrupted first, so every later retry with the key gets 409 request_interrupted and nothing runs again', async () => {
    const api = await pool.spawn('api');
    const url = String(api.started.url);
    const org = await newOrg(5);
    const k = key();
    const pending = query(org.api_key, london, { 'idempotency-key': k }, url);
    const claim = await until(async () => {
      const r = await db().query(`SELECT id, workflow_id FROM requests WHERE org_id = $1`, [org.org_id]);
      return r.rows[0] as { id: string; workflow_id: string } | undefined;
    }, 60_000);
    await until(() => withTemporal(async (c) => (await c.workflow.getHandle(claim.workflow_id).describe().catch(() => undefined))?.status.name === 'RUNNING'), 60_000);
    // The run's reserve finds no `reserving` row to reserve on: its claim is gone from that state
    // without an envelope (the state a lost write leaves; no caller has been told anything yet).
    await db().query(`UPDATE requests SET status = 'refund_pending' WHERE id = $1`, [claim.id]);
    await pool.spawn('worker');
    const res = await pending;
    expect(res.status, res.text).toBe(409);
    expect(res.body.error.code).toBe('request_interrupted');
    // Told only because the row says so; an interrupted row is never finalized, its key never freed.
    const row = (await db().query('SELECT status, result, idempotency_key_hash IS NOT NULL AS keyed FROM requests WHERE id = $1', [claim.id])).rows[0];
    expect(row).toEqual({ status: 'interrupted', result: null, keyed: true });
    const later = await finalize(db(), {
      requestId: claim.id,
      status: 'rejected',
      envelope: { status: 503, body: errorEnvelope('billing_unavailable', { requestId: claim.id }) },
      errorCode: 'billing_unavailable',
      retentionMs: 60_000,
      freeKey: true,
    });
    expect(later.moved).toBe(false);
    for (let i = 0; i < 2; i++) {
      const retry = await query(org.api_key, london, { 'idempotency-key': k }, url);
      expect(retry.status, retry.text).toBe(409);
      expect(retry.body.error.code).toBe('request_interrupted');
      expect(retry.body.error.request_id).toBe(claim.id);
    }
    expect(await ledgerOf(org.org_id)).toEqual([]);
    expect(await balanceOf(org.org_id)).toEqual({ granted: 5, available: 5, reserved: 0, charged: 0 });
  });

  // The claim loop's races, driven by a trigger on this organization's inserts: every claim of the
  // caller meets a request holding the key, inserted by the trigger in the claim's own statement.
  // The first holder finished and its retained result has expired by the time the caller looks (so
  // the key is released and the caller claims again); the second is a live claim of an identical
  // request that has not reached Temporal yet. The caller runs out of attempts on it.
  it('a keyed request that loses every claim to concurrent requests gets 409 request_in_progress with Retry-After and Location pointing at the request holding the key', async () => {
    const org = await newOrg(5);
    const k = key();
    const tag = Math.random().toString(36).slice(2, 10);
    const finished = `req_racefinished_${tag}`;
    const live = `req_racelive_${tag}`;
    await db().query(`
      CREATE FUNCTION race_claims_${tag}() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        IF pg_trigger_depth() > 1 OR NEW.idempotency_key_hash IS NULL THEN RETURN NEW; END IF;
        IF NOT EXISTS (SELECT 1 FROM requests WHERE org_id = NEW.org_id) THEN
          INSERT INTO requests (id, org_id, idempotency_key_hash, fingerprint, workflow_id, api, operation, status, response_status, result, result_expires_at, completed_at)
          VALUES ('${finished}', NEW.org_id, NEW.idempotency_key_hash, NEW.fingerprint, 'race-finished-${tag}', NEW.api, NEW.operation, 'succeeded', 200,
                  '{"success":true,"data":{"output":{}}}', now() - interval '1 second', now());
        ELSE
          INSERT INTO requests (id, org_id, idempotency_key_hash, fingerprint, workflow_id, api, operation, status)
          VALUES ('${live}', NEW.org_id, NEW.idempotency_key_hash, NEW.fingerprint, 'race-live-${tag}', NEW.api, NEW.operation, 'reserving');
        END IF;
        RETURN NEW;
      END $$`);
    await db().query(`CREATE TRIGGER race_claims_${tag} BEFORE INSERT ON requests FOR EACH ROW WHEN (NEW.org_id = '${org.org_id}') EXECUTE FUNCTION race_claims_${tag}()`);
    try {
      const res = await query(org.api_key, london, { 'idempotency-key': k });
      expect(res.status, res.text).toBe(409);
      expect(res.body.error.code).toBe('request_in_progress');
      expect(res.body.error.retryable).toBe(true);
      expect(res.body.error.request_id).toBe(live);
      expect(res.headers.get('location')).toBe(`/v1/query/requests/${live}`);
      expect(Number(res.headers.get('retry-after'))).toBeGreaterThan(0);
    } finally {
      await db().query(`DROP TRIGGER race_claims_${tag} ON requests`);
      await db().query(`DROP FUNCTION race_claims_${tag}()`);
    }
    // The caller's own claims never landed: the two holders are the organization's only requests,
    // the finished one's key released when its expired result was found; nothing was charged.
    const rows = (await db().query('SELECT id, idempotency_key_hash IS NOT NULL AS keyed FROM requests WHERE org_id = $1 ORDER BY created_at, id', [org.org_id])).rows;
    expect(rows).toEqual([{ id: finished, keyed: false }, { id: live, keyed: true }]);
    expect(await ledgerOf(org.org_id)).toEqual([]);
  });
});
