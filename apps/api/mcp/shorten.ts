// max_chars: shorten a run's output to fit, keeping it valid JSON where possible — long lists
// lose their tail first, then long strings; only as a last resort is the JSON text cut.

export interface Shortened {
  value: unknown;
  truncated: boolean;
  /** Length of the full output's JSON text. */
  fullChars: number;
}

const size = (v: unknown) => (v === undefined ? 0 : JSON.stringify(v).length);

export function shorten(value: unknown, maxChars: number): Shortened {
  const fullChars = size(value);
  if (fullChars <= maxChars) return { value, truncated: false, fullChars };
  let v: unknown = structuredClone(value);
  // Halve the biggest list until the text fits (bounded: each pass removes items).
  for (let i = 0; i < 200 && size(v) > maxChars; i++) {
    const biggest = largestArray(v);
    if (!biggest || biggest.length === 0) break;
    biggest.length = Math.floor(biggest.length / 2);
  }
  for (let cap = 2000; cap >= 50 && size(v) > maxChars; cap = Math.floor(cap / 2)) v = capStrings(v, cap);
  if (size(v) > maxChars) v = JSON.stringify(v).slice(0, Math.max(0, maxChars - 2));
  return { value: v, truncated: true, fullChars };
}

function largestArray(v: unknown): unknown[] | undefined {
  let best: unknown[] | undefined;
  let bestSize = -1;
  const visit = (node: unknown) => {
    if (node === null || typeof node !== 'object') return;
    if (Array.isArray(node)) {
      const s = size(node);
      if (node.length > 0 && s > bestSize) {
        best = node;
        bestSize = s;
      }
      node.forEach(visit);
      return;
    }
    Object.values(node).forEach(visit);
  };
  visit(v);
  return best;
}

function capStrings(v: unknown, cap: number): unknown {
  if (typeof v === 'string') return v.length > cap ? `${v.slice(0, cap)}…` : v;
  if (Array.isArray(v)) return v.map((x) => capStrings(x, cap));
  if (v !== null && typeof v === 'object') return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, capStrings(x, cap)]));
  return v;
}
