// A site output larger than Temporal can carry (its blob limit is 2 MiB by default) fails at once
// as a non-retryable workflow_execution_failed: the site is asked once, the reservation released.
// Real API and worker processes of our own, mapped to an HTTP server this test starts.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { publishApi } from '../shared/db/catalog.ts';
import { parseRecipe } from '../shared/recipes/schema.ts';
import { processPool, type ServiceProcess } from './helpers/processes.ts';
import { balanceOf, closeDb, db, ledgerOf, newOrg, ownPair, query, stack } from './helpers/stack.ts';
import { bulkItems as items, bulkListApi } from './helpers/bulk-list.ts';

const HOST = 'bulk.example.test';
const HANDLE = `@bulk-${Math.random().toString(36).slice(2, 8)}`;
let hits = 0;
let server: http.Server;
let pair: ReturnType<typeof ownPair>;
const pool = processPool(() => pair);
let api: ServiceProcess;

const definition = bulkListApi(HANDLE, HOST, 'Bulk list (test fixture)');

beforeAll(async () => {
  server = http.createServer((req, res) => {
    hits++;
    const n = Number(new URL(req.url ?? '/', 'http://x').searchParams.get('n') ?? '1');
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(items(n)));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  pair = { ...ownPair('payload'), hostMap: { ...stack().hostMap, [HOST]: `127.0.0.1:${port}` } };
  await publishApi(db(), definition, { validateRecipe: (r) => void parseRecipe(r) });
  [api] = await Promise.all([pool.spawn('api'), pool.spawn('worker')]);
});
afterAll(async () => {
  await pool.killAll();
  await new Promise((resolve) => server.close(resolve));
  await closeDb();
});

describe('site outputs over the payload bound', () => {
  it('a small list comes back whole (the fixture works)', async () => {
    const org = await newOrg(5);
    const res = await query(org.api_key, { api: HANDLE, operation: 'list_items', input: { n: 3 } }, {}, String(api.started.url));
    expect(res.status, res.text).toBe(200);
    expect(res.body.data.output).toEqual(items(3));
  });

  it('a 2.7 MB output is workflow_execution_failed at once: the site asked once, nothing charged', async () => {
    const org = await newOrg(5);
    const n = 45_000;
    const bytes = Buffer.byteLength(JSON.stringify(items(n)));
    expect(bytes).toBeGreaterThan(2 * 1024 * 1024); // over Temporal's own limit, not only ours
    hits = 0;
    const res = await query(org.api_key, { api: HANDLE, operation: 'list_items', input: { n } }, {}, String(api.started.url));
    expect(res.status, res.text).toBe(502);
    expect(res.body.error.code).toBe('workflow_execution_failed');
    expect(res.body.error.message).toMatch(/more than the service can carry/);
    expect(res.body.error.details).toMatchObject({ reason: 'output_too_large', output_bytes: bytes, limit_bytes: 1_572_864 });
    expect(res.body.error.receipt.billing).toMatchObject({ status: 'released', charged_credits: 0 });
    expect(hits).toBe(1);
    const rid = res.body.error.request_id;
    expect(await ledgerOf(org.org_id)).toEqual([
      { request_id: rid, kind: 'reserve', amount: 1 },
      { request_id: rid, kind: 'release', amount: 1 },
    ]);
    expect(await balanceOf(org.org_id)).toEqual({ granted: 5, available: 5, reserved: 0, charged: 0 });
    const row = await db().query('SELECT status, error_code FROM requests WHERE id = $1', [rid]);
    expect(row.rows[0]).toEqual({ status: 'failed', error_code: 'workflow_execution_failed' });
    // Still nobody asked the site again after the answer.
    expect(hits).toBe(1);
  });
});
