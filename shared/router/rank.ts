// The cheap rerank over retrieved candidates and the decision to run one or abstain. Each
// candidate gets a score in 0..1 from: how well the prompt's words meet the operation's own words
// (name, label, labels first; field names, enum values, API and sites next; descriptions last),
// how many of its required fields the prompt fills, and whether the prompt holds a value only this
// operation takes (an enum value, an id of its pattern). Actions need an explicit verb for them
// and every required input from the prompt.
import type { Candidate, RankResult } from './types.ts';
import type { RouteRow } from './retrieve.ts';
import { fillDetailed, operationVocabulary, targetVocabulary } from './fill.ts';
import { withoutZone } from './prompt-facts.ts';
import { synonymsOf } from './synonyms.ts';
import type { PromptFacts } from './prompt-facts.ts';
import { sameWord, STOP_WORDS, WordBudget, words } from './text.ts';

/**
 * The rerank is a logistic model over the candidate's features, so its score is a probability
 * (comparable across prompts): weights fitted on the dev split of test/router-eval by
 * test/router-eval/fit.ts (the held-out split is only measured). The router abstains below
 * `minScore`, or when the winner leads the runner-up (another operation) by less than `minMargin`.
 */
export const TUNING = {
  weights: { bias: -8.651, lex: 6.565, nameCover: 1.596, slots: 4.207, specific: 0.644, coverage: 2.039, unused: -1.358, anchored: 0.103, named: 0.546, dense: 0 },
  minScore: 0.25,
  minMargin: 0,
  /**
   * The dense rule (hybrid ranking only): when the lexical model would abstain, the candidate
   * nearest the prompt's vector, among those the prompt fills completely, runs if its cosine is at least `minCosine` and leads the next
   * operation's by `minLead`; its score is then at least `score`, the rule's precision on the dev
   * split. A cosine never reaches 2: off here.
   */
  dense: { minCosine: 2, minLead: 0, score: 0 },
};
export type Tuning = typeof TUNING;
/** The same model with the dense cosine (embeddings.ts) as a feature and the dense rule: used when every candidate has a vector. */
export const TUNING_DENSE: Tuning = {
  weights: { bias: -6.039, lex: 4.688, nameCover: 1.045, slots: 3.845, specific: 1.15, coverage: -0.935, unused: -1.328, anchored: 0.37, named: 0.247, dense: 5.329 },
  minScore: 0.6,
  minMargin: 0,
  dense: { minCosine: 0.3, minLead: 0.06, score: 0.8 },
};
export const FEATURE_NAMES = ['lex', 'nameCover', 'slots', 'specific', 'coverage', 'unused', 'anchored', 'named', 'dense'] as const;

/** The features as numbers, in FEATURE_NAMES order. */
export function featureVector(f: CandidateFeatures): number[] {
  return FEATURE_NAMES.map((k) => Number(f[k]));
}

const MAX_RANK_WORDS = 64;

/** Verbs that ask a site to do something (not just read). */
const ACTION_VERBS = new Set(
  (
    'order place buy purchase book reserve schedule cancel delete remove send pay post submit subscribe unsubscribe transfer refund ' +
    'register apply email text call create update change add rent sell return publish upload share donate tweet message invite ' +
    'hire checkout rebook reschedule sign renew top-up transfer withdraw deposit unfollow reply'
  ).split(' '),
);
/** Words before a verb that make it a request ("please book", "I want to order", "can you cancel"). */
const LEADS = new Set(['please', 'to', 'and', 'then', 'pls', 'plz', 'kindly', 'now', 'also', 'just', 'go', 'ahead']);
/** Words after "order"/"book" that make it a noun ("order status", "book details"). */
const NOUN_NEXT = new Set(['status', 'history', 'number', 'details', 'detail', 'id', 'info', 'page', 'price', 'prices', 'list', 'of', 'is', 'was', 'by', 'about', 'with']);

/** The action verbs the prompt uses as requests. */
export function requestedActions(facts: PromptFacts): string[] {
  const toks = facts.tokens.map((t) => words(t.raw).join(''));
  const out: string[] = [];
  toks.forEach((w, i) => {
    if (!ACTION_VERBS.has(w)) return;
    const prev = toks[i - 1];
    const next = toks[i + 1];
    const gap = i === 0 ? '' : facts.tokens[i - 1]!.raw.slice(-1) + facts.text.slice(facts.tokens[i - 1]!.end, facts.tokens[i]!.start).trim();
    const clauseStart = i === 0 || /[.!?;,:]$/.test(gap);
    // "please book", "I want to order", "can you buy" — but not "do you sell" (a question about what is sold).
    const lead = prev !== undefined && (LEADS.has(prev) || (prev === 'you' && /^(can|could|would|will)$/.test(toks[i - 2] ?? '')));
    if (!clauseStart && !lead) return;
    if (next !== undefined && NOUN_NEXT.has(next)) return;
    // "order ORD-100001": an id named after the word makes it a noun; "book 20261124-DERM-1500" stays a verb.
    const nextRaw = (facts.tokens[i + 1]?.raw ?? '').toLowerCase();
    if (/[0-9]/.test(nextRaw) && nextRaw.startsWith(w.slice(0, 3))) return;
    out.push(w);
  });
  return out;
}

