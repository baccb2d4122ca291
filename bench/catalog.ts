// Catalog search speed: 10,000 synthetic workflows in a separate database, p50/p99 of
// GET /v1/catalog?query=… and /v1/catalog/suggest through real HTTP, beside the same SQL's
// execution time inside PostgreSQL alone (EXPLAIN ANALYZE of the statements the route runs).
// Search is measured twice: as a search box sees it (the same ten queries again and again, so
// kept pages are served after one generation check) and cold (the catalog cache generation
// bumped before every request, so every page is computed afresh). A stage breakdown of one
// search (validation, SQL, page building, serialization, the rest of the HTTP exchange) and the
// EXPLAIN (ANALYZE, BUFFERS) summary of each first-page statement are in the figures.
// CATALOG_BASELINE_DIR=<an exported copy of an older commit, node_modules linked> also runs that
// copy's own bench on the same PostgreSQL server in the same session, before this one.
import { mkdtemp, rm } from 'node:fs/promises';
import { loadavg, tmpdir } from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import pg from 'pg';
import { buildApp } from '../apps/api/app.ts';
import { loadConfig } from '../shared/config.ts';
import { searchCatalog, suggest } from '../shared/db/catalog-search.ts';
import { CatalogSearchParams, CatalogSearchResponse } from '../shared/schemas/catalog.ts';
import { serializerCompiler, validatorCompiler } from 'fastify-type-provider-zod';
import { migrate } from '../shared/db/migrate.ts';
import { createPool, type Db } from '../shared/db/pool.ts';
import { startEmbeddedPostgres } from '../shared/infra/embedded-postgres.ts';

export interface CatalogBenchOptions {
  /** Any database URL of a running server; a new database is created beside it. Without it an embedded server is started. */
  databaseUrl?: string;
  workflows?: number;
  requests?: number;
  log?: (line: string) => void;
  /** Include the text of each first-page plan in the figures. */
  plans?: boolean;
}

const WORDS = (
  'weather forecast books library flights hotels train jobs careers news sports scores recipes food grocery pharmacy clinic ' +
  'doctor appointment invoice payments bank stocks crypto wallet maps routes traffic parking cinema tickets concerts music ' +
  'podcast video translate dictionary legal court permits taxes energy solar electricity water housing rentals mortgage ' +
  'insurance shipping parcel tracking warehouse inventory calendar email chat support reviews ratings coupons deals fashion'
).split(' ');
const CATEGORIES = ['ai', 'commerce', 'data', 'finance', 'food', 'health', 'jobs', 'maps', 'media', 'news', 'sports', 'travel', 'weather', 'other'];

export const SEARCH_QUERIES = ['weather', 'wether forecast', 'books library', 'flight', 'parcel tracking', 'doctor appointment', 'stocks', 'cinema tickets', 'mortgage', 'recipes'];
export const SUGGEST_QUERIES = ['w', 'we', 'wea', 'boo', 'fli', 'park', 'tra', 'stoc', 'recip', 'doc'];

function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return NaN;
  const i = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return Math.round(sorted[i]! * 1000) / 1000;
}
const stats = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return { n: s.length, p50_ms: percentile(s, 50), p99_ms: percentile(s, 99), mean_ms: Math.round((s.reduce((a, b) => a + b, 0) / s.length) * 1000) / 1000 };
};

