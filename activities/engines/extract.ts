// Extraction of typed fields from HTML (cheerio, CSS selectors) or JSON (JSON pointers), and the
// conditions used by `not_found` / `fail` steps. Both engines use it: the browser engine extracts
// from a snapshot of the rendered DOM.

import * as cheerio from 'cheerio';
import { select as cssSelect } from 'cheerio-select';
import { hasChildren, isComment, isDocument, isText, type AnyNode, type Element } from 'domhandler';
import * as DomUtils from 'domutils';
import { Parser, serializeOuter } from 'parse5';
import { adapter as domAdapter, type Htmlparser2TreeAdapterMap } from 'parse5-htmlparser2-tree-adapter';
import { ServiceError } from '../../shared/errors.ts';
import type { Field, FieldType } from '../../shared/recipes/schema.ts';
import { linearExtract, matchCost } from '../../shared/regex.ts';

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

/**
 * Nodes (elements, text runs, comments) one parsed page may hold. A parsed node costs the heap
 * about 500 bytes (domhandler's objects, attribute maps, parse5's bookkeeping), whatever the markup
 * costs on the wire: 5 MiB of `<p>x</p>` made 1.3 million nodes, 613 MiB of heap for one document,
 * and three runs at once took a worker from 95 MiB to 2 GiB (the worker every organization's runs
 * share; its container has 768 MiB). 200,000 nodes are at most about 100 MiB. Real pages are far
 * below it: the demo sites' largest page has a few hundred, a long encyclopedia article or a shop's
 * product page tens of thousands.
 */
export const MAX_HTML_NODES = 200_000;

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

/**
 * cheerio's tree adapter, refusing an element deeper than MAX_HTML_DEPTH as the parser inserts it
 * and a node beyond MAX_HTML_NODES as the parser creates it (before it takes any memory). parse5
 * makes text nodes through the adapter's own insertText (not this object's appendChild), so text
 * is counted there: a run of text joined to the text node before it is no new node.
 */
function boundedAdapter() {
  let depth = new WeakMap<object, number>();
  let nodes = 0;
  const created = () => {
    if (++nodes > MAX_HTML_NODES) throw tooComplex(`more than ${MAX_HTML_NODES} elements, texts and comments`);
  };
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
  const newText = (node: DomChild | undefined) => !(node && domAdapter.isTextNode(node));
  const adapter = {
    ...domAdapter,
    createElement(...args: Parameters<typeof domAdapter.createElement>) {
      created();
      return domAdapter.createElement(...args);
    },
    createCommentNode(data: string) {
      created();
      return domAdapter.createCommentNode(data);
    },
    insertText(parent: DomParent, text: string) {
      if (newText(parent.children[parent.children.length - 1])) created();
      domAdapter.insertText(parent, text);
    },
    insertTextBefore(parent: DomParent, text: string, ref: DomChild) {
      if (newText(parent.children[parent.children.indexOf(ref) - 1])) created();
      domAdapter.insertTextBefore(parent, text, ref);
    },
    appendChild(parent: DomParent, node: DomChild) {
      placed(parent, node);
      domAdapter.appendChild(parent, node);
    },
    insertBefore(parent: DomParent, node: DomChild, ref: DomChild) {
      placed(parent, node);
      domAdapter.insertBefore(parent, node, ref);
    },
  } satisfies typeof domAdapter;
  /** Once the document is parsed: the depths are not needed any more (cheerio keeps the adapter with its options). */
  const done = () => {
    depth = new WeakMap();
  };
  return { adapter, done };
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
  const bounded = boundedAdapter();
  const options = { treeAdapter: bounded.adapter, scriptingEnabled: true };
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
  bounded.done();
  return cheerio.load(parser.document, options as Parameters<typeof cheerio.load>[1]);
}

// ------------------------------------------------------------------------------------------
// Value coercion

/** Characters of an element's text a text field reads (before whitespace is collapsed). */
export const MAX_TEXT = 20_000;

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

/**
 * A field's `pattern` (the recipe's author's) on the page's text: linear time (shared/regex.ts), but
 * up to a step for each character and each instruction of the pattern. That cost is charged to the
 * document's work budget before the pattern runs: a pattern run on each item of a long list spends
 * the same budget as the selectors and reads that found them, and past it the run fails instead of
 * holding the thread.
 */
