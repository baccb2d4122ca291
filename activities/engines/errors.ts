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
 * The spellings in which a website may echo a secret back: as is, percent-encoded (as by
 * encodeURIComponent, or as a form or query string: URLSearchParams also escapes !'()~ and writes a
 * space as '+'; either case of hex digits), inside a JSON string, HTML-escaped, and base64.
 */
export function secretSpellings(sec: string): string[] {
  const forms = new Set<string>();
  for (const f of [sec, encodeURIComponent(sec), encodeURIComponent(sec).replace(/%20/g, '+'), new URLSearchParams({ v: sec }).toString().slice(2)]) {
    forms.add(f);
    forms.add(f.replace(/%[0-9A-F]{2}/g, (h) => h.toLowerCase()));
  }
  forms.add(JSON.stringify(sec).slice(1, -1));
  forms.add(escapeHtml(sec));
  forms.add(escapeHtml(sec).replace(/&#39;/g, '&#x27;'));
  const b64 = Buffer.from(sec, 'utf8').toString('base64');
  forms.add(b64);
  forms.add(b64.replace(/=+$/, ''));
  forms.add(Buffer.from(sec, 'utf8').toString('base64url'));
  // Every spelling of a secret of MIN_SECRET_LENGTH or more is at least that long (each is the value or longer).
  return [...forms].filter((f) => f.length >= MIN_SECRET_LENGTH);
}

/** Replaces every secret value, in every spelling of secretSpellings, in strings of a value. */
export function redact<T>(value: T, secrets: string[]): T {
  if (secrets.length === 0) return value;
  // Longest first: a spelling that contains another is replaced whole.
  const forms = [...new Set(secrets.flatMap(secretSpellings))].sort((a, b) => b.length - a.length);
  const scrub = (s: string) => {
    let out = s;
    for (const form of forms) if (out.includes(form)) out = out.split(form).join('[redacted]');
    return out;
  };
  return mapStrings(value, scrub) as T;
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
const FINAL_REASONS = new Set(['destination_refused', 'host_not_allowed', 'scheme_not_allowed', 'userinfo_not_allowed', 'secret_not_for_host', 'cross_origin_body_redirect']);

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
