// max_chars: shorten a run's output to fit, keeping it valid JSON where possible — long lists
// lose their tail first, then long strings; only as a last resort is the JSON text cut.
//
// The output is a publisher's (up to EXECUTE_MAX_OUTPUT_BYTES, nested as deep as it likes) and the
// limit is the caller's, and this runs on the API's one thread: every pass measures the whole value
// once, bottom-up (never JSON.stringify of each list again, which cost seconds on deep nesting), and
// halves every list near the biggest at once (not one list a pass, which left an object of many
// equal lists cut as text after hundreds of passes).

export interface Shortened {
  value: unknown;
  truncated: boolean;
  /** Length of the full output's JSON text. */
  fullChars: number;
}

const size = (v: unknown) => (v === undefined ? 0 : JSON.stringify(v).length);

/** Passes of list halving at most: each halves the longest lists, so 64 empties any list. */
const MAX_PASSES = 64;

export function shorten(value: unknown, maxChars: number): Shortened {
  const fullChars = size(value);
  if (fullChars <= maxChars) return { value, truncated: false, fullChars };
  let v: unknown = structuredClone(value);
  for (let i = 0; i < MAX_PASSES; i++) {
    const { total, lists } = measure(v);
    if (total <= maxChars || lists.length === 0) break;
    // Every non-empty list at least half the biggest's size loses the second half of its items.
    const biggest = Math.max(...lists.map((l) => l.chars));
    for (const l of lists) if (l.chars * 2 >= biggest) l.list.length = Math.floor(l.list.length / 2);
  }
  for (let cap = 2000; cap >= 50 && measure(v).total > maxChars; cap = Math.floor(cap / 2)) v = capStrings(v, cap);
  if (size(v) > maxChars) v = JSON.stringify(v).slice(0, Math.max(0, maxChars - 2));
  return { value: v, truncated: true, fullChars };
}

interface Measured {
  /** Length of the value's JSON text. */
  total: number;
  /** Every non-empty list in it, with the length of its JSON text. */
  lists: Array<{ list: unknown[]; chars: number }>;
}

/** The JSON text length of a JSON value and of each of its lists, in one walk. */
export function measure(v: unknown): Measured {
  const lists: Measured['lists'] = [];
  const walk = (node: unknown): number => {
    if (node === null || typeof node !== 'object') return node === undefined ? 0 : JSON.stringify(node).length;
    if (Array.isArray(node)) {
      // [a,b]: brackets, commas, and a missing item is written null.
      let chars = 2 + Math.max(0, node.length - 1);
      for (const item of node) chars += item === undefined ? 4 : walk(item);
      if (node.length > 0) lists.push({ list: node, chars });
      return chars;
    }
    let chars = 2;
    let n = 0;
    for (const [k, item] of Object.entries(node)) {
      if (item === undefined) continue;
      chars += JSON.stringify(k).length + 1 + walk(item);
      n++;
    }
    return chars + Math.max(0, n - 1);
  };
  return { total: walk(v), lists };
}

function capStrings(v: unknown, cap: number): unknown {
  if (typeof v === 'string') return v.length > cap ? `${v.slice(0, cap)}…` : v;
  if (Array.isArray(v)) return v.map((x) => capStrings(x, cap));
  if (v !== null && typeof v === 'object') return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, capStrings(x, cap)]));
  return v;
}
