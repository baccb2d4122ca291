// Prompt mode (issue 10): from a validated prompt-mode request to the operation and input a direct
// query would carry. Attachments are the caller's own unexpired files; the router ranks within the
// scope and abstains when unsure; it fills the input without inventing values. Nothing here claims,
// reserves or runs: every refusal is free and leaves no request row. The query service then checks
// the filled input with the operation's schema and runs it exactly like direct mode.
import { z } from 'zod';
import { ServiceError } from '../../../shared/errors.ts';
import { resolveOperation, type ResolvedOperation } from '../../../shared/db/catalog.ts';
import type { RoutingAudit } from '../../../shared/db/requests.ts';
import type { Db } from '../../../shared/db/pool.ts';
import type { QueryRequest } from '../../../shared/schemas/query.ts';
import type { Candidate, FillResult, FillTarget, PromptAttachment, PromptRouter, RouteScope } from '../../../shared/router/types.ts';
import { llmMayAnswer, llmVetoesAction, type LlmRouter } from '../../../shared/router/llm.ts';

/** A successful prompt search costs this much on top of the operation's own price (spec: Credits). */
export const PROMPT_SEARCH_CREDITS = 5;

/** A filled input must be plain JSON, as a direct query's body is (no Date or undefined slips through). */
const FilledInput = z.record(z.string(), z.json());

/** What routing decided: run `op` with `input`; `routing` is recorded with the request. */
export interface PromptPlan {
  input: z.infer<typeof FilledInput>;
  routing: RoutingAudit;
}

/** The router is created on first use (it loads its index and model) and shared afterwards. */
export type RouterSource = () => Promise<PromptRouter>;

const TEXT_TYPES = /^(text\/|application\/(json|xml|csv|x-ndjson)\b)/;
/** TEXT_TYPES in PostgreSQL's regular expressions (`\M` ends a word there as `\b` does here): a file of another type has no bytes read. */
const TEXT_TYPES_SQL = '^(text/|application/(json|xml|csv|x-ndjson)\\M)';
/**
 * A file's text, when it is UTF-8 text; bytes are never handed to the router. `bytes` may be the
 * start of the file only: a character cut at its end is left out (streamed decoding), not an error.
 */
function textOf(contentType: string, bytes: Buffer, cut: boolean): string | null {
  if (!TEXT_TYPES.test(contentType)) return null;
  try {
    return new TextDecoder('utf-8', { fatal: true }).decode(bytes, { stream: cut });
  } catch {
    return null;
  }
}

/**
 * How much of an attachment is read (a file may be 10 MB, and four may be attached, the same one
 * four times even). Only the first `input` attachment's text can fill the input
 * (shared/router/fill.ts): it is read up to what a query can carry, MAX_WORKFLOW_INPUT_BYTES, and a
 * little beyond, so the text is either all of it or already too large to run (413
 * payload_too_large, as the whole text would be) and the rest is never loaded. Every other
 * attachment (a `context` file, a later `input` file) informs ranking with the start of its text
 * at most (500 characters, shared/router/index.ts): 2,000 bytes hold them. A file listed more than
 * once is read once, as far as its furthest use; a file that is not text has no bytes read at all.
 */
export const CONTEXT_TEXT_BYTES = 2_000;
const INPUT_TEXT_MARGIN_BYTES = 1_024;

const publicCandidate = (c: Candidate) => ({ api: c.api, operation: c.operation, label: c.label, score: round(c.score) });
const round = (n: number) => Math.round(n * 1000) / 1000;

export class PromptRouting {
  private router?: Promise<PromptRouter>;

  constructor(private readonly deps: { db: Db; router?: RouterSource; llm?: LlmRouter; maxInputBytes: number }) {}

  private async getRouter(): Promise<PromptRouter> {
    if (!this.deps.router)
      throw new ServiceError('feature_unavailable', 'Prompt mode is not available on this deployment; send api, operation and input (direct mode)', { param: 'prompt' });
    // A failed start is not cached: the next prompt tries again.
    this.router ??= this.deps.router().catch((err) => {
      this.router = undefined;
      throw err;
    });
    try {
      return await this.router;
    } catch {
      throw new ServiceError('catalog_unavailable', 'The prompt router cannot start right now; retry, or use direct mode', { headers: { 'retry-after': '5' } });
    }
  }

