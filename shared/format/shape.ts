// Response shaping: include / exclude / schema projection / JSON-Pointer mapping, and the
// text and markdown renderings. Pure functions, no model involved.
import type { JsonSchema } from '../catalog/types.ts';
import type { ResponseSpec } from '../schemas/query.ts';

type Json = null | boolean | number | string | Json[] | { [k: string]: Json };

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

function schemaProps(schema: JsonSchema | undefined): Record<string, JsonSchema> | undefined {
  if (!schema) return undefined;
  if (isObject(schema.properties)) return schema.properties as Record<string, JsonSchema>;
  return undefined;
}

/** The paths response.include / exclude accept: every declared field, dotted, array items transparent. */
export function selectableFields(schema: JsonSchema, prefix = ''): string[] {
  const out: string[] = [];
  const s = schema.type === 'array' && isObject(schema.items) ? (schema.items as JsonSchema) : schema;
  for (const [name, sub] of Object.entries(schemaProps(s) ?? {})) {
    const path = prefix ? `${prefix}.${name}` : name;
    out.push(path);
    out.push(...selectableFields(sub, path));
  }
  return out;
}

/** Paths not among the selectable fields, with their index, for precise validation errors. */
export function unknownFieldPaths(paths: string[], schema: JsonSchema): Array<{ index: number; path: string }> {
  const known = new Set(selectableFields(schema));
  return paths.map((path, index) => ({ index, path })).filter((p) => !known.has(p.path));
}

interface PathTree {
  [segment: string]: PathTree | true;
}

function toTree(paths: string[]): PathTree {
  const tree: PathTree = {};
  for (const p of paths) {
    let node = tree;
    const segs = p.split('.');
    segs.forEach((seg, i) => {
      if (i === segs.length - 1) node[seg] = true;
      else {
        const next = node[seg];
        if (next === true) return;
        node = (node[seg] = next ?? {}) as PathTree;
      }
    });
  }
  return tree;
}

function pick(value: unknown, tree: PathTree): unknown {
  if (Array.isArray(value)) return value.map((v) => pick(v, tree));
  if (!isObject(value)) return value;
  const out: Record<string, unknown> = {};
  for (const [k, sub] of Object.entries(tree)) {
    if (!(k in value)) continue;
    out[k] = sub === true ? value[k] : pick(value[k], sub);
  }
  return out;
}

function omit(value: unknown, tree: PathTree): unknown {
  if (Array.isArray(value)) return value.map((v) => omit(v, tree));
  if (!isObject(value)) return value;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value)) {
    const sub = tree[k];
    if (sub === true) continue;
    out[k] = sub ? omit(v, sub) : v;
  }
  return out;
}

/** Keep what the target schema declares, recursively; values the schema does not describe pass as they are. */
function project(value: unknown, schema: JsonSchema): unknown {
  if (Array.isArray(value) && isObject(schema.items)) return value.map((v) => project(v, schema.items as JsonSchema));
  const props = schemaProps(schema);
  if (!props || !isObject(value)) return value;
  const out: Record<string, unknown> = {};
  for (const [k, sub] of Object.entries(props)) if (k in value) out[k] = project(value[k], sub);
  return out;
}

function pointerSegments(pointer: string): string[] {
  if (pointer === '') return [];
  if (!pointer.startsWith('/')) throw new Error(`"${pointer}" is not a JSON Pointer`);
  return pointer
    .slice(1)
    .split('/')
    .map((s) => s.replace(/~1/g, '/').replace(/~0/g, '~'));
}

export function getPointer(doc: unknown, pointer: string): unknown {
  let cur: unknown = doc;
  for (const seg of pointerSegments(pointer)) {
    if (Array.isArray(cur)) cur = cur[Number(seg)];
    else if (isObject(cur)) cur = cur[seg];
    else return undefined;
  }
  return cur;
}

