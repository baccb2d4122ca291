// Response shaping: include / exclude / schema projection / JSON-Pointer mapping, and the
// text and markdown renderings. Pure functions, no model involved.
import type { JsonSchema } from '../catalog/types.ts';
import type { ResponseSpec } from '../schemas/query.ts';
import { FORBIDDEN_KEYS, MAX_TARGET_INDEX, isIndexSegment, ownValue, parsePointer } from './pointer.ts';

type Json = null | boolean | number | string | Json[] | { [k: string]: Json };

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

function schemaProps(schema: JsonSchema | undefined): Record<string, unknown> | undefined {
  if (!schema) return undefined;
  const props = ownValue(schema, 'properties');
  if (isObject(props)) return props;
  return undefined;
}

/**
 * Most fields an output schema may declare (a builder definition with more is refused), as many as
 * one `response.include` can name. Every path is written out in full, so a deep schema of many
 * leaves would otherwise become megabytes of `selectable_fields` in catalog detail and MCP answers.
 */
export const MAX_SELECTABLE_FIELDS = 1000;
/** Most characters all of an output schema's field paths may take together. */
export const MAX_SELECTABLE_FIELDS_CHARS = 64 * 1024;

/**
 * The paths response.include / exclude accept: every declared field, dotted, array items
 * transparent, in schema order. At most `limit` of them (the first ones): the walk stops there.
 */
export function selectableFields(schema: JsonSchema, limit = MAX_SELECTABLE_FIELDS): string[] {
  const out: string[] = [];
  const walk = (schema: JsonSchema, prefix: string, depth: number) => {
    const s = schema.type === 'array' && isObject(schema.items) ? (schema.items as JsonSchema) : schema;
    for (const [name, sub] of Object.entries(schemaProps(s) ?? {})) {
      if (out.length >= limit) return;
      const path = prefix ? `${prefix}.${name}` : name;
      out.push(path);
      if (isObject(sub) && depth < MAX_SHAPE_DEPTH) walk(sub, path, depth + 1);
    }
  };
  walk(schema, '', 0);
  return out;
}

/** Paths not among the selectable fields, with their index, for precise validation errors. */
export function unknownFieldPaths(paths: string[], schema: JsonSchema): Array<{ index: number; path: string }> {
  const known = new Set(selectableFields(schema));
  return paths.map((path, index) => ({ index, path })).filter((p) => !known.has(p.path));
}

// Everything below is built from user data (paths, pointers, schemas, site output), so it is
// written to be total even on unvalidated input: trees are Maps, built objects have no prototype,
// reads are own properties, forbidden keys are skipped, arrays are built densely, and recursion is
// bounded by MAX_SHAPE_DEPTH (deeper values pass through unchanged).

/** Deeper nesting than this is passed through as it is instead of walked (keeps the stack safe). */
export const MAX_SHAPE_DEPTH = 64;
/** Targets with more segments than this are ignored (validation allows at most 1000 characters). */
const MAX_TARGET_SEGMENTS = 1000;

type PathTree = Map<string, PathTree | true>;

/** A JSON object with no prototype: no key a site or a caller chooses can reach Object.prototype. */
function bare(): Record<string, unknown> {
  return Object.create(null) as Record<string, unknown>;
}

function toTree(paths: readonly string[]): PathTree {
  const tree: PathTree = new Map();
  for (const p of paths) {
    if (typeof p !== 'string') continue;
    const segs = p.split('.');
    if (segs.some((seg) => FORBIDDEN_KEYS.has(seg))) continue;
    let node = tree;
    for (let i = 0; i < segs.length; i++) {
      const seg = segs[i]!;
      if (i === segs.length - 1) {
        node.set(seg, true);
        break;
      }
      const next = node.get(seg);
      if (next === true) break; // the whole field is already selected
      const child: PathTree = next ?? new Map();
      node.set(seg, child);
      node = child;
    }
  }
  return tree;
}

function pick(value: unknown, tree: PathTree, depth = 0): unknown {
  if (depth > MAX_SHAPE_DEPTH) return value;
  if (Array.isArray(value)) return value.map((v) => pick(v, tree, depth + 1));
  if (!isObject(value)) return value;
  const out = bare();
  for (const [k, sub] of tree) {
    if (!Object.hasOwn(value, k)) continue;
    out[k] = sub === true ? value[k] : pick(value[k], sub, depth + 1);
  }
  return out;
}

function omit(value: unknown, tree: PathTree, depth = 0): unknown {
  if (depth > MAX_SHAPE_DEPTH) return value;
  if (Array.isArray(value)) return value.map((v) => omit(v, tree, depth + 1));
  if (!isObject(value)) return value;
  const out = bare();
  for (const k of Object.keys(value)) {
    const sub = tree.get(k);
    // A site's own "__proto__" key is data, but no shaped object carries one onward.
    if (sub === true || FORBIDDEN_KEYS.has(k)) continue;
    out[k] = sub ? omit(value[k], sub, depth + 1) : value[k];
  }
  return out;
}

