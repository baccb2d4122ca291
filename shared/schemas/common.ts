import { z } from 'zod';
import type { ValidationIssue } from '../errors.ts';

export const HANDLE_PATTERN = /^@[a-z0-9][a-z0-9_-]{0,99}$/;
export const OPERATION_PATTERN = /^[a-z][a-z0-9_]{0,99}$/;
export const FILE_ID_PATTERN = /^file_[0-9a-f]{32}$/;

export const Handle = z.string().regex(HANDLE_PATTERN, 'must be a handle like @name (lowercase letters, digits, _ and -)');
export const OperationName = z.string().regex(OPERATION_PATTERN, 'must be a callable operation name like search_books');

/**
 * An integer query parameter, written in decimal digits (a leading minus allowed, so that -1 is
 * "too small" rather than "not a number"). z.coerce.number() took whatever Number() takes: `0x10`
 * was 16, `1e1` 10, ` 5 ` 5 and `1.0` 1, none of them the integer the contract asks for. A value
 * that is not a string (a number from a caller that is not a query string) is checked as it is.
 */
function decimalInt(min: number, max: number) {
  const int = z
    .number({ error: (issue) => (issue.code === 'invalid_type' ? 'must be an integer in decimal digits' : undefined) })
    .int()
    .min(min)
    .max(max);
  return z.preprocess((v) => (typeof v === 'string' && /^-?[0-9]+$/.test(v) ? Number(v) : v), int);
}
// The document says what the preprocessing hides from zod's JSON Schema: an integer and its bounds.
const intDoc = (min: number, max: number) => ({ type: 'integer', minimum: min, maximum: max }) as const;
export const queryInt = (min: number, max: number) => decimalInt(min, max).optional().meta(intDoc(min, max));
/** queryInt with a default for an absent parameter (a prefault: parsed like a sent value, and shown as the default in the document). */
export const queryIntOr = (min: number, max: number, byDefault: number) => decimalInt(min, max).prefault(byDefault).meta(intDoc(min, max));

export const uniqueItems = <T>(items: T[]) => new Set(items.map((i) => JSON.stringify(i))).size === items.length;

/** Dotted path of a zod issue path: ["response","include",3] -> "response.include.3". */
export const dotted = (path: ReadonlyArray<PropertyKey>) => path.map(String).join('.');

/** Flatten zod issues into the envelope's details.issues, one per failing path (unknown keys each get their own). */
export function zodIssues(error: z.ZodError, prefix: ReadonlyArray<PropertyKey> = []): ValidationIssue[] {
  const out: ValidationIssue[] = [];
  for (const issue of error.issues) {
    const base = [...prefix, ...issue.path];
    if (issue.code === 'unrecognized_keys') {
      for (const key of issue.keys) out.push({ path: dotted([...base, key]), message: 'unknown field', code: 'unrecognized_key' });
    } else {
      out.push({ path: dotted(base), message: issue.message, code: issue.code });
    }
  }
  return out;
}