function applyPattern(text: string, pattern: string | undefined, work: Work): string | null {
  if (!pattern) return text;
  const subject = text.slice(0, MAX_TEXT);
  const cost = matchCost(pattern, subject);
  if ((work.left -= cost) < 0) {
    throw new ExtractionError(
      `matching the pattern "${pattern}" against ${subject.length.toLocaleString('en')} characters needs more work than a document may take (${WORK_PER_DOCUMENT.toLocaleString('en')} steps a document, with its selectors' and reads'): each character costs a step per instruction of the pattern (${(cost / (subject.length + 1)).toLocaleString('en')})`,
    );
  }
  return linearExtract(pattern, subject);
}

/**
 * A website's JSON value as text. JSON.stringify recurses: an array nested 20,000 deep (40 KB of
 * brackets, which JSON.parse reads) overflows the stack, and the RangeError would end the run as
 * internal_error, retried as our fault. It is the website's data that cannot be read.
 */
function jsonText(raw: object): string {
  try {
    return JSON.stringify(raw);
  } catch (e) {
    if (!(e instanceof RangeError)) throw e;
    throw new ServiceError('upstream_http_error', "The website's data is too complex to read (JSON nested too deeply to write as text)", {
      details: { reason: 'document_too_complex' },
    });
  }
}

/** Converts a scalar read from a page or JSON document to the field's type; null when it cannot. `work`: the document's budget (its pattern is charged to it). */
export function coerce(raw: unknown, type: FieldType, f: Field, work: Work): unknown {
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
        return typeof raw === 'object' ? jsonText(raw) : String(raw);
      default:
        if (typeof raw === 'number' && (type === 'date' || type === 'datetime')) {
          const iso = new Date(raw > 1e11 ? raw : raw * 1000).toISOString();
          return type === 'date' ? iso.slice(0, 10) : iso.replace(/\.000Z$/, 'Z');
        }
        return null;
    }
  }
  const picked = applyPattern(type === 'html' ? raw : normalizeText(raw), f.pattern, work);
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
// Selectors, text and markup within a work budget

/**
 * Steps of work one parsed document allows, over every selector run on it and every text and
 * markup read out of it. Both are synchronous CPU work on the thread every organization's runs
 * share.
 *
 * Selectors: a step is a call into the document (parent, siblings, children, name, attribute…).
 * Some selectors cost far more than the page's size: unbounded, `li.none ~ li ~ li ~ li` over 500
 * items took 59 s, `div:has(div:has(div:has(span)))` 400 levels deep 43 s, and `tr:nth-child(2n)`
 * over a 5 MiB table of 31,000 rows 16 s (each row counts its earlier siblings). Measured on a
 * 5 MiB page of 31,000 rows, an ordinary selector (`table tr.r`, `td.price + td span`,
 * `td:nth-child(2)`) takes at most 512,000 steps, and 5,000,000 steps take about 90 ms of the
 * thread.
 *
 * Reading: a node visited is a step, and so is each character read or written (textOf, htmlOf);
 * measured, a step of reading takes between a cheap and a costly step of a selector. An element's
 * text and markup hold those of every element inside it, so a list of nested matches reads the
 * page again for each: 500 nested `<div>`s over 100 KB of text, listed as `div` items, built 500
 * texts of 100 KB (cheerio builds each level's text again: 13 s), and over a 5 MiB page their
 * strings would hold 2.5 GB. On the 5 MiB table, the text of every row takes 1,600,000 steps, the
 * markup of every row 6,500,000 and the markup of the whole body 7,500,000.
 *
 * This bound, 20,000,000, holds the thread about a third of a second per page at that pace (walks
 * over all of a large page, matching or reading, may take a few times that), leaves a recipe room
 * for dozens of ordinary selectors over the largest page, and keeps what a page's fields hold to
 * tens of megabytes.
 */
export const WORK_PER_DOCUMENT = 20_000_000;

/** What is left of one document's work budget. */
interface Work {
  left: number;
}

class WorkSpent extends Error {}

type DomAdapter = typeof DomUtils;
/** The document functions css-select calls (its Adapter), each counting one step. */
const COUNTED = ['isTag', 'existsOne', 'getAttributeValue', 'getChildren', 'getName', 'getParent', 'getSiblings', 'getText', 'hasAttrib', 'removeSubsets', 'findAll', 'findOne', 'prevElementSibling'] as const;

const budgets = new WeakMap<CheerioDoc, { work: Work; adapter: DomAdapter }>();

