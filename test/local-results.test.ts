// The envelope a worker hands to an API in the same process (shared/local-results.ts, `npm start`):
// handed over only once its own write committed, and byte for byte what PostgreSQL stored, so a
// first answer and every replay read from the row are the same text. On the stack's PostgreSQL.
import { afterAll, describe, expect, it } from 'vitest';
import { closeDb, db, ledgerDb, newOrg, stack } from './helpers/stack.ts';
import { LocalResults, inJsonbKeyOrder } from '../shared/local-results.ts';
import { createBillingActivities } from '../activities/billing.ts';
import { reserve } from '../shared/db/credits.ts';
import { RunWatch } from '../apps/api/services/run-watch.ts';
import type { Client } from '@temporalio/client';
import type { Finalize } from '../activities/types.ts';

afterAll(closeDb);

async function claim(orgId: string) {
  const id = `req_handoff${Date.now()}${Math.random().toString(36).slice(2, 8)}`;
  await db().query(`INSERT INTO requests (id, org_id, workflow_id, status) VALUES ($1, $2, $3, 'reserving')`, [id, orgId, `test-${id}`]);
  return id;
}

/** What the API sends for the stored row: pg parses jsonb's text, keys in jsonb's order. */
async function storedText(requestId: string): Promise<string> {
  const r = await db().query('SELECT result FROM requests WHERE id = $1', [requestId]);
  return JSON.stringify(r.rows[0].result);
}

const body = (n: number) => ({
  success: true,
  data: {
    output: { zeta: n, a: 1, bb: [{ é: 'accent', e: 'plain', '😀': 'emoji', 'ￚ': 'BMP past the surrogates', ab: null }], nul: 'x\u0000y', lone: 'a\ud800b' },
    receipt: { request_id: 'r', billing: { status: 'settled', charged_credits: 1 } },
  },
});

describe('in-process result hand-off', () => {
  it('orders keys as jsonb does, for keys of every length and script', async () => {
    const values: unknown[] = [
      { b: 1, a: 2, aa: 3, ab: 4, B: 5, '': 6, ' ': 7 },
      { é: 1, e: 2, f: 3, '😀': 4, 'ￚ': 5, 'ä': 6, z: 7, 'zz': 8, 'ü': 9, '𝄞a': 10, 'aé': 11 },
      [{ y: [{ d: 1, c: { b: 1, a: [] } }], x: 'v' }, 3, 'three', null, true],
      JSON.parse('{"__proto__": {"b": 1, "a": 2}, "constructor": 1, "c": 0}'),
      { numbers: [0, -1, 1.5, 1e21, 1e-7, 0.30000000000000004, 123456789012345] },
    ];
    for (const v of values) {
      const r = await db().query('SELECT $1::jsonb AS j', [JSON.stringify(v)]);
      expect(JSON.stringify(inJsonbKeyOrder(v))).toBe(JSON.stringify(r.rows[0].j));
    }
    // __proto__ stays a key of its own, never the object's prototype.
    const odd = inJsonbKeyOrder(JSON.parse('{"__proto__": {"polluted": true}}')) as Record<string, unknown>;
    expect(Object.keys(odd)).toEqual(['__proto__']);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    // Nesting past the copy's bound hands nothing over (the row is read instead).
    let deep: unknown = 1;
    for (let i = 0; i < 300; i++) deep = [deep];
    expect(inJsonbKeyOrder(deep)).toBeUndefined();
  });

  it('hands over the committed envelope as the row stores it, once, and nothing for a write that did not move the row', async () => {
    const org = await newOrg(10);
    const local = new LocalResults();
    const billing = createBillingActivities(db(), ledgerDb(), local);
    const id = await claim(org.org_id);
    await reserve(ledgerDb(), org.org_id, id, 2);
    const fin = (n: number): Finalize => ({ requestId: id, status: 'succeeded', envelope: { status: 200, body: body(n) as never }, errorCode: null, retentionMs: 60_000 });

    const first = local.wait(id);
    expect(local.wanted(id)).toBe(true);
    const s = await billing.settleAndFinalize({ orgId: org.org_id, amount: 2, finalize: fin(1) });
    expect(s).toEqual({ charged: 2, finalized: { moved: true, status: 'succeeded' } });
    const handed = await first.envelope;
    expect(handed.status).toBe(200);
    // Byte for byte the stored row: jsonb's key order, NUL and the lone surrogate as stored.
    expect(JSON.stringify(handed.body)).toBe(await storedText(id));
    expect(JSON.stringify(handed.body)).toContain('x\ufffdy');
    expect(local.wanted(id)).toBe(false);

    // A second write finds the row finalized: nothing moved, nothing handed over.
    const second = local.wait(id);
    const again = await billing.finalizeRequest(fin(2));
    expect(again).toEqual({ moved: false, status: 'succeeded' });
    const outcome = await Promise.race([second.envelope.then(() => 'handed'), new Promise((r) => setTimeout(() => r('nothing'), 200))]);
    expect(outcome).toBe('nothing');
    second.cancel();
    expect(local.wanted(id)).toBe(false);
  });

  it("the API's wait answers with the handed envelope, even when nothing else could answer", async () => {
    const org = await newOrg(10);
    const local = new LocalResults();
    const billing = createBillingActivities(db(), ledgerDb(), local);
    // Temporal never answers and no notification is listened for: only the hand-off can answer.
    const watch = new RunWatch({
      db: db(),
      temporal: () => new Promise<Client>(() => {}),
      baseUrl: () => 'http://127.0.0.1',
      config: { RESULT_WAIT: 'history', RESULT_NOTIFY_FALLBACK_MS: 60_000, DATABASE_URL: undefined },
      localResults: local,
    });
    const id = await claim(org.org_id);
    await reserve(ledgerDb(), org.org_id, id, 1);
    const waiting = watch.awaitResult(`test-${id}`, id, 30_000);
    const env: Finalize['envelope'] = { status: 200, body: body(3) as never };
    await billing.settleAndFinalize({ orgId: org.org_id, amount: 1, finalize: { requestId: id, status: 'succeeded', envelope: env, errorCode: null, retentionMs: 60_000 } });
    const answer = await waiting;
    expect(answer?.status).toBe(200);
    expect(JSON.stringify(answer?.body)).toBe(await storedText(id));
    expect(local.wanted(id)).toBe(false);

  });

  it('a caller that left ends the wait with null, and the hand-off no longer waits for it', async () => {
    const org = await newOrg(10);
    const local = new LocalResults();
    const watch = new RunWatch({
      db: db(),
      temporal: () => new Promise<Client>(() => {}),
      baseUrl: () => 'http://127.0.0.1',
      config: { RESULT_WAIT: 'notify', RESULT_NOTIFY_FALLBACK_MS: 60_000, DATABASE_URL: stack().databaseUrl },
      localResults: local,
    });
    try {
      const id = await claim(org.org_id);
      const left = new AbortController();
      const gone = watch.awaitResult(`test-${id}`, id, 30_000, undefined, left.signal);
      expect(local.wanted(id)).toBe(true);
      left.abort();
      await expect(gone).resolves.toBeNull();
      expect(local.wanted(id)).toBe(false);
    } finally {
      await watch.close();
    }
  });
});
