// How the API learns a run's envelope (RESULT_WAIT=notify, the default): the envelope's write
// sends the request id on PostgreSQL channel wqs_request_final, and an API whose LISTEN connection
// is cut still answers (history fallback) and listens again.
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { balanceOf, closeDb, db, newOrg, query, stack, until } from './helpers/stack.ts';

const london = { api: '@weather', operation: 'current_weather', input: { city: 'London' } };
const CHANNEL = 'wqs_request_final';

/** Backends other than `exceptPid` that LISTEN on the channel (the API processes' listeners, which
 *  subscribe to the final and progress channels in one statement). */
async function listeners(exceptPid: number): Promise<number[]> {
  const r = await db().query(`SELECT pid FROM pg_stat_activity WHERE query LIKE $1 AND pid <> $2`, [`LISTEN ${CHANNEL}%`, exceptPid]);
  return r.rows.map((row) => row.pid as number);
}

describe('terminal envelope notifications', () => {
  const client = new pg.Client({ connectionString: stack().databaseUrl });
  const heard: string[] = [];
  let ownPid = 0;

  afterAll(async () => {
    await client.end().catch(() => {});
    await closeDb();
  });

  it('the envelope write sends the request id once, and the API answers with that envelope', async () => {
    await client.connect();
    client.on('notification', (m) => {
      if (m.channel === CHANNEL && m.payload) heard.push(m.payload);
    });
    await client.query(`LISTEN ${CHANNEL}`);
    ownPid = (await client.query('SELECT pg_backend_pid() AS pid')).rows[0].pid as number;

    const org = await newOrg(100);
    const r = await query(org.api_key, london);
    expect(r.status).toBe(200);
    const id = r.body.data.receipt.request_id as string;
    await until(async () => heard.includes(id), 30_000, 50);
    const row = (await db().query('SELECT status, result, response_status FROM requests WHERE id = $1', [id])).rows[0];
    expect(row.status).toBe('succeeded');
    expect(row.response_status).toBe(200);
    expect(r.body).toEqual(row.result);
    // A later write to the row (the status route, retention) sends nothing more.
    await query(org.api_key, london);
    expect(heard.filter((h) => h === id)).toHaveLength(1);
  });

  it('an API whose LISTEN connection is cut still answers, and listens again', async () => {
    const before = await until(async () => {
      const l = await listeners(ownPid);
      return l.length > 0 && l;
    });
    await db().query('SELECT pg_terminate_backend(pid) FROM unnest($1::int[]) AS pid', [before]);
    const org = await newOrg(100);
    // Answered right after the cut (the listener may be reconnecting) and again later.
    const first = await query(org.api_key, london);
    expect(first.status).toBe(200);
    expect(first.body.data.receipt.billing.status).toBe('settled');
    const after = await until(async () => {
      const l = (await listeners(ownPid)).filter((pid) => !before.includes(pid));
      return l.length > 0 && l;
    });
    expect(after.length).toBeGreaterThan(0);
    const second = await query(org.api_key, london);
    expect(second.status).toBe(200);
    const b = await balanceOf(org.org_id);
    expect(b.granted).toBe(b.available + b.reserved + b.charged);
    expect(b.reserved).toBe(0);
    expect(b.charged).toBe(first.body.data.receipt.billing.charged_credits + second.body.data.receipt.billing.charged_credits);
  });
});
