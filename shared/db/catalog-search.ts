// Catalog discovery in PostgreSQL: ranked search (full text + trigram typo tolerance), filters,
// sorts and keyset cursors bound to the query they came from; detail, suggestions and sitemap.
// Search documents are kept by triggers (migrations/1700000000100_catalog_search.sql).
import { createHash } from 'node:crypto';
import { ServiceError } from '../errors.ts';
import { selectableFields } from '../format/shape.ts';
import {
  CATALOG_LIMIT_DEFAULT,
  DETAIL_OPERATIONS_PAGE,
  SITEMAP_PAGE_SIZE,
  SUGGEST_LIMIT_DEFAULT,
  type CatalogDetailParams,
  type CatalogSearchParams,
} from '../schemas/catalog.ts';
import type { JsonSchema } from '../catalog/types.ts';
import type { CategoryId } from '../catalog/categories.ts';
import { checkKept, GENERATION_SQL, pageCacheOf } from './catalog-cache.ts';
import type { Db } from './pool.ts';

export type CatalogSort = 'relevant' | 'popular' | 'newest' | 'updated';

export const iconUrl = (base: string, sha: string | null | undefined) => (sha ? `${base}/v1/icons/${sha}` : null);

/** Cursors for the `popular` order rank by popularity as of the first page, for this long. */
export const CURSOR_TTL_MS = 24 * 3_600_000;
/** Completions younger than this are left out of a first page's "as of" count (commit lag). */
const AS_OF_LAG_MS = 2_000;
/**
 * Runs and rating changes are added up per workflow per this long (catalog_event_bucket(),
 * migration 1700000002800), so a `popular` page ranks as of the start of one: its first page
 * counts what was counted 2 to 12 seconds before it.
 */
export const EVENT_BUCKET_MS = 10_000;
const bucketStart = (ms: number) => Math.floor(ms / EVENT_BUCKET_MS) * EVENT_BUCKET_MS;
const MAX_QUERY_WORDS = 8;
/** Near words (typos) looked up per query word. */
const NEAR_WORDS = 16;
/** Trigram similarity a keyword needs to count as a near word (typo) of a query word. */
const NEAR_MIN_SIMILARITY = 0.4;

const STOP_WORDS = new Set(
  'a an and are as at be by for from how i in is it of on or that the this to was what when where which who with'.split(' '),
);

/** Lower-case words of a free-text query (letters and digits), at most 8; stop words dropped unless nothing else is left. */
export function queryWords(text: string | undefined): string[] {
  if (!text) return [];
  const words = [...new Set(text.normalize('NFKC').toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? [])];
  const content = words.filter((w) => !STOP_WORDS.has(w));
  return (content.length > 0 ? content : words).slice(0, MAX_QUERY_WORDS);
}

const statementNames = new Map<string, string>();
/**
 * A named (prepared) statement: parsed once per connection, and planned once when PostgreSQL's
 * generic plan is as good as a custom one. The name is derived from the text, so one text is one
 * statement; the texts are few (their shape depends on the number of query words, the sort and
 * which filters are set, never on values). Search and the empty suggestion box; measured in
 * bench/results/2026-11-23-issue-11-catalog.md. A typed suggestion is not named: its best plan
 * depends on the prefix, and a generic one took twice as long for some (issue 11, session 38).
 */
export function prepared(text: string, values: unknown[]) {
  let name = statementNames.get(text);
  if (!name) statementNames.set(text, (name = `catalog_${createHash('sha256').update(text).digest('base64url').slice(0, 22)}`));
  return { name, text, values };
}

/** A number as an SQL literal. */
const num = (x: number) => String(Math.round(x * 1e6) / 1e6);

function badParam(param: string, message: string): ServiceError {
  return new ServiceError('invalid_input', `${param}: ${message}`, { param, details: { issues: [{ path: param, message }] } });
}

// --- cursors ---------------------------------------------------------------------------------

interface SearchCursor {
  v: 1;
  s: CatalogSort;
  f: string; // fingerprint of query + filters + sort
  k: number | string; // sort key of the last item (score, runs, or updated µs as string)
  i: number; // id of the last item
  t?: number; // popular: "as of" time in ms
}

