// Extraction of typed fields from HTML (cheerio, CSS selectors) or JSON (JSON pointers), and the
// conditions used by `not_found` / `fail` steps. Both engines use it: the browser engine extracts
// from a snapshot of the rendered DOM.

import * as cheerio from 'cheerio';
import { select as cssSelect } from 'cheerio-select';
import type { AnyNode, Element } from 'domhandler';
import * as DomUtils from 'domutils';
import { Parser } from 'parse5';
import { adapter as domAdapter, type Htmlparser2TreeAdapterMap } from 'parse5-htmlparser2-tree-adapter';
import { ServiceError } from '../../shared/errors.ts';
import type { Field, FieldType } from '../../shared/recipes/schema.ts';
import { linearExtract } from '../../shared/regex.ts';

export type CheerioDoc = cheerio.CheerioAPI;
type Sel = cheerio.Cheerio<AnyNode>;

/** Thrown when a recipe's extraction cannot be carried out (bad selector, wrong source type). */
export class ExtractionError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ExtractionError';
  }
}

/**
 * Bounds on a page's structure. parse5 (cheerio's HTML parser) spends time quadratic in the
 * attributes of one tag (each name is compared with every earlier one) and in the depth of open
 * elements (many start tags walk the stack of them): a 270 KB tag of 40,000 attributes parsed for
 * 4 s and 100,000 nested <div>s (500 KB) for 90 s, on the worker thread every organization's runs
 * share. Chromium's parser does not nest deeper than 512 either; no real element has 256
 * attributes. Within these bounds a 5 MiB page parses in about the time of any 5 MiB page.
 */
export const MAX_HTML_DEPTH = 512;
export const MAX_HTML_ATTRIBUTES = 256;

const tooComplex = (what: string) =>
  new ServiceError('upstream_http_error', `The website's page is too complex to read (${what})`, { details: { reason: 'document_too_complex' } });

const isSpace = (c: number) => c === 0x20 || c === 0x09 || c === 0x0a || c === 0x0c || c === 0x0d;

/**
 * Throws when a start tag has more than MAX_HTML_ATTRIBUTES attribute names, read the way the
 * HTML tokenizer reads them; linear in the text. Text inside scripts and comments may count too
 * (never fewer than the parser sees).
 */
function assertAttributeBound(html: string): void {
  const n = html.length;
  let i = 0;
  while ((i = html.indexOf('<', i)) !== -1) {
    i++;
    const first = html.charCodeAt(i) | 0x20;
    if (!(first >= 0x61 && first <= 0x7a)) continue;
    while (i < n && !isSpace(html.charCodeAt(i)) && html[i] !== '/' && html[i] !== '>') i++;
    let attrs = 0;
    for (;;) {
      while (i < n && (isSpace(html.charCodeAt(i)) || html[i] === '/')) i++;
      if (i >= n || html[i] === '>') break;
      if (++attrs > MAX_HTML_ATTRIBUTES) throw tooComplex(`a tag with more than ${MAX_HTML_ATTRIBUTES} attributes`);
      i++; // the first character of a name may be anything, even '='
      while (i < n && !isSpace(html.charCodeAt(i)) && html[i] !== '/' && html[i] !== '>' && html[i] !== '=') i++;
      while (i < n && isSpace(html.charCodeAt(i))) i++;
      if (html[i] !== '=') continue;
      i++;
      while (i < n && isSpace(html.charCodeAt(i))) i++;
      const q = html[i];
      if (q === '"' || q === "'") {
        const end = html.indexOf(q, i + 1);
        i = end === -1 ? n : end + 1;
      } else while (i < n && !isSpace(html.charCodeAt(i)) && html[i] !== '>') i++;
    }
  }
}

type DomParent = Parameters<typeof domAdapter.appendChild>[0];
type DomChild = Parameters<typeof domAdapter.appendChild>[1];

