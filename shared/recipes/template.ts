// Rendering of recipe templates. Values are looked up by path, never evaluated.
// Workflow-safe: no Node built-ins.

import { ServiceError } from '../errors.ts';
import { PLACEHOLDER_RE, parseReference, wholeReference, type TemplateRef } from './schema.ts';

export interface TemplateScope {
  input: Record<string, unknown>;
  vars: Record<string, unknown>;
  secrets: Record<string, string>;
  run: { request_ref?: string };
}

export class TemplateError extends Error {
  readonly kind: 'missing_secret' | 'invalid_reference';
  readonly ref: string;
  constructor(kind: 'missing_secret' | 'invalid_reference', ref: string, message: string) {
    super(message);
    this.name = 'TemplateError';
    this.kind = kind;
    this.ref = ref;
  }
}

const hasOwn = (o: object, k: PropertyKey) => Object.prototype.hasOwnProperty.call(o, k);

/** Looks a reference up; undefined when any segment is absent. Only own properties (and `length`). */
export function lookup(ref: TemplateRef, scope: TemplateScope): unknown {
  if (ref.namespace === 'secrets') {
    const name = String(ref.path[0] ?? '');
    if (!hasOwn(scope.secrets, name) || typeof scope.secrets[name] !== 'string' || scope.secrets[name] === '')
      throw new TemplateError('missing_secret', name, `The secret ${name} is missing`);
    return scope.secrets[name];
  }
  let cur: unknown = scope[ref.namespace];
  for (const seg of ref.path) {
    if (cur === null || cur === undefined) return undefined;
    if (Array.isArray(cur)) {
      if (seg === 'length') cur = cur.length;
      else if (typeof seg === 'number') cur = cur[seg];
      else return undefined;
    } else if (typeof cur === 'string') {
      if (seg === 'length') cur = cur.length;
      else return undefined;
    } else if (typeof cur === 'object') {
      const key = String(seg);
      cur = hasOwn(cur as object, key) ? (cur as Record<string, unknown>)[key] : undefined;
    } else return undefined;
  }
  return cur;
}

/**
 * The most one rendered value may hold: nodes (array items, object members) and characters, each
 * reference to a shared value counted every time it appears. A whole reference returns the value
 * itself, not a copy, so `set` steps can build a value whose size doubles at every step (two
 * references to the previous one) in a few milliseconds; walking, copying or serializing it would
 * then hang or exhaust the worker every organization shares. Far above any real page's data (a
 * run's output is at most 1.5 MiB anyway).
 */
export const MAX_VALUE_NODES = 200_000;
export const MAX_VALUE_CHARS = 4 * 1024 * 1024;

/** Throws workflow_execution_failed (`value_too_large`) when `value` is over the bounds; stops walking as soon as it is. */
export function assertBoundedValue(value: unknown): void {
  let nodes = 0;
  let chars = 0;
  const stack: unknown[] = [value];
  while (stack.length > 0) {
    const v = stack.pop();
    if (typeof v === 'string') chars += v.length;
    else if (Array.isArray(v)) {
      nodes += v.length;
      for (const x of v) stack.push(x);
    } else if (v && typeof v === 'object') {
      for (const k in v) {
        if (!hasOwn(v, k)) continue;
        nodes++;
        chars += k.length;
        stack.push((v as Record<string, unknown>)[k]);
      }
    }
    if (nodes > MAX_VALUE_NODES || chars > MAX_VALUE_CHARS) throw tooLarge();
  }
}

const tooLarge = () =>
  new ServiceError('workflow_execution_failed', `A value the recipe builds is larger than ${MAX_VALUE_NODES} items or ${MAX_VALUE_CHARS / (1024 * 1024)} MiB of text`, {
    details: { reason: 'value_too_large' },
  });

/**
 * A value as JSON text (a placeholder inside a string, a request's JSON body, an object in a query
 * or form), within the bounds of assertBoundedValue. JSON.stringify recurses natively: a website's
 * JSON nested 20,000 deep (40 KB of brackets, which JSON.parse reads) threw a RangeError, and the
 * run ended as our internal_error, retried against the site until its deadline. It is a value the
 * recipe cannot use, refused like one too large (`value_too_large`).
 */
export function toJson(value: unknown): string {
  assertBoundedValue(value);
  try {
    return JSON.stringify(value) ?? 'null';
  } catch (e) {
    if (!(e instanceof RangeError)) throw e;
    throw new ServiceError('workflow_execution_failed', 'A value the recipe writes as JSON is nested too deeply to write', { details: { reason: 'value_too_large' } });
  }
}

function stringify(value: unknown): string {
  if (value === undefined || value === null) return '';
  if (typeof value === 'string') return value;
  if (typeof value === 'number' || typeof value === 'boolean') return String(value);
  return toJson(value);
}