const verbMatches = (verb: string, vocab: string) => sameWord(verb, vocab) || (verb.length >= 5 && vocab.length >= 5 && verb.slice(0, 5) === vocab.slice(0, 5));

/** Enum values of one field that count as its words: a publisher's list of thousands is not read whole for every prompt. */
const ENUM_VOCABULARY_VALUES = 256;

/** The operation's words with their weights, heaviest first (matchWeight stops at the first it cannot improve on). */
function weightedVocabulary(row: RouteRow, withValues = true): Map<string, number> {
  const m = new Map<string, number>();
  const add = (text: string, w: number) => {
    for (const x of words(text.replace(/_/g, ' '))) if (!STOP_WORDS.has(x) && (m.get(x) ?? 0) < w) m.set(x, w);
  };
  const props = (row.input_schema.properties ?? {}) as Record<string, Record<string, unknown>>;
  add(row.api_description, 0.5);
  add(row.description, 1);
  for (const e of row.examples) if (typeof e.title === 'string') add(e.title, 1);
  for (const [name, p] of Object.entries(props)) {
    if (typeof p?.description === 'string') add(p.description.split(/e\.g\./)[0]!, 1);
    add(name, 2);
    // Enum values are values, not topics: they count when the fill takes them.
    if (withValues && Array.isArray(p?.enum)) for (const v of p.enum.slice(0, ENUM_VOCABULARY_VALUES)) add(String(v), 1);
  }
  add(`${row.api} ${row.api_name} ${row.sites.join(' ')}`, 1.5);
  add(row.labels.join(' '), 2.5);
  add(`${row.operation} ${row.label}`, 3);
  // Without values, enum values named anywhere ("one section (world, technology…)") go too.
  if (!withValues) {
    for (const p of Object.values(props)) if (Array.isArray(p?.enum)) for (const v of p.enum.slice(0, ENUM_VOCABULARY_VALUES)) for (const x of words(String(v))) m.delete(x);
  }
  return new Map([...m].sort((a, b) => b[1] - a[1]));
}

function matchWeight(token: string, vocab: Map<string, number>, budget: WordBudget): number {
  // The best of every form: "job" is in a description (1) and "jobs" in the name (3).
  let best = vocab.get(token) ?? 0;
  for (const [v, w] of vocab) {
    if (w <= best || budget.exhausted) break; // heaviest first: nothing after this can raise `best`
    if (budget.same(token, v)) best = w;
  }
  return best;
}

/** A prompt word's weight for an operation: its own, or a share of a word it stands for. */
function tokenWeight(token: string, vocab: Map<string, number>, budget: WordBudget): number {
  let best = matchWeight(token, vocab, budget);
  for (const s of synonymsOf(token)) best = Math.max(best, s.strength * matchWeight(s.word, vocab, budget));
  return best;
}

/**
 * Word-comparison units (text.ts, WordBudget) ranking may spend on one candidate: its fill from the
 * start of the prompt and its words against the prompt's. A candidate that needs more (a publisher's
 * enum of thousands of values, say) is listed but never chosen.
 */
export const RANK_ROW_UNITS = 200_000;

/** Whether the prompt holds a value that only fits this operation's schema (a patterned id, an enum value). */
function specificValues(row: RouteRow, input: Record<string, unknown>): number {
  const props = (row.input_schema.properties ?? {}) as Record<string, Record<string, unknown>>;
  let n = 0;
  for (const k of Object.keys(input)) {
    const p = props[k];
    if (p && typeof p.pattern === 'string') n += 1;
    else if (p && Array.isArray(p.enum)) n += 0.5;
  }
  return Math.min(1, n);
}

/** Typed values in the prompt (a named day, emails, URLs) that the operation's input has no place for. */
function unusedValues(facts: PromptFacts, input: Record<string, unknown>): number {
  const taken = new Set(Object.values(input).map(String));
  const days = [...facts.dates.forward, ...facts.dates.backward].filter((d) => !d.stretch && !d.present);
  const dayUnused = days.length > 0 && !days.some((d) => taken.has(d.date));
  return (dayUnused ? 1 : 0) + facts.emails.filter((e) => !taken.has(e.value)).length + facts.urls.filter((u) => !taken.has(u.value)).length;
}

