// JSON Pointers (RFC 6901) and the rules that keep user-chosen keys away from prototypes.
// Pure and workflow-safe: the API validates `response` with these before dispatch, and shaping
// (inside the workflow sandbox, shared by every organization) re-checks with them.

/** Keys that reach an object's prototype chain when used as property names on plain objects. */
export const FORBIDDEN_KEYS: ReadonlySet<string> = new Set(['__proto__', 'constructor', 'prototype']);

/** Highest array index a mapping target may name: targets build arrays, so indexes are bounded. */
export const MAX_TARGET_INDEX = 999;

/** All mapping targets (and, separately, all sources) together: targets become the shaped output's
 *  keys and both travel in the workflow's input, which Temporal must carry. */
export const MAX_TARGETS_CHARS = 65_536;

/** Deepest a response schema may nest (objects and arrays); its walkers stay iterative anyway. */
export const MAX_SCHEMA_DEPTH = 32;

/** RFC 6901: empty, or `/`-prefixed segments where `~` is only ever `~0` or `~1`. */
export const POINTER_PATTERN = /^(?:\/(?:[^~/]|~[01])*)*$/;

/** An array index as RFC 6901 writes it: no sign, no leading zero. */
export const isIndexSegment = (seg: string) => /^(?:0|[1-9][0-9]*)$/.test(seg);

/** Segments of a pointer, unescaped; undefined when it is not an RFC 6901 pointer. */
export function parsePointer(pointer: string): string[] | undefined {
  if (typeof pointer !== 'string' || !POINTER_PATTERN.test(pointer)) return undefined;
  if (pointer === '') return [];
  return pointer
    .slice(1)
    .split('/')
    .map((s) => s.replace(/~1/g, '/').replace(/~0/g, '~'));
}

/** Why a pointer is unusable (syntax or a forbidden segment), or undefined when it is fine. */
export function pointerProblem(pointer: string): string | undefined {
  const segs = parsePointer(pointer);
  if (!segs) return 'must be a JSON Pointer (RFC 6901): empty or starting with "/", with "~" only as "~0" or "~1"';
  const bad = segs.find((s) => FORBIDDEN_KEYS.has(s));
  if (bad !== undefined) return `must not contain the segment "${bad}"`;
  return undefined;
}

export const isPlainObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** An own property only: never a value inherited from a prototype. */
export function ownValue(obj: Record<string, unknown>, key: string): unknown {
  return Object.hasOwn(obj, key) ? obj[key] : undefined;
}

export interface PathIssue {
  path: Array<string | number>;
  message: string;
}

const SUBSCHEMA_KEYWORDS = new Set(['items', 'additionalProperties', 'not', 'contains', 'propertyNames', 'if', 'then', 'else', 'unevaluatedItems', 'unevaluatedProperties']);
const SCHEMA_TYPES = new Set(['object', 'array', 'string', 'number', 'integer', 'boolean', 'null']);

/**
 * A response schema is a JSON Schema object that shaping walks (`properties`, `items`): bounded
 * depth, no forbidden keys anywhere, `$ref` only to this document (`#…`), and the keywords shaping
 * reads of the right JSON type. Iterative, so a deep schema cannot exhaust the stack.
 */