/** One document's budget and its counting adapter: every selector and read on it spends the same budget. */
function budgetOf($: CheerioDoc): { work: Work; adapter: DomAdapter } {
  let budget = budgets.get($);
  if (!budget) {
    const work: Work = { left: WORK_PER_DOCUMENT };
    const counted: Record<string, unknown> = { ...DomUtils };
    for (const name of COUNTED) {
      // Three fixed parameters (no adapter function takes more), not a rest parameter: this runs
      // for every step of every match, and a spread made the steps twice as slow.
      const fn = DomUtils[name] as (a: unknown, b: unknown, c: unknown) => unknown;
      counted[name] = (a: unknown, b: unknown, c: unknown) => {
        if (--work.left < 0) throw new WorkSpent();
        return fn(a, b, c);
      };
    }
    budget = { work, adapter: counted as DomAdapter };
    budgets.set($, budget);
  }
  return budget;
}

/**
 * `scope.find(selector)`, or `$(selector)` without a scope, as cheerio runs them, but matching
 * through the document's counting adapter: past WORK_PER_DOCUMENT steps the run fails
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
        adapter: budgetOf($).adapter,
      },
      Number.POSITIVE_INFINITY,
    );
    return $(found as Element[]);
  } catch (e) {
    if (e instanceof WorkSpent) {
      throw new ExtractionError(`the selector "${selector}" needs more work than a page may take (${WORK_PER_DOCUMENT.toLocaleString('en')} steps a page): write it without long chains of sibling (~) or :has() steps`);
    }
    throw new ExtractionError(`invalid CSS selector "${selector}": ${(e as Error).message}`);
  }
}

function find($: CheerioDoc, scope: Sel | null, selector: string | undefined): Sel {
  if (!selector) return scope ?? $.root();
  return selectIn($, scope, selector);
}

/**
 * cheerio's `text()` of `nodes` (domutils' textContent: the data of every text node under them,
 * CDATA's included, in document order) cut at `max` characters, spending a step of `work` for each
 * node visited and each character taken. It stops once it has `max` characters, and never builds
 * the text of a whole subtree: cheerio joins every level's text again, so reading the text of each
 * of 500 nested elements took time in the square of the depth, times the page's size.
 */
function textOf(work: Work, nodes: readonly AnyNode[], max: number): string {
  const parts: string[] = [];
  let length = 0;
  // The children lists being walked and the next index in each: at most the page's depth deep.
  const lists: Array<readonly AnyNode[]> = [nodes];
  const next: number[] = [0];
  while (lists.length > 0 && length < max) {
    const top = lists.length - 1;
    const list = lists[top]!;
    const i = next[top]!++;
    if (i >= list.length) {
      lists.pop();
      next.pop();
      continue;
    }
    const node = list[i]!;
    if (--work.left < 0) throw new WorkSpent();
    if (hasChildren(node) && !isComment(node)) {
      lists.push(node.children);
      next.push(0);
    } else if (isText(node) && node.data.length > 0) {
      const take = Math.min(node.data.length, max - length);
      if ((work.left -= take) < 0) throw new WorkSpent();
      parts.push(take === node.data.length ? node.data : node.data.slice(0, take));
      length += take;
    }
  }
  return parts.join('');
}

/**
 * Steps an element costs besides its characters (parse5 asks the tree adapter about it several
 * times and builds its attribute list anew): with them, a step of writing markup takes about the
 * time of a step of reading text.
 */
const ELEMENT_WRITE_STEPS = 8;

