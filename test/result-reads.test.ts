// svc_get_run and the console's request page read a large retained result only when they show it:
// svc_get_run any run's result within its retention, the console page a keyed request's within its
// retention (as GET /v1/query/requests/{request_id}, test/request-status.test.ts). A result past its
// retention, or one the page does not show, is never read. Measured on an API process of this
// file's own whose PostgreSQL connections go through a proxy that counts the bytes PostgreSQL sends.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { closeDb, db, newOrg, query, stack } from './helpers/stack.ts';
import { processPool } from './helpers/processes.ts';
import { startPgByteCounter, type PgByteCounter } from './helpers/pg-bytes.ts';
import { signedIn } from './helpers/console-http.ts';

const s = () => stack();
const pool = processPool(() => ({ databaseUrl: s().databaseUrl, temporalAddress: s().temporalAddress, hostMap: s().hostMap, taskQueue: 'result-reads-unused' }));
const london = { api: '@weather', operation: 'current_weather', input: { city: 'London' } };

let org: Awaited<ReturnType<typeof newOrg>>;
let counter: PgByteCounter;
let url: string;
let mcp: Client;

beforeAll(async () => {
  org = await newOrg(20);
  counter = await startPgByteCounter(s().databaseUrl);
  const api = await pool.spawn('api', { databaseUrl: counter.url, temporalAddress: s().temporalAddress, hostMap: s().hostMap, taskQueue: 'result-reads-unused', env: { WQS_SKIP_MIGRATIONS: '1' } });
  url = String(api.started.url);
  mcp = new Client({ name: 'result-reads-test', version: '1.0.0' });
  await mcp.connect(new StreamableHTTPClientTransport(new URL(`${url}/mcp`), { requestInit: { headers: { authorization: `Bearer ${org.api_key}` } } }));
});
afterAll(async () => {
  await mcp?.close().catch(() => {});
  await pool.killAll();
  await counter?.close();
  await closeDb();
});

/** A ~1.6 MB output. */
const largeOutput = () => ({ items: Array.from({ length: 6_000 }, (_, i) => ({ i, name: `item ${i} "quoted" é 漢字 😀 </script>`, pad: 'x'.repeat(250) })) });

/** A finished request of the organization, keyed or not, with the large output in its stored result. */
async function largeRequest(keyed: boolean, expired = false): Promise<string> {
  const res = await query(org.api_key, london, keyed ? { 'idempotency-key': `reads-${Date.now()}-${Math.random()}` } : {});
  expect(res.status, res.text).toBe(200);
  const id: string = res.body.data.receipt.request_id;
  const r = await db().query(
    `UPDATE requests SET result = jsonb_set(result, '{data,output}', $2::jsonb),
                         result_expires_at = CASE WHEN $3 THEN now() - interval '1 second' ELSE result_expires_at END
      WHERE id = $1 AND result IS NOT NULL RETURNING octet_length(result::text) AS n`,
    [id, JSON.stringify(largeOutput()), expired],
  );
  expect(r.rows[0].n).toBeGreaterThan(1_500_000);
  return id;
}

/** `send()`, and the bytes PostgreSQL sent this file's API meanwhile. */
async function measured<T>(send: () => Promise<T>): Promise<{ res: T; read: number }> {
  const before = counter.received();
  const res = await send();
  return { res, read: counter.received() - before };
}

/**
 * The least of three: the process's own background reads (the router's warm-up, the catalog) may
 * fall into one of them; a call that read the result would read it every time.
 */
async function leastOfThree<T>(send: () => Promise<T>, check: (res: T) => void): Promise<number> {
  const reads: number[] = [];
  for (let i = 0; i < 3; i++) {
    const m = await measured(send);
    check(m.res);
    reads.push(m.read);
  }
  return Math.min(...reads);
}

async function getRun(requestId: string) {
  const r = (await mcp.callTool({ name: 'svc_get_run', arguments: { request_id: requestId, max_chars: 1000 } }, undefined, { timeout: 60_000 })) as CallToolResult;
  return { ...r, sc: r.structuredContent as any };
}

describe('svc_get_run reads the retained result only when it returns it', () => {
  it('within retention: the result (read, ~1.6 MB); past retention: request_not_found without reading it', async () => {
    const kept = await largeRequest(false);
    const expired = await largeRequest(false, true);

    // The baseline, in this run: a call that returns the result reads it.
    const shown = await measured(() => getRun(kept));
    expect(shown.res.isError).toBeFalsy();
    expect(shown.res.sc).toMatchObject({ status: 'succeeded', request_id: kept, api: '@weather', operation: 'current_weather', truncated: true });
    expect(shown.res.sc.receipt).toMatchObject({ request_id: kept, billing: { status: 'settled' } });
    expect(shown.read).toBeGreaterThan(1_500_000);

    const read = await leastOfThree(
      () => getRun(expired),
      (r) => {
        expect(r.isError).toBe(true);
        expect(r.sc).toMatchObject({ status: 'failed', request_id: expired, error: { code: 'request_not_found', param: 'request_id' } });
        expect(r.sc.error.message).toMatch(/kept for 24 hours and has been deleted/);
      },
    );
    // Alone, such a call reads under 1 KB. Under the whole suite, the process's background reads
    // (the catalog and the router refreshing while other files publish) can add ~80 KB to all
    // three calls. The expired result itself is ~1.6 MB.
    expect(read, `svc_get_run of an expired result read ${read} bytes`).toBeLessThan(256_000);
  });
});

describe("the console's request page reads the retained result only when it shows it", () => {
  it('a keyed request within its retention: shown (read, ~1.6 MB); unkeyed or past retention: not read at all', async () => {
    const { client } = await signedIn('member', org.org_id, url);
    const [keyed, unkeyed, expired] = [await largeRequest(true), await largeRequest(false), await largeRequest(true, true)];

    const shown = await measured(() => client.get(`/console/requests/${keyed}`));
    expect(shown.res.status).toBe(200);
    expect(shown.res.text).toContain('aria-label="Retained result (JSON)"');
    expect(shown.res.text).toContain('item 5999 \\&quot;quoted\\&quot;');
    expect(shown.read).toBeGreaterThan(1_500_000);

    for (const id of [unkeyed, expired]) {
      const read = await leastOfThree(
        () => client.get(`/console/requests/${id}`),
        (page) => {
          expect(page.status).toBe(200);
          expect(page.text).toContain(`Request <code>${id}</code>`);
          expect(page.text).toContain('No retained result');
          expect(page.text).not.toContain('item 5999');
          expect(page.text).toContain('status-succeeded');
        },
      );
      // The same bound as svc_get_run's above: background reads under the whole suite, never the ~1.6 MB result.
      expect(read, `the page of ${id} read ${read} bytes`).toBeLessThan(256_000);
    }
  });
});
