// The engines' destination checks on the real stack: a private workflow whose website (a demo host)
// redirects or scripts its way to a loopback port outside the host map, queried through the API and
// run by the worker. The run fails with a clear code, nothing is charged, and the loopback server
// never sees a connection.
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { publishApi } from '../shared/db/catalog.ts';
import { validateOperationVersion } from '../shared/catalog/validate.ts';
import type { ApiDefinition } from '../shared/catalog/types.ts';
import { balanceOf, closeDb, db, ledgerOf, newOrg, query } from './helpers/stack.ts';
import { startInsideServer, type InsideServer } from './helpers/inside-server.ts';

let inside: InsideServer;
let insidePort = 0;

beforeAll(async () => {
  inside = await startInsideServer();
  insidePort = inside.port;
});
afterAll(async () => {
  await inside.close();
  await closeDb();
});
beforeEach(() => inside.reset());

/** A private workflow of `orgId` that opens `url` on books.example.test with the given engine. */
async function hostileWorkflow(orgId: string, engine: 'http' | 'browser', url: string, extra: unknown[] = []): Promise<string> {
  const handle = `@hostile-${engine}-${Math.random().toString(36).slice(2, 8)}`;
  const recipe = {
    engine,
    hosts: ['books.example.test'],
    steps: [{ type: 'navigate', url }, ...extra, { type: 'extract', fields: { t: { type: 'text', selector: 'h1' } }, save_as: 'r' }],
    output: { title: '{{vars.r.t}}' },
  };
  const def: ApiDefinition = {
    handle,
    name: 'Hostile site',
    description: 'A website that points inward.',
    category: 'other',
    website_url: 'http://books.example.test/',
    sites: [{ name: 'Hostile', host: 'books.example.test' }],
    operations: [
      {
        name: 'open',
        label: 'Open',
        description: 'Opens a page.',
        cost_credits: 1,
        default_version: 1,
        versions: [{ version: 1, input_schema: { type: 'object', additionalProperties: false, properties: {} }, output_schema: { type: 'object' }, examples: [], recipe }],
      },
    ],
  };
  await publishApi(db(), def, { ownerOrgId: orgId, validateRecipe: validateOperationVersion });
  return handle;
}

const redirectTo = (to: string) => `http://books.example.test/__probe/redirect?to=${encodeURIComponent(to)}`;

describe('destinations on the real stack', () => {
  it.each(['http', 'browser'] as const)('%s engine: a redirect to a loopback port fails the query, charges nothing, reaches nothing', async (engine) => {
    const org = await newOrg(5);
    const api = await hostileWorkflow(org.org_id, engine, redirectTo(`http://127.0.0.1:${insidePort}/admin`));
    const res = await query(org.api_key, { api, operation: 'open', input: {} });
    expect(res.status, res.text).toBe(502);
    expect(res.body.error.code).toBe('workflow_execution_failed');
    expect(res.body.error.details).toMatchObject({ reason: engine === 'http' ? 'host_not_allowed' : 'destination_refused' });
    expect(inside.seen()).toBe(0);
    expect((await balanceOf(org.org_id)).charged).toBe(0);
    expect((await ledgerOf(org.org_id)).filter((l) => l.kind === 'charge')).toEqual([]);
  });

  it('browser engine: a WebSocket the page opens to a loopback port fails the query and reaches nothing', async () => {
    const org = await newOrg(5);
    const page = `http://books.example.test/__probe/page?${new URLSearchParams({ ws: `ws://127.0.0.1:${insidePort}/socket` })}`;
    const api = await hostileWorkflow(org.org_id, 'browser', page, [{ type: 'wait', selector: '#done', state: 'attached' }]);
    const res = await query(org.api_key, { api, operation: 'open', input: {} });
    expect(res.status, res.text).toBe(502);
    expect(res.body.error).toMatchObject({ code: 'workflow_execution_failed', details: { reason: 'destination_refused' } });
    expect(inside.seen()).toBe(0);
    expect((await balanceOf(org.org_id)).charged).toBe(0);
  });

  it('the same workflow shape on a harmless page succeeds (so the failures above are about the destinations)', async () => {
    const org = await newOrg(5);
    const api = await hostileWorkflow(org.org_id, 'browser', redirectTo('http://books.example.test/__probe/page'), [{ type: 'wait', selector: '#done', state: 'attached' }]);
    const res = await query(org.api_key, { api, operation: 'open', input: {} });
    expect(res.status, res.text).toBe(200);
    expect(res.body.data.output).toEqual({ title: 'Probe' });
  });
});
