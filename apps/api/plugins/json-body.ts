// The application/json body parser for every route (/v1/*, /mcp): JSON nested deeper than
// MAX_JSON_DEPTH is refused before it is parsed, and keys that reach prototypes (`__proto__`, or
// `constructor` holding `prototype`) are refused as Fastify's secure-json-parse default does.
// Why: JSON.parse copes with any depth, but the code after it (zod's z.json(), canonical
// fingerprints, ajv, the MCP SDK) recurses over the value, and a 3 KB body nested 1500 deep
// overflowed the stack (a 500, and "Maximum call stack size exceeded" over MCP).
import type { FastifyInstance, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { ServiceError } from '../../../shared/errors.ts';

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

class PrototypeKey extends Error {}

/** A hostile body may hold a refused key in every object: the first ones make the point. */
const MAX_KEY_ISSUES = 100;

/** secure-json-parse's `protoAction: 'error'` and `constructorAction: 'error'`, as a reviver (depth is bounded first). */
function refusePrototypeKeys(key: string, value: unknown): unknown {
  if (key === '__proto__') throw new PrototypeKey('__proto__');
  if (key === 'constructor' && typeof value === 'object' && value !== null && Object.hasOwn(value, 'prototype')) throw new PrototypeKey('constructor.prototype');
  return value;
}

export function parseJsonBody(text: string): unknown {
  if (text.length === 0) throw invalid('A JSON body is required', 'a JSON body is required');
  if (jsonDepthExceeds(text, MAX_JSON_DEPTH))
    throw invalid(`The body nests objects and arrays deeper than ${MAX_JSON_DEPTH} levels`, `nesting depth exceeds the limit of ${MAX_JSON_DEPTH}`);
  try {
    return JSON.parse(text, refusePrototypeKeys);
  } catch (err) {
    if (err instanceof PrototypeKey) {
      const paths = prototypeKeyPaths(text, MAX_KEY_ISSUES);
      const issues = paths.map((path) => ({ path, message: `the key ${path.endsWith('constructor.prototype') ? 'constructor.prototype' : '__proto__'} is not allowed anywhere in the body` }));
      const where = paths.length > 3 ? `${paths.slice(0, 3).join(', ')}, …` : paths.join(', ');
      throw new ServiceError('invalid_input', `The body must not contain the key ${err.message} (${where})`, { param: paths[0] || undefined, details: { issues } });
    }
    throw invalid('The body is not valid JSON', 'The body is not valid JSON');
  }
}

/** A value met by the walk: its key and a link to its parent's node (its path is built only when needed). */
interface WalkNode {
  value: unknown;
  key: string;
  parent: WalkNode | null;
}

/** The dotted path of `node` (the root's is empty) followed by `tail`: O(depth), and depth is bounded. */
function pathOf(node: WalkNode, tail: string[]): string {
  const keys: string[] = [];
  for (let n: WalkNode | null = node; n !== null && n.parent !== null; n = n.parent) keys.push(n.key);
  return [...keys.reverse(), ...tail].join('.');
}

/**
 * Where the refused keys are, as the dotted paths `param` and `details.issues` use
 * (`input.__proto__`, `response.schema.constructor.prototype`), in document order. Only after a
 * refusal, on a plain parse: JSON.parse makes `__proto__` an own property, never the prototype,
 * and the depth is bounded already, so the walk is short (and iterative all the same). Linear in
 * the body: each value knows only its key and its parent, and a path is spelled out only for a
 * refused key (at most `max` of them). Copying the path for every value made a 1.8 MB array 60
 * deep with one `__proto__` at its end cost seconds of CPU.
 */
export function prototypeKeyPaths(text: string, max: number): string[] {
  const out: string[] = [];
  const stack: WalkNode[] = [{ value: JSON.parse(text), key: '', parent: null }];
  while (stack.length > 0 && out.length < max) {
    const node = stack.pop()!;
    const value = node.value;
    if (typeof value !== 'object' || value === null) continue;
    const first = stack.length;
    if (Array.isArray(value)) {
      // An array from JSON.parse holds only its indices, never a refused key; an element's key is
      // made only when the element is walked further (Object.entries made a pair for every one).
      for (let i = 0; i < value.length; i++) {
        const child: unknown = value[i];
        if (typeof child === 'object' && child !== null) stack.push({ value: child, key: String(i), parent: node });
      }
    } else {
      for (const [key, child] of Object.entries(value)) {
        if (key === '__proto__') out.push(pathOf(node, [key]));
        else if (key === 'constructor' && typeof child === 'object' && child !== null && Object.hasOwn(child, 'prototype')) out.push(pathOf(node, [key, 'prototype']));
        // Only values that can hold keys are walked further.
        if (typeof child === 'object' && child !== null) stack.push({ value: child, key, parent: node });
      }
    }
    // Children were pushed in document order: reversed, the first is popped first.
    for (let i = first, j = stack.length - 1; i < j; i++, j--) [stack[i], stack[j]] = [stack[j]!, stack[i]!];
  }
  return out.slice(0, max);
}

export default fp(
  async function jsonBodyPlugin(app: FastifyInstance) {
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