/** Seed `n` workflows (2 operations each) with bulk SQL; search documents built once at the end. */
export async function seedSyntheticCatalog(db: Db, n: number): Promise<void> {
  const c = await db.connect();
  try {
    await c.query('BEGIN');
    // Bulk load without the per-row search triggers, then build every search document once.
    await c.query(`SET LOCAL session_replication_role = replica`);
    await c.query(
      `INSERT INTO apis (handle, visibility, owner_org_id, name, description, category, website_url, created_at, updated_at)
       SELECT '@bench-' || g, 'public', 'org_platform',
              initcap(w1) || ' ' || initcap(w2) || ' ' || g,
              'Find ' || w1 || ' and ' || w2 || ' on ' || w3 || ' sites; compare ' || w4 || ' results.',
              $2::text[] ~> g, 'https://' || w1 || g || '.example.test',
              now() - make_interval(mins => g), now() - make_interval(secs => (g * 7919) % 100000)
         FROM generate_series(1, $1::int) g,
              LATERAL (SELECT $3::text[] AS w) v,
              LATERAL (SELECT v.w[1 + (g * 7) % array_length(v.w, 1)] AS w1, v.w[1 + (g * 13) % array_length(v.w, 1)] AS w2,
                              v.w[1 + (g * 17) % array_length(v.w, 1)] AS w3, v.w[1 + (g * 23) % array_length(v.w, 1)] AS w4) ws`
        .replace('$2::text[] ~> g', `($2::text[])[1 + g % array_length($2::text[], 1)]`),
      [n, CATEGORIES, WORDS],
    );
    await c.query(
      `INSERT INTO api_sites (api_id, position, name, host)
       SELECT id, 0, split_part(name, ' ', 1), lower(split_part(name, ' ', 1)) || id || '.example.test' FROM apis WHERE handle LIKE '@bench-%'`,
    );
    await c.query(
      `INSERT INTO operations (api_id, name, label, description, cost_credits, performs_actions, default_version, labels)
       SELECT a.id, op.name, op.label, op.label || ' on ' || a.name, 1 + (a.id % 3)::int, op.acts, 1, ARRAY[lower(split_part(a.name, ' ', 2))]
         FROM apis a, (VALUES ('search', 'Search', false), ('get_details', 'Get details', false)) op(name, label, acts)
        WHERE a.handle LIKE '@bench-%'`,
    );
    await c.query(
      `INSERT INTO operation_versions (operation_id, version, input_schema, output_schema, recipe)
       SELECT o.id, 1, '{"type":"object"}', '{"type":"object"}', '{}' FROM operations o JOIN apis a ON a.id = o.api_id WHERE a.handle LIKE '@bench-%'`,
    );
    await c.query(`SELECT catalog_search_refresh(id) FROM apis WHERE handle LIKE '@bench-%'`);
    // The rank rows are copied by a trigger on catalog_search, off under the replica role.
    await c.query(
      `INSERT INTO catalog_rank (api_id, listed, operation_count, min_cost_credits, tsv, keywords, exact)
       SELECT api_id, listed, operation_count, min_cost_credits, tsv, keywords, exact FROM catalog_search WHERE api_id IN (SELECT id FROM apis WHERE handle LIKE '@bench-%')`,
    );
    // The kept items (deferred triggers, also off under the replica role).
    await c.query(`INSERT INTO catalog_items (api_id, item) SELECT id, catalog_item_build(id) FROM apis WHERE handle LIKE '@bench-%'`);
    // The counters with triggers on again: catalog_names keeps a copy of each popularity.
    await c.query(`SET LOCAL session_replication_role = origin`);
    await c.query(
      `INSERT INTO catalog_api_stats (api_id, completed_runs) SELECT id, (id * 2654435761) % 5000 FROM apis WHERE handle LIKE '@bench-%'
       ON CONFLICT (api_id) DO UPDATE SET completed_runs = EXCLUDED.completed_runs`,
    );
    await c.query('COMMIT');
  } catch (err) {
    await c.query('ROLLBACK').catch(() => {});
    throw err;
  } finally {
    c.release();
  }
  // VACUUM also flushes the GIN pending lists the bulk load left (a long one makes the planner
  // skip those indexes) and sets the visibility map; ANALYZE gives the planner the new sizes.
  await db.query('VACUUM ANALYZE');
}

type Statement = { text: string; values: unknown[] };

