// Mapping of website failures to the catalog's codes, and redaction of secrets from errors.

import { ServiceError, type ErrorCode } from '../../shared/errors.ts';
import { DestinationRefusedError } from './net-guard.ts';
import { escapeHtml } from '../../shared/format/html.ts';
import { MIN_SECRET_LENGTH } from '../../shared/secrets.ts';

export interface StatusContext {
  status: number;
  host: string;
  path: string;
  step: string;
  usesSecrets: boolean;
  retryAfter?: string | null;
}

function retryAfterSeconds(v: string | null | undefined): number | undefined {
  if (!v) return undefined;
  if (/^\d+$/.test(v.trim())) return Number(v.trim());
  const at = Date.parse(v);
  return Number.isNaN(at) ? undefined : Math.max(0, Math.ceil((at - Date.now()) / 1000));
}

/** The catalog error for a website's HTTP status that the recipe did not expect. */
export function statusError(c: StatusContext): ServiceError {
  const details: Record<string, unknown> = { step: c.step, host: c.host, path: c.path, upstream_status: c.status };
  const where = `${c.host}${c.path}`;
  if (c.status === 404 || c.status === 410) return new ServiceError('upstream_not_found', `The website returned ${c.status} for ${where}`, { details });
  if (c.status === 429) {
    const s = retryAfterSeconds(c.retryAfter);
    if (s !== undefined) details.retry_after_seconds = s;
    return new ServiceError('source_rate_limited', `The website is rate-limiting (429 from ${c.host})`, { details });
  }
  if (c.status === 401 && c.usesSecrets) return new ServiceError('credentials_rejected', `The website rejected the credentials (401 from ${c.host})`, { details });
  if (c.status === 403 && c.usesSecrets) return new ServiceError('source_permission_denied', `The website denied the account access (403 from ${c.host})`, { details });
  if (c.status === 403) return new ServiceError('source_blocked', `The website is blocking the request (403 from ${c.host})`, { details });
  if (c.status === 503 || c.status === 502 || c.status === 504) {
    const s = retryAfterSeconds(c.retryAfter);
    if (s !== undefined) details.retry_after_seconds = s;
  }
  return new ServiceError('upstream_http_error', `The website returned ${c.status} for ${where}`, { details });
}

const NETWORK_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ENOTFOUND',
  'EAI_AGAIN',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EPIPE',
  'UND_ERR_SOCKET',
  'UND_ERR_CONNECT_TIMEOUT',
  'UND_ERR_HEADERS_TIMEOUT',
  'UND_ERR_BODY_TIMEOUT',
  'UND_ERR_CLOSED',
]);

/** Errors that show that nothing reached the website (safe for actions). */
const NOT_SENT_CODES = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH', 'UND_ERR_CONNECT_TIMEOUT', 'E_DESTINATION_REFUSED']);

function errCode(e: unknown): string | undefined {
  let cur: unknown = e;
  for (let i = 0; i < 4 && cur && typeof cur === 'object'; i++) {
    const code = (cur as { code?: unknown }).code;
    if (typeof code === 'string' && (NETWORK_CODES.has(code) || code === 'E_DESTINATION_REFUSED')) return code;
    cur = (cur as { cause?: unknown }).cause;
  }
  return undefined;
}

export function isAbortError(e: unknown): boolean {
  return !!e && typeof e === 'object' && ((e as Error).name === 'AbortError' || (e as { code?: string }).code === 'ABORT_ERR' || (e as Error).name === 'TimeoutError');
}

/** A network failure reaching `host` as a catalog error. */
export function networkError(e: unknown, host: string, step: string): ServiceError {
  if (e instanceof ServiceError) return e;
  if (e instanceof DestinationRefusedError || errCode(e) === 'E_DESTINATION_REFUSED') {
    const err = new ServiceError('workflow_execution_failed', `Refused to connect to ${host}: private, loopback and link-local destinations are not allowed`, {
      details: { step, host, reason: 'destination_refused' },
    });
    notSent.add(err);
    return err;
  }
  const code = errCode(e) ?? 'network_error';
  const err = new ServiceError('workflow_execution_failed', `The website ${host} could not be reached (${code})`, { details: { step, host, reason: code } });
  if (NOT_SENT_CODES.has(code)) notSent.add(err);
  return err;
}

/** Errors known to have happened before anything reached the website. */
export const notSent = new WeakSet<object>();

