// Kept search pages (shared/db/catalog-cache.ts): served again only while nothing they show or
// rank by has changed. Every change here is committed through a connection of its own, as
// another API process, the builder or an operator would make it; the search goes through the
// route (app.inject) on the app's own pool, which keeps the pages.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { publishApi } from '../shared/db/catalog.ts';
import { createPool, type Db } from '../shared/db/pool.ts';
import { CatalogSearchResponse } from '../shared/schemas/catalog.ts';
import { completeRuns, startCatalogFixture, syntheticApi, syntheticOp, type CatalogFixture } from './catalog-fixture.ts';

let f: CatalogFixture;
let other: Db;

const search = async (query: string, extra = '') => {
  const res = await f.app.inject({ method: 'GET', url: `/v1/catalog?query=${encodeURIComponent(query)}${extra}` });
  expect(res.statusCode).toBe(200);
  const body = res.json();
  CatalogSearchResponse.parse(body);
  return body.data as { items: Array<{ api: string; name: string; completed_runs: number; operations: Array<{ cost_credits: number; health: { status: string } }> }>; next_cursor: string | null };
};
const handles = (page: { items: Array<{ api: string }> }) => page.items.map((i) => i.api);
const generation = async () => Number((await f.db.query('SELECT gen FROM catalog_cache_generation')).rows[0].gen);

/** Counts the statements the app's pool runs while `fn` runs, by their first words. */
async function statementsDuring(fn: () => Promise<unknown>) {
  const seen: string[] = [];
  const original = f.db.query.bind(f.db);
  const spy = (...args: unknown[]) => {
    const q = args[0] as string | { text: string };
    seen.push(typeof q === 'string' ? q : q.text);
    return (original as (...a: unknown[]) => unknown)(...args);
  };
  (f.db as { query: unknown }).query = spy;
  try {
    await fn();
  } finally {
    (f.db as { query: unknown }).query = original;
  }
  return { total: seen.length, pages: seen.filter((t) => t.includes('page AS MATERIALIZED')).length };
}

beforeAll(async () => {
  f = await startCatalogFixture(
    [
      syntheticApi('@zebra-tides', { name: 'Zebra Tides', description: 'Tide tables for zebra harbours.', operations: [syntheticOp('tides', { cost_credits: 2 })] }),
      syntheticApi('@zebra-maps', { name: 'Zebra Maps', description: 'Maps of zebra harbours.' }),
    ],
    { demo: false },
  );
  other = createPool(f.pg.databaseUrl, 2);
}, 120_000);
afterAll(async () => {
  await other?.end();
  await f?.close();
});