/**
 * A pool whose `query` records each statement with its round-trip time and forwards it. A
 * bench-only stand-in for the one method the catalog code calls, hence the cast. One per pool:
 * kept search pages belong to the pool object (catalog-cache.ts), so a fresh recorder per call
 * would never find one.
 */
const recorders = new WeakMap<Db, { db: Db; sink: Array<Statement & { ms: number }> }>();
async function recordStatements(db: Db, fn: (db: Db) => Promise<unknown>): Promise<Array<Statement & { ms: number }>> {
  let rec = recorders.get(db);
  if (!rec) {
    const holder = { sink: [] as Array<Statement & { ms: number }> };
    const query = async (text: string | { text: string; values?: unknown[]; name?: string }, values: unknown[] = []) => {
      const q = typeof text === 'string' ? { text, values } : { ...text, values: text.values ?? values };
      const s = performance.now();
      const res = await db.query(q);
      holder.sink.push({ text: q.text, values: q.values, ms: performance.now() - s });
      return res;
    };
    rec = Object.assign(holder, { db: { query } as unknown as Db });
    recorders.set(db, rec);
  }
  rec.sink = [];
  await fn(rec.db);
  return rec.sink;
}

/** Execution time inside PostgreSQL of every statement `fn` runs (EXPLAIN ANALYZE), summed. */
async function pgExecutionMs(db: Db, fn: (db: Db) => Promise<unknown>): Promise<number> {
  let total = 0;
  for (const s of await recordStatements(db, fn)) {
    const r = await db.query(`EXPLAIN (ANALYZE, FORMAT JSON) ${s.text}`, s.values);
    const plan = r.rows[0]['QUERY PLAN'][0];
    total += plan['Execution Time'] + (plan['Planning Time'] ?? 0);
  }
  return total;
}

/** Forget every kept search page: a committed change to the catalog does the same. */
const bumpGeneration = (db: Db) => db.query('UPDATE catalog_cache_generation SET gen = gen + 1');

/** Planning and execution time, buffers hit and candidate rows of a first page's statement (EXPLAIN ANALYZE, BUFFERS). */
async function explainFirstPage(db: Db, query: string, base: string) {
  await bumpGeneration(db);
  // The ranking statement, not the generation check a kept page (now stale) runs first.
  const first = (await recordStatements(db, (d) => searchCatalog(d, { query, baseUrl: base }))).find((s) => s.text.includes('page AS MATERIALIZED'));
  const r = await db.query(`EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) ${first!.text}`, first!.values);
  const plan = r.rows[0]['QUERY PLAN'][0];
  let candidates = 0;
  const walk = (node: any) => {
    if (node['Node Type'] === 'Bitmap Heap Scan' && ['catalog_rank', 'catalog_search'].includes(node['Relation Name'])) candidates = Math.max(candidates, node['Actual Rows']);
    for (const child of node.Plans ?? []) walk(child);
  };
  walk(plan.Plan);
  const text = await db.query(`EXPLAIN (ANALYZE, BUFFERS) ${first!.text}`, first!.values);
  return {
    query,
    planning_ms: plan['Planning Time'],
    execution_ms: plan['Execution Time'],
    shared_hit_blocks: plan.Plan['Shared Hit Blocks'],
    shared_read_blocks: plan.Plan['Shared Read Blocks'],
    candidate_rows: candidates,
    plan_text: text.rows.map((x: Record<string, string>) => x['QUERY PLAN']).join('\n'),
  };
}

/**
 * Where the time of one search goes, each stage timed alone in this process (p50 over the ten
 * queries): query-string validation, the SQL round trips, building the page from the rows,
 * serializing the response (the route's zod serializer), and the whole exchange over HTTP; the
 * rest of the HTTP time is Fastify's routing and hooks, the socket and the client.
 */