const b64 = (o: unknown) => Buffer.from(JSON.stringify(o)).toString('base64url');
function unb64(s: string): unknown {
  if (!/^[A-Za-z0-9_-]+$/.test(s)) throw new Error('not base64url');
  return JSON.parse(Buffer.from(s, 'base64url').toString('utf8'));
}

function fingerprint(parts: unknown[]): string {
  return createHash('sha256').update(JSON.stringify(parts)).digest('base64url').slice(0, 16);
}

const INT8_MIN = -(2n ** 63n);
const INT8_MAX = 2n ** 63n - 1n;
/** Clock skew allowed on a `popular` cursor's "as of" time (it is set by this service, in the past). */
const AS_OF_SKEW_MS = 60_000;

/** A decimal string PostgreSQL's bigint holds (a 20-digit key would fail the ::bigint cast). */
function isInt8(s: string): boolean {
  if (!/^-?[0-9]{1,20}$/.test(s)) return false;
  const n = BigInt(s);
  return n >= INT8_MIN && n <= INT8_MAX;
}

/**
 * Cursors are plain base64url JSON, so anything a client sends is checked here: every tampered,
 * truncated or out-of-range cursor is 400 invalid_input param `cursor`, never a failed query.
 */
function decodeSearchCursor(raw: string, sort: CatalogSort, fp: string): SearchCursor {
  const invalid = () => badParam('cursor', 'is not a cursor returned by this endpoint');
  let c: SearchCursor;
  try {
    c = unb64(raw) as SearchCursor;
  } catch {
    throw invalid();
  }
  if (!c || typeof c !== 'object' || Array.isArray(c) || c.v !== 1 || typeof c.s !== 'string' || typeof c.f !== 'string' || !Number.isSafeInteger(c.i)) throw invalid();
  if (c.s !== sort || c.f !== fp) {
    throw badParam('cursor', 'belongs to a different query, filter or sort; send the same query, api, category, max_cost_credits and sort as the page it came from, or start again without cursor');
  }
  // `updated` keys are microsecond timestamps as bigint strings; the others are float8 numbers.
  const validKey = c.s === 'updated' ? typeof c.k === 'string' && isInt8(c.k) : typeof c.k === 'number' && Number.isFinite(c.k);
  if (!validKey) throw invalid();
  if (c.s === 'popular') {
    if (typeof c.t !== 'number' || !Number.isSafeInteger(c.t) || c.t < 0 || c.t > Date.now() + AS_OF_SKEW_MS) throw invalid();
    if (Date.now() - c.t > CURSOR_TTL_MS) throw badParam('cursor', 'has expired (cursors last 24 hours); start again without cursor');
  }
  return c;
}

// --- search ----------------------------------------------------------------------------------

export interface SearchOptions extends Partial<Omit<CatalogSearchParams, 'limit'>> {
  limit?: number;
  baseUrl: string;
}

export interface CatalogPage<T> {
  items: T[];
  next_cursor: string | null;
}