/** cheerio's tree adapter, refusing an element deeper than MAX_HTML_DEPTH as the parser inserts it. */
function boundedAdapter() {
  const depth = new WeakMap<object, number>();
  const depthOf = (node: DomParent): number => {
    const known = depth.get(node);
    if (known !== undefined) return known;
    let d = 0;
    for (let p = (node as { parent?: DomParent | null }).parent; p && d <= MAX_HTML_DEPTH; p = (p as { parent?: DomParent | null }).parent) d++;
    return d;
  };
  const placed = (parent: DomParent, node: DomChild) => {
    if (!domAdapter.isElementNode(node)) return;
    const d = depthOf(parent) + 1;
    if (d > MAX_HTML_DEPTH) throw tooComplex(`elements nested more than ${MAX_HTML_DEPTH} deep`);
    depth.set(node, d);
  };
  return {
    ...domAdapter,
    appendChild(parent: DomParent, node: DomChild) {
      placed(parent, node);
      domAdapter.appendChild(parent, node);
    },
    insertBefore(parent: DomParent, node: DomChild, ref: DomChild) {
      placed(parent, node);
      domAdapter.insertBefore(parent, node, ref);
    },
  } satisfies typeof domAdapter;
}

/**
 * How much HTML is parsed before the thread is given back. Parsing is CPU work on the thread every
 * organization's runs share (and, for HTTP operations run as local activities, the workflow tasks
 * of every run on the worker): a 5 MiB page of ordinary markup takes parse5 seconds. In slices of
 * 16 KiB (a few milliseconds each) other runs, heartbeats and workflow tasks go on in between.
 */
export const HTML_PARSE_SLICE = 16 * 1024;

const yieldToLoop = () => new Promise<void>((resolve) => setImmediate(resolve));

/**
 * A website's HTML, parsed within the bounds above (upstream_http_error `document_too_complex`
 * beyond them), a slice at a time: parse5's own streaming (the tokenizer takes chunks and holds a
 * tag, entity or surrogate pair cut at a slice's end until the next), so the document is exactly
 * the one a single parse makes. `signal` ends the parse between slices (a cancelled run).
 */
export async function loadHtml(html: string, signal?: AbortSignal, slice = HTML_PARSE_SLICE): Promise<CheerioDoc> {
  assertAttributeBound(html);
  const options = { treeAdapter: boundedAdapter(), scriptingEnabled: true };
  const parser = new Parser<Htmlparser2TreeAdapterMap>(options);
  for (let at = 0; ; ) {
    let end = Math.min(html.length, at + slice);
    // never split a surrogate pair (parse5 would wait for its second half anyway; this keeps it simple)
    if (end < html.length && (html.charCodeAt(end - 1) & 0xfc00) === 0xd800) end++;
    parser.tokenizer.write(html.slice(at, end), end === html.length);
    at = end;
    if (at === html.length) break;
    await yieldToLoop();
    signal?.throwIfAborted();
  }
  return cheerio.load(parser.document, options as Parameters<typeof cheerio.load>[1]);
}

// ------------------------------------------------------------------------------------------
// Value coercion

const MAX_TEXT = 20_000;

export function normalizeText(s: string): string {
  return s.replace(/\s+/g, ' ').trim();
}

/** `£1,234.50` → 1234.5; `-3 °C` → -3; commas are thousands separators. */
export function parseNumber(s: string): number | null {
  const m = /[-−]?\d[\d,]*(?:\.\d+)?|[-−]?\.\d+/.exec(s);
  if (!m) return null;
  const n = Number(m[0].replace(/,/g, '').replace('−', '-'));
  return Number.isFinite(n) ? n : null;
}

export function parseInteger(s: string): number | null {
  const m = /[-−]?\d[\d,]*/.exec(s);
  if (!m) return null;
  const n = Number(m[0].replace(/,/g, '').replace('−', '-'));
  return Number.isSafeInteger(n) ? n : null;
}

const pad = (n: number, w = 2) => String(n).padStart(w, '0');