async function stageBreakdown(db: Db, base: string, cold: boolean, rounds: number) {
  const validate = validatorCompiler({ schema: CatalogSearchParams, method: 'GET', url: '/v1/catalog', httpPart: 'querystring' });
  const serialize = serializerCompiler({ schema: CatalogSearchResponse, method: 'GET', url: '/v1/catalog' });
  const t = { validation: [] as number[], sql: [] as number[], build: [] as number[], serialization: [] as number[], http: [] as number[], bytes: 0 };
  for (let i = 0; i < rounds; i++) {
    const query = SEARCH_QUERIES[i % SEARCH_QUERIES.length]!;
    if (cold) await bumpGeneration(db);
    let s = performance.now();
    const v = validate({ query }) as { value: { limit: number } };
    t.validation.push(performance.now() - s);
    let page: unknown;
    s = performance.now();
    const statements = await recordStatements(db, async (d) => (page = await searchCatalog(d, { ...v.value, query, baseUrl: base })));
    const total = performance.now() - s;
    const sqlMs = statements.reduce((a, x) => a + x.ms, 0);
    t.sql.push(sqlMs);
    t.build.push(total - sqlMs);
    s = performance.now();
    const body = serialize({ success: true, data: page }) as string;
    t.serialization.push(performance.now() - s);
    t.bytes = Buffer.byteLength(body);
    if (cold) await bumpGeneration(db);
    s = performance.now();
    await fetch(`${base}/v1/catalog?query=${encodeURIComponent(query)}`).then((r) => r.arrayBuffer());
    t.http.push(performance.now() - s);
  }
  const p50 = (xs: number[]) => stats(xs).p50_ms;
  const stages = { validation: p50(t.validation), sql: p50(t.sql), build_page: p50(t.build), serialization: p50(t.serialization) };
  const inProcess = Object.values(stages).reduce((a, b) => a + b, 0);
  return { ...stages, http_total: p50(t.http), rest_of_http: Math.round((p50(t.http) - inProcess) * 1000) / 1000, response_bytes: t.bytes };
}