/** What the rerank knows of one candidate, before weights. */
export interface CandidateFeatures {
  row: RouteRow;
  /** Prompt words met by the operation's words, idf-weighted, 0..1. */
  lex: number;
  /** Share of the prompt's words some candidate knows. */
  coverage: number;
  /** Share of required fields the prompt fills (0.5 with none required). */
  slots: number;
  /** A patterned id (1) or an enum value (0.5) the prompt holds for this operation. */
  specific: number;
  /** Typed values (a named day, an email, a URL) the operation has no place for (0..2). */
  unused: number;
  /** Some prompt word names the operation's topic, not only a value it takes. */
  anchored: boolean;
  /** Share of the operation name's words the prompt says (or a synonym of them). */
  nameCover: number;
  /** The prompt names this API by handle ("@weather"). */
  named: boolean;
  /** Cosine of the prompt's and the operation's sentence vectors (0 without embeddings). */
  dense: number;
  /** Every required input comes from the prompt, and every typed value in it has a place (the dense rule asks both). */
  complete: boolean;
  eligible: boolean;
  why?: string;
}

export interface PromptFeatures {
  candidates: CandidateFeatures[];
  /** The prompt asks for an action (book, order, cancel…). */
  actions: string[];
  /** Every candidate carries a dense cosine: TUNING_DENSE applies. */
  dense: boolean;
}

function nameCover(row: RouteRow, tokens: string[]): number {
  const parts = words(row.operation.replace(/_/g, ' ')).filter((w) => !STOP_WORDS.has(w) && !['get', 'list', 'read', 'find'].includes(w));
  if (parts.length === 0) return 0;
  const said = (p: string) => tokens.some((t) => sameWord(t, p) || synonymsOf(t).some((s) => s.strength >= 0.8 && sameWord(s.word, p)));
  return parts.filter(said).length / parts.length;
}

/** `dense`: the cosine of each row with the prompt, in row order, when embeddings are ready. */
export function features(rows: RouteRow[], facts: PromptFacts, rankText: string, dense?: number[]): PromptFeatures {
  const actions = requestedActions(facts);
  const named = facts.tokens.filter((t) => /^@[a-z0-9][a-z0-9_-]*$/.test(t.lower)).map((t) => t.lower);
  const budgets = rows.map(() => new WordBudget(RANK_ROW_UNITS));
  const fills = rows.map((row, i) => fillDetailed(row.input_schema, facts, targetVocabulary(row.operation, row.label, row.labels, row.input_schema), [], budgets[i]));
  // The prompt's words, and ids some candidate took as a typed value ("9782918455943").
  const typedAny = fills.flatMap((f) => [...f.typedTokens].flatMap((k) => words(facts.tokens[k]!.raw)));
  // At most 64 distinct words: a 10,000-character prompt ranks in the time of a short one.
  const tokens = [...new Set([...words(withoutZone(rankText)).filter((w) => !STOP_WORDS.has(w) && /^[a-z]/.test(w) && w.length <= 40), ...typedAny])].slice(0, MAX_RANK_WORDS);
  const vocabs = rows.map((r) => weightedVocabulary(r));
  const topical = rows.map((r) => weightedVocabulary(r, false));
  // Per candidate and prompt word: 3 for the operation's name and label, 2.5 its labels, 2 for
  // fields, API and sites, 1 for descriptions; 2 for a word its fill took as a typed value.
  const own = rows.map((_, i) => tokens.map((t) => tokenWeight(t, vocabs[i]!, budgets[i]!)));
  const weights = rows.map((_, i) => {
    const typed = new Set([...fills[i]!.typedTokens].flatMap((k) => words(facts.tokens[k]!.raw)));
    const placed = new Set([...fills[i]!.placeTokens].flatMap((k) => words(facts.tokens[k]!.raw)));
    return tokens.map((t, j) => Math.max(typed.has(t) ? 2 : placed.has(t) ? 1 : 0, own[i]![j]!));
  });
  const idf = tokens.map((_, j) => {
    const df = weights.filter((w) => w[j]! > 0).length;
    return df === 0 ? 0 : 1 + Math.log(rows.length / df);
  });
  const knownMass = idf.reduce((a, b) => a + b, 0);
  const known = idf.filter((x) => x > 0).length;
  const candidates = rows.map((row, i): CandidateFeatures => {
    const fill = fills[i]!;
    const required = Array.isArray(row.input_schema.required) ? row.input_schema.required.length : 0;
    let eligible = true;
    let why: string | undefined;
    // Its words and fill were compared only in part: no reason to run it.
    const anchored = tokens.some((t) => tokenWeight(t, topical[i]!, budgets[i]!) >= 0.8);
    if (budgets[i]!.exhausted) [eligible, why] = [false, 'too_complex'];
    else if (row.performs_actions) {
      const verbs = operationVocabulary([row.operation, row.label, ...row.labels]);
      const asked = actions.some((a) => [...verbs].some((v) => verbMatches(a, v)));
      if (!asked) [eligible, why] = [false, 'action_not_asked'];
      else if (fill.missing.length > 0) [eligible, why] = [false, 'action_inputs_missing'];
    }
    return {
      row,
      lex: knownMass === 0 ? 0 : Math.min(1, weights[i]!.reduce((a, x, j) => a + x * idf[j]!, 0) / (3 * knownMass)),
      coverage: tokens.length === 0 ? 0 : known / tokens.length,
      slots: required === 0 ? 0.5 : (required - fill.missing.length) / required,
      specific: specificValues(row, fill.input),
      unused: Math.min(2, unusedValues(facts, fill.input)),
      anchored,
      nameCover: nameCover(row, tokens),
      named: named.includes(row.api),
      dense: dense?.[i] ?? 0,
      complete: fill.missing.length === 0 && unusedValues(facts, fill.input) === 0,
      eligible,
      why,
    };
  });
  return { candidates, actions, dense: dense !== undefined };
}

