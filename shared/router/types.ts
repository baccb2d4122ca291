// The prompt router's interface (issue 10): rank the operations a free-text prompt may mean within
// a scope, then fill the chosen operation's input from the prompt and its attachments. The query
// service, SSE and MCP use only this interface; how ranking and filling work stays inside
// shared/router/.

import type { JsonSchema } from '../catalog/types.ts';

/** Where a prompt may be routed; every filter applies before ranking. */
export interface RouteScope {
  /** The calling organization: its private operations are candidates beside the public ones. */
  orgId: string;
  /** Route only within this API handle (`@weather`). */
  api?: string;
  /** With `api`: only the public or only the organization's private API of that handle. */
  visibility?: 'public' | 'private';
  /** Only these handles (1–100, validated by the request schema). */
  allowedApis?: string[];
  /** Never these handles. */
  blockedApis?: string[];
}

/** An attachment the caller sent, already checked to be its organization's own, unexpired file. */
export interface PromptAttachment {
  id: string;
  purpose: 'input' | 'context';
  name: string;
  content_type: string;
  /**
   * The file's text when it is text (UTF-8), else null; bytes are never handed to the router. Only
   * as much as can be used is read (apps/api/services/prompt-routing.ts): the first `input`
   * attachment's text up to just past what a query can carry (only it can fill an input field);
   * every other attachment's, context or later input, only its start (2,000 bytes).
   */
  text: string | null;
}

/** One operation the router considered, best first. */
export interface Candidate {
  api: string;
  visibility: 'public' | 'private';
  operation: string;
  label: string;
  /** 0..1, comparable across prompts: the abstention threshold is applied to it. */
  score: number;
  performs_actions: boolean;
}

export interface RankResult {
  /** The operation to run, or null to abstain (no clear winner, or an action not clearly asked). */
  chosen: Candidate | null;
  /** The best few candidates (at most 5), for `details.candidates` and the request's audit. */
  candidates: Candidate[];
  /** Which router answered: the offline hybrid one, or an OpenAI-compatible model. */
  router: 'offline' | 'llm';
  /** Why it abstained, when it did (for logs and the audit, not a contract code). */
  reason?: string;
}

/** What the router needs of the chosen operation to fill its input. */
export interface FillTarget {
  api: string;
  operation: string;
  /** The operation's label and search labels: words that name the operation are never taken as search terms. */
  label?: string;
  labels?: string[];
  input_schema: JsonSchema;
  performs_actions: boolean;
  examples: { input: Record<string, unknown> }[];
}

export interface MissingField {
  /** RFC 6901 pointer into the input (`/city`). */
  field: string;
  description: string;
}

export interface FillResult {
  /** The input to validate against the operation's schema; never holds an invented value. */
  input: Record<string, unknown>;
  /** Required fields the prompt, attachments and defaults could not supply; non-empty means do not run. */
  missing: MissingField[];
}

export interface PromptRouter {
  rank(prompt: string, scope: RouteScope, attachments?: PromptAttachment[]): Promise<RankResult>;
  fill(target: FillTarget, prompt: string, attachments?: PromptAttachment[], opts?: { timeZone?: string; now?: Date }): Promise<FillResult>;
}
