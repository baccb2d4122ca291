// Whether a failure means PostgreSQL cannot answer now (503 + Retry-After for the caller), as opposed
// to a bug in a query. One rule for the HTTP error handler and the MCP tools.

const NETWORK_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ENOTFOUND', 'ETIMEDOUT', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH', 'EPIPE']);
// SQLSTATE: 57014 statement timeout / cancel, 57P01-57P05 shutdown and idle timeouts,
// class 08 connection exceptions, class 53 insufficient resources (too many connections, ...).
const SQLSTATE_UNAVAILABLE = /^(57014|57P0[1-5]|08...|53...)$/;
// node-postgres reports a lost or never-made connection with plain Errors.
const PG_MESSAGES = /timeout exceeded when trying to connect|Connection terminated|connection timeout|Client has encountered a connection error|Cannot use a pool after calling end/i;

/** True when `err` says PostgreSQL cannot answer now (as opposed to a bug in a query). */
export function isDatabaseUnavailable(err: unknown, depth = 0): boolean {
  if (!err || typeof err !== 'object' || depth > 4) return false;
  const e = err as { code?: unknown; message?: unknown; cause?: unknown; errors?: unknown };
  if (typeof e.code === 'string' && (NETWORK_CODES.has(e.code) || SQLSTATE_UNAVAILABLE.test(e.code))) return true;
  if (typeof e.message === 'string' && PG_MESSAGES.test(e.message)) return true;
  if (Array.isArray(e.errors) && e.errors.some((x) => isDatabaseUnavailable(x, depth + 1))) return true;
  return isDatabaseUnavailable(e.cause, depth + 1);
}
