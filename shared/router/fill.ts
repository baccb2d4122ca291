// Slot filling driven by the input schema: each property takes a value only from what the prompt
// (or an `input` attachment) says — enum values by fuzzy match, pattern-shaped tokens, dates,
// numbers next to words that name the field, emails, URLs, quoted or labelled spans, places and
// names. Defaults are never written in (the operation applies them); a required property nothing
// supplies is reported in `missing`. The caller validates the result with the schema.
import type { JsonSchema } from '../catalog/types.ts';
import type { FillResult, MissingField, PromptAttachment } from './types.ts';
import { readPrompt, type PromptFacts, type Token } from './prompt-facts.ts';
import { stem, STOP_WORDS, WordBudget, words } from './text.ts';
import { MAX_PATTERN_INSTRUCTIONS, compileLinear, patternCost } from '../regex.ts';

type Prop = Record<string, unknown>;

const isObj = (x: unknown): x is Record<string, unknown> => typeof x === 'object' && x !== null && !Array.isArray(x);

/**
 * Sets an own property, whatever the field's name: a schema may name a field `__proto__` (whose
 * plain assignment would set the object's prototype, or be ignored) or `toString` (which `in`
 * sees on every object), and a filled input must hold exactly the fields filled.
 */
export function setOwn(target: Record<string, unknown>, name: string, value: unknown): void {
  Object.defineProperty(target, name, { value, enumerable: true, writable: true, configurable: true });
}

/** Words that end a place or name span ("in Paris tomorrow", "for Dune please"). */
const SPAN_END = new Set([
  ...STOP_WORDS, 'today', 'tomorrow', 'yesterday', 'tonight', 'next', 'last', 'this', 'on', 'in', 'at', 'for', 'and', 'over',
  'week', 'weekend', 'days', 'day', 'right', 'now', 'currently', 'like', 'going', 'gonna', 'be', 'forecast', 'weather', 'please', 'thanks',
]);
const PLACE_FIELD = /city|location|place|town|region|country|destination|origin/;
const NAME_FIELD = /(^|_)name$/;
const TERMS_FIELD = /^(q|query|keywords?|terms?|search|text)$/;
const FILE_FIELD = /file|attachment|document|upload/;
/** Words that speak of result counts, for integer fields about how many to return. */
/** Nouns that name what is searched for, not what it is about ("python developer roles"). */
const CONTAINER_WORDS = new Set(['role', 'position', 'opening', 'listing', 'result', 'item', 'thing', 'stuff', 'option', 'posting', 'opportunity', 'anything', 'something', 'one', 'ones', 'available', 'recent', 'new', 'good', 'best']);
const COUNT_WORDS = new Set(['result', 'item', 'entry', 'story', 'article', 'listing', 'slot', 'option', 'record', 'top', 'first', 'latest', 'newest', 'last', 'max', 'maximum', 'most', 'limit', 'up', 'only', 'recent']);

export interface FillContext {
  facts: PromptFacts;
  /** Token indexes another property already used. */
  used: Set<number>;
  /** Character spans another property already used. */
  spans: Array<[number, number]>;
  /** Words of the operation itself (name, label, labels, field names): never a search term. */
  vocabulary: Set<string>;
  /** The word comparisons this operation may still cost (text.ts); spent, the fill stops. */
  budget: WordBudget;
}

/** Word-comparison units one fill may spend (text.ts, WordBudget): a few milliseconds at most. */
export const FILL_UNITS = 1_000_000;

function tokensIn(ctx: FillContext, start: number, end: number): number[] {
  return ctx.facts.tokens.flatMap((t, i) => (t.start >= start && t.end <= end ? [i] : []));
}
function claim(ctx: FillContext, start: number, end: number) {
  ctx.spans.push([start, end]);
  for (const i of tokensIn(ctx, start, end)) ctx.used.add(i);
}
const spanFree = (ctx: FillContext, start: number, end: number) => !ctx.spans.some(([s, e]) => start < e && end > s);

const fieldWords = (name: string, prop: Prop) => [
  ...words(name.replace(/_/g, ' ')),
  ...(typeof prop.description === 'string' ? words(prop.description).filter((w) => !STOP_WORDS.has(w)).slice(0, 4) : []),
];

