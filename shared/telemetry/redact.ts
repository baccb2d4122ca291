// What a span or a log line may say about a URL. Query strings can carry secrets (tokens, signed
// URLs, a console invitation link's secret) and a site request's path can carry a query's input,
// so spans and request logs keep the API's own path (route and ids, never a query string) and only
// the origin of a site request. Pure: no OpenTelemetry import.

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
