// The cheap rerank over retrieved candidates and the decision to run one or abstain. Each
// candidate gets a score in 0..1 from: how well the prompt's words meet the operation's own words
// (name, label, labels first; field names, enum values, API and sites next; descriptions last),
// how many of its required fields the prompt fills, and whether the prompt holds a value only this
// operation takes (an enum value, an id of its pattern). Actions need an explicit request for them
// (actionMentions: an imperative or a first-person ask, not negated, hedged or asked about) and
// every required input from the prompt; a prompt that names an action without asking for it abstains.
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
/** Words after "order"/"book" that make it a noun ("order status", "book details"). */
const NOUN_NEXT = new Set(['status', 'history', 'number', 'details', 'detail', 'id', 'info', 'page', 'price', 'prices', 'list', 'of', 'is', 'was', 'by', 'about', 'with']);

// Actions need an explicit request (docs/contract-decisions.md, "Actions need an explicit request").
// An action verb in a verb's place (a clause's first word, or after "please", "to", "and"…) is a
// *mention*; a mention is a *request* only when all of these hold:
//   1. it is an imperative at the start of a clause ("Book …", "please order …", "…, then buy …"),
//      or follows "can/could/would/will you" at the start of a clause, or a first-person ask
//      ("I want to", "I'd like to", "I would like to", "I need to", "we want to"…, "let's");
//   2. its sentence has no negation (not, n't, never, no…), conditional or hedge (if, whether,
//      unless, might, maybe, perhaps, possible, "should I", "what happens"…) and no reminder
//      ("remind me to …");
//   3. its sentence is not a question ending in "?", unless the ask is "can/could/would/will you …?".
// A third party's wish ("my colleague wants to buy …") matches none of the asks in 1. The words are
// English: a prompt in another language has no action verb here, so it never asks for an action.
// A mention that is not a request makes the router abstain (`action_not_asked`, decide()).

/**
 * Words that may stand between a clause's start (or an ask) and its verb: "please", "just", "go ahead
 * and", a greeting ("hi, please book …"). "and" alone does not start a clause: "check the price and
 * order …" could be anyone's plan ("my colleague will check … and order …"); ", then order …" does.
 */
const FILLERS = new Set(['please', 'pls', 'plz', 'kindly', 'just', 'now', 'also', 'then', 'go', 'ahead', 'and', 'hi', 'hello', 'hey', 'ok', 'okay', 'yes']);
/** First-person asks that end right before the verb (words as `words()` spells them: "I'd" is "id"). */
const ASKS = [
  ['i', 'want', 'to'], ['i', 'need', 'to'], ['id', 'like', 'to'], ['i', 'would', 'like', 'to'],
  ['we', 'want', 'to'], ['we', 'need', 'to'], ['wed', 'like', 'to'], ['we', 'would', 'like', 'to'],
  ['lets'], ['let', 'us'],
];
/** Words after which an action verb stands in a verb's place ("please book", "to order", "let's buy"): a mention, a request only by the rules above. */
const VERB_LEADS = new Set(['please', 'to', 'and', 'then', 'pls', 'plz', 'kindly', 'now', 'also', 'just', 'go', 'ahead', 'lets', 'us']);
/** "can you …", "could you …": a request even as a question. */
const POLITE = new Set(['can', 'could', 'would', 'will']);
/** A sentence with one of these words asks for no action (negations, hedges and conditionals, reminders). */
const NOT_A_REQUEST = new Set([
  'not', 'no', 'never', 'nor', 'cannot', 'dont', 'doesnt', 'didnt', 'wont', 'cant', 'shouldnt', 'wouldnt', 'couldnt', 'isnt', 'arent', 'wasnt', 'werent', 'havent', 'hasnt', 'neednt', 'mustnt',
  'if', 'whether', 'unless', 'might', 'maybe', 'perhaps', 'possible', 'possibly', 'wonder', 'wondering',
  'remind', 'reminder', 'reminders',
]);
/** Two-word hedges: "should I order…?", "what happens when I book…". */
const NOT_A_REQUEST_PAIRS = [['should', 'i'], ['should', 'we'], ['what', 'happens'], ['what', 'happen'], ['in', 'case']];

export interface ActionMentions {
  /** Action verbs the prompt asks for. */
  requested: string[];
  /** Action verbs the prompt names in a verb's place without asking for them (negated, hedged, asked about, someone else's). */
  declined: string[];
}

/** The action verbs the prompt uses as requests. */
export function requestedActions(facts: PromptFacts): string[] {
  return actionMentions(facts).requested;
}

