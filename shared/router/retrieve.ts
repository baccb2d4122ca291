// Candidates for a prompt from PostgreSQL: full text over each operation's routing document
// (migrations/1700000001200_router_documents.sql) plus near words (typos) through the trigram
// vocabulary, with every scope filter in the WHERE clause, so nothing out of scope is ranked.
import type { JsonSchema } from '../catalog/types.ts';
import type { Db } from '../db/pool.ts';
import type { RouteScope } from './types.ts';
import { synonymsOf } from './synonyms.ts';
import { STOP_WORDS, words } from './text.ts';

export interface RouteRow {
  operation_id: string;
  api: string;
  visibility: 'public' | 'private';
  api_name: string;
  api_description: string;
  sites: string[];
  operation: string;
  label: string;
  description: string;
  labels: string[];
  performs_actions: boolean;
  input_schema: JsonSchema;
  examples: { title?: string; input: Record<string, unknown> }[];
  /** PostgreSQL's full-text rank of the prompt's words in the document. */
  rank: number;
}

const MAX_WORDS = 12;
const NEAR_WORDS = 4;
const NEAR_MIN_SIMILARITY = 0.45;
export const CANDIDATES = 24;
/** Hits kept after the API-level filters, before the version check (an unavailable default version is rare). */
const PREFILTER = 4 * CANDIDATES;

/** The prompt's content words for retrieval: no stop words, no numbers or ids, at most 12. */
export function retrievalWords(prompt: string): string[] {
  const ws = words(prompt).filter((w) => !STOP_WORDS.has(w) && /^[a-z]/.test(w) && w.length >= 2 && w.length <= 40);
  return [...new Set(ws.flatMap((w) => [w, ...synonymsOf(w).map((x) => x.word)]))].slice(0, MAX_WORDS);
}

/** Binds parameters as $1, $2… in order. */
function binder() {
  const params: unknown[] = [];
  const p = (v: unknown) => {
    params.push(v);
    return `$${params.length}`;
  };
  return { params, p };
}

/** The scope filters that are the API's (`api`, `visibility`, `allowed_apis`, `blocked_apis`, public + the caller's own private, active and available) over `a` (apis). */
function apiWhere(scope: RouteScope, p: (v: unknown) => string): string {
  const where = [`a.status = 'active'`, `a.availability = 'available'`, `(a.visibility = 'public' OR a.owner_org_id = ${p(scope.orgId)})`];
  if (scope.api) where.push(`a.handle = ${p(scope.api)}`);
  if (scope.visibility) where.push(`a.visibility = ${p(scope.visibility)}`);
  if (scope.allowedApis) where.push(`a.handle = ANY(${p(scope.allowedApis)}::text[])`);
  if (scope.blockedApis?.length) where.push(`NOT (a.handle = ANY(${p(scope.blockedApis)}::text[]))`);
  return where.join(' AND ');
}

/** Every scope filter: the API's, and the default version available, over `a` (apis) and `v` (operation_versions). */
function scopeWhere(scope: RouteScope, p: (v: unknown) => string): string {
  return `${apiWhere(scope, p)} AND v.available`;
}

const ROW_COLUMNS = `o.id::text AS operation_id, a.handle AS api, a.visibility, a.name AS api_name, a.description AS api_description,
           ARRAY(SELECT s.name FROM api_sites s WHERE s.api_id = a.id ORDER BY s.position) AS sites,
           o.name AS operation, o.label, o.description, o.labels, o.performs_actions,
           v.input_schema, v.examples`;

