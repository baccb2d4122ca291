// The application/json body parser for every route (/v1/*, /mcp): JSON nested deeper than
// MAX_JSON_DEPTH is refused before it is parsed, and keys that reach prototypes (`__proto__`, or
// `constructor` holding `prototype`) are refused as Fastify's secure-json-parse default does.
// Why: JSON.parse copes with any depth, but the code after it (zod's z.json(), canonical
// fingerprints, ajv, the MCP SDK) recurses over the value, and a 3 KB body nested 1500 deep
// overflowed the stack (a 500, and "Maximum call stack size exceeded" over MCP).
import type { FastifyInstance, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { ServiceError } from '../../../shared/errors.ts';
import { refuseEncodedBody } from './content-encoding.ts';

/** Deepest nesting of objects and arrays a body may have (a QueryRequest needs a handful). */
export const MAX_JSON_DEPTH = 64;

/**
 * The deepest nesting of `{`/`[` in JSON text, stopping as soon as it passes `limit`. A linear scan
 * that skips string contents (and their escapes), so it needs no recursion and no parse.
 */
export function jsonDepthExceeds(text: string, limit: number): boolean {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c) i++; // backslash: the next character is escaped
      else if (c === 0x22) inString = false;
      continue;
    }
    if (c === 0x22) inString = true;
    else if (c === 0x7b || c === 0x5b) {
      if (++depth > limit) return true;
    } else if (c === 0x7d || c === 0x5d) depth--;
  }
  return false;
}

/** A refusal of the body as a whole: no field to name, so no `param`; its issue's path is ''. */
function invalid(message: string, issue: string): ServiceError {
  return new ServiceError('invalid_input', message, { details: { issues: [{ path: '', message: issue }] } });
}

/** A hostile body may hold a refused key in every object: the first ones make the point. */
const MAX_KEY_ISSUES = 100;

/**
 * Whether the text can hold a refused key at all: `__proto__` or `constructor` spelled out, or a
 * `\u` escape, which can spell either (`"\u005f_proto__"`). Most bodies have none, and skip the walk.
 */
const mayHoldPrototypeKey = (text: string): boolean => text.includes('__proto__') || text.includes('constructor') || text.includes('\\u');

/**
 * The body parsed, refusing what secure-json-parse refuses with `protoAction: 'error'` and
 * `constructorAction: 'error'`. A plain JSON.parse, then a walk of the value when the text may hold a
 * refused key: JSON.parse makes `__proto__` an own property, never the prototype, so the walk sees
 * what a reviver would. A reviver (a JavaScript call for every value) made a hostile 1 MB body cost
 * 15 to 40 times the parse: 200 to 340 ms of the API's one thread, which every organization shares.
 */
export function parseJsonBody(text: string): unknown {
  if (text.length === 0) throw invalid('A JSON body is required', 'a JSON body is required');
  if (jsonDepthExceeds(text, MAX_JSON_DEPTH))
    throw invalid(`The body nests objects and arrays deeper than ${MAX_JSON_DEPTH} levels`, `nesting depth exceeds the limit of ${MAX_JSON_DEPTH}`);
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw invalid('The body is not valid JSON', 'The body is not valid JSON');
  }
  const paths = mayHoldPrototypeKey(text) ? refusedKeyPaths(value, MAX_KEY_ISSUES) : [];
  if (paths.length === 0) return value;
  const keyOf = (path: string) => (path.endsWith('constructor.prototype') ? 'constructor.prototype' : '__proto__');
  const issues = paths.map((path) => ({ path, message: `the key ${keyOf(path)} is not allowed anywhere in the body` }));
  const where = paths.length > 3 ? `${paths.slice(0, 3).join(', ')}, …` : paths.join(', ');
  throw new ServiceError('invalid_input', `The body must not contain the key ${keyOf(paths[0]!)} (${where})`, { param: paths[0] || undefined, details: { issues } });
}

/** `refusedKeyPaths` of the text's plain parse. */
export function prototypeKeyPaths(text: string, max: number): string[] {
  return refusedKeyPaths(JSON.parse(text), max);
}

/**
 * Where the refused keys are in a plain parse, as the dotted paths `param` and `details.issues` use
 * (`input.__proto__`, `response.schema.constructor.prototype`), in document order, at most `max`.
 * Recursive, which the depth bound (checked before the parse) makes safe. Linear in the body: one
 * path is kept and changed in place, only objects and arrays are visited, and a path is spelled out
 * only for a refused key. Copying the path for every value made a 1.8 MB array 60 deep with one
 * `__proto__` at its end cost seconds of CPU.
 */
function refusedKeyPaths(parsed: unknown, max: number): string[] {
  const out: string[] = [];
  const path: string[] = [];
  const isNode = (v: unknown): v is object => typeof v === 'object' && v !== null;
  const visit = (value: object): void => {
    if (Array.isArray(value)) {
      // An array from JSON.parse holds only its indices, never a refused key.
      for (let i = 0; i < value.length && out.length < max; i++) {
        const child: unknown = value[i];
        if (!isNode(child)) continue;
        path.push(String(i));
        visit(child);
        path.pop();
      }
      return;
    }
    const record = value as Record<string, unknown>;
    const keys = Object.keys(record);
    // This object's refused keys first, then its children's: the order the paths were always given in.
    for (const key of keys) {
      const child = record[key];
      if (key === '__proto__') out.push([...path, key].join('.'));
      else if (key === 'constructor' && isNode(child) && Object.hasOwn(child, 'prototype')) out.push([...path, key, 'prototype'].join('.'));
    }
    for (let i = 0; i < keys.length && out.length < max; i++) {
      const child = record[keys[i]!];
      // Only values that can hold keys are walked further.
      if (!isNode(child)) continue;
      path.push(keys[i]!);
      visit(child);
      path.pop();
    }
  };
  if (isNode(parsed)) visit(parsed);
  return out.slice(0, max);
}

export default fp(
  async function jsonBodyPlugin(app: FastifyInstance) {
    // Every route's body, whatever its type, is taken as sent: a compressed one is 415 on
    // Content-Encoding before it is read, not a parse error (plugins/content-encoding.ts).
    app.addHook('preParsing', refuseEncodedBody);
    app.removeContentTypeParser('application/json');
    // parseAs string keeps Fastify's bodyLimit (413 while streaming) and its charset handling.
    app.addContentTypeParser('application/json', { parseAs: 'string' }, (_request: FastifyRequest, body: string | Buffer, done) => {
      try {
        done(null, parseJsonBody(typeof body === 'string' ? body : body.toString('utf8')));
      } catch (err) {
        done(err as Error, undefined);
      }
    });
  },
  { name: 'json-body' },
);
