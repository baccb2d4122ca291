// Bodies are taken as they are sent: a request whose body carries a Content-Encoding other than
// identity is refused (415 unsupported_media_type, `param: Content-Encoding`) before the body is
// read, on every route that reads one. Nothing is ever decoded: a decoded body could be far larger
// than the bytes the body limit counted. Without this, a gzip JSON body was answered 400 "not valid
// JSON" (the body was fine; its encoding is what is not taken) and a gzip upload was stored as its
// compressed bytes. The API's routes refuse with the envelope (hook in plugins/json-body.ts), the
// OAuth endpoints turn it into their own error body (routes/oauth.ts), the console into its error
// page (plugins/console-session.ts).
import type { FastifyRequest } from 'fastify';
import { ServiceError } from '../../../shared/errors.ts';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** What a refused Content-Encoding tells the caller to do instead (default: send the body as it is). */
    contentEncodingHint?: string;
  }
}

/** Methods whose body Fastify never reads: a Content-Encoding sent with them is about nothing. */
const BODYLESS = new Set(['GET', 'HEAD', 'TRACE']);

export const DEFAULT_CONTENT_ENCODING_HINT = 'send the body as it is, not compressed';

/**
 * The codings a Content-Encoding header names other than identity, lower-cased, in order. The
 * header is a comma-separated list (copies sent on several lines arrive joined by Node with ", ");
 * `identity` in any case, with spaces around it, and empty members are no coding at all, so an
 * absent or empty header, `IDENTITY` or `identity, identity` give []. Anything else is a coding the
 * service does not decode, `gzip, identity` included: content codings have no parameters, so
 * `identity;q=1` is not identity either.
 */
export function nonIdentityCodings(header: string | string[] | undefined): string[] {
  if (header === undefined) return [];
  return [header]
    .flat()
    .join(',')
    .split(',')
    .map((c) => c.trim().toLowerCase())
    .filter((c) => c !== '' && c !== 'identity');
}

/**
 * Whether the request carries a body the service would read: a method whose body Fastify parses,
 * with Transfer-Encoding or a Content-Length other than 0. A GET, or a POST without a body, is
 * never refused for its Content-Encoding.
 */
export function carriesBody(request: Pick<FastifyRequest, 'method' | 'headers'>): boolean {
  if (BODYLESS.has(request.method)) return false;
  const length = request.headers['content-length'];
  return request.headers['transfer-encoding'] !== undefined || (length !== undefined && Number(length) !== 0);
}

/**
 * The refusal of a request whose body is encoded (415, `param: Content-Encoding`, one issue at that
 * path), or undefined. `hint` ends the message: what to send instead.
 */
export function contentEncodingRefusal(request: Pick<FastifyRequest, 'method' | 'headers'>, hint = DEFAULT_CONTENT_ENCODING_HINT): ServiceError | undefined {
  if (!carriesBody(request) || nonIdentityCodings(request.headers['content-encoding']).length === 0) return undefined;
  const message = `must be identity or absent: ${hint}`;
  return new ServiceError('unsupported_media_type', `Content-Encoding ${message}`, {
    param: 'Content-Encoding',
    details: { issues: [{ path: 'Content-Encoding', message }] },
  });
}

/**
 * preParsing hook: refuses an encoded body before any of it is read, with the route's hint
 * (`config.contentEncodingHint`). Runs after onRequest, so a route's credential is checked first.
 */
export async function refuseEncodedBody(request: FastifyRequest): Promise<void> {
  const refusal = contentEncodingRefusal(request, request.routeOptions.config?.contentEncodingHint);
  if (refusal) throw refusal;
}
