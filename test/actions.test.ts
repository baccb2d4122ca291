// Actions never repeat a step that may have completed. A worker killed mid-action: after a new
// worker starts, the booking exists exactly once on the site and was billed once.
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { ownPair, balanceOf, closeDb, db, demo, ledgerOf, newOrg, query, until } from './helpers/stack.ts';
import { processPool } from './helpers/processes.ts';

const booking = (slot: string) => ({ api: '@clinic', operation: 'book_appointment', input: { slot_id: slot, patient_name: 'Jordan Lee', email: 'jordan.lee@example.com' } });

// A task queue of our own, so killing these processes disturbs no other test.
let pair: ReturnType<typeof ownPair>;
const pool = processPool(() => pair);
const spawn = (kind: 'api' | 'worker') => pool.spawn(kind);

beforeAll(() => {
  pair = ownPair('actions', { EXECUTE_HEARTBEAT_TIMEOUT_MS: '2000', QUERY_DEADLINE_MS: '60000' });
});
beforeEach(async () => {
  await demo('/__demo/reset');
});
afterEach(() => pool.killAll());
afterAll(closeDb);

describe('actions', () => {
  it('a worker killed mid-action: the action happened exactly once and was billed once', async () => {
    const [api, worker] = await Promise.all([spawn('api'), spawn('worker')]);
    const org = await newOrg(5);
    // The site books first and answers late, so the worker dies after the booking exists.
    await demo('/__demo/faults', { host: 'clinic.example.test', path_prefix: '/appointments', method: 'POST', latency_ms: 6000, times: 1 });
    const pending = query(org.api_key, booking('20250610-REYE-0930'), {}, String(api.started.url));
    await until(async () => (await demo('/__demo/state')).bookings === 1, 30_000, 100);
    await worker.kill('SIGKILL');
    await spawn('worker');
    const res = await pending;
    expect(res.status, res.text).toBe(200);
    expect(res.body.data.output).toMatchObject({ slot_id: '20250610-REYE-0930', patient_name: 'Jordan Lee', status: 'confirmed' });
    expect((await demo('/__demo/state')).bookings).toBe(1);
    const rid = res.body.data.receipt.request_id;
    expect(await ledgerOf(org.org_id)).toEqual([
      { request_id: rid, kind: 'reserve', amount: 1 },
      { request_id: rid, kind: 'settle', amount: 1 },
    ]);
    expect(await balanceOf(org.org_id)).toEqual({ granted: 5, available: 4, reserved: 0, charged: 1 });
  });

  it('an action whose outcome cannot be confirmed is action_unconfirmed, not retried, not charged', async () => {
    const [api] = await Promise.all([spawn('api'), spawn('worker')]);
    const org = await newOrg(5);
    await demo('/__demo/faults', { host: 'clinic.example.test', path_prefix: '/appointments', method: 'POST', status: 503, times: 5 });
    const res = await query(org.api_key, booking('20250611-HART-1400'), {}, String(api.started.url));
    expect(res.status, res.text).toBe(422);
    expect(res.body.error.code).toBe('action_unconfirmed');
    expect(res.body.error.retryable).toBe(false);
    expect(res.body.error.receipt.billing.status).toBe('released');
    const state = await demo('/__demo/state');
    expect(state.bookings).toBe(0);
    // Exactly one POST reached the site: the action was not repeated.
    const faults = state.faults as Array<{ host: string; times?: number }>;
    expect(faults).toHaveLength(1);
    expect(faults[0]!.times).toBe(4);
    expect((await balanceOf(org.org_id)).charged).toBe(0);
    const row = await db().query('SELECT status, error_code FROM requests WHERE id = $1', [res.body.error.request_id]);
    expect(row.rows[0]).toEqual({ status: 'failed', error_code: 'action_unconfirmed' });
  });
});