/** The ranked, filtered, keyset-paged catalog search (GET /v1/catalog). */
export async function searchCatalog(db: Db, opts: SearchOptions): Promise<CatalogPage<CatalogItem>> {
  const words = queryWords(opts.query);
  const text = words.join(' ');
  const sort: CatalogSort = opts.sort ?? (words.length > 0 ? 'relevant' : 'popular');
  const limit = opts.limit ?? CATALOG_LIMIT_DEFAULT;
  const fp = fingerprint([text, opts.api ?? null, opts.category ?? null, opts.max_cost_credits ?? null, sort]);
  const cursor = opts.cursor ? decodeSearchCursor(opts.cursor, sort, fp) : undefined;
  // "relevant" without a query has nothing to rank by: it orders like "popular".
  const effective: CatalogSort = sort === 'relevant' && words.length === 0 ? 'popular' : sort;
  // As of a bucket boundary, since runs and ratings are summed per 10-second bucket.
  const asOf = effective === 'popular' ? bucketStart(cursor?.t ?? Date.now() - AS_OF_LAG_MS) : undefined;

  // A page computed before is served again while the catalog cache generation it was computed at
  // is still current (catalog-cache.ts); run counts are always read fresh. Not `popular`: that
  // order moves with every completed run.
  const cache = pageCacheOf<CatalogPage<CatalogItem>>(db);
  const cacheKey = effective === 'popular' ? undefined : JSON.stringify([fp, limit, opts.cursor ?? null, opts.baseUrl]);
  if (cacheKey) {
    const kept = cache.get(cacheKey);
    if (kept) {
      const runs = await checkKept(db, kept.gen, kept.ids);
      if (runs) return { items: kept.value.items.map((item, i) => ({ ...item, completed_runs: runs[i]! })), next_cursor: kept.value.next_cursor };
      cache.delete(cacheKey);
    }
  }

  const params: unknown[] = [];
  const p = (v: unknown) => {
    params.push(v);
    return `$${params.length}`;
  };
  // Everything reads the narrow rank row (migrations/1700000001500: a copy of the search row's
  // ranking columns); apis only for the filters on it and for "updated".
  const needApis = opts.api !== undefined || opts.category !== undefined || effective === 'updated';
  const where = ['s.listed'];
  if (opts.api) where.push(`a.handle = ${p(opts.api)}`);
  if (opts.category) where.push(`a.category = ${p(opts.category)}`);
  if (opts.max_cost_credits !== undefined) where.push(`s.min_cost_credits <= ${p(opts.max_cost_credits)}::numeric`); // fractional and huge limits compare exactly
  else where.push('s.operation_count > 0');

  let key = '0::float8';
  let from = 'catalog_rank s';
  const ctes: string[] = [];
  if (words.length > 0) {
    // Candidates through indexes only: full-text matches (prefix per word) or a near word
    // (typo) held in keywords (GIN). Near words: the keywords (names, handles, operations,
    // labels, categories, sites) most similar to a query word by trigram similarity, looked up
    // in the small vocabulary catalog_keywords; words that start with the query word are left to
    // the full-text prefix match, and a query word that is itself a keyword is taken as typed.
    // Only candidates are ranked; nothing is computed over the whole table.
    // Each tsquery is built once per statement (CTE tq), never per candidate row: also under a
    // generic plan of the prepared statement, where to_tsquery($n) is not folded to a constant.
    const tqColumns: string[] = [];
    const tq = (source: string) => {
      tqColumns.push(`to_tsquery('english', ${p(source)}) AS q${tqColumns.length}`);
      return `tq.q${tqColumns.length - 1}`;
    };
    const orTq = tq(words.map((w) => `${w}:*`).join(' | '));
    words.forEach((w, i) => {
      const wp = p(w);
      const prefix = p(`${w.replace(/[\\%_]/g, '\\$&')}%`);
      // One row: the near words by similarity bucket (score = the bucket's best similarity), all
      // of them, and a query for them in names and handles (weight A).
      ctes.push(`near${i} AS MATERIALIZED (
        SELECT coalesce(array_agg(word) FILTER (WHERE sim >= 0.8), '{}') AS w1, max(sim) FILTER (WHERE sim >= 0.8) AS s1,
               coalesce(array_agg(word) FILTER (WHERE sim >= 0.6 AND sim < 0.8), '{}') AS w2, max(sim) FILTER (WHERE sim >= 0.6 AND sim < 0.8) AS s2,
               coalesce(array_agg(word) FILTER (WHERE sim < 0.6), '{}') AS w3, max(sim) FILTER (WHERE sim < 0.6) AS s3,
               coalesce(array_agg(word), '{}') AS ws,
               CASE WHEN count(*) > 0 THEN to_tsquery('english', string_agg(word || ':A', ' | ')) END AS name_tq
          FROM (SELECT word, similarity(word, ${wp}) AS sim FROM catalog_keywords
                 WHERE NOT EXISTS (SELECT 1 FROM catalog_keywords k WHERE k.word = ${wp})
                   AND word % ${wp} AND similarity(word, ${wp}) >= ${NEAR_MIN_SIMILARITY} AND word NOT LIKE ${prefix}
                 ORDER BY 2 DESC, word LIMIT ${NEAR_WORDS}) x)`);
    });
    const allNear = words.map((_, i) => `n${i}.ws`).join(' || ');
    from += words.map((_, i) => ` CROSS JOIN near${i} n${i}`).join('');
    where.push(`(s.tsv @@ ${orTq} OR s.keywords && (${allNear}))`);
    if (effective === 'relevant') {
      // Per word: 1 for a full-text match, else 0.8 × the similarity of its near word; name
      // similarity: 1/n more per word found in the name or handle (weight A), times the
      // similarity for a near word; plus full-text rank and an exact handle/name bonus. Only
      // lookups in the row's tsvector and keywords — no trigram function per row.
      const share = num(1 / words.length);
      const scores = words.map((w, i) => {
        const n = (c: string) => `n${i}.${c}`;
        return `(CASE WHEN s.tsv @@ ${tq(`${w}:*A`)} THEN 1 + ${share}
          WHEN s.tsv @@ ${tq(`${w}:*`)} THEN 1
          WHEN s.keywords && ${n('ws')} THEN
            (CASE WHEN s.keywords && ${n('w1')} THEN ${n('s1')} WHEN s.keywords && ${n('w2')} THEN ${n('s2')} ELSE ${n('s3')} END)
            * (CASE WHEN s.tsv @@ ${n('name_tq')} THEN 0.8 + ${share} ELSE 0.8 END)
          ELSE 0 END)`;
      });
      const tp = p(text);
      const score = `${scores.join(' + ')} + ts_rank(s.tsv, ${orTq}) + (CASE WHEN ${tp} = ANY(s.exact) THEN 2 ELSE 0 END)`;
      // Rounded to 6 decimals in float8 (rint of the scaled score), not through numeric: the
      // same key to the last bit on every page of one query, and a numeric round of each
      // candidate's score was a fifth of a cold first page's statement (1,746 candidates for
      // "weather" at 10,000 workflows; issue 11, session 42).
      key = `(round((${score}) * 1000000) / 1000000)::float8`;
    }
    ctes.push(`tq AS MATERIALIZED (SELECT ${tqColumns.join(', ')})`);
    from += ' CROSS JOIN tq';
  }
  if (needApis) from += ' JOIN apis a ON a.id = s.api_id';

  let order: string;
  if (effective === 'relevant') {
    order = 'key DESC, id ASC';
  } else if (effective === 'popular') {
    // Popularity (completed runs + weighted net rating, migrations/1700000000500) as of the first
    // page: the counter minus the completions and rating changes after it.
    const since = p(new Date(asOf!));
    from += ' LEFT JOIN catalog_api_stats st ON st.api_id = s.api_id';
    // Both sums read 10-second buckets (migration 1700000002800) and the per-event rows written before them.
    from += ` LEFT JOIN (SELECT e.api_id, sum(e.n) AS n FROM (
        SELECT api_id, n FROM catalog_run_buckets WHERE at >= ${since}
        UNION ALL SELECT api_id, 1 FROM catalog_run_events WHERE at >= ${since}) e GROUP BY e.api_id) ev ON ev.api_id = s.api_id`;
    from += ` LEFT JOIN (SELECT e.api_id, sum(e.points) AS n FROM (
        SELECT api_id, points FROM catalog_rating_buckets WHERE at >= ${since}
        UNION ALL SELECT api_id, points FROM catalog_rating_events WHERE at >= ${since}) e GROUP BY e.api_id) rv ON rv.api_id = s.api_id`;
    key = `(coalesce(st.popularity, 0) - coalesce(ev.n, 0) - coalesce(rv.n, 0))::float8`;
    order = 'key DESC, id ASC';
  } else if (effective === 'newest') {
    key = 's.api_id::float8';
    order = 'key DESC, id ASC';
  } else {
    key = `(extract(epoch FROM a.updated_at) * 1000000)::bigint::text`;
    order = 'key::bigint DESC, id ASC';
  }
  let after = '';
  if (cursor) {
    if (effective === 'updated') after = `WHERE (key::bigint < ${p(String(cursor.k))}::bigint OR (key::bigint = ${p(String(cursor.k))}::bigint AND id > ${p(cursor.i)}))`;
    else after = `WHERE (key < ${p(Number(cursor.k))} OR (key = ${p(Number(cursor.k))} AND id > ${p(cursor.i)}))`;
  }
  // One statement: the page (limit + 1 ids, ranked) and its items.
  ctes.push(`page AS MATERIALIZED (
    SELECT id, key FROM (
      SELECT s.api_id AS id, ${key} AS key
        FROM ${from}
       WHERE ${where.join(' AND ')}
    ) ranked ${after}
    ORDER BY ${order}
    LIMIT ${p(limit + 1)})`);
  // The items as kept by their workflows' changes (migrations/1700000003200), runs read fresh.
  const sql = `WITH ${ctes.join(',\n  ')}
    SELECT page.key AS page_key, ${GENERATION_SQL} AS gen, ci.item,
           coalesce((SELECT st.completed_runs FROM catalog_api_stats st WHERE st.api_id = page.id), 0) AS completed_runs
      FROM page JOIN catalog_items ci ON ci.api_id = page.id`;
  const r = await db.query<{ page_key: number | string; gen: string; item: KeptItem; completed_runs: number }>(prepared(sql, params));
  const maxCost = opts.max_cost_credits;
  const ranked = r.rows.map(({ page_key, item, completed_runs }) => ({ row: keptRow(item, completed_runs, maxCost), id: Number(item.id), key: page_key }));
  ranked.sort((x, y) => {
    if (x.key !== y.key) {
      if (typeof x.key === 'string') return BigInt(x.key) < BigInt(y.key as string) ? 1 : -1;
      return Number(y.key) - Number(x.key);
    }
    return x.id - y.id;
  });
  const rows = ranked.slice(0, limit);
  const shown = rows.filter((x) => x.row.ops.length > 0);
  const items = shown.map((x) => toItem(x.row, opts.baseUrl));
  let next: string | null = null;
  if (ranked.length > limit) {
    const last = rows[rows.length - 1]!;
    const c: SearchCursor = { v: 1, s: sort, f: fp, k: typeof last.key === 'string' ? last.key : Number(last.key), i: last.id };
    if (asOf !== undefined) c.t = asOf;
    next = b64(c);
  }
  const page = { items, next_cursor: next };
  // An empty page carries no generation (no row); it is computed again next time.
  if (cacheKey && r.rows.length > 0) {
    cache.set(cacheKey, { gen: r.rows[0]!.gen, ids: shown.map((x) => x.id), value: page });
    return { items: items.map((item) => ({ ...item })), next_cursor: next };
  }
  return page;
}

