// The offline prompt router (issue 10): PostgreSQL retrieval within the scope, a cheap rerank
// with abstention, and schema-driven slot filling. See README.md in this folder.
import type { Db } from '../db/pool.ts';
import { fillInput, targetVocabulary } from './fill.ts';
import { readPrompt, withoutZone } from './prompt-facts.ts';
import { rerank } from './rank.ts';
import { retrieve } from './retrieve.ts';
import type { FillResult, FillTarget, PromptAttachment, PromptRouter, RankResult, RouteScope } from './types.ts';

export type * from './types.ts';
// The optional LLM path (llm.ts), used by the query service beside this router.
export { createLlmRouter, type LlmRouter } from './llm.ts';

export interface RouterDeps {
  db: Db;
  /** Reference time for relative dates (tests); the clock when left out. */
  now?: () => Date;
}

/** How much of a prompt ranking reads: a 10,000-character prompt ranks in the time of a short one. */
export const RANK_CHARS = 1_000;

/** Context attachments inform ranking only: their name and the start of their text. */
function rankText(prompt: string, attachments: PromptAttachment[] = []): string {
  const context = attachments.filter((a) => a.purpose === 'context').map((a) => `${a.name} ${(a.text ?? '').slice(0, 500)}`);
  return [prompt, ...context].join('\n');
}

/** The router, plus `warmUp()`: the first date parse compiles chrono-node's grammar (hundreds of ms); do it at start, not in a caller's request. */
export type OfflineRouter = PromptRouter & { warmUp(): void };

export function createRouter(deps: RouterDeps): OfflineRouter {
  const now = deps.now ?? (() => new Date());
  return {
    warmUp() {
      readPrompt('books by "Jane" for 2 days from tomorrow, Europe/Paris', { now: now() });
    },
    async rank(prompt: string, scope: RouteScope, attachments?: PromptAttachment[]): Promise<RankResult> {
      // Ranking reads the start of a long prompt (what is asked comes first); filling reads all of it.
      const head = prompt.slice(0, RANK_CHARS);
      const text = rankText(head, attachments);
      const rows = await retrieve(deps.db, withoutZone(text), scope);
      return rerank(rows, readPrompt(head, { now: now() }), text);
    },
    async fill(target: FillTarget, prompt: string, attachments?: PromptAttachment[], opts?: { timeZone?: string; now?: Date }): Promise<FillResult> {
      const facts = readPrompt(prompt, { timeZone: opts?.timeZone, now: opts?.now ?? now() });
      const vocabulary = targetVocabulary(target.operation, target.label ?? '', target.labels ?? [], target.input_schema);
      return fillInput(target.input_schema, facts, vocabulary, attachments);
    },
  };
}
