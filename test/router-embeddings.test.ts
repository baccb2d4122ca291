// The router's dense side (shared/router/embeddings.ts, vector-index.ts, hybrid.ts) with the real
// model that scripts/ensure-model.sh installs (npm test runs it through ensure-tools.sh), on the
// test stack's PostgreSQL: dense retrieval finds a paraphrase sharing no word with its operation,
// scope filters apply before the dense top-k, vectors are stored by operation, version and
// document hash and read (not embedded) by the next start, and without the model the router ranks
// lexically and says so once.
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { demoCatalog } from '../shared/catalog/demo/index.ts';
import { publishApi } from '../shared/db/catalog.ts';
import { cosine, DIMENSIONS, loadEmbedder, operationDocument, type Embedder } from '../shared/router/embeddings.ts';
import { routerFactory } from './helpers/routers.ts';
import type { RouteRow } from '../shared/router/retrieve.ts';
import { createDotKernel } from '../shared/router/simd-dot.ts';
import { documentHash, VectorIndex } from '../shared/router/vector-index.ts';
import { syntheticApi, syntheticOp } from './catalog-fixture.ts';
import { closeDb, db, newOrg } from './helpers/stack.ts';

/** Routers made here are closed after the file (their embedding threads released). */
const createRouter = routerFactory();

const DEMO = demoCatalog.map((a) => a.handle);
const tag = Math.random().toString(36).slice(2, 8);
const privateHandle = `@harbour-${tag}`;
// No word of this prompt is in the operation below (nor a synonym or a near spelling of one).
const PARAPHRASE = 'when does the sea come in at the port';
const tidesOp = syntheticOp('tide_times', {
  label: 'Tide times',
  description: 'High and low tide times for a harbour.',
  labels: ['tides', 'tide', 'harbour'],
});

let orgA: string;
let orgB: string;
let embedder: Embedder;

beforeAll(async () => {
  orgA = (await newOrg(0, 'Dense A')).org_id;
  orgB = (await newOrg(0, 'Dense B')).org_id;
  await publishApi(db(), syntheticApi(privateHandle, { name: 'Harbour', operations: [tidesOp] }), { ownerOrgId: orgA });
  const e = await loadEmbedder();
  expect(e, 'run scripts/ensure-model.sh').not.toBeNull();
  embedder = e!;
});
afterAll(closeDb);

function row(id: string, over: Partial<RouteRow>): RouteRow {
  return {
    operation_id: id, api: '@x', visibility: 'public', api_name: 'X', api_description: '', sites: [], operation: 'op', label: 'Op',
    description: '', labels: [], performs_actions: false, input_schema: { type: 'object', properties: {} }, examples: [], rank: 0, ...over,
  };
}

const privateOpId = async () =>
  (await db().query<{ id: string }>(`SELECT o.id::text AS id FROM operations o JOIN apis a ON a.id = o.api_id WHERE a.handle = $1`, [privateHandle])).rows[0]!.id;

describe('the SIMD dot kernel', () => {
  it('scores exactly the listed rows as JavaScript would, and keeps rows when it grows', () => {
    const k = createDotKernel(2)!;
    expect(k, 'WebAssembly SIMD runs on every Node the project supports').not.toBeNull();
    k.reserve(300);
    const m = k.matrix();
    for (let i = 0; i < m.length; i++) m[i] = Math.sin(i * 0.37);
    const q = Float32Array.from({ length: DIMENSIONS }, (_, d) => Math.cos(d * 0.11));
    const rows = Int32Array.from([299, 0, 17, 150]);
    const js = [...rows].map((r) => {
      let s = 0;
      for (let d = 0; d < DIMENSIONS; d++) s += q[d]! * m[r * DIMENSIONS + d]!;
      return s;
    });
    const got = [...k.dots(q, rows, 3)];
    expect(got).toHaveLength(3);
    got.forEach((x, i) => expect(x).toBeCloseTo(js[i]!, 3));
    const row17 = [...k.matrix().subarray(17 * DIMENSIONS, 18 * DIMENSIONS)];
    k.reserve(5_000);
    expect([...k.matrix().subarray(17 * DIMENSIONS, 18 * DIMENSIONS)]).toEqual(row17);
    expect(k.dots(q, Int32Array.from([17]), 1)[0]).toBeCloseTo(js[2]!, 3);
    expect(() => k.dots(q, new Int32Array(6_000), 6_000)).toThrow(RangeError);
  });
});