/** Keep what the target schema declares, recursively; values the schema does not describe pass as they are. */
function project(value: unknown, schema: JsonSchema, depth = 0): unknown {
  if (depth > MAX_SHAPE_DEPTH) return value;
  const items = ownValue(schema, 'items');
  if (Array.isArray(value) && isObject(items)) return value.map((v) => project(v, items, depth + 1));
  const props = schemaProps(schema);
  if (!props || !isObject(value)) return value;
  const out = bare();
  for (const k of Object.keys(props)) {
    const sub = props[k];
    if (FORBIDDEN_KEYS.has(k) || !Object.hasOwn(value, k)) continue;
    out[k] = isObject(sub) ? project(value[k], sub, depth + 1) : value[k];
  }
  return out;
}

/** The value at a pointer, reading own properties and in-range indexes only; undefined when absent. */
export function getPointer(doc: unknown, pointer: string): unknown {
  const segs = parsePointer(pointer);
  if (!segs) return undefined;
  let cur: unknown = doc;
  for (const seg of segs) {
    if (FORBIDDEN_KEYS.has(seg)) return undefined;
    if (Array.isArray(cur)) {
      if (!isIndexSegment(seg)) return undefined;
      const i = Number(seg);
      cur = i < cur.length ? cur[i] : undefined;
    } else if (isObject(cur)) cur = ownValue(cur, seg);
    else return undefined;
  }
  return cur;
}

/** A target tree: a leaf holds a value, an inner node its children by segment. */
interface TargetNode {
  leaf: boolean;
  value?: unknown;
  kids: Map<string, TargetNode>;
}

/** Place a value at a target; a target that cannot be placed (bad pointer, clash, huge index) is skipped. */
function place(root: TargetNode, target: string, value: unknown) {
  const segs = parsePointer(target);
  if (!segs || segs.length > MAX_TARGET_SEGMENTS) return;
  if (segs.some((seg) => FORBIDDEN_KEYS.has(seg) || (isIndexSegment(seg) && Number(seg) > MAX_TARGET_INDEX))) return;
  let node = root;
  for (const seg of segs) {
    if (node.leaf) return; // a value cannot also be a container
    let next = node.kids.get(seg);
    if (!next) {
      next = { leaf: false, kids: new Map() };
      node.kids.set(seg, next);
    }
    node = next;
  }
  if (node.leaf || node.kids.size > 0) return; // first mapping wins; a container is not overwritten
  node.leaf = true;
  node.value = value;
}

/** Plain JSON from a target tree. Arrays are dense: their items in index order, never padded. */
function build(node: TargetNode): unknown {
  if (node.leaf) return node.value;
  const keys = [...node.kids.keys()];
  if (keys.length > 0 && keys.every(isIndexSegment)) {
    return keys
      .map(Number)
      .sort((a, b) => a - b)
      .map((i) => build(node.kids.get(String(i))!) ?? null);
  }
  const out = bare();
  for (const k of keys) {
    const v = build(node.kids.get(k)!);
    if (v !== undefined) out[k] = v;
  }
  return out;
}

function mapOutput(output: unknown, mapping: ReadonlyArray<{ target: string; source: string }>): unknown {
  const root: TargetNode = { leaf: false, kids: new Map() };
  for (const m of mapping) place(root, m.target, getPointer(output, m.source));
  const built = build(root);
  return built === undefined ? null : built;
}

/** JSON.stringify recurses natively and throws on values nested thousands deep; text never does. */
function jsonText(v: unknown): string {
  try {
    return JSON.stringify(v) ?? '—';
  } catch {
    return '[nested too deeply to show]';
  }
}

function scalarText(v: unknown): string {
  if (v === null || v === undefined) return '—';
  if (typeof v === 'object') return jsonText(v);
  return String(v);
}

function humanize(key: string): string {
  const s = key.replace(/_/g, ' ');
  return s.charAt(0).toUpperCase() + s.slice(1);
}

