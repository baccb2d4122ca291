// Catalog discovery against a real PostgreSQL: search, filters, sorts, cursors, detail, suggest,
// categories, sitemap, tools and icons.
import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CATEGORIES } from '../shared/catalog/categories.ts';
import { publishApi } from '../shared/db/catalog.ts';
import { setFeedback } from '../shared/db/feedback.ts';
import { listTools } from '../shared/db/catalog-tools.ts';
import {
  CatalogCategoriesResponse,
  CatalogDetailResponse,
  CatalogSearchResponse,
  CatalogSitemapResponse,
  CatalogSuggestResponse,
} from '../shared/schemas/catalog.ts';
import { ToolsResponse } from '../shared/schemas/tools.ts';
import { BASE, completeRuns, startCatalogFixture, syntheticApi, syntheticOp, type CatalogFixture } from './catalog-fixture.ts';

const PNG = new Uint8Array([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 1, 2, 3, 4]);
const PNG_SHA = createHash('sha256').update(PNG).digest('hex');

const FILLERS = 80;
let f: CatalogFixture;
const get = async (url: string, headers: Record<string, string> = {}) => {
  const res = await f.app.inject({ method: 'GET', url, headers });
  let body: any;
  try {
    body = res.json();
  } catch {
    body = undefined;
  }
  return { status: res.statusCode, headers: res.headers, body, raw: res.rawPayload };
};
const handles = (body: any) => body.data.items.map((i: any) => i.api);

beforeAll(async () => {
  const many = Array.from({ length: 30 }, (_, i) => syntheticOp(`op_${String(i).padStart(2, '0')}`, { cost_credits: i % 3 }));
  f = await startCatalogFixture([
    syntheticApi('@acme-shop', {
      name: 'Acme Shop',
      description: 'Order groceries and household goods from Acme.',
      category: 'commerce',
      sites: [{ name: 'Acme', host: 'shop.acme.example.test', icon: { content_type: 'image/png', bytes: PNG } }],
      operations: [
        syntheticOp('search_products', { cost_credits: 1, labels: ['groceries', 'catalogue'] }),
        syntheticOp('place_order', { cost_credits: 5, performs_actions: true, access: [{ kind: 'account', name: 'acme_account', site: 'shop.acme.example.test' }] }),
      ],
    }),
    syntheticApi('@many-ops', { name: 'Many Operations', category: 'developer-tools', operations: many }),
    syntheticApi('@gone', { name: 'Gone Away', description: 'An inactive workflow about weather.' }),
    ...Array.from({ length: FILLERS }, (_, i) => syntheticApi(`@filler-${String(i).padStart(2, '0')}`, { name: `Filler ${i} tracker`, category: i % 2 ? 'data' : 'jobs' })),
  ]);
  await f.db.query(`UPDATE apis SET status = 'inactive' WHERE handle = '@gone'`);
  await publishApi(f.db, syntheticApi('@secret-weather', { name: 'Secret Weather', description: 'Private weather forecasts.', category: 'weather' }), { ownerOrgId: f.orgA.org_id });
  await publishApi(f.db, syntheticApi('@books', { name: 'Private Books', description: 'Our own books.' }), { ownerOrgId: f.orgA.org_id });
  await completeRuns(f.db, f.orgA.org_id, '@filler-07', 5);
  await completeRuns(f.db, f.orgA.org_id, '@filler-03', 3);
}, 120_000);
afterAll(async () => f?.close());

describe('categories', () => {
  it('lists all 34 ids with labels, the same the database searches', async () => {
    const r = await get('/v1/catalog/categories');
    expect(r.status).toBe(200);
    CatalogCategoriesResponse.parse(r.body);
    expect(r.body.data.items).toHaveLength(34);
    expect(r.body.data.items[0]).toEqual({ id: 'ai', label: 'AI & machine learning' });
    const db = await f.db.query('SELECT id, label FROM catalog_categories ORDER BY id');
    expect(db.rows).toEqual([...CATEGORIES].map((c) => ({ id: c.id, label: c.label })).sort((a, b) => (a.id < b.id ? -1 : 1)));
    expect((await get('/v1/catalog/categories?x=1')).body.error.param).toBe('x');
  });
});

