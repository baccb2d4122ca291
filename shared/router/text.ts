// Words of a prompt and of an operation's routing text, compared loosely: lower case, a light
// English stem (plural and -ing/-ed endings), and a one- or two-letter typo allowance by length.

/** Words that say nothing about which operation is meant; kept out of retrieval and coverage. */
export const STOP_WORDS = new Set(
  (
    'a an and are as at be by can could do does for from give how i i\'d im is it its me my of on or our please show ' +
    'some tell that the their them there this to us was we what whats when where which who will with would you your ' +
    'want like need get find list look up lookup search fetch check see know let lets any all just also right pls plz ' +
    'hey hi hello thanks thank much many about into over out so than then these those very'
  ).split(' '),
);

const NUMBER_WORDS: Record<string, number> = {
  one: 1, two: 2, three: 3, four: 4, five: 5, six: 6, seven: 7, eight: 8, nine: 9, ten: 10,
  eleven: 11, twelve: 12, fifteen: 15, twenty: 20, thirty: 30, a: 1, an: 1, single: 1, couple: 2, pair: 2, dozen: 12,
};

export function numberWord(w: string): number | undefined {
  if (/^[0-9]{1,6}$/.test(w)) return Number(w);
  return NUMBER_WORDS[w];
}

/** Lower-case words (letters, digits) of any text. */
export function words(text: string): string[] {
  return text.normalize('NFKC').toLowerCase().replace(/[’']/g, '').match(/[\p{L}\p{N}]+/gu) ?? [];
}

/** A light stem so "forecasts", "booking", "booked" meet "forecast", "book". */
export function stem(w: string): string {
  if (w.length <= 3 || /[0-9]/.test(w)) return w;
  if (w.endsWith('ies') && w.length > 4) return `${w.slice(0, -3)}y`;
  if (w.endsWith('ing') && w.length > 5) return w.slice(0, -3);
  if (w.endsWith('ed') && w.length > 4) return w.slice(0, -2);
  if (w.endsWith('es') && /(sh|ch|x|ss)es$/.test(w)) return w.slice(0, -2);
  if (w.endsWith('s') && !w.endsWith('ss') && !w.endsWith('us')) return w.slice(0, -1);
  return w;
}

/** Edit distance, stopping early past `max`. */
export function editDistance(a: string, b: string, max = 2): number {
  if (Math.abs(a.length - b.length) > max) return max + 1;
  let before: number[] = [];
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const cur = [i];
    let best = i;
    for (let j = 1; j <= b.length; j++) {
      cur[j] = Math.min(prev[j]! + 1, cur[j - 1]! + 1, prev[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
      // Two swapped neighbours are one typo ("forcast" / "froecast").
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) cur[j] = Math.min(cur[j]!, before[j - 2]! + 1);
      best = Math.min(best, cur[j]!);
    }
    if (best > max) return max + 1;
    before = prev;
    prev = cur;
  }
  return prev[b.length]!;
}

/** Two words that differ by one swap of neighbouring letters ("jbos" / "jobs"). */
function isSwap(a: string, b: string): boolean {
  const diff = [...a].flatMap((c, i) => (c === b[i] ? [] : [i]));
  return diff.length === 2 && diff[1] === diff[0]! + 1 && a[diff[0]!] === b[diff[1]!] && a[diff[1]!] === b[diff[0]!];
}

/** Typos allowed for a word of this length: none below 5 letters, one below 9, else two. */
export const typoAllowance = (w: string) => (w.length < 5 ? 0 : w.length < 9 ? 1 : 2);

/**
 * How many word comparisons one operation may cost the router, in units: a comparison its first
 * letter decides costs 1, one that needs the stems and edit distances (tens of µs) costs
 * `DISTANCE_UNITS`, and a pair already compared costs nothing more. The prompt's words are the
 * caller's and the operation's words (enum values, field names, descriptions) its publisher's, up
 * to a 512 KiB definition: unbounded, a prompt of random words starting with one letter against an
 * enum of a few thousand such values held the API's event loop for seconds to minutes per prompt.
 * The router's own evaluation set spends at most a few thousand units per operation.
 */
export const DISTANCE_UNITS = 1_000;

/** sameWord within a budget of units; once it is spent every comparison is false and `exhausted` says so. */
export class WordBudget {
  exhausted = false;
  private left: number;
  private readonly seen = new Map<string, boolean>();

  constructor(units: number) {
    this.left = units;
  }

  same(promptWord: string, vocab: string): boolean {
    if (this.exhausted) return false;
    if (promptWord === vocab || promptWord[0] !== vocab[0] || Math.abs(promptWord.length - vocab.length) > 12) return this.spend(1) && promptWord === vocab;
    const key = `${promptWord}\u0000${vocab}`;
    const known = this.seen.get(key);
    if (known !== undefined) return known;
    if (!this.spend(DISTANCE_UNITS)) return false;
    const same = sameWord(promptWord, vocab);
    this.seen.set(key, same);
    return same;
  }

  /** Spends `units` of other work (a publisher's pattern matched against a prompt token): false, and exhausted, once the budget is gone. */
  charge(units: number): boolean {
    return !this.exhausted && this.spend(units);
  }

  private spend(units: number): boolean {
    this.left -= units;
    if (this.left < 0) this.exhausted = true;
    return !this.exhausted;
  }
}

/** Whether a prompt word and a vocabulary word are the same word, allowing a typo. */
export function sameWord(promptWord: string, vocab: string): boolean {
  if (promptWord === vocab) return true;
  // Typos keep the first letter (the usual assumption of spelling correctors); cheap and decisive.
  if (promptWord[0] !== vocab[0] || Math.abs(promptWord.length - vocab.length) > 12) return false;
  const a = stem(promptWord);
  const b = stem(vocab);
  if (a === b) return true;
  // One word inside another ("temp" / "temperature", "windy" / "wind", "polluted" / "pollution").
  const [short, long] = a.length <= b.length ? [a, b] : [b, a];
  if (!/[0-9]/.test(short) && long.startsWith(short) && short.length >= 4) return true;
  // Raw words too: "bookz" (5 letters) is one typo from "books"; their stems differ in length more.
  if (promptWord.length >= 4 && vocab.length >= 4 && promptWord.length === vocab.length && isSwap(promptWord, vocab)) return true;
  const allow = Math.min(typoAllowance(a), typoAllowance(b));
  const rawAllow = Math.min(4, Math.min(promptWord.length, vocab.length)) >= 4 ? typoAllowance(promptWord.length > vocab.length ? promptWord : vocab) : 0;
  return (allow > 0 && editDistance(a, b, allow) <= allow) || (rawAllow > 0 && editDistance(promptWord, vocab, rawAllow) <= rawAllow);
}