export function schemaIssues(schema: unknown): PathIssue[] {
  const issues: PathIssue[] = [];
  if (!isPlainObject(schema)) return [{ path: [], message: 'must be a JSON Schema object' }];
  const stack: Array<{ value: unknown; path: Array<string | number>; depth: number; isSchema: boolean }> = [{ value: schema, path: [], depth: 0, isSchema: true }];
  while (stack.length > 0 && issues.length < 20) {
    const { value, path, depth, isSchema } = stack.pop()!;
    if (depth > MAX_SCHEMA_DEPTH) {
      issues.push({ path, message: `nests deeper than ${MAX_SCHEMA_DEPTH} levels` });
      continue;
    }
    if (Array.isArray(value)) {
      value.forEach((v, i) => stack.push({ value: v, path: [...path, i], depth: depth + 1, isSchema: false }));
      continue;
    }
    if (!isPlainObject(value)) continue;
    for (const key of Object.keys(value)) {
      const v = value[key];
      if (FORBIDDEN_KEYS.has(key)) {
        issues.push({ path: [...path, key], message: `must not use the key "${key}"` });
        continue;
      }
      if (key === '$ref' && typeof v === 'string' && !v.startsWith('#'))
        issues.push({ path: [...path, key], message: 'may only refer to this schema ("#…"); remote references are not fetched' });
      if (isSchema) {
        if (key === 'properties' && !isPlainObject(v)) issues.push({ path: [...path, key], message: 'must be an object of schemas' });
        if (key === 'properties' && isPlainObject(v)) {
          for (const [name, sub] of Object.entries(v)) {
            if (FORBIDDEN_KEYS.has(name)) issues.push({ path: [...path, key, name], message: `must not declare the property "${name}"` });
            else if (!isPlainObject(sub) && typeof sub !== 'boolean') issues.push({ path: [...path, key, name], message: 'must be a schema (an object or a boolean)' });
            else stack.push({ value: sub, path: [...path, key, name], depth: depth + 1, isSchema: true });
          }
          continue;
        }
        if (key === 'items' && !isPlainObject(v) && typeof v !== 'boolean') issues.push({ path: [...path, key], message: 'must be a schema (an object or a boolean)' });
        if (key === 'type') {
          const types = Array.isArray(v) ? v : [v];
          if (types.length === 0 || types.some((t) => typeof t !== 'string' || !SCHEMA_TYPES.has(t)))
            issues.push({ path: [...path, key], message: `must be one of ${[...SCHEMA_TYPES].join(', ')} (or a list of them)` });
        }
      }
      // Keyword shapes are checked where a single sub-schema sits; everything else (maps of schemas,
      // lists, enum/const/default data) is still walked for forbidden keys, $ref and depth.
      stack.push({ value: v, path: [...path, key], depth: depth + 1, isSchema: isSchema && SUBSCHEMA_KEYWORDS.has(key) && isPlainObject(v) });
    }
  }
  return issues;
}

/** What the schema says about the place one segment further down: a sub-schema, or undefined when it says nothing. */
type Step = { ok: true; next: Record<string, unknown> | undefined } | { ok: false; message: string };

function stepInto(node: Record<string, unknown> | undefined, seg: string): Step {
  if (!node) return { ok: true, next: undefined };
  const props = ownValue(node, 'properties');
  const items = ownValue(node, 'items');
  const type = ownValue(node, 'type');
  const isArray = type === 'array' || (isPlainObject(items) && !isPlainObject(props));
  if (isArray) {
    if (!isIndexSegment(seg)) return { ok: false, message: `"${seg}" is not an array index, and the schema declares an array here` };
    return { ok: true, next: isPlainObject(items) ? items : undefined };
  }
  if (isPlainObject(props)) {
    if (!Object.hasOwn(props, seg)) return { ok: false, message: `"${seg}" is not a property the response schema declares (${Object.keys(props).slice(0, 20).join(', ') || 'none'})` };
    const sub = props[seg];
    return { ok: true, next: isPlainObject(sub) ? sub : undefined };
  }
  return { ok: true, next: undefined };
}

/**
 * Mapping targets, checked together against each other and the response schema:
 * - each is a pointer without forbidden segments (also checked per item);
 * - no duplicates; none both a leaf and a parent of another (the root "" stands alone);
 * - an array index is at most MAX_TARGET_INDEX, and the indexes under one array are dense
 *   (0..n-1), so shaping never builds sparse or huge arrays; names and indexes never mix under one parent;
 * - where the schema declares `properties` a segment must be one of them; where it declares an
 *   array a segment must be an index; where it says nothing, anything is accepted below.
 */