describe('search', () => {
  it('lists active public workflows only, in the CatalogApi shape', async () => {
    const r = await get('/v1/catalog?limit=100');
    expect(r.status).toBe(200);
    CatalogSearchResponse.parse(r.body);
    const hs = handles(r.body);
    expect(hs).toContain('@books');
    expect(hs).toContain('@weather');
    expect(hs).not.toContain('@gone');
    expect(hs).not.toContain('@secret-weather');
    expect(hs.filter((h: string) => h === '@books')).toHaveLength(1);
    const books = r.body.data.items.find((i: any) => i.api === '@books');
    expect(books.name).not.toBe('Private Books');
    const acme = r.body.data.items.find((i: any) => i.api === '@acme-shop');
    expect(acme).toMatchObject({ category: 'commerce', visibility: 'public', is_enabled: true, access: 'mixed', availability: 'available' });
    expect(acme.logo_url).toBe(`${BASE}/v1/icons/${PNG_SHA}`);
    expect(acme.sites).toEqual([{ name: 'Acme', host: 'shop.acme.example.test', icon_url: `${BASE}/v1/icons/${PNG_SHA}` }]);
    expect(acme.operations.map((o: any) => o.operation)).toEqual(['search_products', 'place_order']);
    expect(acme.operations[1]).toMatchObject({ cost_credits: 5, performs_actions: true, contract_version: 1 });
    expect(typeof acme.operations[0].id).toBe('number');
  });

  it('ranks by relevance, tolerates typos and finds hosts, labels and categories', async () => {
    expect(handles((await get('/v1/catalog?query=weather')).body)[0]).toBe('@weather');
    expect(handles((await get('/v1/catalog?query=wether')).body)).toContain('@weather');
    expect(handles((await get('/v1/catalog?query=ferow%20finch')).body)).toContain('@books');
    expect(handles((await get('/v1/catalog?query=bookshop')).body)).toContain('@books');
    expect(handles((await get('/v1/catalog?query=groceries')).body)[0]).toBe('@acme-shop');
    expect(handles((await get('/v1/catalog?query=shop.acme.example.test')).body)[0]).toBe('@acme-shop');
    expect(handles((await get('/v1/catalog?query=acme')).body)[0]).toBe('@acme-shop');
    expect(handles((await get('/v1/catalog?query=place%20order')).body)).toContain('@acme-shop');
    expect(handles((await get('/v1/catalog?query=acme%20order')).body)[0]).toBe('@acme-shop');
    // Private and inactive workflows never match.
    const secret = handles((await get('/v1/catalog?query=secret%20weather')).body);
    expect(secret).not.toContain('@secret-weather');
    expect(secret).not.toContain('@gone');
    expect((await get('/v1/catalog?query=zzqqxxjj')).body.data).toEqual({ items: [], next_cursor: null });
  });

  it('filters by api, category and max_cost_credits', async () => {
    expect(handles((await get('/v1/catalog?api=@acme-shop')).body)).toEqual(['@acme-shop']);
    const jobs = (await get('/v1/catalog?category=jobs&limit=100')).body.data.items;
    expect(jobs.length).toBeGreaterThanOrEqual(20);
    expect(jobs.every((i: any) => i.category === 'jobs')).toBe(true);
    const cheap = (await get('/v1/catalog?api=@acme-shop&max_cost_credits=2')).body.data.items;
    expect(cheap[0].operations.map((o: any) => o.operation)).toEqual(['search_products']);
    const free = (await get('/v1/catalog?max_cost_credits=0&limit=100')).body.data.items;
    expect(handles({ data: { items: free } })).toEqual(['@many-ops']);
    expect(free[0].operations.every((o: any) => o.cost_credits === 0)).toBe(true);
  });

  it('sorts popular, newest and updated', async () => {
    expect(handles((await get('/v1/catalog?sort=popular&limit=2')).body)).toEqual(['@filler-07', '@filler-03']);
    expect(handles((await get('/v1/catalog?limit=2')).body)).toEqual(['@filler-07', '@filler-03']);
    const runs = (await get('/v1/catalog?api=@filler-07')).body.data.items[0].completed_runs;
    expect(runs).toBe(5);
    expect(handles((await get('/v1/catalog?sort=newest&limit=1')).body)).toEqual([`@filler-${FILLERS - 1}`]);
    await f.db.query(`UPDATE apis SET description = 'Freshly updated.' WHERE handle = '@filler-11'`);
    expect(handles((await get('/v1/catalog?sort=updated&limit=1')).body)).toEqual(['@filler-11']);
  });

  it('pages with cursors that visit every item exactly once, also while runs change popularity', async () => {
    for (const sort of ['popular', 'newest', 'updated', 'relevant']) {
      const q = sort === 'relevant' ? '&query=filler%20tracker' : '';
      const all = handles((await get(`/v1/catalog?limit=100&sort=${sort}${q}`)).body);
      expect(all.length).toBeLessThan(100);
      const seen: string[] = [];
      let cursor: string | null = null;
      let pages = 0;
      do {
        const r = await get(`/v1/catalog?limit=7&sort=${sort}${q}${cursor ? `&cursor=${cursor}` : ''}`);
        expect(r.status).toBe(200);
        seen.push(...handles(r.body));
        cursor = r.body.data.next_cursor;
        if (pages === 0 && sort === 'popular') {
          // Items on later pages become the most popular while we page.
          // (Completions are timestamped when they commit, after this page was ranked.)
          await completeRuns(f.db, f.orgB.org_id, all[all.length - 1], 9, 0);
          await completeRuns(f.db, f.orgB.org_id, all[all.length - 2], 4, 0);
        }
        pages++;
      } while (cursor && pages < 50);
      expect(new Set(seen).size).toBe(seen.length);
      expect(seen.sort()).toEqual([...all].sort());
    }
  });

  it('binds cursors to their sort and filters', async () => {
    const first = await get('/v1/catalog?limit=5&category=data');
    const cursor = first.body.data.next_cursor;
    expect(cursor).toBeTruthy();
    expect((await get(`/v1/catalog?limit=5&category=data&cursor=${cursor}`)).status).toBe(200);
    for (const other of ['category=jobs', 'category=data&sort=newest', 'category=data&query=x', 'category=data&max_cost_credits=3']) {
      const r = await get(`/v1/catalog?limit=5&${other}&cursor=${cursor}`);
      expect(r.status).toBe(400);
      expect(r.body.error).toMatchObject({ code: 'invalid_input', param: 'cursor' });
    }
    const bad = await get('/v1/catalog?cursor=not-a-cursor!');
    expect(bad.body.error).toMatchObject({ code: 'invalid_input', param: 'cursor' });
  });

  it('rejects bad parameters naming the param', async () => {
    for (const [qs, param] of [
      ['limit=0', 'limit'],
      ['limit=101', 'limit'],
      ['limit=abc', 'limit'],
      ['sort=best', 'sort'],
      ['category=cats', 'category'],
      ['api=books', 'api'],
      ['max_cost_credits=-1', 'max_cost_credits'],
      [`query=${'x'.repeat(101)}`, 'query'],
      ['colour=red', 'colour'],
      ['limit=1&limit=2', 'limit'],
      // An integer in decimal digits, not whatever Number() reads as one.
      ['limit=0x10', 'limit'],
      ['limit=1e1', 'limit'],
      ['limit=%205', 'limit'],
      ['limit=5.0', 'limit'],
      ['limit=', 'limit'],
    ]) {
      const r = await get(`/v1/catalog?${qs}`);
      expect(r.status, qs).toBe(400);
      expect(r.body.success).toBe(false);
      expect(r.body.error, qs).toMatchObject({ code: 'invalid_input', param });
    }
  });
});