describe('kept search pages', () => {
  it('serve a repeated search from one cheap statement, with run counts read fresh', async () => {
    const first = await search('zebra');
    expect(handles(first).sort()).toEqual(['@zebra-maps', '@zebra-tides']);
    const again = await statementsDuring(() => search('zebra'));
    // One statement (generation + run counts), not the ranking one.
    expect(again).toEqual({ total: 1, pages: 0 });
    await completeRuns(other, f.orgA.org_id, '@zebra-maps', 3);
    const after = await search('zebra');
    expect(after.items.find((i) => i.api === '@zebra-maps')!.completed_runs).toBe(3);
    // A completed run changes no generation: the page is still served from the kept copy.
    expect((await statementsDuring(() => search('zebra'))).pages).toBe(0);
  });

  it('never outlive a visibility change, an unpublish, or a re-publish', async () => {
    expect(handles(await search('zebra'))).toContain('@zebra-tides');
    await other.query(`UPDATE apis SET visibility = 'private', owner_org_id = $1 WHERE handle = '@zebra-tides'`, [f.orgA.org_id]);
    expect(handles(await search('zebra'))).toEqual(['@zebra-maps']);
    await other.query(`UPDATE apis SET visibility = 'public', owner_org_id = 'org_platform' WHERE handle = '@zebra-tides'`);
    expect(handles(await search('zebra')).sort()).toEqual(['@zebra-maps', '@zebra-tides']);

    await other.query(`UPDATE apis SET status = 'inactive' WHERE handle = '@zebra-tides'`);
    expect(handles(await search('zebra'))).toEqual(['@zebra-maps']);
    await other.query(`UPDATE apis SET status = 'active' WHERE handle = '@zebra-tides'`);
    expect(handles(await search('zebra'))).toContain('@zebra-tides');

    // A re-publish changing a name and a price: both show at once.
    await publishApi(
      other,
      syntheticApi('@zebra-tides', { name: 'Zebra Tide Tables', description: 'Tide tables for zebra harbours.', operations: [syntheticOp('tides', { cost_credits: 4 })] }),
    );
    const item = (await search('zebra')).items.find((i) => i.api === '@zebra-tides')!;
    expect(item.name).toBe('Zebra Tide Tables');
    expect(item.operations[0]!.cost_credits).toBe(4);
    // The price filter is part of what is kept: a page under 3 credits no longer has it.
    expect(handles(await search('zebra', '&max_cost_credits=3'))).toEqual(['@zebra-maps']);
  });

  it('show a new health status, and a check that changes nothing shown keeps them', async () => {
    await search('zebra');
    await other.query(`UPDATE operations SET health_status = 'failing' WHERE api_id = (SELECT id FROM apis WHERE handle = '@zebra-maps')`);
    const item = (await search('zebra')).items.find((i) => i.api === '@zebra-maps')!;
    expect(item.operations[0]!.health.status).toBe('failing');
    const before = await generation();
    await other.query(`UPDATE operations SET health_checked_at = now(), health_detail = 'same again' WHERE api_id = (SELECT id FROM apis WHERE handle = '@zebra-maps')`);
    expect(await generation()).toBe(before);
    expect((await statementsDuring(() => search('zebra'))).pages).toBe(0);
  });

  it("never show an organization's private workflow, kept or not", async () => {
    await publishApi(f.db, syntheticApi('@zebra-private', { name: 'Zebra Private' }), { ownerOrgId: f.orgB.org_id });
    expect(handles(await search('zebra'))).not.toContain('@zebra-private');
    expect(handles(await search('zebra'))).not.toContain('@zebra-private');
  });

  it("one organization's private build neither waits on another's nor drops the kept pages", async () => {
    await publishApi(other, syntheticApi('@quokka-ledger', { name: 'Quokka Ledger' }), { ownerOrgId: f.orgA.org_id });
    await search('zebra');
    const before = await generation();
    // Organization A's build of its private workflow holds its writes until its commit...
    const c = await other.connect();
    const b = createPool(f.pg.databaseUrl, 1, { statementTimeoutMs: 3_000 });
    try {
      await c.query('BEGIN');
      await c.query(`UPDATE operations SET description = 'Ledger lines, revised.', cost_credits = cost_credits + 1
                      WHERE api_id = (SELECT id FROM apis WHERE handle = '@quokka-ledger')`);
      // ...while organization B publishes its own: it must not wait for A (it waited on the one
      // row every change bumped, and failed here on the statement timeout).
      await publishApi(b, syntheticApi('@wombat-orders', { name: 'Wombat Orders', sites: [{ name: 'wombat', host: 'wombatsecret.example.test' }] }), {
        ownerOrgId: f.orgB.org_id,
      });
      await c.query('COMMIT');
    } finally {
      c.release();
      await b.end();
    }
    // Nothing public changed: the kept page is still served, from one statement.
    expect(await generation()).toBe(before);
    expect((await statementsDuring(() => search('zebra'))).pages).toBe(0);
    // A private workflow's words stay out of the vocabulary every search reads; a public one's enter it.
    const vocabulary = async (word: string) => (await f.db.query('SELECT 1 FROM catalog_keywords WHERE word = $1', [word])).rowCount;
    expect(await vocabulary('wombatsecret')).toBe(0);
    expect(await vocabulary('quokka')).toBe(0);
    await publishApi(other, syntheticApi('@numbat-ledger', { name: 'Numbat Ledger' }));
    expect(await vocabulary('numbat')).toBe(1);
    expect(await generation()).toBeGreaterThan(before);
  });

  it('a change rolled back leaves the kept page as it was', async () => {
    await search('zebra');
    const before = await generation();
    const c = await other.connect();
    try {
      await c.query('BEGIN');
      await c.query(`UPDATE apis SET visibility = 'private', owner_org_id = $1 WHERE handle = '@zebra-maps'`, [f.orgA.org_id]);
      // Not yet committed: the page is unchanged for everyone else.
      expect(handles(await search('zebra'))).toContain('@zebra-maps');
      await c.query('ROLLBACK');
    } finally {
      c.release();
    }
    expect(await generation()).toBe(before);
    expect(handles(await search('zebra'))).toContain('@zebra-maps');
  });
});

