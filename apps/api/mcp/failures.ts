// What an MCP client hears when a tool fails for a reason of ours: a database that cannot be
// read is a retryable 503 code with a hint; anything unexpected is a generic internal_error. The
// error's own text (a PostgreSQL message, "Maximum call stack size exceeded") stays in the log.
import { ServiceError } from '../../../shared/errors.ts';
import { isDatabaseUnavailable } from '../../../shared/db/unavailable.ts';

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