/** The action verbs the prompt names as verbs, split into the ones it asks for and the ones it does not. */
export function actionMentions(facts: PromptFacts): ActionMentions {
  const toks = facts.tokens.map((t) => words(t.raw).join(''));
  // The text between token k-1 and token k, with token k-1's stripped trailing punctuation ("…STL?" → "?").
  const gapBefore = (k: number) => (k <= 0 ? '' : facts.tokens[k - 1]!.raw.slice(-1) + facts.text.slice(facts.tokens[k - 1]!.end, facts.tokens[k]!.start).trim());
  const sentenceBreak = (k: number) => k <= 0 || /[.!?;]/.test(gapBefore(k).slice(1));
  const clauseBreak = (k: number) => k <= 0 || /[.!?;,:]/.test(gapBefore(k).slice(1));
  // Sentences as [first, last] token indexes, and whether each ends with "?".
  const sentenceOf: number[] = [];
  const sentences: { first: number; last: number; question: boolean }[] = [];
  toks.forEach((_, k) => {
    if (sentenceBreak(k)) sentences.push({ first: k, last: k, question: false });
    sentences[sentences.length - 1]!.last = k;
    sentenceOf.push(sentences.length - 1);
  });
  for (const s of sentences) {
    const after = s.last + 1 < toks.length ? gapBefore(s.last + 1).slice(1) : facts.text.slice(facts.tokens[s.last]!.end);
    s.question = /^[^.!;]*\?/.test(after);
  }
  const hedged = sentences.map((s) => {
    const w = toks.slice(s.first, s.last + 1);
    const raws = facts.tokens.slice(s.first, s.last + 1).map((t) => t.raw);
    return w.some((x) => NOT_A_REQUEST.has(x)) || raws.some((r) => /n['’]t$/i.test(r)) || w.some((x, j) => NOT_A_REQUEST_PAIRS.some(([a, b]) => x === a && w[j + 1] === b));
  });
  // Skip fillers back from k (inclusive), not past the sentence's first token.
  const skipFillers = (k: number, first: number) => {
    while (k >= first && FILLERS.has(toks[k]!)) k--;
    return k;
  };
  // Whether token k starts a clause, after optional fillers ("please", "just").
  const startsClause = (k: number, first: number) => {
    const j = skipFillers(k - 1, first);
    return j < first || clauseBreak(j + 1);
  };

  const requested: string[] = [];
  const declined: string[] = [];
  toks.forEach((w, i) => {
    if (!ACTION_VERBS.has(w)) return;
    const prev = toks[i - 1];
    const next = toks[i + 1];
    // A verb's place: a clause's first word, or after a word that leads a verb ("please", "to", "can you").
    const clauseStart = i === 0 || /[.!?;,:]$/.test(gapBefore(i));
    const lead = prev !== undefined && (VERB_LEADS.has(prev) || (prev === 'you' && POLITE.has(toks[i - 2] ?? '')));
    if (!clauseStart && !lead) return;
    if (next !== undefined && NOUN_NEXT.has(next)) return;
    // "order ORD-100001": an id named after the word makes it a noun; "book 20261124-DERM-1500" stays a verb.
    const nextRaw = (facts.tokens[i + 1]?.raw ?? '').toLowerCase();
    if (/[0-9]/.test(nextRaw) && nextRaw.startsWith(w.slice(0, 3))) return;

    const s = sentences[sentenceOf[i]!]!;
    const j = skipFillers(i - 1, s.first); // the word before the verb and its fillers
    const imperative = j < s.first || clauseBreak(j + 1);
    const polite = j >= s.first + 1 && toks[j] === 'you' && POLITE.has(toks[j - 1]!) && startsClause(j - 1, s.first);
    const ask = ASKS.some((a) => a.every((x, n) => toks[j - a.length + 1 + n] === x) && j - a.length + 1 >= s.first);
    const isRequest = (imperative || polite || ask) && !hedged[sentenceOf[i]!] && (!s.question || polite);
    (isRequest ? requested : declined).push(w);
  });
  return { requested, declined };
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
  /** Action verbs the prompt names without asking for them ("I don't want to order…", "is it possible to book…?"). */
  declined: string[];
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
  const { requested: actions, declined } = actionMentions(facts);
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
  return { candidates, actions, declined, dense: dense !== undefined };
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
  // A prompt that talks about an action without asking for it (negated, hedged, a question, a
  // reminder, someone else's wish) runs nothing: what it wants is unclear, and guessing a read-only
  // neighbour is no better. The caller can pick a candidate in direct mode.
  if (pf.actions.length === 0 && pf.declined.length > 0) return abstain('action_not_asked');
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