describe('detail', () => {
  it('carries contracts per operation', async () => {
    const r = await get('/v1/catalog/detail?api=@books');
    expect(r.status).toBe(200);
    CatalogDetailResponse.parse(r.body);
    const op = r.body.data.operations[0];
    expect(op.input_schema.type).toBe('object');
    expect(op.output_schema.type).toBe('object');
    expect(op.examples.length).toBeGreaterThan(0);
    expect(op.selectable_fields.length).toBeGreaterThan(0);
    expect(op).toMatchObject({ contract_version: 1, operation_id: op.id, versions: [1] });
    expect(op.health).toHaveProperty('status');
    expect(op.access).toEqual([]);
    expect(r.body.data.next_operation_cursor).toBeNull();
  });

  it('pages many operations and selects one by operation_id', async () => {
    const first = await get('/v1/catalog/detail?api=@many-ops');
    expect(first.body.data.operation_count).toBe(30);
    expect(first.body.data.operations).toHaveLength(25);
    const next = await get(`/v1/catalog/detail?api=@many-ops&operation_cursor=${first.body.data.next_operation_cursor}`);
    expect(next.body.data.operations.map((o: any) => o.operation)).toEqual(['op_25', 'op_26', 'op_27', 'op_28', 'op_29']);
    expect(next.body.data.next_operation_cursor).toBeNull();
    const id = first.body.data.operations[3].id;
    const one = await get(`/v1/catalog/detail?api=@many-ops&operation_id=${id}`);
    expect(one.body.data.operations.map((o: any) => o.operation)).toEqual(['op_03']);
    const wrong = await get(`/v1/catalog/detail?api=@books&operation_cursor=${first.body.data.next_operation_cursor}`);
    expect(wrong.body.error).toMatchObject({ code: 'invalid_input', param: 'operation_cursor' });
    const foreign = await get(`/v1/catalog/detail?api=@books&operation_id=${id}`);
    expect(foreign.status).toBe(404);
  });

  it('404 for unknown, private and inactive handles; 400 without api', async () => {
    for (const h of ['@nope', '@secret-weather', '@gone']) {
      const r = await get(`/v1/catalog/detail?api=${h}`);
      expect(r.status).toBe(404);
      expect(r.body).toMatchObject({ success: false, error: { code: 'unknown_api_slug', status: 404 } });
    }
    const missing = await get('/v1/catalog/detail');
    expect(missing.status).toBe(400);
    expect(missing.body.error).toMatchObject({ code: 'invalid_input', param: 'api' });
    expect((await get('/v1/catalog/detail?api=@books&operation_id=x')).body.error.param).toBe('operation_id');
    expect((await get('/v1/catalog/detail?api=@books&operation_id=0x1')).body.error).toMatchObject({ code: 'invalid_input', param: 'operation_id' });
  });
});