// --- items -----------------------------------------------------------------------------------

/** What an operation needs connected first (`kind` account or access_key). */
export type AccessRequirement = { kind: 'account' | 'access_key'; name: string; site: string };

export type CatalogItem = {
  api: string;
  name: string;
  description: string;
  category: CategoryId;
  website_url: string | null;
  logo_url: string | null;
  availability: 'available' | 'coming_soon';
  visibility: 'public';
  access: 'open' | 'own' | 'mixed';
  is_enabled: true;
  sites: Array<{ name: string; host: string; icon_url: string | null }>;
  completed_runs: number;
  created_at: string;
  updated_at: string;
  operations: CatalogItemOperation[];
};

export type CatalogItemOperation = {
  id: number;
  operation: string;
  label: string;
  contract_version: number;
  cost_credits: number;
  performs_actions: boolean;
  health: { status: string; verified_at: string | null };
  sites: Array<{ name: string; host: string; icon_url: string | null }>;
  access: AccessRequirement[];
};

interface ItemRow {
  id: string;
  handle: string;
  name: string;
  description: string;
  category: CategoryId;
  website_url: string | null;
  logo_sha256: string | null;
  availability: 'available' | 'coming_soon';
  created_at: Date;
  updated_at: Date;
  completed_runs: number;
  sites: Array<{ name: string; host: string; icon_sha256: string | null }>;
  ops: Array<{
    id: number;
    name: string;
    label: string;
    /** Read by the detail only (not kept in catalog_items). */
    description?: string;
    cost_credits: number;
    performs_actions: boolean;
    default_version: number;
    access: AccessRequirement[];
    health_status: string;
    verified_at: string | null;
  }>;
}

