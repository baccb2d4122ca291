// The offline prompt router (issue 10): PostgreSQL retrieval within the scope, a cheap rerank
// with abstention, and schema-driven slot filling. See README.md in this folder.
import type { Db } from '../db/pool.ts';
import { loadEmbedder, type Embedder } from './embeddings.ts';
import { fillInput, targetVocabulary } from './fill.ts';
import { denseRetrieval, hybridCandidates, type StageTimes } from './hybrid.ts';
import { readPrompt, withoutZone } from './prompt-facts.ts';
import { rerank } from './rank.ts';
import type { FillResult, FillTarget, PromptAttachment, PromptRouter, RankResult, RouteScope } from './types.ts';

export type * from './types.ts';
// The optional LLM path (llm.ts), used by the query service beside this router.
export { createLlmRouter, type LlmRouter } from './llm.ts';
export type { StageTimes } from './hybrid.ts';

export interface RouterDeps {
  db: Db;
  /** Reference time for relative dates (tests); the clock when left out. */
  now?: () => Date;
  /** Dense embeddings: `false` ranks lexically only; left out, the model in .tools/ (embeddings.ts). */
  embeddings?: false | (() => Promise<Embedder | null>);
  /** Told where each prompt's ranking time went (the bench). */
  onStages?: (t: StageTimes) => void;
}

/** How much of a prompt ranking reads: a 10,000-character prompt ranks in the time of a short one. */
export const RANK_CHARS = 1_000;

/** Context attachments inform ranking only: their name and the start of their text. */
function rankText(prompt: string, attachments: PromptAttachment[] = []): string {
  const context = attachments.filter((a) => a.purpose === 'context').map((a) => `${a.name} ${(a.text ?? '').slice(0, 500)}`);
  return [prompt, ...context].join('\n');
}

/**
 * The router, plus `warmUp()`: the first date parse compiles chrono-node's grammar (hundreds of
 * ms), and the embedding model and the operations' vectors load in the background; do it at start,
 * not in a caller's request. Ranking never waits for it: it is lexical until the vectors are read.
 * `ready()` resolves when every operation has its vector (true when embeddings are in use).
 */
export type OfflineRouter = PromptRouter & { warmUp(): void; ready(): Promise<boolean>; close(): Promise<void> };

export function createRouter(deps: RouterDeps): OfflineRouter {
  const now = deps.now ?? (() => new Date());
  const dense = denseRetrieval(deps.db, deps.embeddings ?? (() => loadEmbedder()));
  return {
    warmUp() {
      readPrompt('books by "Jane" for 2 days from tomorrow, Europe/Paris', { now: now() });
      void dense.start();
    },
    ready: () => dense.settled(),
    close: () => dense.close(),
    async rank(prompt: string, scope: RouteScope, attachments?: PromptAttachment[]): Promise<RankResult> {
      const t0 = performance.now();
      const times: StageTimes = { embed_ms: 0, lexical_ms: 0, dense_ms: 0, fill_ms: 0, rerank_ms: 0, total_ms: 0, dense: false };
      // Ranking reads the start of a long prompt (what is asked comes first); filling reads all of it.
      const head = prompt.slice(0, RANK_CHARS);
      const text = rankText(head, attachments);
      const { rows, cosines } = await hybridCandidates(deps.db, dense.current(), withoutZone(text), scope, times);
      const t1 = performance.now();
      const result = rerank(rows, readPrompt(head, { now: now() }), text, cosines);
      times.rerank_ms = performance.now() - t1;
      times.total_ms = performance.now() - t0;
      deps.onStages?.(times);
      return result;
    },
    async fill(target: FillTarget, prompt: string, attachments?: PromptAttachment[], opts?: { timeZone?: string; now?: Date }): Promise<FillResult> {
      const facts = readPrompt(prompt, { timeZone: opts?.timeZone, now: opts?.now ?? now() });
      const vocabulary = targetVocabulary(target.operation, target.label ?? '', target.labels ?? [], target.input_schema);
      return fillInput(target.input_schema, facts, vocabulary, attachments);
    },
  };
}