describe('suggest and sitemap', () => {
  it('suggests names and logos on a prefix, typo tolerant, public only', async () => {
    const r = await get('/v1/catalog/suggest?query=acm');
    expect(r.status).toBe(200);
    CatalogSuggestResponse.parse(r.body);
    expect(r.body.data.items[0]).toEqual({ api: '@acme-shop', name: 'Acme Shop', logo_url: `${BASE}/v1/icons/${PNG_SHA}`, category: 'commerce' });
    expect(r.body.data.items.map((i: any) => i.api)).toEqual(['@acme-shop']);
    expect((await get('/v1/catalog/suggest?query=fill&limit=3')).body.data.items).toHaveLength(3);
    expect((await get('/v1/catalog/suggest?query=wether')).body.data.items.map((i: any) => i.api)).toContain('@weather');
    expect((await get('/v1/catalog/suggest?query=secret')).body.data.items).toEqual([]);
    expect((await get('/v1/catalog/suggest')).body.data.items.length).toBe(8);
    expect((await get('/v1/catalog/suggest?limit=50')).body.error.param).toBe('limit');
    expect((await get('/v1/catalog/suggest?limit=1e1')).body.error).toMatchObject({ code: 'invalid_input', param: 'limit' });
  });

  it('lists indexable pages with their terms', async () => {
    const r = await get('/v1/catalog/sitemap');
    expect(r.status).toBe(200);
    CatalogSitemapResponse.parse(r.body);
    expect(r.body.data).toMatchObject({ page: 1, page_size: 1000, next_page: null });
    const acme = r.body.data.items.find((i: any) => i.api === '@acme-shop');
    expect(acme.url).toBe(`${BASE}/v1/catalog/detail?api=%40acme-shop`);
    expect(acme.terms).toEqual(expect.arrayContaining(['groceries', 'search products', 'commerce & shopping', 'shop.acme.example.test']));
    expect(r.body.data.items.map((i: any) => i.api)).not.toContain('@secret-weather');
    expect(r.body.data.total).toBe(r.body.data.items.length);
    expect((await get('/v1/catalog/sitemap?page=2')).body.data.items).toEqual([]);
    expect((await get('/v1/catalog/sitemap?page=0')).body.error).toMatchObject({ code: 'invalid_input', param: 'page' });
    expect((await get('/v1/catalog/sitemap?page=0x1')).body.error).toMatchObject({ code: 'invalid_input', param: 'page' });
  });
});