/** A workflow's item as kept in catalog_items (catalog_item_build()): JSON, so dates are strings. */
type KeptItem = Omit<ItemRow, 'created_at' | 'updated_at' | 'completed_runs'> & { created_at: string; updated_at: string };

/** An item row from a kept item: its run count, and its operations at or under `maxCost` only. */
function keptRow(item: KeptItem, completedRuns: number, maxCost: number | undefined): ItemRow {
  return {
    ...item,
    created_at: new Date(item.created_at),
    updated_at: new Date(item.updated_at),
    completed_runs: completedRuns,
    ops: maxCost === undefined ? item.ops : item.ops.filter((o) => o.cost_credits <= maxCost),
  };
}

/** Item columns of `apis a`: sites, operations (cheaper than maxCost, = opId, after afterId) and runs. */
const itemColumns = (maxCost: string, opId: string, afterId: string) => `
         a.id, a.handle, a.name, a.description, a.category, a.website_url, a.logo_sha256, a.availability,
         a.created_at, a.updated_at, coalesce((SELECT st.completed_runs FROM catalog_api_stats st WHERE st.api_id = a.id), 0) AS completed_runs,
         coalesce((SELECT json_agg(json_build_object('name', s.name, 'host', s.host, 'icon_sha256', s.icon_sha256) ORDER BY s.position)
                     FROM api_sites s WHERE s.api_id = a.id), '[]') AS sites,
         coalesce((SELECT json_agg(json_build_object('id', o.id, 'name', o.name, 'label', o.label, 'description', o.description,
                     'cost_credits', o.cost_credits, 'performs_actions', o.performs_actions, 'default_version', o.default_version,
                     'access', o.access, 'health_status', o.health_status, 'verified_at', o.verified_at) ORDER BY o.id)
                     FROM operations o WHERE o.api_id = a.id AND (${maxCost}::numeric IS NULL OR o.cost_credits <= ${maxCost}::numeric)
                       AND (${opId}::bigint IS NULL OR o.id = ${opId}::bigint) AND o.id > ${afterId}::bigint), '[]') AS ops`;