/** `label: value` / `label = value` / `label is value` for the field's name (spaces or underscores). */
function labelled(ctx: FillContext, name: string): { value: string; start: number; end: number } | undefined {
  const label = name.replace(/[.*+?^${}()|[\]\\]/g, '\\$&').replace(/_/g, '[ _]');
  const re = new RegExp(`\\b${label}\\s*(?::|=|\\bis\\b)\\s*(?:"([^"]*)"|'([^']*)'|([^,;\\n]+?))\\s*(?=$|[,;\\n]|\\band\\b)`, 'i');
  const m = re.exec(ctx.facts.text);
  if (!m) return undefined;
  const value = (m[1] ?? m[2] ?? m[3] ?? '').trim();
  return value && spanFree(ctx, m.index, m.index + m[0].length) ? { value, start: m.index, end: m.index + m[0].length } : undefined;
}

function sharedStart(a: string, b: string): number {
  let i = 0;
  while (i < a.length && i < b.length && a[i] === b[i]) i++;
  return i;
}

function fillEnum(ctx: FillContext, values: unknown[]): string | number | undefined {
  const toks = ctx.facts.tokens;
  const hits: Array<{ value: string | number; at: number; len: number }> = [];
  const norm = toks.map((t) => words(t.raw));
  const joinedAt = norm.map((w) => w.join(''));
  const same = (a: string, b: string) => ctx.budget.same(a, b);
  for (const v of values) {
    if (ctx.budget.exhausted) return undefined;
    if (typeof v !== 'string' && typeof v !== 'number') continue;
    const parts = words(String(v));
    if (parts.length === 0) continue;
    for (let i = 0; i + parts.length <= toks.length; i++) {
      const span = joinedAt.slice(i, i + parts.length);
      const ok =
        parts.every((p, k) => span[k] !== undefined && same(span[k]!, p)) ||
        ((joined) => joined.length === parts.length && joined.every((w, k) => same(w, parts[k]!)))(norm.slice(i, i + parts.length).flat()) ||
        // A prefix of 4+ letters of a one-word value ("tech", "physio", "derm"), or a long shared
        // start ("physiotherapist" / "physiotherapy").
        (parts.length === 1 && span[0]!.length >= 4 && parts[0]!.startsWith(span[0]!) && !STOP_WORDS.has(span[0]!)) ||
        (parts.length === 1 && sharedStart(span[0]!, parts[0]!) >= Math.max(8, 0.75 * Math.min(span[0]!.length, parts[0]!.length)));
      if (ok && [...Array(parts.length).keys()].every((k) => !ctx.used.has(i + k))) hits.push({ value: v, at: i, len: parts.length });
    }
    // Initials of a value of several words ("GP" for general-practice).
    if (parts.length > 1) {
      const initials = parts.map((x) => x[0]).join('');
      const at = toks.findIndex((t, i) => !ctx.used.has(i) && t.lower === initials);
      if (at >= 0) hits.push({ value: v, at, len: 1 });
    }
    // "new-york" typed as one token.
    const hyphen = toks.findIndex((t, i) => !ctx.used.has(i) && t.lower === String(v).toLowerCase());
    if (hyphen >= 0) hits.push({ value: v, at: hyphen, len: 1 });
  }
  const distinct = new Set(hits.map((h) => h.value));
  // none, or ambiguous, or not every value compared: never guess
  if (distinct.size !== 1 || ctx.budget.exhausted) return undefined;
  for (const h of hits) for (let k = 0; k < h.len; k++) ctx.used.add(h.at + k);
  return hits[0]!.value;
}