describe('tools', () => {
  it('needs a key', async () => {
    const r = await get('/v1/catalog/tools');
    expect(r.status).toBe(401);
    expect(r.body.error.code).toBe('api_key_required');
  });

  it("lists public operations plus the organization's own private ones", async () => {
    const auth = { authorization: `Bearer ${f.orgA.api_key}` };
    const first = await get('/v1/catalog/tools', auth);
    expect(first.status).toBe(200);
    ToolsResponse.parse(first.body);
    expect(first.body.data.items).toHaveLength(100);
    const all = [...first.body.data.items];
    let cursor = first.body.data.next_cursor;
    expect(cursor).toMatch(/^[0-9]+$/);
    while (cursor) {
      const r = await get(`/v1/catalog/tools?cursor=${cursor}`, auth);
      all.push(...r.body.data.items);
      cursor = r.body.data.next_cursor;
    }
    expect(new Set(all.map((t) => t.name)).size).toBe(all.length);
    const secret = all.find((t) => t.api === '@secret-weather');
    expect(secret).toMatchObject({ visibility: 'private', name: `svc_${secret.operation_id}` });
    expect(all.filter((t) => t.api === '@books').map((t) => t.visibility).sort()).toEqual(['private', 'public', 'public']);
    expect(all.some((t) => t.api === '@gone')).toBe(false);
    const order = all.find((t) => t.api === '@acme-shop' && t.operation === 'place_order');
    expect(order.annotations).toMatchObject({ readOnlyHint: false, destructiveHint: true, openWorldHint: true });
    expect(order.description).toMatch(/^Acme Shop \(shop\.acme\.example\.test\)\./);
    expect(order.description).toMatch(/Cost: 5 credits per completed run\.$/);
    expect(order).toMatchObject({ title: 'Acme Shop: place order', workflow: 'Acme Shop', site: 'shop.acme.example.test', contract_version: 1, performs_actions: true });
    expect(order.inputSchema.type).toBe('object');

    const b = await listTools(f.db, f.orgB.org_id, { baseUrl: BASE, api: '@secret-weather' });
    expect(b.items).toEqual([]);
  });

  it('filters by api, query and operation_id; validates parameters', async () => {
    const auth = { authorization: `Bearer ${f.orgA.api_key}` };
    const byApi = await get('/v1/catalog/tools?api=@acme-shop', auth);
    expect(byApi.body.data.items.map((t: any) => t.operation)).toEqual(['search_products', 'place_order']);
    const byQuery = await get('/v1/catalog/tools?query=forecast', auth);
    expect(byQuery.body.data.items.map((t: any) => t.api)).toEqual(expect.arrayContaining(['@weather', '@secret-weather']));
    const id = byApi.body.data.items[1].operation_id;
    const one = await get(`/v1/catalog/tools?operation_id=${id}`, auth);
    expect(one.body.data.items.map((t: any) => t.name)).toEqual([`svc_${id}`]);
    expect((await get('/v1/catalog/tools?cursor=abc', auth)).body.error).toMatchObject({ code: 'invalid_input', param: 'cursor' });
    expect((await get('/v1/catalog/tools?operation_id=-3', auth)).body.error).toMatchObject({ code: 'invalid_input', param: 'operation_id' });
    expect((await get(`/v1/catalog/tools?operation_id=${id}.0`, auth)).body.error).toMatchObject({ code: 'invalid_input', param: 'operation_id' });
  });
});

describe('icons', () => {
  it('serves bytes by hash with a strong ETag and immutable caching', async () => {
    const r = await get(`/v1/icons/${PNG_SHA}`);
    expect(r.status).toBe(200);
    expect(r.headers['content-type']).toBe('image/png');
    expect(r.headers.etag).toBe(`"${PNG_SHA}"`);
    expect(r.headers['cache-control']).toContain('immutable');
    expect(createHash('sha256').update(r.raw).digest('hex')).toBe(PNG_SHA);
    const again = await get(`/v1/icons/${PNG_SHA}`, { 'if-none-match': `"${PNG_SHA}"` });
    expect(again.status).toBe(304);
  });

  it('404 for an unknown hash, 400 for a malformed one, in the envelope', async () => {
    const unknown = await get(`/v1/icons/${'0'.repeat(64)}`);
    expect(unknown.status).toBe(404);
    expect(unknown.body).toMatchObject({ success: false, error: { status: 404 } });
    const bad = await get('/v1/icons/xyz');
    expect(bad.status).toBe(400);
    expect(bad.body.error).toMatchObject({ code: 'invalid_input', param: 'sha256' });
  });
});