const ITEM_SQL = `
  SELECT ${itemColumns('$2', '$3', '$4')}
    FROM apis a
   WHERE a.id = ANY($1::bigint[])`;

function toItem(row: ItemRow, baseUrl: string): CatalogItem {
  const sites = row.sites.map((s) => ({ name: s.name, host: s.host, icon_url: iconUrl(baseUrl, s.icon_sha256) }));
  const kinds = new Set(row.ops.map((o) => ((o.access as unknown[]).length > 0 ? 'own' : 'open')));
  return {
    api: row.handle,
    name: row.name,
    description: row.description,
    category: row.category,
    website_url: row.website_url,
    logo_url: iconUrl(baseUrl, row.logo_sha256),
    availability: row.availability,
    visibility: 'public',
    access: kinds.size > 1 ? 'mixed' : kinds.has('own') ? 'own' : 'open',
    is_enabled: true,
    sites,
    completed_runs: Number(row.completed_runs),
    created_at: row.created_at.toISOString(),
    updated_at: row.updated_at.toISOString(),
    operations: row.ops.map((o) => opItem(o, sites)),
  };
}

function opItem(o: ItemRow['ops'][number], sites: CatalogItem['sites']): CatalogItemOperation {
  return {
    id: Number(o.id),
    operation: o.name,
    label: o.label,
    contract_version: o.default_version,
    cost_credits: o.cost_credits,
    performs_actions: o.performs_actions,
    health: { status: o.health_status, verified_at: o.verified_at ? new Date(o.verified_at).toISOString() : null },
    sites,
    access: o.access,
  };
}

/** Catalog items for these API ids, in the given order; operations over `maxCost` left out. */
export async function loadItems(db: Db, ids: number[], opts: { baseUrl: string; maxCost?: number }): Promise<CatalogItem[]> {
  if (ids.length === 0) return [];
  const r = await db.query<ItemRow>(ITEM_SQL, [ids, opts.maxCost ?? null, null, 0]);
  const byId = new Map(r.rows.map((row) => [Number(row.id), row]));
  return ids
    .map((id) => byId.get(id))
    .filter((row): row is ItemRow => row !== undefined && row.ops.length > 0)
    .map((row) => toItem(row, opts.baseUrl));
}

// --- detail ----------------------------------------------------------------------------------

interface OperationCursor {
  v: 1;
  a: string; // handle
  o: number; // last operation id
}

