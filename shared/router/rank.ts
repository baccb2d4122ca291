// The cheap rerank over retrieved candidates and the decision to run one or abstain. Each
// candidate gets a score in 0..1 from: how well the prompt's words meet the operation's own words
// (name, label, labels first; field names, enum values, API and sites next; descriptions last),
// how many of its required fields the prompt fills, and whether the prompt holds a value only this
// operation takes (an enum value, an id of its pattern). Actions need an explicit verb for them
// and every required input from the prompt.
import type { Candidate, RankResult } from './types.ts';
import type { RouteRow } from './retrieve.ts';
import { fillInput, operationVocabulary, targetVocabulary } from './fill.ts';
import type { PromptFacts } from './prompt-facts.ts';
import { sameWord, STOP_WORDS, words } from './text.ts';

/** Below this score the router abstains; tuned on the dev split of test/router-eval. */
export const MIN_SCORE = 0.42;
/** The winner must lead the runner-up (of another operation) by this much. */
export const MIN_MARGIN = 0.04;

/** Verbs that ask a site to do something (not just read). */
const ACTION_VERBS = new Set(
  (
    'order place buy purchase book reserve schedule cancel delete remove send pay post submit subscribe unsubscribe transfer refund ' +
    'register apply email text call create update change add rent sell return publish upload share donate tweet message invite ' +
    'hire checkout rebook reschedule sign renew top-up transfer withdraw deposit unfollow reply'
  ).split(' '),
);
/** Words before a verb that make it a request ("please book", "I want to order", "can you cancel"). */
const LEADS = new Set(['please', 'to', 'and', 'then', 'pls', 'plz', 'kindly', 'now', 'also', 'just', 'go', 'ahead', 'you']);
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
    const clauseStart = i === 0 || /[.!?;,]$/.test(facts.tokens[i - 1]!.raw + facts.text.slice(facts.tokens[i - 1]!.end, facts.tokens[i]!.start).trim());
    const lead = prev !== undefined && LEADS.has(prev);
    if (!clauseStart && !lead) return;
    if (next !== undefined && NOUN_NEXT.has(next)) return;
    // "order ORD-100001": an id after it makes "order" a noun; a bare count ("order 2") does not.
    const nextRaw = facts.tokens[i + 1]?.raw ?? '';
    if (/[A-Za-z]/.test(nextRaw) && /[0-9]/.test(nextRaw)) return;
    out.push(w);
  });
  return out;
}

const verbMatches = (verb: string, vocab: string) => sameWord(verb, vocab) || (verb.length >= 5 && vocab.length >= 5 && verb.slice(0, 5) === vocab.slice(0, 5));

interface Scored {
  row: RouteRow;
  score: number;
  eligible: boolean;
  why?: string;
}

function weightedVocabulary(row: RouteRow): Map<string, number> {
  const m = new Map<string, number>();
  const add = (text: string, w: number) => {
    for (const x of words(text.replace(/_/g, ' '))) if (!STOP_WORDS.has(x) && (m.get(x) ?? 0) < w) m.set(x, w);
  };
  const props = (row.input_schema.properties ?? {}) as Record<string, Record<string, unknown>>;
  add(row.api_description, 0.5);
  add(row.description, 1);
  for (const e of row.examples) if (typeof e.title === 'string') add(e.title, 1);
  for (const [name, p] of Object.entries(props)) {
    if (typeof p?.description === 'string') add(p.description, 1);
    add(name, 2);
    if (Array.isArray(p?.enum)) for (const v of p.enum) add(String(v), 2);
  }
  add(`${row.api} ${row.api_name} ${row.sites.join(' ')}`, 2);
  add(`${row.operation} ${row.label} ${row.labels.join(' ')}`, 3);
  return m;
}

function matchWeight(token: string, vocab: Map<string, number>): number {
  const exact = vocab.get(token);
  if (exact !== undefined) return exact;
  let best = 0;
  for (const [v, w] of vocab) if (w > best && sameWord(token, v)) best = w;
  return best;
}