/** Characters that escaping may write as entities (`&amp;`, `&lt;`, `&gt;`, `&quot;`, `&nbsp;`). */
const ESCAPED = /[&<>"\u00a0]/g;

/** The most characters the serializer writes for `s`: each escaped character as at most six. */
function escapedLength(s: string): number {
  let n = s.length;
  ESCAPED.lastIndex = 0;
  while (ESCAPED.exec(s)) n += 5;
  return n;
}

/**
 * cheerio's `html()` of the first node of `el` ('' when it has no children): parse5's own
 * serializer, as cheerio calls it, through a tree adapter that spends a step of `work` for each
 * node and for each character it will write (text, comments, tag and attribute names, values
 * with their escapes), and stops it when the budget is spent. Unbounded, a list of nested
 * elements wrote the page again for each, and kept every copy.
 */
function htmlOf(work: Work, el: Sel): string {
  const node = el[0];
  if (!node || !hasChildren(node)) return '';
  const spend = (n: number) => {
    if ((work.left -= n) < 0) throw new WorkSpent();
  };
  const treeAdapter: typeof domAdapter = {
    ...domAdapter,
    getChildNodes(parent) {
      const children = domAdapter.getChildNodes(parent);
      spend(children.length + 1);
      return children;
    },
    getAttrList(element) {
      const attrs = domAdapter.getAttrList(element);
      let n = 2 * element.name.length + 5 + ELEMENT_WRITE_STEPS;
      for (const a of attrs) n += a.name.length + escapedLength(a.value) + 4;
      spend(n);
      return attrs;
    },
    getTextNodeContent(text) {
      const data = domAdapter.getTextNodeContent(text);
      spend(escapedLength(data));
      return data;
    },
    getCommentNodeContent(comment) {
      const data = domAdapter.getCommentNodeContent(comment);
      spend(data.length + 7);
      return data;
    },
  };
  let out = '';
  for (const child of node.children) {
    // cheerio writes a document among the nodes as its children: a template's content is one
    if (isDocument(child)) for (const c of treeAdapter.getChildNodes(child)) out += serializeOuter(c, { treeAdapter });
    else out += serializeOuter(child, { treeAdapter });
  }
  return out;
}

function htmlScalar($: CheerioDoc, el: Sel, f: Field): unknown {
  if (f.attribute && f.type !== 'html') return el.attr(f.attribute) ?? null;
  const { work } = budgetOf($);
  let text: string;
  try {
    if (f.type === 'html') return htmlOf(work, el);
    // A json field parses the whole text (an ld+json script may be large): it is bounded by the budget alone.
    text = textOf(work, el.toArray(), f.type === 'json' ? Number.POSITIVE_INFINITY : MAX_TEXT);
  } catch (e) {
    if (!(e instanceof WorkSpent)) throw e;
    const what = `the ${f.type === 'html' ? 'markup' : 'text'} of ${f.selector ? `"${f.selector}"` : 'the elements matched'}`;
    throw new ExtractionError(
      `reading ${what} needs more work than a page may take (${WORK_PER_DOCUMENT.toLocaleString('en')} steps a page, with its selectors'): nested matches read the same text again for each`,
    );
  }
  if (f.type !== 'json') return text;
  try {
    return JSON.parse(text);
  } catch {
    return null;
  }
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
      return orDefault(coerce(htmlScalar($, matches.first(), f), 'boolean', f, budgetOf($).work), f);
    default:
      if (matches.length === 0) return orDefault(null, f);
      return orDefault(coerce(htmlScalar($, matches.first(), f), f.type, f, budgetOf($).work), f);
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

/** The work budget of a JSON document (its patterns are charged to it), as budgetOf is an HTML document's. */
const jsonBudgets = new WeakMap<object, Work>();
function jsonWork(doc: unknown): Work {
  if (doc === null || typeof doc !== 'object') return { left: WORK_PER_DOCUMENT };
  let work = jsonBudgets.get(doc);
  if (!work) jsonBudgets.set(doc, (work = { left: WORK_PER_DOCUMENT }));
  return work;
}

export function extractJsonField(doc: unknown, f: Field, opts: ExtractOptions, work: Work = jsonWork(doc)): unknown {
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
      return v.slice(0, limit === Infinity ? undefined : limit).map((item) => (f.fields ? extractJsonObject(item, f.fields, opts, work) : extractJsonField(item, f.item!, opts, work)));
    }
    case 'object':
      if (v === undefined || v === null || typeof v !== 'object') return orDefault(null, f);
      return extractJsonObject(v, f.fields!, opts, work);
    case 'url':
      return orDefault(resolveUrlValue(v, opts.baseUrl), f);
    default:
      return orDefault(coerce(v, f.type, f, work), f);
  }
}

export function extractJsonObject(doc: unknown, fields: Record<string, Field>, opts: ExtractOptions, work: Work = jsonWork(doc)): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [k, f] of Object.entries(fields)) out[k] = extractJsonField(doc, f, opts, work);
  return out;
}

export function isEmptyValue(v: unknown): boolean {
  if (v === undefined || v === null || v === '') return true;
  if (Array.isArray(v)) return v.length === 0;
  if (typeof v === 'object') return Object.keys(v).length === 0;
  return false;
}