/** One public workflow with its contracts (GET /v1/catalog/detail); null when unknown or private. */
export async function catalogDetail(db: Db, params: CatalogDetailParams & { baseUrl: string }) {
  let afterId = 0;
  if (params.operation_cursor) {
    let c: OperationCursor | undefined;
    try {
      c = unb64(params.operation_cursor) as OperationCursor;
    } catch {
      /* reported below */
    }
    if (!c || c.v !== 1 || typeof c.a !== 'string' || !Number.isSafeInteger(c.o)) throw badParam('operation_cursor', 'is not a cursor returned by this endpoint');
    if (c.a !== params.api) throw badParam('operation_cursor', `belongs to ${c.a}, not ${params.api}`);
    if (params.operation_id !== undefined) throw badParam('operation_cursor', 'cannot be combined with operation_id');
    afterId = c.o;
  }
  const api = await db.query<{ id: string }>(
    `SELECT a.id FROM apis a WHERE a.handle = $1 AND a.visibility = 'public' AND a.status = 'active'`,
    [params.api],
  );
  if (api.rowCount === 0) return null;
  const apiId = Number(api.rows[0]!.id);
  const r = await db.query<ItemRow & { operation_count: number }>(
    `SELECT * FROM (${ITEM_SQL}) i, LATERAL (SELECT count(*)::int AS operation_count FROM operations WHERE api_id = i.id) n`,
    [[apiId], null, params.operation_id ?? null, afterId],
  );
  const row = r.rows[0]!;
  if (params.operation_id !== undefined && row.ops.length === 0) {
    throw new ServiceError('unknown_operation', `${params.api} has no operation with id ${params.operation_id}`, { param: 'operation_id' });
  }
  const page = row.ops.slice(0, DETAIL_OPERATIONS_PAGE);
  const more = row.ops.length > DETAIL_OPERATIONS_PAGE;
  const ids = page.map((o) => Number(o.id));
  const versions = await db.query<{ operation_id: string; version: number; input_schema: JsonSchema; output_schema: JsonSchema; examples: Array<{ title?: string; input: Record<string, unknown>; output: unknown }>; available: boolean }>(
    `SELECT operation_id, version, input_schema, output_schema, examples, available FROM operation_versions
      WHERE operation_id = ANY($1::bigint[]) ORDER BY operation_id, version`,
    [ids],
  );
  const item = toItem({ ...row, ops: page }, params.baseUrl);
  const operations = item.operations.map((op, i) => {
    const dbOp = page[i]!;
    const vs = versions.rows.filter((v) => Number(v.operation_id) === op.id);
    const def = vs.find((v) => v.version === op.contract_version);
    return {
      ...op,
      operation_id: op.id,
      description: dbOp.description ?? '',
      input_schema: def?.input_schema ?? {},
      output_schema: def?.output_schema ?? {},
      examples: def?.examples ?? [],
      selectable_fields: def ? selectableFields(def.output_schema) : [],
      versions: vs.filter((v) => v.available).map((v) => v.version),
    };
  });
  const last = page[page.length - 1];
  return {
    ...item,
    operation_count: row.operation_count,
    operations,
    next_operation_cursor: more && last ? b64({ v: 1, a: params.api, o: Number(last.id) } satisfies OperationCursor) : null,
  };
}

// --- suggest ---------------------------------------------------------------------------------

export type Suggestion = {
  api: string;
  name: string;
  logo_url: string | null;
  category: CategoryId;
};

/**
 * Names and logos for a search box: name or handle prefix first, then a word prefix (both by
 * popularity), then near misses (trigram word similarity, then popularity). Reads the narrow
 * `catalog_names` (listed workflows with operations, each with its popularity: migration
 * 1700000003100) and fetches the few rows shown from apis.
 *
 * Each class's matches are read whole and sorted (`-popularity`, an order no index has): walking
 * the popularity index until enough names match is fast for a common prefix but reads every name
 * when the planner overestimates a rare one (12 ms at 10,000 workflows, measured). The name
 * prefixes are an index-only range of `catalog_names_prefix`; the word prefixes (trigram index)
 * are read only when the name prefixes leave room (their LIMIT is then above 0; at 0 that part
 * of the plan is never run).
 */