export function score(f: CandidateFeatures, t: Tuning = TUNING): number {
  const x = featureVector(f);
  const z = FEATURE_NAMES.reduce((a, k, i) => a + t.weights[k] * x[i]!, t.weights.bias);
  let p = 1 / (1 + Math.exp(-z));
  // Without a word for its topic, only a patterned id can carry an operation over the threshold.
  if (!f.anchored && f.specific < 1) p = Math.min(p, t.minScore - 0.01);
  return Math.round(p * 1000) / 1000;
}

export function decide(pf: PromptFeatures, t: Tuning = pf.dense ? TUNING_DENSE : TUNING): RankResult {
  const scored = pf.candidates
    .map((f) => ({ f, score: score(f, t) }))
    .sort((a, b) => b.score - a.score || a.f.row.operation_id.localeCompare(b.f.row.operation_id));
  const toCandidate = ({ f, score }: (typeof scored)[number]): Candidate => ({
    api: f.row.api,
    visibility: f.row.visibility,
    operation: f.row.operation,
    label: f.row.label,
    score,
    performs_actions: f.row.performs_actions,
  });
  const candidates = scored.slice(0, 5).map(toCandidate);
  const abstain = (reason: string): RankResult => ({ chosen: null, candidates, router: 'offline', reason });
  // A prompt asking for an action (book, order, cancel…) may only run an operation that performs
  // that action, with every input from the prompt; otherwise action operations are not candidates.
  let pool = scored.filter((s) => s.f.eligible);
  if (pf.actions.length > 0) {
    const asked = scored.filter((s) => s.f.row.performs_actions && s.f.why !== 'action_not_asked');
    if (asked.length === 0) return abstain(scored.length === 0 ? 'no_candidates' : 'action_not_offered');
    pool = asked.filter((s) => s.f.eligible);
    if (pool.length === 0) return abstain('action_inputs_missing');
  }
  const same = (a: RouteRow, b: RouteRow) => a.api === b.api && a.operation === b.operation;
  const best = pool[0];
  if (!best || best.score < t.minScore) {
    // A paraphrase that shares no word with its operation scores low lexically: the dense rule may
    // still pick it, among the operations the prompt gives every input to (and says nothing they cannot take).
    const near = pool.filter((s) => s.f.complete).sort((a, b) => b.f.dense - a.f.dense);
    const top = near[0];
    const next = top && near.find((s) => !same(s.f.row, top.f.row));
    if (pf.dense && top && top.f.dense >= t.dense.minCosine && top.f.dense - (next?.f.dense ?? 0) >= t.dense.minLead) {
      top.score = Math.max(top.score, t.dense.score);
      scored.sort((a, b) => b.score - a.score || a.f.row.operation_id.localeCompare(b.f.row.operation_id));
      return { chosen: toCandidate(top), candidates: scored.slice(0, 5).map(toCandidate), router: 'offline' };
    }
    return abstain(best ? 'low_score' : 'no_candidates');
  }
  const runnerUp = pool.find((s) => s !== best && !same(s.f.row, best.f.row));
  if (runnerUp && best.score - runnerUp.score < t.minMargin) return abstain('no_clear_winner');
  return { chosen: toCandidate(best), candidates, router: 'offline' };
}

export function rerank(rows: RouteRow[], facts: PromptFacts, rankText: string, dense?: number[]): RankResult {
  return decide(features(rows, facts, rankText, dense));
}