describe('dense retrieval', () => {
  it('gives unit-length 384-d vectors that put a paraphrase nearer its operation than another', async () => {
    const weather = row('1', { operation: 'forecast', label: 'Weather forecast', description: 'Daily forecast for a city.', labels: ['weather', 'temperature'] });
    const books = row('2', { operation: 'search_books', label: 'Search books', description: 'Find books in the catalogue by title or author.' });
    const [p, w, b] = await embedder.embed(['will I need an umbrella in Lyon', operationDocument(weather), operationDocument(books)]);
    expect(p!.length).toBe(DIMENSIONS);
    expect(cosine(p!, p!)).toBeCloseTo(1, 4);
    expect(cosine(p!, w!)).toBeGreaterThan(cosine(p!, b!) + 0.1);
  });

  it('routes a paraphrase sharing no word with its operation, which the lexical router abstains on', async () => {
    const org = await newOrg(0, 'Dense paraphrase');
    const lexical = createRouter({ db: db(), embeddings: false });
    const hybrid = createRouter({ db: db() });
    expect(await hybrid.ready()).toBe(true);
    const scope = { orgId: org.org_id, allowedApis: DEMO };
    const l = await lexical.rank('what are the papers reporting', scope);
    expect(l.chosen).toBeNull();
    expect(l.candidates).toEqual([]);
    const h = await hybrid.rank('what are the papers reporting', scope);
    expect(h.chosen).toMatchObject({ api: '@news', operation: 'latest_headlines' });
    expect(h.candidates[0]).toEqual(h.chosen);
  });

  it("never scores another organization's private operation: the scope applies before the dense top-k", async () => {
    const index = new VectorIndex(db(), embedder);
    await index.refresh();
    await index.drain();
    const id = await privateOpId();
    const [q] = await embedder.embed([PARAPHRASE]);
    // Its owner's scan finds it first within its API; the owner's blocked list and any other organization never see it.
    expect(index.scan(q!, { orgId: orgA, api: privateHandle }, 3).map((h) => h.operationId)).toEqual([id]);
    expect(index.scan(q!, { orgId: orgA }, 50).map((h) => h.operationId)).toContain(id);
    expect(index.scan(q!, { orgId: orgA, blockedApis: [privateHandle] }, 10_000).map((h) => h.operationId)).not.toContain(id);
    expect(index.scan(q!, { orgId: orgB }, 10_000).map((h) => h.operationId)).not.toContain(id);
    expect(index.scan(q!, { orgId: orgA, api: privateHandle, visibility: 'public' }, 10)).toEqual([]);

    const router = createRouter({ db: db() });
    await router.ready();
    const a = await router.rank(PARAPHRASE, { orgId: orgA, api: privateHandle });
    expect(a.candidates.map((c) => c.api)).toEqual([privateHandle]);
    const b = await router.rank(PARAPHRASE, { orgId: orgB, api: privateHandle });
    expect(b).toMatchObject({ chosen: null, candidates: [] });
    const bAll = await router.rank(PARAPHRASE, { orgId: orgB });
    expect(bAll.candidates.map((c) => c.api)).not.toContain(privateHandle);
  });

  it('stores vectors by operation, version and document hash; the next start reads them and embeds none again', async () => {
    const first = createRouter({ db: db() });
    expect(await first.ready()).toBe(true);
    const docs = await db().query<RouteRow & { id: string; version: number }>(
      `SELECT o.id::text AS id, o.default_version AS version, o.name AS operation, o.label, o.description, o.labels, v.input_schema, v.examples
         FROM operations o JOIN apis a ON a.id = o.api_id JOIN operation_versions v ON v.operation_id = o.id AND v.version = o.default_version
        WHERE a.handle = ANY($1::text[])`,
      [DEMO],
    );
    const stored = await db().query<{ id: string; version: number; doc_hash: string; bytes: number }>(
      `SELECT operation_id::text AS id, version, doc_hash, length(vector) AS bytes FROM router_vectors WHERE operation_id = ANY($1::bigint[])`,
      [docs.rows.map((d) => d.id)],
    );
    expect(stored.rows).toHaveLength(docs.rows.length);
    for (const d of docs.rows) {
      expect(stored.rows.find((s) => s.id === d.id)).toEqual({ id: d.id, version: d.version, doc_hash: documentHash(operationDocument(d)), bytes: DIMENSIONS * 4 });
    }

    const embedded: string[] = [];
    const counting: Embedder = { embed: (ts) => (embedded.push(...ts), embedder.embed(ts)) };
    const second = createRouter({ db: db(), embeddings: async () => counting });
    expect(await second.ready()).toBe(true);
    const demoDocs = new Set(docs.rows.map((d) => operationDocument(d)));
    expect(embedded.filter((t) => demoDocs.has(t))).toEqual([]);
  });

  it('embeds a changed document again and drops the old vector', async () => {
    const id = await privateOpId();
    const index = new VectorIndex(db(), embedder);
    await index.refresh();
    await index.drain();
    const [q] = await embedder.embed([PARAPHRASE]);
    const near0 = index.cosine(q!, id)!;
    const before = await db().query<{ doc_hash: string }>(`SELECT doc_hash FROM router_vectors WHERE operation_id = $1`, [id]);
    expect(before.rows).toHaveLength(1);
    await db().query(`UPDATE operations SET description = 'When the sea comes in and goes out at a port.' WHERE id = $1`, [id]);
    await index.refresh();
    await index.drain();
    const after = await db().query<{ doc_hash: string }>(`SELECT doc_hash FROM router_vectors WHERE operation_id = $1`, [id]);
    expect(after.rows).toHaveLength(1);
    expect(after.rows[0]!.doc_hash).not.toBe(before.rows[0]!.doc_hash);
    // The new description says the paraphrase's own words: the vector in memory moved nearer.
    expect(index.cosine(q!, id)!).toBeGreaterThan(near0);
  });

  it('a process shut down while the model is embedding exits cleanly once the model is closed (it aborts if not)', () => {
    const child = (env: Record<string, string>) =>
      spawnSync(process.execPath, ['--import', 'tsx', 'test/helpers/embed-exit-child.ts'], { cwd: path.resolve(import.meta.dirname, '..'), env: { ...process.env, ...env }, timeout: 60_000 });
    const closed = child({});
    expect(closed.status, String(closed.stderr)).toBe(0);
    // The control: the same exit without close() is what the API did before (SIGABRT, no exit code).
    const unclosed = child({ SKIP_CLOSE: '1' });
    expect(unclosed.signal).toBe('SIGABRT');
  });

  it('without the model files ranks lexically and says so once', async () => {
    const warnings: string[] = [];
    const onWarning = (w: Error & { code?: string }) => {
      if (w.code === 'WQS_ROUTER_LEXICAL') warnings.push(w.message);
    };
    process.on('warning', onWarning);
    try {
      const org = await newOrg(0, 'Router lexical');
      const scope = { orgId: org.org_id, allowedApis: DEMO };
      for (let i = 0; i < 2; i++) {
        const lexical = createRouter({ db: db(), embeddings: () => loadEmbedder('/nonexistent-model-dir') });
        lexical.warmUp();
        expect(await lexical.ready()).toBe(false);
        expect((await lexical.rank('weather forecast for Paris for 3 days', scope)).chosen?.operation).toBe('forecast');
        expect((await lexical.rank('what are the papers reporting', scope)).chosen).toBeNull();
      }
      await new Promise((r) => setImmediate(r));
      expect(warnings).toHaveLength(1);
      expect(warnings[0]).toMatch(/no embedding model in \/nonexistent-model-dir .*ranking lexically/);
    } finally {
      process.off('warning', onWarning);
    }
  });
});