function setPointer(doc: Record<string, unknown>, pointer: string, value: unknown): unknown {
  const segs = pointerSegments(pointer);
  if (segs.length === 0) return value;
  let cur: Record<string, unknown> | unknown[] = doc;
  segs.forEach((seg, i) => {
    const last = i === segs.length - 1;
    const nextIsIndex = !last && /^\d+$/.test(segs[i + 1]!);
    const key: string | number = Array.isArray(cur) ? Number(seg) : seg;
    if (last) (cur as Record<string | number, unknown>)[key] = value;
    else {
      const existing = (cur as Record<string | number, unknown>)[key];
      const next = isObject(existing) || Array.isArray(existing) ? existing : nextIsIndex ? [] : {};
      (cur as Record<string | number, unknown>)[key] = next;
      cur = next as Record<string, unknown> | unknown[];
    }
  });
  return doc;
}

function scalarText(v: unknown): string {
  if (v === null || v === undefined) return '—';
  if (typeof v === 'object') return JSON.stringify(v);
  return String(v);
}

function humanize(key: string): string {
  const s = key.replace(/_/g, ' ');
  return s.charAt(0).toUpperCase() + s.slice(1);
}

/** Plain text: one "Field: value" line per scalar, nested blocks indented. */
export function renderText(value: unknown, indent = ''): string {
  if (Array.isArray(value)) {
    return value
      .map((v, i) => (isObject(v) || Array.isArray(v) ? `${indent}${i + 1}.\n${renderText(v, indent + '   ')}` : `${indent}- ${scalarText(v)}`))
      .join('\n');
  }
  if (isObject(value)) {
    return Object.entries(value)
      .map(([k, v]) =>
        isObject(v) || Array.isArray(v) ? `${indent}${humanize(k)}:\n${renderText(v, indent + '  ')}` : `${indent}${humanize(k)}: ${scalarText(v)}`,
      )
      .join('\n');
  }
  return `${indent}${scalarText(value)}`;
}

const mdCell = (v: unknown) => scalarText(v).replace(/\|/g, '\\|').replace(/\n/g, ' ');

/** Markdown: headings for objects, tables for lists of flat objects, bullet lists otherwise. */
export function renderMarkdown(value: unknown, depth = 2): string {
  if (Array.isArray(value)) {
    if (value.length > 0 && value.every(isObject)) {
      const cols = [...new Set(value.flatMap((v) => Object.keys(v as object)))];
      const head = `| ${cols.map(humanize).join(' | ')} |\n| ${cols.map(() => '---').join(' | ')} |`;
      const rows = value.map((v) => `| ${cols.map((c) => mdCell((v as Record<string, unknown>)[c])).join(' | ')} |`);
      return [head, ...rows].join('\n');
    }
    return value.map((v) => `- ${scalarText(v)}`).join('\n');
  }
  if (isObject(value)) {
    const scalars = Object.entries(value).filter(([, v]) => !isObject(v) && !Array.isArray(v));
    const blocks = Object.entries(value).filter(([, v]) => isObject(v) || Array.isArray(v));
    const parts: string[] = [];
    if (scalars.length) parts.push(scalars.map(([k, v]) => `- **${humanize(k)}:** ${scalarText(v)}`).join('\n'));
    for (const [k, v] of blocks) parts.push(`${'#'.repeat(Math.min(depth, 6))} ${humanize(k)}\n\n${renderMarkdown(v, depth + 1)}`);
    return parts.join('\n\n');
  }
  return scalarText(value);
}

/** Apply a validated `response` object to a workflow output. */
export function shapeOutput(output: unknown, response: ResponseSpec): unknown {
  let shaped: unknown = output;
  if (response.include) shaped = pick(shaped, toTree(response.include));
  else if (response.exclude) shaped = omit(shaped, toTree(response.exclude));
  else if (response.schema && response.mapping) {
    let doc: Record<string, unknown> = {};
    for (const m of response.mapping) doc = setPointer(doc, m.target, getPointer(output, m.source)) as Record<string, unknown>;
    shaped = doc;
  } else if (response.schema) shaped = project(output, response.schema as JsonSchema);
  switch (response.format ?? 'json') {
    case 'text':
      return renderText(shaped);
    case 'markdown':
      return renderMarkdown(shaped);
    default:
      return shaped as Json;
  }
}