  /** Route and fill; throws the catalog's errors (nothing charged, no request row). */
  async plan(orgId: string, q: QueryRequest): Promise<{ op: ResolvedOperation; plan: PromptPlan }> {
    const prompt = q.prompt!;
    const attachments = await this.attachments(orgId, q.attachments ?? []);
    if (q.api !== undefined) await this.checkHandle(orgId, q.api, q.visibility);
    const router = await this.getRouter();
    const scope: RouteScope = { orgId, api: q.api, visibility: q.visibility, allowedApis: q.allowed_apis, blockedApis: q.blocked_apis };

    const ranked = await router.rank(prompt, scope, attachments).catch(() => {
      throw new ServiceError('catalog_unavailable', 'The catalog cannot be searched right now', { headers: { 'retry-after': '5' } });
    });
    const candidates = ranked.candidates.map(publicCandidate);
    const fill = (target: FillTarget) =>
      router.fill(target, prompt, attachments).catch(() => {
        throw new ServiceError('catalog_unavailable', 'The prompt router cannot fill the input right now', { headers: { 'retry-after': '5' } });
      });
    // The optional LLM path (shared/router/llm.ts) answers within the offline router's candidates, or
    // says why the offline router answers instead (recorded as routing.llm_fallback).
    const viaLlm = this.deps.llm && llmMayAnswer(ranked) ? await this.deps.llm.route({ prompt, ranked, resolve: (c) => this.resolve(orgId, c), offlineFill: fill }) : undefined;
    let chosen: Candidate, op: ResolvedOperation, filled: FillResult;
    if (viaLlm?.ok) ({ chosen, value: op, filled } = viaLlm);
    else {
      // The model answered "none" or another operation than the action the offline router chose:
      // no action runs on a split decision, so the prompt abstains as one with no clear match.
      const vetoed = viaLlm !== undefined && !viaLlm.ok && llmVetoesAction(ranked, viaLlm.fallback);
      if (!ranked.chosen || vetoed) {
        throw new ServiceError(
          'prompt_unroutable',
          candidates.length
            ? 'No operation is a clear match for this prompt; nothing was charged. Pick one of details.candidates and call it in direct mode'
            : 'No operation in scope matches this prompt; nothing was charged',
          { param: 'prompt', details: { candidates, router: ranked.router } },
        );
      }
      chosen = ranked.chosen;
      const resolved = await this.resolve(orgId, chosen);
      // The router saw the catalog a moment ago; an operation withdrawn since is no clear winner.
      if (!resolved) throw new ServiceError('prompt_unroutable', `${chosen.api} ${chosen.operation} is no longer available; nothing was charged`, { param: 'prompt', details: { candidates, router: ranked.router } });
      op = resolved.value;
      filled = await fill(resolved.target);
    }
    if (filled.missing.length) {
      const fields = filled.missing.map((m) => m.field.replace(/^\//, '').replaceAll('/', '.'));
      throw new ServiceError(
        'prompt_input_missing',
        `The prompt routes to ${op.handle} ${op.operation} but does not say ${fields.join(', ')}; say it in the prompt or call it in direct mode. Nothing was charged`,
        {
          param: 'prompt',
          details: { api: op.handle, operation: op.operation, missing: filled.missing.map((m) => ({ field: m.field, description: m.description })), candidates },
        },
      );
    }
    const input = FilledInput.safeParse(filled.input);
    // A router bug, never the caller's: refuse it rather than run something nobody said.
    if (!input.success) throw new ServiceError('internal_error', 'The prompt router filled an input that is not JSON; nothing was charged');
    return {
      op,
      plan: {
        input: input.data,
        routing: {
          router: viaLlm?.ok ? 'llm' : ranked.router,
          score: round(chosen.score),
          candidates,
          search_credits: PROMPT_SEARCH_CREDITS,
          ...(viaLlm && !viaLlm.ok ? { llm_fallback: viaLlm.fallback } : {}),
        },
      },
    };
  }

  /** A candidate's operation as it stands now, and what the router needs to fill it; null when withdrawn. */
  private async resolve(orgId: string, c: Candidate): Promise<{ value: ResolvedOperation; target: FillTarget } | null> {
    let resolved;
    try {
      resolved = await resolveOperation(this.deps.db, orgId, { api: c.api, operation: c.operation, visibility: c.visibility });
    } catch {
      throw new ServiceError('catalog_unavailable', 'The catalog cannot be read right now', { headers: { 'retry-after': '5' } });
    }
    if (!resolved.ok) return null;
    const op = resolved.op;
    return {
      value: op,
      target: { api: op.handle, operation: op.operation, label: c.label, input_schema: op.inputSchema, performs_actions: op.performsActions, examples: op.examples.map((e) => ({ input: e.input })) },
    };
  }

  /**
   * Each attachment must be the organization's own file. Another organization's file is
   * indistinguishable from none (404 file_not_found); the organization's own file past its
   * retention but not yet purged is 410 file_expired. One statement reads every file listed, each
   * once and only as far as routing can use it (CONTEXT_TEXT_BYTES above), as base64 text rather
   * than the hex text bytea comes as (1.33 rather than 2 characters a byte).
   */
  private async attachments(orgId: string, items: NonNullable<QueryRequest['attachments']>): Promise<PromptAttachment[]> {
    if (items.length === 0) return [];
    const firstInput = items.findIndex((a) => a.purpose === 'input');
    const reachOf = (i: number) => (i === firstInput ? this.deps.maxInputBytes + INPUT_TEXT_MARGIN_BYTES : CONTEXT_TEXT_BYTES);
    const reach = new Map<string, number>();
    for (const [i, a] of items.entries()) reach.set(a.id, Math.max(reach.get(a.id) ?? 0, reachOf(i)));
    let rows: Array<{ id: string; name: string; size: string | number; content_type: string; expires_at: Date; head: string | null }>;
    try {
      // Whatever the files' expiry: expiry is decided here (410 rather than 404).
      const r = await this.deps.db.query(
        `SELECT f.id, f.name, f.size, f.content_type, f.expires_at,
                CASE WHEN f.content_type ~ $4 THEN encode(substring(f.bytes FROM 1 FOR w.n), 'base64') END AS head
           FROM unnest($2::text[], $3::int[]) AS w(id, n)
           JOIN files f ON f.id = w.id AND f.org_id = $1`,
        [orgId, [...reach.keys()], [...reach.values()], TEXT_TYPES_SQL],
      );
      rows = r.rows;
    } catch {
      throw new ServiceError('catalog_unavailable', 'Files cannot be read right now', { headers: { 'retry-after': '5' } });
    }
    const files = new Map(rows.map((f) => [f.id, { ...f, size: Number(f.size), head: f.head === null ? null : Buffer.from(f.head, 'base64') }]));
    const out: PromptAttachment[] = [];
    for (const [i, a] of items.entries()) {
      const file = files.get(a.id);
      const param = `attachments.${i}.id`;
      if (!file) throw new ServiceError('file_not_found', `No file ${a.id} for this organization`, { param, details: { issues: [{ path: param, message: 'no such file for this organization' }] } });
      if (new Date(file.expires_at).getTime() <= Date.now())
        throw new ServiceError('file_expired', `File ${a.id} expired at ${file.expires_at.toISOString()}; upload it again`, { param, details: { issues: [{ path: param, message: 'the file has expired' }] } });
      // A file listed again for a shorter use gets as much as that use would have read.
      const bytes = file.head === null ? null : file.head.subarray(0, reachOf(i));
      out.push({ id: file.id, purpose: a.purpose, name: file.name, content_type: file.content_type, text: bytes === null ? null : textOf(file.content_type, bytes, bytes.length < file.size) });
    }
    return out;
  }

  /** A prompt that names an API names one the organization can reach, as in direct mode. */
  private async checkHandle(orgId: string, api: string, visibility: 'public' | 'private' | undefined) {
    let found;
    try {
      found = await this.deps.db.query(
        `SELECT 1 FROM apis
          WHERE handle = $1 AND status = 'active'
            AND ((visibility = 'public' AND availability = 'available') OR (visibility = 'private' AND owner_org_id = $2))
            AND ($3::text IS NULL OR visibility = $3) LIMIT 1`,
        [api, orgId, visibility ?? null],
      );
    } catch {
      throw new ServiceError('catalog_unavailable', 'The catalog cannot be read right now', { headers: { 'retry-after': '5' } });
    }
    if (!found.rowCount) throw new ServiceError('unknown_api_slug', `No workflow ${api} is available to this organization`, { param: 'api' });
  }
}
