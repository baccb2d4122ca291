// What a span or a log line may say about a URL. Query strings can carry secrets (tokens, signed
// URLs, a console invitation link's secret) and a site request's path can carry a query's input,
// so spans and request logs keep the API's own path (route and ids, never a query string) and only
// the origin of a site request; for the same reason an exported span keeps an error's type, not its
// message or stack trace. Pure: no OpenTelemetry import.

/** The API's incoming request target without its query string ("/v1/query?x=1" → "/v1/query"). */
export function pathOnly(target: string | undefined): string {
  const t = target ?? '/';
  const cut = t.search(/[?#]/);
  return (cut === -1 ? t : t.slice(0, cut)) || '/';
}

/** The API's request log fields (Fastify's own, `req` serializer), the URL without its query string. */
export function logRequest(req: { method?: string; url?: string; host?: string; ip?: string; socket?: { remotePort?: number } }) {
  return { method: req.method, url: pathOnly(req.url), host: req.host, remoteAddress: req.ip, remotePort: req.socket?.remotePort };
}

/** scheme://host[:port] of an outgoing request, or undefined if it is not a URL. */
export function originOnly(url: string): string | undefined {
  try {
    const u = new URL(url);
    return u.origin === 'null' ? undefined : u.origin;
  } catch {
    return undefined;
  }
}

/** Probes and metrics scrapes: not traced, they would drown the queries. Neither are proxy
 *  requests (absolute-form targets, "http://host/…"): under `npm start` the browser engine's
 *  guarded proxy shares the process, and each of its hops would start a trace of its own. */
const UNTRACED = new Set(['/livez', '/readyz', '/health', '/metrics']);
export const isUntracedPath = (target: string | undefined) => !(target ?? '/').startsWith('/') || UNTRACED.has(pathOnly(target));

/** OpenTelemetry's exception event attributes that hold the error's own text. */
const ERROR_TEXT = new Set(['exception.message', 'exception.stacktrace']);

type ExportedSpan = { status: { code: number; message?: string }; events: ReadonlyArray<{ name: string; attributes?: Record<string, unknown> }> };

/**
 * A span as exported: that it failed, and the error's type (`exception.type`), never the error's
 * message or stack trace. Those are an activity's failure as the instrumentation recorded it
 * (Temporal's interceptors call recordException and put the message in the status): a website
 * failure names the page it asked for with the query's input in its path, a recipe's not_found or
 * fail message is rendered from the run's scope, a stack trace names the worker's files. The
 * worker's own logs keep the message. Spans without error text are returned as they are.
 */
export function withoutErrorText<S extends ExportedSpan>(span: S): S {
  const hasText = span.status.message !== undefined || span.events.some((e) => e.name === 'exception' && Object.keys(e.attributes ?? {}).some((k) => ERROR_TEXT.has(k)));
  if (!hasText) return span;
  const events = span.events.map((e) =>
    e.name === 'exception' && e.attributes ? { ...e, attributes: Object.fromEntries(Object.entries(e.attributes).filter(([k]) => !ERROR_TEXT.has(k))) } : e,
  );
  // The span's own methods (spanContext(), ...) and every other field stay the original's.
  return Object.create(span, { status: { value: { code: span.status.code }, enumerable: true }, events: { value: events, enumerable: true } }) as S;
}
