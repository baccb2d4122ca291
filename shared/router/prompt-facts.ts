// What a prompt says that can become an input value, read once per prompt: its tokens with their
// positions, quoted spans, "label: value" pairs, emails, URLs, dates (chrono-node, in the time
// zone the prompt names, else the one given, else UTC) and numbers.
import * as chrono from 'chrono-node';
import { numberWord } from './text.ts';

export interface Token {
  /** As typed, outer punctuation trimmed. */
  raw: string;
  /** Lower case. */
  lower: string;
  start: number;
  end: number;
}

export interface DateFact {
  /** YYYY-MM-DD in the reference time zone. */
  date: string;
  start: number;
  end: number;
  /** A stretch of days ("next 7 days", "3 days"), not one day. */
  stretch: boolean;
  /** The present ("today", "now"): context more than a value. */
  present: boolean;
  /** "now": a moment, not a day someone asked about. */
  instant: boolean;
}

export interface NumberFact {
  value: number;
  /** Index into tokens. */
  token: number;
}

export interface PromptFacts {
  text: string;
  tokens: Token[];
  quoted: { value: string; start: number; end: number }[];
  emails: { value: string; start: number; end: number }[];
  urls: { value: string; start: number; end: number }[];
  /** Dates for a field that wants a future day (forward) and for a past day. */
  dates: { forward: DateFact[]; backward: DateFact[] };
  numbers: NumberFact[];
  timeZone: string;
  /** Today in that time zone, YYYY-MM-DD. */
  today: string;
}

const IANA_ZONE = /\b((?:Africa|America|Antarctica|Asia|Atlantic|Australia|Europe|Indian|Pacific)\/[A-Za-z_]+(?:\/[A-Za-z_]+)?)\b/;
const UTC_ZONE = /\b(?:UTC|GMT)(?:\s*([+-])\s*(\d{1,2})(?::?(\d{2}))?)?\b/;

function validZone(zone: string): boolean {
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: zone });
    return true;
  } catch {
    return false;
  }
}

/** The time zone a prompt names (an IANA name, or UTC/GMT with an offset), else `fallback`, else UTC. */
export function promptTimeZone(text: string, fallback?: string): string {
  const iana = IANA_ZONE.exec(text)?.[1];
  if (iana && validZone(iana)) return iana;
  const utc = UTC_ZONE.exec(text);
  if (utc) {
    if (!utc[1]) return 'UTC';
    const sign = utc[1] === '-' ? '-' : '+';
    return `${sign}${utc[2]!.padStart(2, '0')}:${utc[3] ?? '00'}`;
  }
  return fallback && validZone(fallback) ? fallback : 'UTC';
}

/** Minutes east of UTC of `zone` at `at` (`+05:30` style offsets or IANA names). */
export function zoneOffsetMinutes(zone: string, at: Date): number {
  const fixed = /^([+-])(\d{2}):(\d{2})$/.exec(zone);
  if (fixed) return (fixed[1] === '-' ? -1 : 1) * (Number(fixed[2]) * 60 + Number(fixed[3]));
  const parts = new Intl.DateTimeFormat('en-US', {
    timeZone: zone, hourCycle: 'h23', year: 'numeric', month: 'numeric', day: 'numeric', hour: 'numeric', minute: 'numeric',
  }).formatToParts(at);
  const get = (t: string) => Number(parts.find((p) => p.type === t)?.value);
  const local = Date.UTC(get('year'), get('month') - 1, get('day'), get('hour'), get('minute'));
  return Math.round((local - Math.floor(at.getTime() / 60_000) * 60_000) / 60_000);
}

const pad = (n: number) => String(n).padStart(2, '0');

function readDates(text: string, now: Date, offset: number, forwardDate: boolean): DateFact[] {
  let results: chrono.ParsedResult[];
  try {
    results = chrono.parse(text, { instant: now, timezone: offset }, { forwardDate });
  } catch {
    return [];
  }
  return results
    .filter((r) => r.start.isCertain('day') || r.start.isCertain('weekday') || /\b(today|tomorrow|yesterday|tonight|ago)\b/i.test(r.text))
    .map((r) => ({
      date: `${r.start.get('year')}-${pad(r.start.get('month')!)}-${pad(r.start.get('day')!)}`,
      start: r.index,
      end: r.index + r.text.length,
      stretch: /^(?:(?:over |for )?the )?(?:next|coming|past)?\s*\S+\s+(?:days?|weeks?)$|^(?:this|next|the) (?:weekend|week)$/i.test(r.text.trim()),
      present: /^(?:today|tonight|now|right now|at the moment|this (?:morning|afternoon|evening))$/i.test(r.text.trim()),
      instant: /^(?:right )?now$/i.test(r.text.trim()),
    }));
}

/** The prompt with a named time zone blanked out ("Europe/Berlin" is not a place to fill). */
export function withoutZone(text: string): string {
  return text.replace(IANA_ZONE, (m) => ' '.repeat(m.length)).replace(UTC_ZONE, (m) => ' '.repeat(m.length));
}

export function readPrompt(original: string, opts: { timeZone?: string; now?: Date } = {}): PromptFacts {
  const now = opts.now ?? new Date();
  const timeZone = promptTimeZone(original, opts.timeZone);
  const text = withoutZone(original);
  const offset = zoneOffsetMinutes(timeZone, now);
  const tokens: Token[] = [];
  for (const m of text.matchAll(/\S+/g)) {
    const lead = /^[("“‘'[{<]*/.exec(m[0])![0].length;
    const trail = /[)"”’'\]}>.,;:!?]*$/.exec(m[0].slice(lead))![0].length;
    const raw = m[0].slice(lead, m[0].length - trail);
    if (raw) tokens.push({ raw, lower: raw.toLowerCase(), start: m.index + lead, end: m.index + m[0].length - trail });
  }
  const quoted: PromptFacts['quoted'] = [];
  // Double or curly quotes anywhere; single quotes only around words (not an apostrophe in "what's").
  for (const m of text.matchAll(/["“”]([^"“”]{1,200})["“”]|(?:^|(?<=[\s(:]))['‘]([^'‘’]{1,200})['’](?=$|[\s.,;:!?)])/g)) {
    const value = (m[1] ?? m[2] ?? '').trim();
    if (value) quoted.push({ value, start: m.index, end: m.index + m[0].length });
  }
  const emails = [...text.matchAll(/[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}/g)].map((m) => ({ value: m[0], start: m.index, end: m.index + m[0].length }));
  const urls = [...text.matchAll(/\bhttps?:\/\/[^\s"'<>]+[^\s"'<>.,;:!?)]/g)].map((m) => ({ value: m[0], start: m.index, end: m.index + m[0].length }));
  const dates = { forward: readDates(text, now, offset, true), backward: readDates(text, now, offset, false) };
  // Numbers inside a date ("December 3") stay numbers until a date field takes the date.
  const numbers: NumberFact[] = [];
  tokens.forEach((t, i) => {
    // "a"/"an" count only in "a couple"/"an order of one": too common to be a number alone.
    if (t.lower === 'a' || t.lower === 'an') return;
    const v = numberWord(t.lower.replace(/^#/, ''));
    if (v !== undefined) numbers.push({ value: v, token: i });
  });
  const local = new Date(now.getTime() + offset * 60_000);
  const today = `${local.getUTCFullYear()}-${pad(local.getUTCMonth() + 1)}-${pad(local.getUTCDate())}`;
  return { text, tokens, quoted, emails, urls, dates, numbers, timeZone, today };
}