// Each workflow's item is kept as JSON beside its search rows (migrations/1700000003200), written at
// the commit of every change to it; a search page reads it instead of building it.
describe('kept search items', () => {
  /** Workflows whose kept item is not what catalog_item_build() makes of them now (none, or one missing). */
  const stale = async () =>
    (
      await f.db.query(`SELECT coalesce(a.handle, c.api_id::text) AS api FROM apis a FULL JOIN catalog_items c ON c.api_id = a.id
                         WHERE c.item::text IS DISTINCT FROM catalog_item_build(a.id)::text`)
    ).rows.map((r) => r.api);
  const apiId = async (handle: string) => Number((await f.db.query('SELECT id FROM apis WHERE handle = $1', [handle])).rows[0].id);
  const item = async (handle: string) => (await search('zebra')).items.find((i) => i.api === handle) as unknown as Record<string, any>;

  it('match the workflow after every kind of change, and a search shows each at once', async () => {
    expect(await stale()).toEqual([]);
    const id = await apiId('@zebra-maps');
    const changes: Array<[string, unknown[], (it: Record<string, any>) => void]> = [
      [`UPDATE apis SET name = 'Zebra Charts', description = 'Charts of zebra harbours.' WHERE id = $1`, [id], (it) => expect([it.name, it.description]).toEqual(['Zebra Charts', 'Charts of zebra harbours.'])],
      [`UPDATE apis SET website_url = 'https://charts.example.test', availability = 'coming_soon' WHERE id = $1`, [id], (it) => expect([it.website_url, it.availability]).toEqual(['https://charts.example.test', 'coming_soon'])],
      [`INSERT INTO api_sites (api_id, position, name, host) VALUES ($1, 9, 'mirror', 'mirror.example.test')`, [id], (it) => expect(it.sites.map((s: any) => s.host)).toContain('mirror.example.test')],
      [`UPDATE api_sites SET host = 'mirror2.example.test' WHERE api_id = $1 AND position = 9`, [id], (it) => expect(it.sites.map((s: any) => s.host)).toContain('mirror2.example.test')],
      [`DELETE FROM api_sites WHERE api_id = $1 AND position = 9`, [id], (it) => expect(it.sites.map((s: any) => s.host)).not.toContain('mirror2.example.test')],
      [`INSERT INTO operations (api_id, name, label, cost_credits, default_version) VALUES ($1, 'extra', 'Extra', 7, 1)`, [id], (it) => expect(it.operations.map((o: any) => o.operation)).toContain('extra')],
      [`UPDATE operations SET cost_credits = 8, access = '[{"kind":"account","name":"login","site":"zebra"}]' WHERE api_id = $1 AND name = 'extra'`, [id], (it) => {
        const op = it.operations.find((o: any) => o.operation === 'extra');
        expect([op.cost_credits, op.access.length, it.access]).toEqual([8, 1, 'mixed']);
      }],
      [`UPDATE operations SET health_status = 'healthy', verified_at = '2026-11-30T10:00:00Z' WHERE api_id = $1 AND name = 'extra'`, [id], (it) =>
        expect(it.operations.find((o: any) => o.operation === 'extra').health).toEqual({ status: 'healthy', verified_at: '2026-11-30T10:00:00.000Z' })],
      [`DELETE FROM operations WHERE api_id = $1 AND name = 'extra'`, [id], (it) => expect(it.operations.map((o: any) => o.operation)).not.toContain('extra')],
    ];
    for (const [sql, values, check] of changes) {
      await other.query(sql, values);
      expect(await stale(), sql).toEqual([]);
      check(await item('@zebra-maps'));
    }
    // The kept item carries every operation; a price limit leaves out the dearer ones as before.
    await other.query(`INSERT INTO operations (api_id, name, label, cost_credits, default_version) VALUES ($1, 'dear', 'Dear', 50, 1)`, [id]);
    const cheap = (await search('zebra', '&max_cost_credits=10')).items.find((i) => i.api === '@zebra-maps')!;
    expect(cheap.operations.every((o) => o.cost_credits <= 10)).toBe(true);
    expect((await item('@zebra-maps')).operations.map((o: any) => o.cost_credits)).toContain(50);
    await other.query(`DELETE FROM operations WHERE api_id = $1 AND name = 'dear'`, [id]);
    // A new workflow and a deleted one.
    await publishApi(other, syntheticApi('@zebra-ferries', { name: 'Zebra Ferries' }));
    expect(await stale()).toEqual([]);
    expect(handles(await search('zebra'))).toContain('@zebra-ferries');
    await other.query(`DELETE FROM apis WHERE handle = '@zebra-ferries'`);
    expect(await stale()).toEqual([]);
    expect(handles(await search('zebra'))).not.toContain('@zebra-ferries');
  });

  it('a health check and a publish of one workflow at once: neither waits forever, the item shows both', async () => {
    const id = await apiId('@zebra-maps');
    const check = await other.connect();
    const publish = await other.connect();
    try {
      await check.query('BEGIN');
      await check.query(`UPDATE operations SET health_status = 'degraded' WHERE api_id = $1`, [id]);
      await publish.query('BEGIN');
      // The publish waits for rows the check holds (its search row, its operation row)...
      const publishing = (async () => {
        await publish.query(`UPDATE apis SET name = 'Zebra Sea Maps' WHERE id = $1`, [id]);
        await publish.query(`UPDATE operations SET label = 'Search the seas' WHERE api_id = $1`, [id]);
      })();
      await new Promise((r) => setTimeout(r, 200));
      // ...and the check commits: it must not wait on anything the publish holds.
      await check.query('COMMIT');
      await publishing;
      await publish.query('COMMIT');
    } finally {
      check.release();
      publish.release();
    }
    expect(await stale()).toEqual([]);
    const it = await item('@zebra-maps');
    expect(it.name).toBe('Zebra Sea Maps');
    expect(it.operations.map((o: any) => [o.label, o.health.status])).toEqual([['Search the seas', 'degraded']]);
  });
});
