// GET /v1/query/requests/{request_id}, the route agents poll: it reads a large retained result
// only when it shows it (a keyed request within its retention), and shows it as stored; and a
// request_id too long to route is refused as the parameter it is, on the status and feedback routes.
// The reads are measured on an API process of this file's own whose PostgreSQL connections go
// through a proxy that counts the bytes PostgreSQL sends back.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call, closeDb, db, newOrg, query, stack } from './helpers/stack.ts';
import { processPool } from './helpers/processes.ts';
import { startPgByteCounter, type PgByteCounter } from './helpers/pg-bytes.ts';

const s = () => stack();
const pool = processPool(() => ({ databaseUrl: s().databaseUrl, temporalAddress: s().temporalAddress, hostMap: s().hostMap, taskQueue: 'request-status-unused' }));
const london = { api: '@weather', operation: 'current_weather', input: { city: 'London' } };

let org: Awaited<ReturnType<typeof newOrg>>;
let counter: PgByteCounter;
let url: string;

beforeAll(async () => {
  org = await newOrg(20);
  counter = await startPgByteCounter(s().databaseUrl);
  const api = await pool.spawn('api', { databaseUrl: counter.url, temporalAddress: s().temporalAddress, hostMap: s().hostMap, taskQueue: 'request-status-unused', env: { WQS_SKIP_MIGRATIONS: '1' } });
  url = String(api.started.url);
});
afterAll(async () => {
  await pool.killAll();
  await counter?.close();
  await closeDb();
});

/**
 * A ~1.6 MB output of everything JSON text can hold: escapes, control characters, U+2028,
 * non-BMP characters, HTML, numbers of every shape, nesting.
 */
function largeOutput() {
  const items = Array.from({ length: 6_000 }, (_, i) => ({
    i,
    name: `item ${i} "quoted" \\ back\\slash / slash \u0001\u001f\t\n\r é ü 漢字 😀 \u2028\u2029 </script>`,
    n: [0, -0.5, 1e21, 1.5e-7, 123456789.125, -42, Number.MAX_SAFE_INTEGER][i % 7],
    ok: i % 2 === 0,
    none: null,
    nested: { a: [i, `${i}`, { b: [] }], 'key with spaces': {}, '': 'empty key' },
    pad: 'x'.repeat(120),
  }));
  return { items, total: items.length };
}

/** A finished request of the organization, keyed or not, with the large output in its stored result. */
async function largeRequest(keyed: boolean): Promise<string> {
  const res = await query(org.api_key, london, keyed ? { 'idempotency-key': `status-${Date.now()}-${Math.random()}` } : {});
  expect(res.status, res.text).toBe(200);
  const id: string = res.body.data.receipt.request_id;
  const r = await db().query(`UPDATE requests SET result = jsonb_set(result, '{data,output}', $2::jsonb) WHERE id = $1 AND result IS NOT NULL RETURNING octet_length(result::text) AS n`, [
    id,
    JSON.stringify(largeOutput()),
  ]);
  expect(r.rows[0].n).toBeGreaterThan(1_500_000);
  return id;
}

/** One poll through this file's API, and the bytes PostgreSQL sent that API meanwhile. */
async function poll(id: string) {
  const before = counter.received();
  const res = await call('GET', `/v1/query/requests/${id}`, { key: org.api_key, baseUrl: url });
  return { res, read: counter.received() - before };
}

describe('a poll reads the retained result only when it shows it', () => {
  it('a keyed request within its retention: the result as stored (read, ~1.6 MB); unkeyed or past retention: not read at all', async () => {
    const [unkeyed, keyed, expired] = [await largeRequest(false), await largeRequest(true), await largeRequest(true)];
    await db().query(`UPDATE requests SET result_expires_at = now() - interval '1 second' WHERE id = $1`, [expired]);

    // The baseline, in this run: a poll that shows the result reads it.
    const shown = await poll(keyed);
    expect(shown.res.status, shown.res.text.slice(0, 500)).toBe(200);
    expect(shown.read).toBeGreaterThan(1_500_000);
    const stored = (await db().query('SELECT result, response_status, result_expires_at FROM requests WHERE id = $1', [keyed])).rows[0];
    expect(shown.res.body.data.result).toEqual(stored.result);
    expect(shown.res.body.data.result.data.output).toEqual(JSON.parse(JSON.stringify(largeOutput())));
    expect(shown.res.body.data).toMatchObject({ request_id: keyed, status: 'succeeded', response_status: stored.response_status, result_expires_at: stored.result_expires_at.toISOString() });
    expect(shown.res.headers.get('content-type')).toBe('application/json; charset=utf-8');
    expect(shown.res.headers.get('cache-control')).toBe('no-store');

    for (const id of [unkeyed, expired]) {
      // The least of three polls: the process's own background reads (the router's warm-up, the
      // catalog) may fall into one of them; a poll that read the result would read it every time.
      const polls = [await poll(id), await poll(id), await poll(id)];
      for (const p of polls) {
        expect(p.res.status, p.res.text).toBe(200);
        expect(p.res.body.data).toMatchObject({ request_id: id, status: 'succeeded', result: null, response_status: null, result_expires_at: null });
        expect(p.res.body.data.receipt).toMatchObject({ request_id: id, billing: { status: 'settled' } });
      }
      // The row, its rating context and the key check: a few kilobytes, never the result.
      const read = Math.min(...polls.map((p) => p.read));
      expect(read, `${id} read ${polls.map((p) => p.read).join(', ')} bytes`).toBeLessThan(64_000);
    }

    // HEAD answers as GET does, without the body.
    const head = await fetch(`${url}/v1/query/requests/${keyed}`, { method: 'HEAD', headers: { authorization: `Bearer ${org.api_key}` } });
    expect(head.status).toBe(200);
    expect(await head.text()).toBe('');
  });
});

describe('a request_id too long to route', () => {
  const id = (n: number) => `req_${'a'.repeat(n)}`;

  it('is refused as request_id on the status and feedback routes, as one a character shorter than the router allows is', async () => {
    const routes = [
      (rid: string) => call('GET', `/v1/query/requests/${rid}`, { key: org.api_key }),
      (rid: string) => call('POST', `/v1/query/requests/${rid}/feedback`, { key: org.api_key, body: { value: 1 } }),
    ];
    for (const send of routes) {
      // 65 characters: the route's schema refuses it. 97 and 300: the router does, before the schema.
      const schema = await send(id(65));
      expect(schema.status, schema.text).toBe(400);
      expect(schema.body.error).toMatchObject({ code: 'invalid_input', param: 'request_id', details: { issues: [{ path: 'request_id' }] } });
      for (const n of [96, 97, 300]) {
        const res = await send(id(n));
        expect(res.status, res.text).toBe(400);
        expect(res.body).toEqual(schema.body);
      }
    }
    // Other paths keep the refusal of the request as a whole.
    const icon = await call('GET', `/v1/icons/${'a'.repeat(300)}`);
    expect(icon.status).toBe(400);
    expect(icon.body.error).not.toHaveProperty('param');
    expect(icon.body.error.details.issues).toEqual([{ path: '', message: icon.body.error.message }]);
  });
});
