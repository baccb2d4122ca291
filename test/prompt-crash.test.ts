// The prompt-search fee under a worker kill (issue 10): it rides in the one reservation of the
// run, so a run finished by another worker is still reserved once and charged 5 + the price once.
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { ownPair, balanceOf, closeDb, db, demo, ledgerOf, newOrg, query, until } from './helpers/stack.ts';
import { processPool } from './helpers/processes.ts';

const PRICE = 1 + 5;

// A task queue of our own, so killing these processes disturbs no other test.
let pair: ReturnType<typeof ownPair>;
const pool = processPool(() => pair);
const spawn = (kind: 'api' | 'worker') => pool.spawn(kind);

beforeAll(() => {
  pair = ownPair('prompt-crash', { EXECUTE_HEARTBEAT_TIMEOUT_MS: '2000', QUERY_DEADLINE_MS: '60000' });
});
beforeEach(async () => {
  await demo('/__demo/reset');
});
afterEach(() => pool.killAll());
afterAll(closeDb);

describe('prompt mode under a worker kill', () => {
  it('a worker killed mid-run: another finishes it, 5 + the price reserved once and charged once', async () => {
    const [api, worker] = await Promise.all([spawn('api'), spawn('worker')]);
    const org = await newOrg(20);
    await demo('/__demo/faults', { host: 'weather.example.test', path_prefix: '/api/v1/current', latency_ms: 5000, times: 1 });
    const pending = query(org.api_key, { prompt: 'What is the current weather in London?', allowed_apis: ['@weather'] }, { 'idempotency-key': `prompt-crash-${Date.now()}` }, String(api.started.url));
    const row = await until(async () => {
      const r = await db().query(`SELECT id FROM requests WHERE org_id = $1 AND status = 'processing'`, [org.org_id]);
      return r.rows[0] as { id: string } | undefined;
    });
    await until(async () => (await demo('/__demo/state')).requests?.['weather.example.test'] >= 1);
    await worker.kill('SIGKILL');
    await spawn('worker');
    const res = await pending;
    expect(res.status, res.text).toBe(200);
    expect(res.body.data.output.city).toBe('London');
    expect(res.body.data.receipt.billing).toEqual({ status: 'settled', reserved_credits: PRICE, charged_credits: PRICE });
    expect(await ledgerOf(org.org_id)).toEqual([
      { request_id: row.id, kind: 'reserve', amount: PRICE },
      { request_id: row.id, kind: 'settle', amount: PRICE },
    ]);
    expect(await balanceOf(org.org_id)).toEqual({ granted: 20, available: 20 - PRICE, reserved: 0, charged: PRICE });
  });
});