function fillPattern(ctx: FillContext, pattern: string): string | undefined {
  // The pattern is the publisher's (any organization can build and share a workflow) and the
  // tokens are the caller's: on V8's backtracking engine `^(\d|\d)*$` against a 40-digit token
  // holds the API's event loop for hours. RE2's linear-time engine, as everywhere else a
  // publisher's pattern runs (shared/regex.ts).
  // Linear is not free: a match costs up to characters x the program's instructions, charged to the
  // fill's budget before it runs (a step costs about what a unit does); a pattern past the size
  // builds refuse (one published before that bound) fills nothing.
  let re: { test(s: string): boolean };
  try {
    const compiled = compileLinear(pattern);
    const instructions = compiled.programSize();
    if (instructions > MAX_PATTERN_INSTRUCTIONS) return undefined;
    re = { test: (s) => ctx.budget.charge(patternCost(instructions, s.length)) && compiled.matcher(s).find() };
  } catch {
    return undefined;
  }
  // A pattern that also takes plain words (a slug) takes only tokens that look like ids.
  const loose = re.test('abc') || re.test('ABC') || re.test('Abc');
  for (const [i, t] of ctx.facts.tokens.entries()) {
    if (ctx.budget.exhausted) return undefined;
    if (ctx.used.has(i)) continue;
    if (t.raw.length > 200) continue; // no id is that long; keeps a publisher's pattern off huge tokens
    const bare = t.raw.replace(/^#/, '');
    if (loose && !/[-_]/.test(bare) && !(/[0-9]/.test(bare) && /[a-z]/i.test(bare))) continue;
    for (const v of [bare, bare.toUpperCase(), bare.toLowerCase(), bare.replace(/-/g, '')]) {
      if (re.test(v)) {
        ctx.used.add(i);
        return v;
      }
    }
  }
  return undefined;
}

function fillDate(ctx: FillContext, prop: Prop): string | undefined {
  const past = typeof prop.description === 'string' && /\bpast\b/i.test(prop.description);
  const list = (past ? ctx.facts.dates.backward.filter((x) => x.date < ctx.facts.today) : ctx.facts.dates.forward).filter((x) => !x.stretch && !x.instant);
  const d = list.find((x) => spanFree(ctx, x.start, x.end));
  if (!d) return undefined;
  claim(ctx, d.start, d.end);
  return d.date;
}

function fillInteger(ctx: FillContext, name: string, prop: Prop, required: boolean, lastChance: boolean): number | undefined {
  const toks = ctx.facts.tokens;
  const cues = new Set(fieldWords(name, prop).map(stem));
  const isCount = /max|limit|count|results|top/.test(name);
  const near = (i: number) =>
    [i - 2, i - 1, i + 1, i + 2].some((j) => {
      const t = toks[j];
      if (!t) return false;
      const s = stem(words(t.raw)[0] ?? '');
      return cues.has(s) || (isCount && (COUNT_WORDS.has(s) || ctx.vocabulary.has(s)));
    });
  for (const n of ctx.facts.numbers) {
    if (ctx.used.has(n.token) || !near(n.token)) continue;
    ctx.used.add(n.token);
    return n.value;
  }
  // A required number with one number left in the prompt and no other integer field wanting it.
  if (required && lastChance) {
    const free = ctx.facts.numbers.filter((n) => !ctx.used.has(n.token));
    if (free.length === 1) {
      ctx.used.add(free[0]!.token);
      return free[0]!.value;
    }
  }
  return undefined;
}

const titleCase = (s: string) => (s === s.toLowerCase() || s === s.toUpperCase() ? s.toLowerCase().replace(/(^|[\s-])(\p{L})/gu, (_, a: string, b: string) => a + b.toUpperCase()) : s);

/** A span of words after one of `preps` ("in Paris", "for Jordan Lee"), up to a stop word or punctuation. */
function spanAfter(ctx: FillContext, preps: Set<string>, wantCapital: boolean): { value: string; from: number; to: number } | undefined {
  const toks = ctx.facts.tokens;
  for (let i = 0; i < toks.length - 1; i++) {
    if (!preps.has(toks[i]!.lower)) continue;
    const picked: number[] = [];
    for (let j = i + 1; j < toks.length && picked.length < 4; j++) {
      const t = toks[j]!;
      if (ctx.used.has(j) || SPAN_END.has(t.lower) || ctx.vocabulary.has(stem(t.lower)) || !/^[\p{L}][\p{L}.'’-]*$/u.test(t.raw)) break;
      if (wantCapital && !/^\p{Lu}/u.test(t.raw)) break;
      picked.push(j);
      if (/[,.;:!?]$/.test(ctx.facts.text.slice(t.end, t.end + 1))) break;
    }
    if (picked.length > 0) {
      const from = toks[picked[0]!]!.start;
      const to = toks[picked.at(-1)!]!.end;
      return { value: ctx.facts.text.slice(from, to), from, to };
    }
  }
  return undefined;
}

function fillPlace(ctx: FillContext): string | undefined {
  const s = spanAfter(ctx, new Set(['in', 'for', 'at', 'near']), false);
  if (s) {
    claim(ctx, s.from, s.to);
    return titleCase(s.value);
  }
  // No preposition ("London weather now", "Current weather Tokyo"): capitalized words that do not name the operation.
  const toks = ctx.facts.tokens;
  const i = toks.findIndex((t, k) => !ctx.used.has(k) && /^\p{Lu}[\p{L}'’-]*$/u.test(t.raw) && !STOP_WORDS.has(t.lower) && !SPAN_END.has(t.lower) && !ctx.vocabulary.has(stem(t.lower)));
  if (i < 0) return undefined;
  let j = i;
  while (j + 1 < toks.length && !ctx.used.has(j + 1) && /^\p{Lu}[\p{L}'’-]*$/u.test(toks[j + 1]!.raw) && !ctx.vocabulary.has(stem(toks[j + 1]!.lower)) && !SPAN_END.has(toks[j + 1]!.lower)) j++;
  claim(ctx, toks[i]!.start, toks[j]!.end);
  return titleCase(ctx.facts.text.slice(toks[i]!.start, toks[j]!.end));
}

function fillName(ctx: FillContext): string | undefined {
  const m = /\b(?:[Mm]y name is|[Nn]ame is|[Nn]ame\s*:|I am|I['’]m|[Pp]atient|for|named)\s*(\p{Lu}[\p{L}'’-]+(?:\s+\p{Lu}[\p{L}'’-]+){0,3})/u.exec(ctx.facts.text);
  if (!m || !spanFree(ctx, m.index + m[0].length - m[1]!.length, m.index + m[0].length)) return undefined;
  claim(ctx, m.index + m[0].length - m[1]!.length, m.index + m[0].length);
  return m[1];
}

/** A word of the operation, allowing a typo ("bookz", "jbos"). */
function inVocabulary(ctx: FillContext, w: string): boolean {
  if (ctx.vocabulary.has(stem(w))) return true;
  for (const v of ctx.vocabulary) if (ctx.budget.same(w, v)) return true;
  return false;
}

/** The words nothing else used and that do not name the operation: the search terms. */
function fillTerms(ctx: FillContext): string | undefined {
  const q = ctx.facts.quoted.find((x) => spanFree(ctx, x.start, x.end));
  if (q) {
    claim(ctx, q.start, q.end);
    return q.value;
  }
  const toks = ctx.facts.tokens;
  const keep: Token[] = [];
  toks.forEach((t, i) => {
    if (ctx.used.has(i) || ctx.spans.some(([s, e]) => t.start >= s && t.end <= e)) return;
    const w = words(t.raw);
    if (w.length === 0) return;
    if (w.length === 1 && (STOP_WORDS.has(w[0]!) || SPAN_END.has(w[0]!) || CONTAINER_WORDS.has(stem(w[0]!)) || inVocabulary(ctx, w[0]!))) return;
    keep.push(t);
  });
  // Keep the longest run of adjacent kept words: "books by Clara Whitcombe please" → "Clara Whitcombe".
  const runs: Token[][] = [];
  for (const t of keep) {
    const prev = runs.at(-1)?.at(-1);
    const gap = prev ? ctx.facts.text.slice(prev.end, t.start) : '';
    if (prev && /^\s+$/.test(gap) && toks.indexOf(t) === toks.indexOf(prev) + 1) runs.at(-1)!.push(t);
    else runs.push([t]);
  }
  // The longest run; of equal ones the later (terms follow what is searched: "Hireway: teacher jobs").
  const best = runs.reduce<Token[] | undefined>((acc, r) => (!acc || r.length >= acc.length ? r : acc), undefined);
  if (!best || ctx.budget.exhausted) return undefined;
  for (const t of best) ctx.used.add(toks.indexOf(t));
  return best.map((t) => t.raw).join(' ');
}

/** Fill one schema property, or leave it out. */
function fillOne(ctx: FillContext, name: string, prop: Prop, required: boolean, lastChance: boolean, attachments: PromptAttachment[]): unknown {
  const type = prop.type;
  if (Array.isArray(prop.enum)) return fillEnum(ctx, prop.enum);
  if (type === 'integer' || type === 'number') {
    const l = labelled(ctx, name);
    if (l && /^-?[0-9]+(\.[0-9]+)?$/.test(l.value)) {
      claim(ctx, l.start, l.end);
      return Number(l.value);
    }
    return fillInteger(ctx, name, prop, required, lastChance);
  }
  if (type !== 'string') return undefined;
  const inputFile = attachments.find((a) => a.purpose === 'input');
  if (inputFile && FILE_FIELD.test(name)) return inputFile.id;
  if (inputFile && /^(text|content|body)$/.test(name) && inputFile.text !== null) return inputFile.text;
  if (typeof prop.pattern === 'string') return fillPattern(ctx, prop.pattern);
  if (prop.format === 'email') {
    const e = ctx.facts.emails.find((x) => spanFree(ctx, x.start, x.end));
    if (e) claim(ctx, e.start, e.end);
    return e?.value;
  }
  if (prop.format === 'uri' || prop.format === 'url') {
    const u = ctx.facts.urls.find((x) => spanFree(ctx, x.start, x.end));
    if (u) claim(ctx, u.start, u.end);
    return u?.value;
  }
  if (prop.format === 'date') return fillDate(ctx, prop);
  const l = labelled(ctx, name);
  if (l) {
    claim(ctx, l.start, l.end);
    return l.value;
  }
  if (PLACE_FIELD.test(name)) return fillPlace(ctx);
  if (NAME_FIELD.test(name)) return fillName(ctx);
  if (TERMS_FIELD.test(name) || (typeof prop.description === 'string' && /\bwords\b/i.test(prop.description))) return fillTerms(ctx);
  return undefined;
}

/** Order: the most specific evidence first, so free-text fields take only what is left. */
function priority(name: string, prop: Prop): number {
  if (Array.isArray(prop.enum) || typeof prop.pattern === 'string' || prop.format === 'email' || prop.format === 'uri') return 0;
  if (prop.format === 'date') return 1;
  if (prop.type === 'integer' || prop.type === 'number') return 2;
  if (PLACE_FIELD.test(name) || NAME_FIELD.test(name)) return 3;
  return 4;
}

export function operationVocabulary(parts: string[]): Set<string> {
  const ws = parts.flatMap((p) => words(p.replace(/_/g, ' '))).filter((w) => !/^[0-9]+$/.test(w));
  return new Set([...ws, ...ws.map(stem)]);
}

/**
 * Words that name an operation (name, label, labels, field names, and what its search-terms
 * field says it searches — "title, author, ISBN"): never taken as a value.
 */
export function targetVocabulary(operation: string, label: string, labels: string[], schema: JsonSchema): Set<string> {
  const props = isObj(schema.properties) ? schema.properties : {};
  const described = Object.entries(props).flatMap(([name, p]) =>
    isObj(p) && typeof p.description === 'string' && (TERMS_FIELD.test(name) || /\bwords\b/i.test(p.description)) ? [p.description.split(/e\.g\./)[0]!] : [],
  );
  return operationVocabulary([operation, label, ...labels, ...Object.keys(props), ...described]);
}

export function fillInput(schema: JsonSchema, facts: PromptFacts, vocabulary: Set<string>, attachments: PromptAttachment[] = []): FillResult {
  const { input, missing } = fillDetailed(schema, facts, vocabulary, attachments);
  return { input, missing };
}

/** A fill, with the prompt tokens typed values (enum, id, date, email, URL, number) were taken from. */
export function fillDetailed(
  schema: JsonSchema,
  facts: PromptFacts,
  vocabulary: Set<string>,
  attachments: PromptAttachment[] = [],
  budget = new WordBudget(FILL_UNITS),
): FillResult & { typedTokens: Set<number>; placeTokens: Set<number>; exhausted: boolean } {
  const props = isObj(schema.properties) ? schema.properties : {};
  const required = new Set(Array.isArray(schema.required) ? schema.required.filter((x): x is string => typeof x === 'string') : []);
  const ctx: FillContext = { facts, used: new Set(), spans: [], vocabulary, budget };
  const input: Record<string, unknown> = {};
  const entries = Object.entries(props)
    .filter((e): e is [string, Prop] => isObj(e[1]))
    .sort((a, b) => priority(a[0], a[1]) - priority(b[0], b[1]));
  const integerFields = entries.filter(([, p]) => p.type === 'integer' || p.type === 'number');
  const typedTokens = new Set<number>();
  const placeTokens = new Set<number>();
  for (const [name, prop] of entries) {
    const unfilledInts = integerFields.filter(([n]) => n !== name && !Object.hasOwn(input, n)).length;
    const before = new Set(ctx.used);
    const value = fillOne(ctx, name, prop, required.has(name), unfilledInts === 0, attachments);
    // An operation whose words cost more comparisons than a fill may spend is filled no further:
    // what is left unfilled is missing (a free refusal), never a guess from half the comparisons.
    if (budget.exhausted) break;
    if (value !== undefined && value !== '') setOwn(input, name, value);
    const level = priority(name, prop);
    for (const i of ctx.used) if (!before.has(i)) (level <= 2 ? typedTokens : level === 3 ? placeTokens : new Set<number>()).add(i);
  }
  const missing: MissingField[] = [...required]
    .filter((name) => !Object.hasOwn(input, name))
    .map((name) => {
      const prop = props[name];
      const description = isObj(prop) && typeof prop.description === 'string' ? prop.description : name.replace(/_/g, ' ');
      return { field: `/${name.replace(/~/g, '~0').replace(/\//g, '~1')}`, description };
    });
  return { input, missing, typedTokens, placeTokens, exhausted: budget.exhausted };
}

export { readPrompt };
