// Hybrid candidates for a prompt (issue 10): PostgreSQL's lexical candidates (retrieve.ts) and the
// dense top-k of the in-memory vector matrix (vector-index.ts) fused by reciprocal rank, so an
// operation the prompt names in none of its words (a paraphrase) is still a candidate. The prompt
// is embedded while PostgreSQL retrieves. Dense-only candidates are read back from PostgreSQL under
// the scope's filters (rowsByIds) before anything is ranked.
import type { Db } from '../db/pool.ts';
import type { Embedder } from './embeddings.ts';
import { CANDIDATES, retrieve, rowsByIds, type RouteRow } from './retrieve.ts';
import type { RouteScope } from './types.ts';
import { VectorIndex } from './vector-index.ts';

/** Dense candidates per prompt, before fusion. */
export const DENSE_K = 8;
/** Reciprocal-rank fusion's constant (Cormack et al. 2009): 1 / (K + rank) per list. */
const RRF_K = 60;

/** Where a prompt's ranking time went, in ms (embed runs beside the lexical SQL, so they overlap). */
export interface StageTimes {
  embed_ms: number;
  lexical_ms: number;
  dense_ms: number;
  fill_ms: number;
  rerank_ms: number;
  total_ms: number;
  dense: boolean;
}

export interface Candidates {
  rows: RouteRow[];
  /** Each row's cosine with the prompt, when every row has a vector; else ranking is lexical. */
  cosines?: number[];
}

const since = (t0: number) => performance.now() - t0;

/** Fuses ranked id lists: ids in both lists rise; ties keep the first list's order. */
export function reciprocalRankFusion(lists: string[][], limit: number): string[] {
  const score = new Map<string, number>();
  for (const list of lists) list.forEach((id, i) => score.set(id, (score.get(id) ?? 0) + 1 / (RRF_K + i + 1)));
  return [...score.keys()].sort((a, b) => score.get(b)! - score.get(a)!).slice(0, limit);
}

export async function hybridCandidates(
  db: Db,
  dense: { embedder: Embedder; index: VectorIndex } | null,
  text: string,
  scope: RouteScope,
  times: StageTimes,
): Promise<Candidates> {
  const t0 = performance.now();
  const lexical = retrieve(db, text, scope).then((rows) => ((times.lexical_ms = since(t0)), rows));
  if (!dense) return { rows: await lexical };
  dense.index.maybeRefresh();
  // Embed and scan while PostgreSQL runs the lexical query: the critical path is the longer of
  // the two, not their sum. (The lexical answer usually arrives first: the prompt's embedding
  // takes ~6 ms on an idle core.)
  const denseSide = dense.embedder.embed([text]).then(
    ([q]) => {
      times.embed_ms = since(t0);
      const t1 = performance.now();
      const hits = dense.index.scan(q!, scope, DENSE_K);
      times.dense_ms = since(t1);
      return { q: q!, hits };
    },
    // A failed embedding ranks this prompt lexically; it never fails the request.
    () => null,
  );
  const [lex, found] = await Promise.all([lexical, denseSide]);
  if (!found) return { rows: lex };
  const { q, hits } = found;
  // Only dense hits the lexical query did not return are read (often none: no round trip).
  const t2 = performance.now();
  const have = new Set(lex.map((r) => r.operation_id));
  const missing = hits.map((h) => h.operationId).filter((id) => !have.has(id));
  const extra = missing.length > 0 ? await rowsByIds(db, missing, scope) : [];
  times.fill_ms = since(t2);

  const byId = new Map([...extra, ...lex].map((r) => [r.operation_id, r]));
  // A dense hit that PostgreSQL's filters refused is not in byId and drops out here.
  const fused = reciprocalRankFusion([lex.map((r) => r.operation_id), hits.map((h) => h.operationId).filter((id) => byId.has(id))], CANDIDATES);
  const rows = fused.map((id) => byId.get(id)!);
  const cosines = rows.map((r) => dense.index.cosine(q, r.operation_id));
  if (cosines.some((c) => c === undefined)) return { rows };
  times.dense = true;
  return { rows, cosines: cosines as number[] };
}

/**
 * The dense side's lifecycle: the model loads and the vector index reads (and, for operations
 * without a stored vector, embeds) in the background from `start()`; until the index has read
 * PostgreSQL's vectors, ranking is lexical.
 */
/** How long close() waits for a model that is still loading. */
const CLOSE_WAIT_MS = 5_000;

export function denseRetrieval(db: Db, load: false | (() => Promise<Embedder | null>)) {
  let ready: { embedder: Embedder; index: VectorIndex } | null = null;
  let loaded: Embedder | null = null;
  let closed = false;
  let starting: Promise<boolean> | undefined;
  const start = (): Promise<boolean> =>
    (starting ??= (async () => {
      if (load === false || closed) return false;
      const embedder = await load();
      if (!embedder) return false;
      loaded = embedder;
      if (closed) {
        await embedder.close?.();
        return false;
      }
      const index = new VectorIndex(db, embedder);
      await index.refresh();
      ready = { embedder, index };
      return true;
    })().catch((err: Error) => {
      process.emitWarning(`prompt router: embeddings unavailable (${err.message}); ranking lexically`, { code: 'WQS_ROUTER_LEXICAL' });
      return false;
    }));
  return {
    start,
    /** The model and index once loaded, else null (rank lexically). */
    current: () => ready,
    /** Ends the model's thread (the process may then exit); ranking is lexical from here on. */
    async close(): Promise<void> {
      closed = true;
      ready = null;
      // A model still loading is closed when its load ends (see start); wait for that, within bounds.
      if (starting) await Promise.race([starting.catch(() => false), new Promise((r) => setTimeout(r, CLOSE_WAIT_MS).unref())]);
      await loaded?.close?.();
    },
    /** Resolves when every operation has its vector (tests, the bench). */
    async settled(): Promise<boolean> {
      if (!(await start())) return false;
      await ready!.index.refresh();
      await ready!.index.drain();
      return true;
    },
  };
}