export async function suggest(db: Db, opts: { query?: string; limit?: number; baseUrl: string }): Promise<Suggestion[]> {
  const limit = opts.limit ?? SUGGEST_LIMIT_DEFAULT;
  const text = queryWords(opts.query).join(' ');
  // The ranked few (class, popularity, id), then their names and logos from apis.
  const show = (ranked: string) => `
    WITH ${ranked}
    SELECT a.handle, a.name, a.logo_sha256, a.category FROM m JOIN apis a ON a.id = m.api_id ORDER BY m.cls, m.rank, m.api_id`;
  let rows: Array<{ handle: string; name: string; logo_sha256: string | null; category: CategoryId }>;
  if (text === '') {
    // The most popular: a walk of catalog_names_popular that stops at the limit.
    rows = (await db.query(prepared(show('m AS (SELECT n.api_id, 0 AS cls, -n.popularity AS rank FROM catalog_names n ORDER BY n.popularity DESC, n.api_id LIMIT $1)'), [limit]))).rows;
  } else {
    // names is "name handle-words", lower case; a typed prefix matches its start or any word.
    const like = text.replace(/[\\%_]/g, '\\$&');
    const starts = [`${like}%`, `% ${like}%`];
    const ranked = show(`name_starts AS MATERIALIZED (
        SELECT n.api_id, 0 AS cls, -n.popularity AS rank FROM catalog_names n WHERE n.names LIKE $2 ORDER BY 3, 1 LIMIT $1
      ), word_starts AS (
        SELECT n.api_id, 1 AS cls, -n.popularity AS rank FROM catalog_names n WHERE n.names LIKE $3 AND n.names NOT LIKE $2
         ORDER BY 3, 1 LIMIT $1 - (SELECT count(*) FROM name_starts)
      ), m AS (SELECT * FROM name_starts UNION ALL SELECT * FROM word_starts)`);
    rows = (await db.query({ text: ranked, values: [limit, ...starts] })).rows;
    if (rows.length < limit) {
      // Near misses: the most similar names first (ranked by -similarity as the class).
      const similar = show(`m AS (
        SELECT n.api_id, -word_similarity($4, n.names) AS cls, -n.popularity AS rank FROM catalog_names n
         WHERE n.names %> $4 AND NOT (n.names LIKE $2 OR n.names LIKE $3) ORDER BY 2, 3, 1 LIMIT $1)`);
      const more = await db.query({ text: similar, values: [limit - rows.length, ...starts, text] });
      rows = rows.concat(more.rows);
    }
  }
  return rows.map((x) => ({ api: x.handle, name: x.name, logo_url: iconUrl(opts.baseUrl, x.logo_sha256), category: x.category }));
}

// --- sitemap ---------------------------------------------------------------------------------

export async function sitemap(db: Db, opts: { page: number; baseUrl: string }) {
  const offset = (opts.page - 1) * SITEMAP_PAGE_SIZE;
  const [rows, total] = await Promise.all([
    db.query(
      `SELECT a.handle, a.name, a.category, a.updated_at, s.terms
         FROM catalog_search s JOIN apis a ON a.id = s.api_id
        WHERE a.visibility = 'public' AND a.status = 'active' AND s.operation_count > 0
        ORDER BY a.id LIMIT $1 OFFSET $2`,
      [SITEMAP_PAGE_SIZE, offset],
    ),
    db.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM catalog_search s JOIN apis a ON a.id = s.api_id
        WHERE a.visibility = 'public' AND a.status = 'active' AND s.operation_count > 0`,
    ),
  ]);
  const n = total.rows[0]!.n;
  return {
    items: rows.rows.map((x) => ({
      api: x.handle as string,
      name: x.name as string,
      url: `${opts.baseUrl}/v1/catalog/detail?api=${encodeURIComponent(x.handle)}`,
      category: x.category as CategoryId,
      updated_at: (x.updated_at as Date).toISOString(),
      terms: x.terms as string[],
    })),
    page: opts.page,
    page_size: SITEMAP_PAGE_SIZE,
    total: n,
    next_page: offset + SITEMAP_PAGE_SIZE < n ? opts.page + 1 : null,
  };
}