export function targetIssues(targets: string[], schema: Record<string, unknown>): PathIssue[] {
  const issues: PathIssue[] = [];
  const parsed = targets.map((t) => parsePointer(t));
  const seen = new Map<string, number>();
  // Parent pointer -> indexes and names used under it, with the first target that used each kind.
  const children = new Map<string, { indexes: Set<number>; names: boolean; first: number; at: string }>();
  const leaves = new Map<string, number>();
  parsed.forEach((segs, i) => {
    const at = (message: string) => issues.push({ path: [i, 'target'], message });
    if (!segs) return;
    const key = JSON.stringify(segs);
    if (seen.has(key)) return at(`duplicates response.mapping.${seen.get(key)}.target`);
    seen.set(key, i);
    leaves.set(key, i);
    let node: Record<string, unknown> | undefined = schema;
    for (let d = 0; d < segs.length; d++) {
      const seg = segs[d]!;
      if (FORBIDDEN_KEYS.has(seg)) return;
      const step = stepInto(node, seg);
      if (!step.ok) return at(`${step.message} (segment ${d + 1})`);
      node = step.next;
      const parentKey = JSON.stringify(segs.slice(0, d));
      const c = children.get(parentKey) ?? { indexes: new Set<number>(), names: false, first: i, at: segs.slice(0, d).map((s) => `/${s.replace(/~/g, '~0').replace(/\//g, '~1')}`).join('') };
      children.set(parentKey, c);
      if (isIndexSegment(seg)) {
        const n = Number(seg);
        if (n > MAX_TARGET_INDEX) return at(`array index ${seg} is above the limit of ${MAX_TARGET_INDEX}`);
        if (c.names) return at(`mixes array indexes and property names under "${c.at}"`);
        c.indexes.add(n);
      } else {
        if (c.indexes.size > 0) return at(`mixes array indexes and property names under "${c.at}"`);
        c.names = true;
      }
    }
  });
  // A target that is a prefix of another would be both a value and a container.
  for (const [key, i] of leaves) {
    const segs = JSON.parse(key) as string[];
    if (children.has(key)) {
      const other = parsed.findIndex((p, j) => j !== i && p && p.length > segs.length && JSON.stringify(p.slice(0, segs.length)) === key);
      if (other >= 0) issues.push({ path: [i, 'target'], message: `is also the parent of response.mapping.${other}.target; a target is either a value or a container` });
    }
  }
  for (const c of children.values()) {
    if (c.indexes.size === 0) continue;
    const max = Math.max(...c.indexes);
    if (max + 1 !== c.indexes.size) {
      const missing = Array.from({ length: max + 1 }, (_, n) => n).filter((n) => !c.indexes.has(n));
      issues.push({ path: [c.first, 'target'], message: `array indexes under "${c.at}" must be dense from 0; missing ${missing.slice(0, 5).join(', ')}${missing.length > 5 ? ', …' : ''}` });
    }
  }
  return issues;
}

/**
 * Mapping sources must not overlap (none equal to or inside another): each byte of the output is
 * then copied at most once, so a shaped output is never larger than the output it came from (a
 * thousand mappings of "" would otherwise multiply it a thousandfold after the site ran).
 */
export function sourceIssues(sources: string[]): PathIssue[] {
  const issues: PathIssue[] = [];
  const parsed = sources.map((s) => parsePointer(s));
  // Sorted by segments, a source inside another directly follows it (or one inside it).
  const order = parsed
    .map((segs, i) => ({ segs, i }))
    .filter((e): e is { segs: string[]; i: number } => e.segs !== undefined)
    .sort((a, b) => {
      const n = Math.min(a.segs.length, b.segs.length);
      for (let k = 0; k < n; k++) if (a.segs[k] !== b.segs[k]) return a.segs[k]! < b.segs[k]! ? -1 : 1;
      return a.segs.length - b.segs.length || a.i - b.i;
    });
  for (let k = 1; k < order.length; k++) {
    // Compare with the nearest earlier source that is not itself reported (the outermost one).
    const prev = order[k - 1]!;
    const cur = order[k]!;
    const inside = prev.segs.length <= cur.segs.length && prev.segs.every((seg, d) => cur.segs[d] === seg);
    if (inside) {
      const [first, second] = prev.i < cur.i ? [prev, cur] : [cur, prev];
      const same = prev.segs.length === cur.segs.length;
      issues.push({
        path: [second.i, 'source'],
        message: same
          ? `duplicates response.mapping.${first.i}.source; each part of the output may be mapped once`
          : `overlaps response.mapping.${first.i}.source; each part of the output may be mapped once`,
      });
      order[k] = prev; // keep comparing later sources with the outer one
    }
  }
  return issues;
}

/** The combined length of all targets (or all sources), bounded so what they carry stays small. */
export function pointersTooLong(pointers: string[]): boolean {
  return pointers.reduce((n, t) => n + t.length, 0) > MAX_TARGETS_CHARS;
}