export async function retrieve(db: Db, prompt: string, scope: RouteScope): Promise<RouteRow[]> {
  const ws = retrievalWords(prompt);
  if (ws.length === 0) return [];
  const { params, p } = binder();
  const wordsP = p(ws);
  // Prefix match for words of 4+ letters ("forecasts" → forecast:*, stemmed by the english config).
  const tq = `to_tsquery('english', ${p(ws.map((w) => (w.length >= 4 ? `${w}:*` : w)).join(' | '))})`;
  // A private API of the caller shadows a public one of the same handle only when asked by
  // visibility; otherwise both are candidates and the ranking decides.
  //
  // Typos: a prompt word in the vocabulary is taken as typed, any other is expanded to its nearest
  // few words. The vocabulary is the listed (public, active) workflows' words (`router_keywords`,
  // migrations/1700000002900_router_keywords_listed.sql) plus those of the caller's own active
  // private workflows, never another organization's private words: whether a word expands shows in
  // the candidates, so those would tell any caller which words someone's private workflow uses.
  const sql = `
    WITH pw AS (SELECT unnest(${wordsP}::text[]) AS w),
    own AS MATERIALIZED (
      SELECT DISTINCT w.word FROM apis a
        JOIN router_documents d ON d.api_id = a.id
        CROSS JOIN LATERAL unnest(d.words) AS w(word)
       WHERE a.owner_org_id = ${p(scope.orgId)} AND a.visibility = 'private' AND a.status = 'active'),
    near AS (
      SELECT coalesce(array_agg(DISTINCT n.word), '{}') AS ws FROM pw
        CROSS JOIN LATERAL (
          SELECT x.word FROM (
              SELECT k.word FROM router_keywords k WHERE k.word % pw.w
              UNION
              SELECT o.word FROM own o WHERE o.word % pw.w) x
           WHERE NOT EXISTS (SELECT 1 FROM router_keywords e WHERE e.word = pw.w)
             AND NOT EXISTS (SELECT 1 FROM own e WHERE e.word = pw.w)
             AND similarity(x.word, pw.w) >= ${NEAR_MIN_SIMILARITY}
           ORDER BY similarity(x.word, pw.w) DESC, x.word LIMIT ${NEAR_WORDS}) n),
    hits AS (
      SELECT d.operation_id, d.api_id,
             ts_rank(d.tsv, ${tq})
               -- near words (typos) are rare: skip the per-row intersection without them
               + CASE WHEN cardinality(near.ws) = 0 THEN 0 ELSE 0.3 * cardinality(ARRAY(SELECT unnest(d.words) INTERSECT SELECT unnest(near.ws))) END AS rank
        FROM router_documents d CROSS JOIN near
       WHERE d.tsv @@ ${tq} OR d.words && near.ws),
    -- The best hits within the API-level filters first, then the rows of those few only: at
    -- 10,000 operations a common word matches thousands, and joining them all dominated the query.
    top AS (
      SELECT h.operation_id, h.rank FROM hits h JOIN apis a ON a.id = h.api_id
       WHERE ${apiWhere(scope, p)}
       ORDER BY h.rank DESC, h.operation_id
       LIMIT ${PREFILTER})
    SELECT ${ROW_COLUMNS}, t.rank
      FROM top t
      JOIN operations o ON o.id = t.operation_id
      JOIN apis a ON a.id = o.api_id
      JOIN operation_versions v ON v.operation_id = o.id AND v.version = o.default_version
     WHERE ${scopeWhere(scope, p)}
     ORDER BY t.rank DESC, o.id
     LIMIT ${CANDIDATES}`;
  const r = await db.query<RouteRow>(sql, params);
  return r.rows;
}

/**
 * The rows of operations the dense scan found, by id, under the same scope filters as `retrieve`
 * (the in-memory scope check is a prefilter; this is the authority), in the order asked.
 */
export async function rowsByIds(db: Db, ids: string[], scope: RouteScope): Promise<RouteRow[]> {
  if (ids.length === 0) return [];
  const { params, p } = binder();
  const idsP = p(ids);
  const r = await db.query<RouteRow>(
    `SELECT ${ROW_COLUMNS}, 0::real AS rank
       FROM operations o
       JOIN apis a ON a.id = o.api_id
       JOIN operation_versions v ON v.operation_id = o.id AND v.version = o.default_version
      WHERE o.id = ANY(${idsP}::bigint[]) AND ${scopeWhere(scope, p)}`,
    params,
  );
  const order = new Map(ids.map((id, i) => [id, i]));
  return r.rows.sort((x, y) => order.get(x.operation_id)! - order.get(y.operation_id)!);
}
