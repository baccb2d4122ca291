// What an MCP client hears when a tool fails for a reason of ours: a database that cannot be
// read is a retryable 503 code with a hint; anything unexpected is a generic internal_error. The
// error's own text (a PostgreSQL message, "Maximum call stack size exceeded") stays in the log.
import type { z } from 'zod';
import { ServiceError, type ValidationIssue } from '../../../shared/errors.ts';
import { isDatabaseUnavailable } from '../../../shared/db/unavailable.ts';
import { zodIssues } from '../../../shared/schemas/common.ts';

export const GENERIC_MESSAGE = 'An unexpected error occurred. Retry shortly; before repeating an action, check its result with svc_get_run.';

/** Maps any failure to a ServiceError a client may see. */
export function toolFailure(err: unknown, unavailable: 'engine_unavailable' | 'catalog_unavailable' = 'engine_unavailable'): ServiceError {
  if (err instanceof ServiceError) return err;
  if (isDatabaseUnavailable(err)) {
    const what = unavailable === 'catalog_unavailable' ? 'The catalog cannot be read right now' : "The service's records cannot be read right now";
    return new ServiceError(unavailable, `${what}; retry in a few seconds`, { headers: { 'retry-after': '5' } });
  }
  logUnexpected(err);
  return new ServiceError('internal_error', GENERIC_MESSAGE);
}

function logUnexpected(err: unknown): void {
  const e = err instanceof Error ? { name: err.name, message: err.message, stack: err.stack?.split('\n').slice(0, 8).join('\n') } : { value: String(err) };
  process.stderr.write(`${JSON.stringify({ level: 50, event: 'mcp_tool_unexpected_error', err: e })}\n`);
}

/** Arguments nested deeper than this are refused before any handler walks them. */
export const MAX_ARGUMENT_DEPTH = 64;
export const MAX_ARGUMENT_NODES = 100_000;

/** Depth and size of tool arguments, walked without recursion; a ServiceError when too big. */
export function checkArguments(args: unknown): ServiceError | null {
  const stack: Array<[unknown, number, string]> = [[args, 0, '']];
  let nodes = 0;
  while (stack.length) {
    const [node, depth, path] = stack.pop()!;
    if (node === null || typeof node !== 'object') continue;
    if (depth >= MAX_ARGUMENT_DEPTH) return tooBig(path, `is nested deeper than ${MAX_ARGUMENT_DEPTH} levels`);
    for (const [k, v] of Object.entries(node)) {
      if (++nodes > MAX_ARGUMENT_NODES) return tooBig(path, `has more than ${MAX_ARGUMENT_NODES} values`);
      if (v !== null && typeof v === 'object') stack.push([v, depth + 1, path ? `${path}.${k}` : k]);
    }
  }
  return null;
}

/** Named by the top-level argument it is in; the arguments as a whole name none (no param, issue path ''). */
function tooBig(path: string, message: string): ServiceError {
  const param = path.split('.')[0] ?? '';
  return new ServiceError('invalid_input', `The arguments are too deeply nested or too large: ${param || 'the arguments'} ${message}`, {
    ...(param ? { param } : {}),
    details: { issues: [{ path: param, message }] },
  });
}

/** Issues listed in a refusal of arguments (the rest are counted in `details.more_issues`), and the longest path or message shown. */
export const MAX_LISTED_ISSUES = 20;
const MAX_ISSUE_TEXT = 200;
const clip = (s: string) => (s.length > MAX_ISSUE_TEXT ? `${s.slice(0, MAX_ISSUE_TEXT)}…` : s);

/**
 * A tool's arguments checked against its input schema (strict: an argument the tool does not take
 * is refused, never ignored). Failing, the service's invalid_input: `param` is the first issue's
 * path, `details.issues` the first MAX_LISTED_ISSUES issues with paths and texts clipped (a key
 * name or an array of bad values can be as large as the body), `details.more_issues` the rest.
 */
export function parseArguments<T>(schema: z.ZodType<T>, args: unknown): { ok: true; data: T } | { ok: false; error: ServiceError } {
  const parsed = schema.safeParse(args ?? {});
  if (parsed.success) return { ok: true, data: parsed.data };
  const all = zodIssues(parsed.error);
  const issues: ValidationIssue[] = all.slice(0, MAX_LISTED_ISSUES).map((i) => ({ ...i, path: clip(i.path), message: clip(i.message) }));
  const more = all.length - issues.length;
  const said = issues.slice(0, 3).map((i) => `${i.path || '(arguments)'}: ${i.message}`);
  if (all.length > said.length) said.push(`${all.length} issues in all`);
  return {
    ok: false,
    error: new ServiceError('invalid_input', `Invalid arguments: ${said.join('; ')}`, {
      ...(issues[0]?.path ? { param: issues[0].path } : {}),
      details: { issues, ...(more > 0 ? { more_issues: more } : {}) },
    }),
  };
}