function resolve(body: string, scope: TemplateScope): unknown {
  const ref = parseReference(body);
  if (!ref) throw new TemplateError('invalid_reference', body, `Invalid template reference {{${body}}}`);
  return lookup(ref, scope);
}

/** Renders a string template; `encode` is applied to every inserted value (not to the literal text). */
export function renderString(text: string, scope: TemplateScope, encode: (s: string) => string = (s) => s): string {
  let length = text.length;
  return text.replace(PLACEHOLDER_RE, (_m, body: string) => {
    const inserted = encode(stringify(resolve(body, scope)));
    // A string that doubles at every step ("{{vars.x}}{{vars.x}}") is bounded like a value.
    length += inserted.length;
    if (length > MAX_VALUE_CHARS) throw tooLarge();
    return inserted;
  });
}

/**
 * Renders a template value: a lone placeholder keeps the value's JSON type; strings inside are
 * rendered. The result is bounded (assertBoundedValue), shared references counted each time.
 */
export function renderValue(value: unknown, scope: TemplateScope): unknown {
  const out = renderInner(value, scope);
  if (out && typeof out === 'object') assertBoundedValue(out);
  return out;
}

function renderInner(value: unknown, scope: TemplateScope): unknown {
  if (typeof value === 'string') {
    const whole = wholeReference(value);
    if (whole) return lookup(whole, scope);
    return renderString(value, scope);
  }
  if (Array.isArray(value)) return value.map((v) => renderInner(v, scope));
  if (value && typeof value === 'object') {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) {
      const r = renderInner(v, scope);
      if (r !== undefined) out[k] = r;
    }
    return out;
  }
  return value;
}

/**
 * Renders a URL template: inserted values are URL-encoded (encodeURIComponent), so input can never
 * change the host, path structure or add parameters. A template that is exactly one placeholder
 * is used as a URL (e.g. a `next` link read from a page) and must then be absolute or a path.
 */
export function renderUrl(text: string, scope: TemplateScope): string {
  const whole = wholeReference(text);
  if (whole) return stringify(lookup(whole, scope));
  // Where inserted values landed in the result, to find a path segment they made "." or "..".
  const inserted: Array<[number, number]> = [];
  let shift = 0;
  let length = text.length;
  const out = text.replace(PLACEHOLDER_RE, (m: string, body: string, offset: number) => {
    const value = encodeURIComponent(stringify(resolve(body, scope)));
    length += value.length;
    if (length > MAX_VALUE_CHARS) throw tooLarge();
    inserted.push([offset + shift, offset + shift + value.length]);
    shift += value.length - m.length;
    return value;
  });
  assertNoInsertedDotSegment(out, inserted);
  return out;
}

/** ".", "..", and their spellings with %2e: URL parsers resolve them, climbing out of the segment. */
const DOT_SEGMENT_RE = /^(?:\.|%2e){1,2}$/i;

/**
 * encodeURIComponent leaves "." alone, so an input of ".." inserted as a whole path segment
 * (`/users/{{input.id}}/orders`) would make the URL parser drop the segment before it
 * (`/orders`): the input would change the path's structure. Refused as invalid input.
 */
function assertNoInsertedDotSegment(url: string, inserted: Array<[number, number]>): void {
  if (inserted.length === 0) return;
  const origin = /^[a-z][a-z0-9+.-]*:\/\/[^/?#]*/i.exec(url);
  let start = origin ? origin[0].length : 0;
  const end = url.slice(start).search(/[?#]/);
  const stop = end === -1 ? url.length : start + end;
  for (const segment of url.slice(start, stop).split('/')) {
    const from = start;
    const to = start + segment.length;
    start = to + 1;
    if (!DOT_SEGMENT_RE.test(segment)) continue;
    if (inserted.some(([a, b]) => a < to && b > from))
      throw new ServiceError('invalid_provider_input', 'An input value would make a URL path segment "." or "..", which climbs out of it', {
        details: { reason: 'dot_segment' },
      });
  }
}

/** Renders a header value; CR/LF are removed so a value can never add a header. */
export function renderHeader(text: string, scope: TemplateScope): string {
  return renderString(text, scope).replace(/[\r\n\0]/g, '');
}

/** Names of the secrets a template value uses. */
export function secretsUsed(value: unknown, out = new Set<string>()): Set<string> {
  if (typeof value === 'string') {
    for (const m of value.matchAll(PLACEHOLDER_RE)) {
      const ref = parseReference(m[1] ?? '');
      if (ref?.namespace === 'secrets') out.add(String(ref.path[0]));
    }
  } else if (Array.isArray(value)) value.forEach((v) => secretsUsed(v, out));
  else if (value && typeof value === 'object') Object.values(value).forEach((v) => secretsUsed(v, out));
  return out;
}