/** ISO date `YYYY-MM-DD` from an ISO string or a written date (`12 March 2024`). */
export function parseDate(s: string): string | null {
  const iso = /(\d{4})-(\d{2})-(\d{2})/.exec(s);
  if (iso) return `${iso[1]}-${iso[2]}-${iso[3]}`;
  const t = Date.parse(s);
  if (Number.isNaN(t)) return null;
  const d = new Date(t); // written dates without a zone parse as local midnight: read local parts
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}`;
}

/** ISO date-time in UTC (`2025-06-01T12:00:00Z`); a time without a zone is taken as UTC. */
export function parseDateTime(s: string): string | null {
  let text = s.trim();
  if (/^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?$/.test(text)) text = `${text.replace(' ', 'T')}Z`;
  else if (/^\d{4}-\d{2}-\d{2}$/.test(text)) text = `${text}T00:00:00Z`;
  const t = Date.parse(text);
  if (Number.isNaN(t)) return null;
  return new Date(t).toISOString().replace(/\.000Z$/, 'Z');
}

/** A field's `pattern` (the recipe's author's) on the page's text: linear time (shared/regex.ts). */
function applyPattern(text: string, pattern: string | undefined): string | null {
  if (!pattern) return text;
  return linearExtract(pattern, text.slice(0, MAX_TEXT));
}

/** Converts a scalar read from a page or JSON document to the field's type; null when it cannot. */
export function coerce(raw: unknown, type: FieldType, f: Field): unknown {
  if (raw === undefined || raw === null) return null;
  if (type === 'json') return raw;
  if (typeof raw !== 'string') {
    // JSON values
    switch (type) {
      case 'number':
        return typeof raw === 'number' ? raw : null;
      case 'integer':
        return typeof raw === 'number' ? (Number.isInteger(raw) ? raw : Math.trunc(raw)) : null;
      case 'boolean':
        if (typeof raw === 'boolean') return raw;
        if (typeof raw === 'number') return raw !== 0;
        return null;
      case 'text':
      case 'attribute':
      case 'html':
        return typeof raw === 'object' ? JSON.stringify(raw) : String(raw);
      default:
        if (typeof raw === 'number' && (type === 'date' || type === 'datetime')) {
          const iso = new Date(raw > 1e11 ? raw : raw * 1000).toISOString();
          return type === 'date' ? iso.slice(0, 10) : iso.replace(/\.000Z$/, 'Z');
        }
        return null;
    }
  }
  const picked = applyPattern(type === 'html' ? raw : normalizeText(raw), f.pattern);
  if (picked === null) return null;
  switch (type) {
    case 'text':
    case 'attribute':
    case 'html':
      return picked;
    case 'number':
      return parseNumber(picked);
    case 'integer':
      return parseInteger(picked);
    case 'boolean': {
      const t = picked.trim().toLowerCase();
      if (f.true_values) return f.true_values.some((v) => v.trim().toLowerCase() === t);
      if (['true', 'yes', '1', 'on'].includes(t)) return true;
      if (['false', 'no', '0', 'off', ''].includes(t)) return false;
      return null;
    }
    case 'date':
      return parseDate(picked);
    case 'datetime':
      return parseDateTime(picked);
    default:
      return picked;
  }
}

function orDefault(v: unknown, f: Field): unknown {
  if (v === null || v === undefined) return f.default !== undefined ? f.default : f.type === 'list' ? [] : null;
  return v;
}

// ------------------------------------------------------------------------------------------
// HTML

export interface ExtractOptions {
  /** Resolves a `limit` given as a template. */
  resolveLimit(limit: number | string): number;
  /** URL of the document, to resolve `url` fields. */
  baseUrl?: string;
}

function resolveUrlValue(raw: unknown, base: string | undefined): string | null {
  if (typeof raw !== 'string' || raw.trim() === '') return null;
  try {
    const u = base ? new URL(raw.trim(), base) : new URL(raw.trim());
    return u.protocol === 'http:' || u.protocol === 'https:' ? u.toString() : null;
  } catch {
    return null;
  }
}

// ------------------------------------------------------------------------------------------
// Selectors within a work budget

/**
 * Steps of selector matching (calls into the document: parent, siblings, children, name,
 * attribute…) one parsed document allows, over every selector run on it. Matching is synchronous
 * CPU work on the thread every organization's runs share, and some selectors cost far more than
 * the page's size: unbounded, `li.none ~ li ~ li ~ li` over 500 items took 59 s,
 * `div:has(div:has(div:has(span)))` 400 levels deep 43 s, and `tr:nth-child(2n)` over a 5 MiB table
 * of 31,000 rows 16 s (each row counts its earlier siblings). Measured on a 5 MiB page of 31,000
 * rows, an ordinary selector (`table tr.r`, `td.price + td span`, `td:nth-child(2)`) takes at most
 * 512,000 steps, and 5,000,000 steps take about 90 ms of the thread: this bound, 20,000,000, holds
 * the thread at most about a third of a second per page, and leaves a recipe room for dozens of
 * ordinary selectors over the largest page.
 */
export const SELECTOR_WORK_PER_DOCUMENT = 20_000_000;

class SelectorBudgetSpent extends Error {}

type DomAdapter = typeof DomUtils;
/** The document functions css-select calls (its Adapter), each counting one step. */
const COUNTED = ['isTag', 'existsOne', 'getAttributeValue', 'getChildren', 'getName', 'getParent', 'getSiblings', 'getText', 'hasAttrib', 'removeSubsets', 'findAll', 'findOne', 'prevElementSibling'] as const;

const adapters = new WeakMap<CheerioDoc, DomAdapter>();

/** The counting adapter of one document: its budget is shared by every selector run on it. */
function adapterOf($: CheerioDoc): DomAdapter {
  let adapter = adapters.get($);
  if (!adapter) {
    let left = SELECTOR_WORK_PER_DOCUMENT;
    const counted: Record<string, unknown> = { ...DomUtils };
    for (const name of COUNTED) {
      // Three fixed parameters (no adapter function takes more), not a rest parameter: this runs
      // for every step of every match, and a spread made the steps twice as slow.
      const fn = DomUtils[name] as (a: unknown, b: unknown, c: unknown) => unknown;
      counted[name] = (a: unknown, b: unknown, c: unknown) => {
        if (--left < 0) throw new SelectorBudgetSpent();
        return fn(a, b, c);
      };
    }
    adapter = counted as DomAdapter;
    adapters.set($, adapter);
  }
  return adapter;
}

/**
 * `scope.find(selector)`, or `$(selector)` without a scope, as cheerio runs them, but matching
 * through the document's counting adapter: past SELECTOR_WORK_PER_DOCUMENT steps the run fails
 * (ExtractionError) instead of holding the thread.
 */
export function selectIn($: CheerioDoc, scope: Sel | null, selector: string): Sel {
  const base = scope ?? $.root();
  const context = base.toArray();
  // cheerio's _findBySelector: a selector starting with a sibling combinator or :scope is matched
  // from the context itself, any other from its children.
  const elems = /^\s*(?:[+~]|:scope\b)/.test(selector) ? context : base.children().toArray();
  const o = base.options;
  try {
    const found = cssSelect(
      selector,
      elems,
      {
        context,
        root: $.root()[0],
        xmlMode: o.xmlMode,
        lowerCaseTags: o.lowerCaseTags,
        lowerCaseAttributeNames: o.lowerCaseAttributeNames,
        pseudos: o.pseudos,
        quirksMode: o.quirksMode,
        adapter: adapterOf($),
      },
      Number.POSITIVE_INFINITY,
    );
    return $(found as Element[]);
  } catch (e) {
    if (e instanceof SelectorBudgetSpent) {
      throw new ExtractionError(`the selector "${selector}" needs more work than a page may take (${SELECTOR_WORK_PER_DOCUMENT.toLocaleString('en')} matching steps a page): write it without long chains of sibling (~) or :has() steps`);
    }
    throw new ExtractionError(`invalid CSS selector "${selector}": ${(e as Error).message}`);
  }
}

function find($: CheerioDoc, scope: Sel | null, selector: string | undefined): Sel {
  if (!selector) return scope ?? $.root();
  return selectIn($, scope, selector);
}

function htmlScalar($: CheerioDoc, el: Sel, f: Field): unknown {
  if (f.type === 'html') return el.html() ?? '';
  if (f.attribute) return el.attr(f.attribute) ?? null;
  if (f.type === 'json') {
    try {
      return JSON.parse(el.text());
    } catch {
      return null;
    }
  }
  return el.text().slice(0, MAX_TEXT);
}

export function extractHtmlField($: CheerioDoc, scope: Sel | null, f: Field, opts: ExtractOptions): unknown {
  if (f.pointer !== undefined) throw new ExtractionError('a JSON pointer cannot be used on an HTML document');
  const matches = find($, scope, f.selector);
  switch (f.type) {
    case 'exists':
      return matches.length > 0;
    case 'count':
      return matches.length;
    case 'list': {
      const limit = f.limit !== undefined ? opts.resolveLimit(f.limit) : Infinity;
      const out: unknown[] = [];
      for (const node of matches.toArray()) {
        if (out.length >= limit) break;
        const el = $(node);
        out.push(f.fields ? extractHtmlObject($, el, f.fields, opts) : extractHtmlField($, el, f.item!, opts));
      }
      return out;
    }
    case 'object':
      if (matches.length === 0) return orDefault(null, f);
      return extractHtmlObject($, matches.first(), f.fields!, opts);
    case 'url':
      if (matches.length === 0) return orDefault(null, f);
      return orDefault(resolveUrlValue(matches.first().attr(f.attribute ?? 'href'), opts.baseUrl), f);
    case 'boolean':
      if (!f.true_values && !f.attribute && !f.pattern) return matches.length > 0;
      if (matches.length === 0) return orDefault(null, f) ?? false;
      return orDefault(coerce(htmlScalar($, matches.first(), f), 'boolean', f), f);
    default:
      if (matches.length === 0) return orDefault(null, f);
      return orDefault(coerce(htmlScalar($, matches.first(), f), f.type, f), f);
  }
}

export function extractHtmlObject($: CheerioDoc, scope: Sel | null, fields: Record<string, Field>, opts: ExtractOptions): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [k, f] of Object.entries(fields)) out[k] = extractHtmlField($, scope, f, opts);
  return out;
}

// ------------------------------------------------------------------------------------------
// JSON

/** RFC 6901 JSON pointer; undefined when absent. */
export function jsonPointer(doc: unknown, pointer: string | undefined): unknown {
  if (!pointer) return doc;
  if (!pointer.startsWith('/')) throw new ExtractionError(`invalid JSON pointer "${pointer}"`);
  let cur: unknown = doc;
  for (const raw of pointer.slice(1).split('/')) {
    const key = raw.replace(/~1/g, '/').replace(/~0/g, '~');
    if (Array.isArray(cur)) {
      if (!/^(0|[1-9]\d*)$/.test(key)) return undefined;
      cur = cur[Number(key)];
    } else if (cur && typeof cur === 'object') {
      cur = Object.prototype.hasOwnProperty.call(cur, key) ? (cur as Record<string, unknown>)[key] : undefined;
    } else return undefined;
  }
  return cur;
}

export function extractJsonField(doc: unknown, f: Field, opts: ExtractOptions): unknown {
  if (f.selector !== undefined) throw new ExtractionError('a CSS selector cannot be used on a JSON document');
  const v = jsonPointer(doc, f.pointer);
  switch (f.type) {
    case 'exists':
      return v !== undefined && v !== null;
    case 'count':
      return Array.isArray(v) ? v.length : v && typeof v === 'object' ? Object.keys(v).length : 0;
    case 'list': {
      if (!Array.isArray(v)) return orDefault(null, f);
      const limit = f.limit !== undefined ? opts.resolveLimit(f.limit) : Infinity;
      return v.slice(0, limit === Infinity ? undefined : limit).map((item) => (f.fields ? extractJsonObject(item, f.fields, opts) : extractJsonField(item, f.item!, opts)));
    }
    case 'object':
      if (v === undefined || v === null || typeof v !== 'object') return orDefault(null, f);
      return extractJsonObject(v, f.fields!, opts);
    case 'url':
      return orDefault(resolveUrlValue(v, opts.baseUrl), f);
    default:
      return orDefault(coerce(v, f.type, f), f);
  }
}

export function extractJsonObject(doc: unknown, fields: Record<string, Field>, opts: ExtractOptions): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [k, f] of Object.entries(fields)) out[k] = extractJsonField(doc, f, opts);
  return out;
}

export function isEmptyValue(v: unknown): boolean {
  if (v === undefined || v === null || v === '') return true;
  if (Array.isArray(v)) return v.length === 0;
  if (typeof v === 'object') return Object.keys(v).length === 0;
  return false;
}