/** Codes that mean the website answered with a clear refusal (the action did not happen). */
export const DEFINITE_REFUSALS = new Set<ErrorCode>([
  'not_found',
  'upstream_not_found',
  'source_rate_limited',
  'source_blocked',
  'credentials_rejected',
  'credentials_missing',
  'source_permission_denied',
  'auth_required',
  'invalid_provider_input',
]);

export function timeoutError(step: string | undefined): ServiceError {
  return new ServiceError('execution_timeout', 'The website task did not finish within its time limit', { details: step === undefined ? undefined : { step } });
}


/**
 * The spellings of a secret that are text (the value, percent-encoded as by encodeURIComponent or as
 * a form or query string: URLSearchParams also escapes !'()~ and writes a space as '+', inside a
 * JSON string, HTML-escaped). A site may write any of them in another case (an upper-cased echo, hex
 * digits of either case), so they are looked for whatever the case of their letters (`SecretMatcher`).
 */
function textSpellings(sec: string): string[] {
  const forms = new Set<string>([sec, encodeURIComponent(sec), encodeURIComponent(sec).replace(/%20/g, '+'), new URLSearchParams({ v: sec }).toString().slice(2)]);
  forms.add(JSON.stringify(sec).slice(1, -1));
  forms.add(escapeHtml(sec));
  forms.add(escapeHtml(sec).replace(/&#39;/g, '&#x27;'));
  return [...forms];
}

/**
 * A base64 part shorter than this is not looked for on its own (inside a longer base64 text): 6
 * base64 characters are 36 bits, rare enough by chance in what a run sends and returns. Every
 * secret of 5 characters (bytes) or more has one at each alignment.
 */
const MIN_BASE64_PART = 6;

/**
 * The spellings of a secret in base64 (and base64url), matched as they are (base64 is case-
 * significant): the whole value, padded or not, and the part of it that shows inside a longer
 * base64 text (a site echoing `Basic base64("user:secret")`) whichever of the three byte
 * alignments it starts at: the characters that depend on the secret's bytes alone.
 */
function base64Spellings(sec: string): string[] {
  const bytes = Buffer.from(sec, 'utf8');
  const forms = new Set<string>();
  const whole = bytes.toString('base64');
  forms.add(whole);
  forms.add(whole.replace(/=+$/, ''));
  forms.add(bytes.toString('base64url'));
  for (const lead of [0, 1, 2]) {
    const n = lead + bytes.length;
    const b64 = Buffer.concat([Buffer.alloc(lead), bytes]).toString('base64');
    // The first characters also hold the bytes before the secret, the last the bytes after it.
    const part = b64.slice([0, 2, 3][lead], Math.floor(n / 3) * 4 + (n % 3));
    if (part.length < MIN_BASE64_PART) continue;
    forms.add(part);
    forms.add(part.replace(/\+/g, '-').replace(/\//g, '_'));
  }
  return [...forms];
}

/**
 * The spellings in which a website may echo a secret back: as is, percent-encoded, inside a JSON
 * string, HTML-escaped (each in any case, see `SecretMatcher`), and base64 (whole or inside a longer
 * base64 text). Not a piece of it (a site showing its last four characters): see the engines' README.
 */
export function secretSpellings(sec: string): string[] {
  // Every spelling of a secret of MIN_SECRET_LENGTH or more is at least that long (each is the value or longer, or a base64 part of MIN_BASE64_PART).
  return [...new Set([...textSpellings(sec), ...base64Spellings(sec)])].filter((f) => f.length >= MIN_SECRET_LENGTH);
}

const escapeRegExp = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/**
 * Finds and replaces secrets in every spelling of `secretSpellings`: the text spellings whatever
 * the case of their letters, the base64 ones as they are. A text is lower-cased once to look for
 * all of them (`holds`); only a text that holds one is rewritten.
 */
export class SecretMatcher {
  /** Text spellings, lower case. */
  private readonly folded: string[];
  private readonly exact: string[];
  private pattern: RegExp | null = null;

  constructor(secrets: readonly string[]) {
    const folded = new Set<string>();
    const exact = new Set<string>();
    for (const sec of secrets) {
      for (const f of textSpellings(sec)) if (f.length >= MIN_SECRET_LENGTH) folded.add(f.toLowerCase());
      for (const f of base64Spellings(sec)) if (f.length >= MIN_SECRET_LENGTH) exact.add(f);
    }
    // Longest first: a spelling that contains another is replaced whole.
    this.folded = [...folded].sort((a, b) => b.length - a.length);
    this.exact = [...exact].sort((a, b) => b.length - a.length);
  }

  get empty(): boolean {
    return this.folded.length === 0 && this.exact.length === 0;
  }

  /** Whether `text` holds a secret in any spelling; `lower` is `text.toLowerCase()` when the caller has it already (one text, several matchers). */
  holds(text: string, lower?: string): boolean {
    if (this.empty || text.length < MIN_SECRET_LENGTH) return false;
    if (this.exact.some((f) => text.includes(f))) return true;
    const l = lower ?? text.toLowerCase();
    return this.folded.some((f) => l.includes(f));
  }

  /**
   * `text` with every spelling replaced by `by`: the base64 ones as they are, then the text ones
   * with a case-insensitive expression (simple case folding). A letter whose lower case is longer or
   * depends on its neighbours (a few outside Latin) can make toLowerCase find what the expression
   * does not: such a text is replaced whole.
   */
  replace(text: string, by: string): string {
    if (!this.holds(text)) return text;
    let out = text;
    for (const f of this.exact) if (out.includes(f)) out = out.split(f).join(by);
    if (this.folded.length > 0) {
      this.pattern ??= new RegExp(this.folded.map(escapeRegExp).join('|'), 'gi');
      out = out.replace(this.pattern, () => by);
    }
    return this.holds(out) ? by : out;
  }
}

/** Replaces every secret value, in every spelling of secretSpellings (text spellings in any case), in strings of a value. */
export function redact<T>(value: T, secrets: string[]): T {
  if (secrets.length === 0) return value;
  const m = new SecretMatcher(secrets);
  if (m.empty) return value;
  return mapStrings(value, (s) => m.replace(s, '[redacted]')) as T;
}

/**
 * A copy of a JSON-like value with `f` applied to every string. Iterative: a website's document
 * nested 20,000 deep (40 KB of brackets) would overflow the stack of a recursive walk, and the run
 * would end as internal_error (retried until its deadline) instead of output_too_large.
 */
function mapStrings(value: unknown, f: (s: string) => string): unknown {
  const copy = (v: unknown, stack: Array<[object, Record<string, unknown>]>): unknown => {
    if (typeof v === 'string') return f(v);
    if (!v || typeof v !== 'object') return v;
    const out = (Array.isArray(v) ? [] : {}) as Record<string, unknown>;
    stack.push([v, out]);
    return out;
  };
  const stack: Array<[object, Record<string, unknown>]> = [];
  const root = copy(value, stack);
  while (stack.length > 0) {
    const [src, dst] = stack.pop()!;
    for (const [k, x] of Object.entries(src)) Object.defineProperty(dst, k, { value: copy(x, stack), enumerable: true, writable: true, configurable: true });
  }
  return root;
}

export function redactError(e: ServiceError, secrets: string[]): ServiceError {
  if (secrets.length === 0) return e;
  const out = new ServiceError(e.code, redact(e.message, secrets), { param: e.param, details: redact(e.details, secrets), headers: e.headers });
  if (notSent.has(e)) notSent.add(out);
  return out;
}

/** Reasons a destination was refused: the same recipe on the same page is refused again. */
const FINAL_REASONS = new Set(['destination_refused', 'host_not_allowed', 'scheme_not_allowed', 'userinfo_not_allowed', 'secret_not_for_host', 'cross_origin_body_redirect', 'header_not_allowed']);

/**
 * A refused destination is final: retrying the run cannot change the answer, so the execute
 * activity fails at once instead of retrying until the deadline (the caller still sees
 * `workflow_execution_failed` with `details.reason`).
 */
export function isFinalRefusal(e: ServiceError): boolean {
  const reason = (e.details as { reason?: unknown } | undefined)?.reason;
  return e.code === 'workflow_execution_failed' && typeof reason === 'string' && FINAL_REASONS.has(reason);
}

/**
 * The same error, no longer "not sent": a refusal on a redirect hop comes after the request itself
 * reached the website (a POST answered 303 to a refused host may still have placed the order).
 */
export function afterSending(e: unknown): unknown {
  if (!(e instanceof ServiceError) || !notSent.has(e)) return e;
  return new ServiceError(e.code, e.message, { param: e.param, details: e.details, headers: e.headers });
}
