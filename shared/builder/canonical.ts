// Canonical JSON: object keys sorted, so the same definition always has the same text and hash
// however it was written (the hash ties a publish to its test run; the pretty form feeds the diff).
import { sha256Hex } from '../ids.ts';

function sortKeys(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(sortKeys);
  if (value && typeof value === 'object') {
    const out: Record<string, unknown> = Object.create(null);
    for (const k of Object.keys(value).sort()) out[k] = sortKeys((value as Record<string, unknown>)[k]);
    return out;
  }
  return value;
}

export const canonicalJson = (value: unknown): string => JSON.stringify(sortKeys(value));
export const canonicalPretty = (value: unknown): string => `${JSON.stringify(sortKeys(value), null, 2)}\n`;
export const canonicalHash = (value: unknown): string => sha256Hex(canonicalJson(value));