// Last in the file: it publishes workflows of its own. Suggestions rank by a copy of each
// workflow's popularity kept beside its names (migration 1700000003100); every writer of the
// counters must move the copy.
describe('suggestion ranking', () => {
  it('follows popularity through folded runs, a rating and a workflow listed again', async () => {
    for (const x of ['a', 'b', 'c']) await publishApi(f.db, syntheticApi(`@quokka-${x}`, { name: `Quokka ${x.toUpperCase()}` }));
    const order = async () => {
      const r = await get('/v1/catalog/suggest?query=quok');
      expect(r.status).toBe(200);
      return handles(r.body);
    };
    const drift = async () =>
      (
        await f.db.query(
          `SELECT count(*)::int AS n FROM catalog_names n LEFT JOIN catalog_api_stats s ON s.api_id = n.api_id WHERE n.popularity <> coalesce(s.popularity, 0)`,
        )
      ).rows[0].n;
    // No runs yet: equal popularity, oldest first.
    expect(await order()).toEqual(['@quokka-a', '@quokka-b', '@quokka-c']);
    // First runs: the counters' row is inserted by the fold.
    await completeRuns(f.db, f.orgA.org_id, '@quokka-c', 2);
    await completeRuns(f.db, f.orgA.org_id, '@quokka-b', 3);
    expect(await order()).toEqual(['@quokka-b', '@quokka-c', '@quokka-a']);
    // More runs: the counters' row is updated.
    await completeRuns(f.db, f.orgA.org_id, '@quokka-c', 2);
    expect(await order()).toEqual(['@quokka-c', '@quokka-b', '@quokka-a']);
    // A thumbs-down weighs five runs: c falls to -1.
    const req = await f.db.query(`SELECT id FROM requests WHERE org_id = $1 AND api = '@quokka-c' LIMIT 1`, [f.orgA.org_id]);
    expect(await setFeedback(f.db, f.orgA.org_id, req.rows[0].id, -1)).toMatchObject({ ok: true });
    expect(await order()).toEqual(['@quokka-b', '@quokka-a', '@quokka-c']);
    // Unlisted, then listed again: its names row is made anew with its popularity.
    await f.db.query(`UPDATE apis SET status = 'inactive' WHERE handle = '@quokka-b'`);
    expect(await order()).toEqual(['@quokka-a', '@quokka-c']);
    await f.db.query(`UPDATE apis SET status = 'active' WHERE handle = '@quokka-b'`);
    expect(await order()).toEqual(['@quokka-b', '@quokka-a', '@quokka-c']);
    expect(await drift()).toBe(0);
  });

  it('ranks word-prefix matches by popularity when no name starts with the prefix, and name prefixes by popularity', async () => {
    // "tracker" starts no name but is a word of every filler's ("Filler N tracker"); "quokka" starts three.
    const words = handles((await get('/v1/catalog/suggest?query=tracker&limit=3')).body);
    expect(words).toHaveLength(3);
    const runs = await f.db.query(
      `SELECT a.handle, coalesce(s.popularity, 0)::int AS p FROM apis a LEFT JOIN catalog_api_stats s ON s.api_id = a.id WHERE a.handle = ANY($1) ORDER BY array_position($1, a.handle)`,
      [words],
    );
    const ps = runs.rows.map((r) => r.p);
    expect(ps).toEqual([...ps].sort((x, y) => y - x));
    const top = await f.db.query(
      `SELECT max(s.popularity)::int AS p FROM apis a JOIN catalog_api_stats s ON s.api_id = a.id WHERE a.handle LIKE '@filler-%' AND a.visibility = 'public'`,
    );
    expect(ps[0]).toBe(top.rows[0].p);
    expect(handles((await get('/v1/catalog/suggest?query=quokka&limit=2')).body)).toEqual(['@quokka-b', '@quokka-a']);
  });
});