/** Whether the prompt holds a value that only fits this operation's schema (an enum value or a patterned id). */
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

/** Typed values in the prompt (dates, emails, URLs) that the operation's input has no place for. */
function unusedValues(facts: PromptFacts, input: Record<string, unknown>): number {
  const taken = new Set(Object.values(input).map(String));
  const dates = new Set([...facts.dates.forward, ...facts.dates.backward].map((d) => `${d.start}`));
  const dateTaken = [...facts.dates.forward, ...facts.dates.backward].some((d) => taken.has(d.date));
  return (dates.size > 0 && !dateTaken ? 1 : 0) + facts.emails.filter((e) => !taken.has(e.value)).length + facts.urls.filter((u) => !taken.has(u.value)).length;
}

export function rerank(rows: RouteRow[], facts: PromptFacts, rankText: string): RankResult {
  const tokens = [...new Set(words(rankText).filter((w) => !STOP_WORDS.has(w) && /^[a-z]/.test(w)))];
  const vocabs = rows.map(weightedVocabulary);
  const weights = rows.map((_, i) => tokens.map((t) => matchWeight(t, vocabs[i]!)));
  const known = tokens.filter((_, j) => weights.some((w) => w[j]! > 0)).length;
  const actions = requestedActions(facts);
  const named = facts.tokens.filter((t) => /^@[a-z0-9][a-z0-9_-]*$/.test(t.lower)).map((t) => t.lower);

  const scored: Scored[] = rows.map((row, i) => {
    const w = weights[i]!;
    const lex = known === 0 ? 0 : w.reduce((a, b) => a + b, 0) / (3 * known);
    const coverage = tokens.length === 0 ? 0 : known / tokens.length;
    const vocabulary = targetVocabulary(row.operation, row.label, row.labels, row.input_schema);
    const fill = fillInput(row.input_schema, facts, vocabulary);
    const required = Array.isArray(row.input_schema.required) ? row.input_schema.required.length : 0;
    const slots = required === 0 ? 0.5 : (required - fill.missing.length) / required;
    const specific = specificValues(row, fill.input);
    let score = 0.55 * Math.min(1, lex) + 0.2 * slots + 0.15 * specific + 0.1 * coverage - 0.08 * Math.min(2, unusedValues(facts, fill.input));
    if (named.length > 0 && named.includes(row.api)) score += 0.1;
    score = Math.max(0, Math.min(1, score));
    let eligible = true;
    let why: string | undefined;
    if (row.performs_actions) {
      const own = operationVocabulary([row.operation, row.label, ...row.labels]);
      const asked = actions.some((a) => [...own].some((v) => verbMatches(a, v)));
      if (!asked) [eligible, why] = [false, 'action_not_asked'];
      else if (fill.missing.length > 0) [eligible, why] = [false, 'action_inputs_missing'];
    }
    return { row, score: Math.round(score * 1000) / 1000, eligible, why };
  });
  scored.sort((a, b) => b.score - a.score || a.row.operation_id.localeCompare(b.row.operation_id));
  const candidates: Candidate[] = scored.slice(0, 5).map((s) => ({
    api: s.row.api,
    visibility: s.row.visibility,
    operation: s.row.operation,
    label: s.row.label,
    score: s.score,
    performs_actions: s.row.performs_actions,
  }));
  const abstain = (reason: string): RankResult => ({ chosen: null, candidates, router: 'offline', reason });
  const best = scored[0];
  if (!best) return abstain('no_candidates');
  if (!best.eligible) return abstain(best.why!);
  if (best.score < MIN_SCORE) return abstain('low_score');
  const runnerUp = scored.find((s) => s !== best && !(s.row.api === best.row.api && s.row.operation === best.row.operation));
  if (runnerUp && best.score - runnerUp.score < MIN_MARGIN) return abstain('no_clear_winner');
  // A prompt asking for an action the winner does not perform (cancel, send, pay…) is out of scope.
  if (actions.length > 0 && !best.row.performs_actions) return abstain('action_not_offered');
  return { chosen: candidates[0]!, candidates, router: 'offline' };
}


