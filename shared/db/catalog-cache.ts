// Search pages kept per pool, each with the catalog cache generation read in the same statement
// that computed it (migrations/1700000001500_catalog_rank_cache.sql; only a change to a public
// workflow bumps it since 1700000002400_catalog_private_apart.sql). A kept page is served
// again only after one cheap statement reads the same generation — nothing a page shows or ranks
// by has committed a change since — and, in that same statement, the completed-run counts, which
// move with every run and are never kept. One organization's data never enters: the catalog
// search reads listed (public, active) workflows only, and nothing here depends on the caller.
import type { Db } from './pool.ts';
import { Lru } from '../lru.ts';

/**
 * Pages kept per pool (least recently used dropped first): a bound on memory. A page of 60 items
 * holds about 67 KB of heap (measured), one of 100 about 110 KB: at most ~11 MB per process.
 */
export const PAGE_CACHE_SIZE = 100;

export interface KeptPage<T> {
  gen: string;
  ids: number[];
  value: T;
}

/** Kept pages, least recently used dropped first. */
export class PageCache<T> extends Lru<string, KeptPage<T>> {
  constructor(size = PAGE_CACHE_SIZE) {
    super(size);
  }
}

// Per pool: tests and the bench run several databases in one process, and a generation number
// means nothing outside its own database.
const caches = new WeakMap<Db, PageCache<unknown>>();
export function pageCacheOf<T>(db: Db): PageCache<T> {
  let c = caches.get(db);
  if (!c) caches.set(db, (c = new PageCache<unknown>()));
  return c as PageCache<T>;
}

/** The generation and completed-run counts (in `ids` order) in one snapshot. */
const CHECK_SQL = `
  SELECT g.gen::text AS gen,
         ARRAY(SELECT coalesce(st.completed_runs, 0) FROM unnest($1::bigint[]) WITH ORDINALITY u(id, i)
                 LEFT JOIN catalog_api_stats st ON st.api_id = u.id ORDER BY u.i) AS runs
    FROM catalog_cache_generation g`;

/** The current generation and run counts, or null when `gen` is no longer current. */
export async function checkKept(db: Db, gen: string, ids: number[]): Promise<number[] | null> {
  const r = await db.query<{ gen: string; runs: Array<number | string> }>({ name: 'catalog_cache_check', text: CHECK_SQL, values: [ids] });
  const row = r.rows[0];
  if (!row || row.gen !== gen) return null;
  return row.runs.map(Number);
}

/** SQL for the generation, to read in the statement that computes a page (same snapshot). */
export const GENERATION_SQL = '(SELECT gen::text FROM catalog_cache_generation)';