export async function runCatalogBench(opts: CatalogBenchOptions = {}) {
  const log = opts.log ?? (() => {});
  const n = opts.workflows ?? 10_000;
  const requests = opts.requests ?? 400;
  let stopPg: (() => Promise<void>) | undefined;
  let tmp: string | undefined;
  const loadBefore = loadavg().map((x) => Math.round(x * 100) / 100);
  let serverUrl = opts.databaseUrl;
  if (!serverUrl) {
    tmp = await mkdtemp(path.join(tmpdir(), 'wqs-bench-catalog-'));
    const embedded = await startEmbeddedPostgres({ dataDir: tmp });
    serverUrl = embedded.databaseUrl;
    stopPg = embedded.stop;
  }
  const dbName = `wqs_bench_catalog_${process.pid}_${Date.now()}`;
  // Short-lived admin connections: one to create the database, one to drop it. Errors surface.
  const admin = async (sql: string) => {
    const c = new pg.Client({ connectionString: serverUrl });
    let late: Error | undefined;
    c.on('error', (err) => {
      late = err;
    });
    await c.connect();
    try {
      await c.query(sql);
    } finally {
      await c.end().catch(() => {});
    }
    if (late) log(`catalog bench: admin connection error after ${sql.split(' ').slice(0, 2).join(' ')}: ${late.message}`);
  };
  try {
    await admin(`CREATE DATABASE ${dbName}`);
  } catch (err) {
    await stopPg?.();
    if (tmp) await rm(tmp, { recursive: true, force: true });
    throw err;
  }
  const url = new URL(serverUrl);
  url.pathname = `/${dbName}`;
  const databaseUrl = url.toString();
  const db = createPool(databaseUrl, 10);
  let app: Awaited<ReturnType<typeof buildApp>> | undefined;
  let failed = false;
  try {
    await migrate(databaseUrl);
    const t0 = performance.now();
    await seedSyntheticCatalog(db, n);
    const seedMs = Math.round(performance.now() - t0);
    log(`catalog bench: seeded ${n} workflows in ${seedMs} ms`);

    let base = 'http://127.0.0.1';
    app = await buildApp({
      config: loadConfig({ LOG_LEVEL: 'silent' } as NodeJS.ProcessEnv),
      db,
      temporal: async () => {
        throw new Error('not used');
      },
      temporalHealthy: async () => false,
      baseUrl: () => base,
    });
    base = await app.listen({ host: '127.0.0.1', port: 0 });

    const http = async (paths: string[], before?: () => Promise<unknown>) => {
      for (const p of paths) await fetch(base + p).then((r) => r.arrayBuffer()); // warm-up
      const times: number[] = [];
      for (let i = 0; i < requests; i++) {
        const p = paths[i % paths.length]!;
        await before?.();
        const s = performance.now();
        const res = await fetch(base + p);
        const body = await res.arrayBuffer();
        times.push(performance.now() - s);
        if (res.status !== 200) throw new Error(`${p}: HTTP ${res.status} ${Buffer.from(body).toString('utf8').slice(0, 500)}`);
      }
      return stats(times);
    };
    const searchPaths = SEARCH_QUERIES.map((q) => `/v1/catalog?query=${encodeURIComponent(q)}`);
    const suggestPaths = SUGGEST_QUERIES.map((q) => `/v1/catalog/suggest?query=${encodeURIComponent(q)}`);
    const searchHttp = await http(searchPaths);
    const searchColdHttp = await http(searchPaths, () => bumpGeneration(db));
    const suggestHttp = await http(suggestPaths);
    const pageOne = await fetch(base + searchPaths[0]).then((r) => r.json() as Promise<any>);

    const pgOnly = async (calls: Array<(d: Db) => Promise<unknown>>) => {
      const times: number[] = [];
      for (let i = 0; i < Math.min(requests, 200); i++) times.push(await pgExecutionMs(db, calls[i % calls.length]!));
      return stats(times);
    };
    const searchPg = await pgOnly(SEARCH_QUERIES.map((q) => (d: Db) => searchCatalog(d, { query: q, baseUrl: base })));
    const searchColdPg = await pgOnly(SEARCH_QUERIES.map((q) => async (d: Db) => (await bumpGeneration(db), searchCatalog(d, { query: q, baseUrl: base }))));
    const suggestPg = await pgOnly(SUGGEST_QUERIES.map((q) => (d: Db) => suggest(d, { query: q, baseUrl: base })));

    const ratio = (h: { p50_ms: number; p99_ms: number }, q: { p50_ms: number; p99_ms: number }) => ({
      p50: Math.round((h.p50_ms / q.p50_ms) * 100) / 100,
      p99: Math.round((h.p99_ms / q.p99_ms) * 100) / 100,
    });
    const figures = {
      workflows: n,
      load_average: { before: loadBefore, after: loadavg().map((x) => Math.round(x * 100) / 100) },
      seed_ms: seedMs,
      requests_per_measure: requests,
      search: { http: searchHttp, postgres: searchPg, ratio_http_to_postgres: ratio(searchHttp, searchPg), items_on_first_page: pageOne.data.items.length, queries: SEARCH_QUERIES },
      search_cold: { http: searchColdHttp, postgres: searchColdPg, ratio_http_to_postgres: ratio(searchColdHttp, searchColdPg), note: 'catalog cache generation bumped before every request: every page computed afresh' },
      suggest: { http: suggestHttp, postgres: suggestPg, ratio_http_to_postgres: ratio(suggestHttp, suggestPg), queries: SUGGEST_QUERIES },
      breakdown_p50_ms: { warm: await stageBreakdown(db, base, false, 100), cold: await stageBreakdown(db, base, true, 100) },
      first_page_plans: await (async () => {
        const plans = [];
        for (const q of SEARCH_QUERIES.slice(0, 3)) {
          const { plan_text, ...x } = await explainFirstPage(db, q, base);
          plans.push(opts.plans ? { ...x, plan_text } : x);
        }
        return plans;
      })(),
      target: { search_http_p50_ms: 5, suggest_http_p50_ms: 3, met: searchHttp.p50_ms <= 5 && suggestHttp.p50_ms <= 3, cold_met: searchColdHttp.p50_ms <= 5 },
    };
    log(
      `catalog bench (load ${figures.load_average.after.join(' ')}): search p50 ${searchHttp.p50_ms} ms / p99 ${searchHttp.p99_ms} ms over HTTP (PostgreSQL alone p50 ${searchPg.p50_ms} ms); ` +
        `cold search p50 ${searchColdHttp.p50_ms} ms / p99 ${searchColdHttp.p99_ms} ms (PostgreSQL alone p50 ${searchColdPg.p50_ms} ms); ` +
        `suggest p50 ${suggestHttp.p50_ms} ms / p99 ${suggestHttp.p99_ms} ms (PostgreSQL alone p50 ${suggestPg.p50_ms} ms)`,
    );
    return figures;
  } catch (err) {
    failed = true;
    throw err;
  } finally {
    await app?.close();
    await db.end();
    // Always drop the bench database; a failure to do so is reported (thrown unless the bench
    // itself already failed, whose error wins and this one is logged).
    try {
      await admin(`DROP DATABASE IF EXISTS ${dbName} WITH (FORCE)`);
    } catch (err) {
      log(`catalog bench: could not drop ${dbName}: ${(err as Error).message}`);
      if (!failed) throw err;
    } finally {
      await stopPg?.();
      if (tmp) await rm(tmp, { recursive: true, force: true });
    }
  }
}

