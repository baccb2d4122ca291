import { z } from 'zod';
import type { ValidationIssue } from '../errors.ts';

export const HANDLE_PATTERN = /^@[a-z0-9][a-z0-9_-]{0,99}$/;
export const OPERATION_PATTERN = /^[a-z][a-z0-9_]{0,99}$/;
export const FILE_ID_PATTERN = /^file_[0-9a-f]{32}$/;

export const Handle = z.string().regex(HANDLE_PATTERN, 'must be a handle like @name (lowercase letters, digits, _ and -)');
export const OperationName = z.string().regex(OPERATION_PATTERN, 'must be a callable operation name like search_books');

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