/** Plain text: one "Field: value" line per scalar, nested blocks indented (JSON below MAX_SHAPE_DEPTH). */
export function renderText(value: unknown, indent = '', depth = 0): string {
  if (depth > MAX_SHAPE_DEPTH) return `${indent}${jsonText(value)}`;
  if (Array.isArray(value)) {
    return value
      .map((v, i) =>
        isObject(v) || Array.isArray(v) ? `${indent}${i + 1}.\n${renderText(v, indent + '   ', depth + 1)}` : `${indent}- ${scalarText(v)}`,
      )
      .join('\n');
  }
  if (isObject(value)) {
    return Object.keys(value)
      .map((k) => {
        const v = value[k];
        return isObject(v) || Array.isArray(v) ? `${indent}${humanize(k)}:\n${renderText(v, indent + '  ', depth + 1)}` : `${indent}${humanize(k)}: ${scalarText(v)}`;
      })
      .join('\n');
  }
  return `${indent}${scalarText(value)}`;
}

const mdCell = (v: unknown) => scalarText(v).replace(/\|/g, '\\|').replace(/\n/g, ' ');

/** Markdown: headings for objects, tables for lists of flat objects, bullet lists otherwise. */
export function renderMarkdown(value: unknown, depth = 2): string {
  if (depth > MAX_SHAPE_DEPTH) return scalarText(value);
  if (Array.isArray(value)) {
    if (value.length > 0 && value.every(isObject)) {
      const cols = [...new Set(value.flatMap((v) => Object.keys(v as object)))];
      const head = `| ${cols.map(humanize).join(' | ')} |\n| ${cols.map(() => '---').join(' | ')} |`;
      const rows = value.map((v) => `| ${cols.map((c) => mdCell(ownValue(v as Record<string, unknown>, c))).join(' | ')} |`);
      return [head, ...rows].join('\n');
    }
    return value.map((v) => `- ${scalarText(v)}`).join('\n');
  }
  if (isObject(value)) {
    const entries = Object.keys(value).map((k) => [k, value[k]] as const);
    const scalars = entries.filter(([, v]) => !isObject(v) && !Array.isArray(v));
    const blocks = entries.filter(([, v]) => isObject(v) || Array.isArray(v));
    const parts: string[] = [];
    if (scalars.length) parts.push(scalars.map(([k, v]) => `- **${humanize(k)}:** ${scalarText(v)}`).join('\n'));
    for (const [k, v] of blocks) parts.push(`${'#'.repeat(Math.min(depth, 6))} ${humanize(k)}\n\n${renderMarkdown(v, depth + 1)}`);
    return parts.join('\n\n');
  }
  return scalarText(value);
}

/** Largest text or markdown rendering (UTF-8 bytes): what Temporal can carry in the envelope. */
export const MAX_RENDERED_BYTES = 1_572_864;

/**
 * A rendering can be many times longer than its JSON (indentation, labels), so it is cut at
 * MAX_RENDERED_BYTES with a visible note rather than fail after the site ran.
 */
export function clampRendering(text: string, maxBytes = MAX_RENDERED_BYTES): string {
  if (text.length * 3 <= maxBytes) return text;
  const note = '\n... [truncated: the rendering is longer than the service can carry; ask for format json or fewer fields]';
  const budget = maxBytes - note.length;
  let bytes = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    const high = c >= 0xd800 && c <= 0xdbff;
    const size = c < 0x80 ? 1 : c < 0x800 ? 2 : high ? 4 : 3;
    if (bytes + size > budget) return text.slice(0, i) + note;
    bytes += size;
    if (high) i++; // the low surrogate was counted with its pair
  }
  return text;
}

const strings = (v: unknown): string[] | undefined => (Array.isArray(v) ? v.filter((x): x is string => typeof x === 'string') : undefined);

/**
 * Apply a `response` object to a workflow output. Validation (shared/schemas/query.ts) ran before
 * dispatch; this still takes nothing on trust, because it runs after the site did and inside the
 * workflow sandbox every organization shares: malformed parts are ignored, never thrown on.
 */
export function shapeOutput(output: unknown, response: ResponseSpec): unknown {
  if (!isObject(response)) return output;
  const include = strings(ownValue(response, 'include'));
  const exclude = strings(ownValue(response, 'exclude'));
  const schema = ownValue(response, 'schema');
  const mapping = ownValue(response, 'mapping');
  let shaped: unknown = output;
  if (include) shaped = pick(shaped, toTree(include));
  else if (exclude) shaped = omit(shaped, toTree(exclude));
  else if (isObject(schema) && Array.isArray(mapping)) {
    const pairs = mapping.filter(isObject).flatMap((m) => {
      const target = ownValue(m, 'target');
      const source = ownValue(m, 'source');
      return typeof target === 'string' && typeof source === 'string' ? [{ target, source }] : [];
    });
    shaped = mapOutput(output, pairs);
  } else if (isObject(schema)) shaped = project(output, schema);
  switch (ownValue(response, 'format')) {
    case 'text':
      return clampRendering(renderText(shaped));
    case 'markdown':
      return clampRendering(renderMarkdown(shaped));
    default:
      return shaped as Json;
  }
}