/**
 * The same bench from an exported copy of an older commit (CATALOG_BASELINE_DIR, its
 * node_modules linked to this one's), on the same server in the same session: the baseline
 * every figure stands beside. Its own code, migrations and app; only the server is shared.
 */
async function runBaseline(databaseUrl: string | undefined, log: (line: string) => void) {
  const dir = process.env.CATALOG_BASELINE_DIR;
  if (!dir) return undefined;
  const mod = (await import(pathToFileURL(path.resolve(dir, 'bench/catalog.ts')).href)) as { runCatalogBench: typeof runCatalogBench };
  log(`catalog bench: baseline from ${dir}`);
  return mod.runCatalogBench({ databaseUrl, workflows: 10_000, log: (l) => log(`[baseline] ${l}`) });
}

/** Entry for `npm run bench` (bench/main.ts): the 10,000-workflow run in a separate database on the stack's server. */
export async function benchCatalog(input: { databaseUrl: string; baseUrl?: string; apiKey?: string; siteOrigin?: string; hostMap?: unknown; chromiumPath?: string }) {
  const log = (l: string) => console.error(l);
  const baseline = await runBaseline(input.databaseUrl, log);
  const figures = await runCatalogBench({ databaseUrl: input.databaseUrl, workflows: 10_000, log });
  return baseline ? { ...figures, baseline } : figures;
}

export default runCatalogBench;

// `node --import tsx bench/catalog.ts` runs it alone, on an embedded PostgreSQL of its own
// (DATABASE_URL: on that server instead; BENCH_CATALOG_PLANS=1 prints the first-page plans).
if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const log = (l: string) => console.error(l);
  (async () => {
    const baseline = await runBaseline(process.env.DATABASE_URL, log);
    const figures = await runCatalogBench({ databaseUrl: process.env.DATABASE_URL, log, plans: process.env.BENCH_CATALOG_PLANS === '1' });
    return baseline ? { ...figures, baseline } : figures;
  })().then(
    (f) => console.log(JSON.stringify(f, null, 2)),
    (err) => {
      console.error(err);
      process.exitCode = 1;
    },
  );
}
