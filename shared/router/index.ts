// The offline prompt router (issue 10): PostgreSQL retrieval within the scope, a cheap rerank
// with abstention, and schema-driven slot filling. See README.md in this folder.
import type { Db } from '../db/pool.ts';
import { cosine, loadEmbedder, OperationVectors, type Embedder } from './embeddings.ts';
import { fillInput, targetVocabulary } from './fill.ts';
import { readPrompt, withoutZone } from './prompt-facts.ts';
import { rerank } from './rank.ts';
import { everyOperation, retrieve, type RouteRow } from './retrieve.ts';
import type { FillResult, FillTarget, PromptAttachment, PromptRouter, RankResult, RouteScope } from './types.ts';

export type * from './types.ts';

export interface RouterDeps {
  db: Db;
  /** Reference time for relative dates (tests); the clock when left out. */
  now?: () => Date;
  /** Dense embeddings: `false` ranks lexically only; left out, the model in .tools/ (embeddings.ts). */
  embeddings?: false | (() => Promise<Embedder | null>);
}

/** Operations embedded at start (in the background): past this, the rest are embedded as prompts meet them. */
const WARM_OPERATIONS = 20_000;

/** How much of a prompt ranking reads: a 10,000-character prompt ranks in the time of a short one. */
export const RANK_CHARS = 1_000;

/** Context attachments inform ranking only: their name and the start of their text. */
function rankText(prompt: string, attachments: PromptAttachment[] = []): string {
  const context = attachments.filter((a) => a.purpose === 'context').map((a) => `${a.name} ${(a.text ?? '').slice(0, 500)}`);
  return [prompt, ...context].join('\n');
}

/**
 * The router, plus `warmUp()`: the first date parse compiles chrono-node's grammar (hundreds of
 * ms), and the embedding model loads and embeds the catalog in the background; do it at start,
 * not in a caller's request. `ready()` resolves once that background work is done (true when
 * embeddings are in use); ranking never waits for it, it ranks lexically until then.
 */
export type OfflineRouter = PromptRouter & { warmUp(): void; ready(): Promise<boolean> };

export function createRouter(deps: RouterDeps): OfflineRouter {
  const now = deps.now ?? (() => new Date());
  let embedder: Embedder | null = null;
  let vectors: OperationVectors | null = null;
  let warming: Promise<boolean> | undefined;
  const warmEmbeddings = (): Promise<boolean> =>
    (warming ??= (async () => {
      if (deps.embeddings === false) return false;
      const e = await (deps.embeddings ?? loadEmbedder)();
      if (!e) return false;
      const v = new OperationVectors(e);
      await v.add(await everyOperation(deps.db, WARM_OPERATIONS));
      [embedder, vectors] = [e, v];
      return true;
    })().catch((err: Error) => {
      process.emitWarning(`prompt router: embeddings unavailable (${err.message}); ranking lexically`);
      return false;
    }));
  /** Cosines of the prompt with each row, or undefined (lexical ranking) until every row has a vector. */
  const denseScores = async (prompt: Promise<Float32Array[]> | undefined, rows: RouteRow[]): Promise<number[] | undefined> => {
    if (!prompt || !vectors || rows.length === 0) return undefined;
    const ops = vectors.lookup(rows);
    const [p] = await prompt;
    return ops?.map((o) => cosine(p!, o));
  };
  return {
    warmUp() {
      readPrompt('books by "Jane" for 2 days from tomorrow, Europe/Paris', { now: now() });
      void warmEmbeddings();
    },
    ready: () => warmEmbeddings(),
    async rank(prompt: string, scope: RouteScope, attachments?: PromptAttachment[]): Promise<RankResult> {
      // Ranking reads the start of a long prompt (what is asked comes first); filling reads all of it.
      const head = prompt.slice(0, RANK_CHARS);
      const text = rankText(head, attachments);
      // The prompt is embedded (on onnxruntime's thread) while PostgreSQL retrieves.
      const promptVector = embedder?.embed([withoutZone(text)]);
      promptVector?.catch(() => {});
      const rows = await retrieve(deps.db, withoutZone(text), scope);
      return rerank(rows, readPrompt(head, { now: now() }), text, await denseScores(promptVector, rows).catch(() => undefined));
    },
    async fill(target: FillTarget, prompt: string, attachments?: PromptAttachment[], opts?: { timeZone?: string; now?: Date }): Promise<FillResult> {
      const facts = readPrompt(prompt, { timeZone: opts?.timeZone, now: opts?.now ?? now() });
      const vocabulary = targetVocabulary(target.operation, target.label ?? '', target.labels ?? [], target.input_schema);
      return fillInput(target.input_schema, facts, vocabulary, attachments);
    },
  };
}
