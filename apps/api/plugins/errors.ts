// One central error handler: every failure on every route is the spec's envelope with a precise code.
// It also maps what the zod type provider rejects (route schemas) to invalid_input, turns a
// database that cannot answer into 503 + Retry-After, and answers methods no route declares with
// 405 (or 404 on unknown paths) — including methods Node's parser or Fastify's router do not know.
import type { Socket } from 'node:net';
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { hasZodFastifySchemaValidationErrors, validatorCompiler as zodValidatorCompiler } from 'fastify-type-provider-zod';
import { ERRORS, ServiceError, errorEnvelope, type ErrorCode, type ErrorOptions, type ValidationIssue } from '../../../shared/errors.ts';
import { isDatabaseUnavailable } from '../../../shared/db/unavailable.ts';
import { REQUEST_ID_MESSAGE } from '../routes/requests.ts';

declare module 'fastify' {
  interface FastifyReply {
    sendError(code: ErrorCode, opts?: ErrorOptions & { headers?: Record<string, string> }): FastifyReply;
  }
  interface FastifyInstance {
    baseUrl(): string;
  }
  interface FastifyContextConfig {
    /** The 503 code when PostgreSQL cannot answer on this route (default `engine_unavailable`). */
    unavailableCode?: UnavailableCode;
  }
}

export type UnavailableCode = 'catalog_unavailable' | 'engine_unavailable';
/** Seconds a client waits before retrying when the database cannot answer. */
export const DB_RETRY_AFTER_SECONDS = 5;

/**
 * Fastify's own refusals of a body. `param` names the header at fault (the Content-Type of a body
 * of another type, as POST /v1/files does); a refusal of the body as a whole names none.
 */
const FASTIFY_CODES: Record<string, { code: ErrorCode; message: string; param?: string }> = {
  FST_ERR_CTP_INVALID_JSON_BODY: { code: 'invalid_input', message: 'The body is not valid JSON' },
  FST_ERR_CTP_EMPTY_JSON_BODY: { code: 'invalid_input', message: 'A JSON body is required' },
  FST_ERR_CTP_BODY_TOO_LARGE: { code: 'payload_too_large', message: 'The request body is too large' },
  FST_ERR_CTP_INVALID_MEDIA_TYPE: { code: 'unsupported_media_type', message: 'The body must be sent as application/json', param: 'Content-Type' },
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: { code: 'invalid_input', message: 'Content-Length does not match the body' },
  FST_ERR_ROUTE_MISSING_CONTENT_TYPE: { code: 'unsupported_media_type', message: 'A request with a body needs a Content-Type header', param: 'Content-Type' },
};

/** The `param` and `details.issues` of a refused Content-Type: the issue names the header and the type the route takes. */
export function contentTypeRefusal(message: string, expected: string) {
  return { param: 'Content-Type', details: { issues: [{ path: 'Content-Type', message: `must be ${expected}` }] }, message };
}

// --- validation by route schemas ---------------------------------------------------------------

type ZodValidationEntry = { instancePath: string; keyword: string; message?: string; params: Record<string, unknown> };

/** The envelope's details.issues from the type provider's errors; unknown keys each get their own issue. */
/** Canonical spellings of headers named in `param` (Fastify lower-cases header names). */
const HEADER_NAMES: ReadonlyMap<string, string> = new Map([
  ['x-file-name', 'X-File-Name'],
  ['idempotency-key', 'Idempotency-Key'],
  ['content-type', 'Content-Type'],
]);

function schemaIssues(entries: ZodValidationEntry[], context?: string): ValidationIssue[] {
  const out: ValidationIssue[] = [];
  for (const v of entries) {
    const base = v.instancePath.split('/').filter(Boolean);
    if (context === 'headers' && base[0]) base[0] = HEADER_NAMES.get(base[0]) ?? base[0];
    if (v.keyword === 'unrecognized_keys' && Array.isArray(v.params.keys)) {
      for (const key of v.params.keys) out.push({ path: [...base, String(key)].join('.'), message: 'unknown field', code: 'unrecognized_key' });
    } else {
      out.push({ path: base.join('.'), message: v.message ?? 'invalid', code: v.keyword });
    }
  }
  return out;
}

// --- routing: 404 / 405 / OPTIONS ----------------------------------------------------------------

const ROUTABLE = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE'] as const;

/** Methods some route answers on `url` (HEAD comes with every GET). */
export function allowedMethods(app: FastifyInstance, url: string): string[] {
  return ROUTABLE.filter((m) => app.findRoute({ method: m, url }) !== null);
}

function routeMiss(app: FastifyInstance, method: string, rawUrl: string): { code: ErrorCode; message: string; allow?: string } {
  const url = rawUrl.split('?')[0]!;
  const allowed = allowedMethods(app, url);
  if (allowed.length === 0) return { code: 'route_not_found', message: `No route for ${method} ${url}` };
  return { code: 'method_not_allowed', message: `${method} is not allowed on ${url}; use ${allowed.join(', ')}`, allow: allowed.join(', ') };
}

function answerMiss(app: FastifyInstance, request: FastifyRequest, reply: FastifyReply) {
  const url = request.url.split('?')[0]!;
  const miss = routeMiss(app, request.method, url);
  if (miss.allow && request.method === 'OPTIONS') {
    // RFC 9110 §9.3.7: OPTIONS on a known path answers which methods it takes; no CORS here.
    return reply.code(204).header('allow', miss.allow).send();
  }
  return reply.sendError(miss.code, { message: miss.message, headers: miss.allow ? { allow: miss.allow } : undefined });
}

/**
 * Headers every answer carries, also those written before any hook runs (below): today only
 * Strict-Transport-Security on an https deployment (plugins/transport-security.ts).
 */
export type AlwaysHeaders = Record<string, string>;

/** A complete raw HTTP/1.1 answer with a JSON body, for requests Fastify never routed; the connection closes. */
function rawJsonAnswer(status: number, reason: string, headers: Record<string, string>, text: string): string {
  const all = { ...headers, 'content-type': 'application/json; charset=utf-8', 'content-length': String(Buffer.byteLength(text)), connection: 'close' };
  const head = [`HTTP/1.1 ${status} ${reason}`, ...Object.entries(all).map(([k, v]) => `${k}: ${v}`)];
  return `${head.join('\r\n')}\r\n\r\n${text}`;
}

/** A complete raw HTTP/1.1 answer for a request Fastify never routed (unknown method, CONNECT). */
export function rawMissResponse(app: FastifyInstance, baseUrl: string, method: string, url: string, always: AlwaysHeaders = {}): string {
  const miss = routeMiss(app, method, url);
  const status = ERRORS[miss.code].status;
  const text = JSON.stringify(errorEnvelope(miss.code, { baseUrl, message: miss.message }));
  return rawJsonAnswer(status, status === 405 ? 'Method Not Allowed' : 'Not Found', { ...always, ...(miss.allow ? { allow: miss.allow } : {}) }, text);
}

/**
 * Node's HTTP parser rejects methods it does not know (FOO) before Fastify sees the request; the
 * request line is still in `rawPacket`, so such a request gets the same 405/404 envelope.
 * Other malformed requests keep Fastify's default (400, connection closed).
 */
export function clientErrorResponder(getApp: () => FastifyInstance | undefined, baseUrl: () => string, always: AlwaysHeaders = {}) {
  return function onClientError(err: Error & { code?: string; rawPacket?: unknown }, socket: Socket) {
    if (!socket.writable) return void socket.destroy();
    const line = /^([!-~]+) (\S+) HTTP\/1\.[01]\r?\n/.exec(Buffer.isBuffer(err.rawPacket) ? err.rawPacket.toString('latin1', 0, 8192) : '');
    const app = getApp();
    if (line && app && (err.code === 'HPE_INVALID_METHOD' || err.code === 'HPE_INVALID_CONSTANT')) {
      return void socket.end(rawMissResponse(app, baseUrl(), line[1]!, line[2]!, always));
    }
    // A request that did not arrive whole in time (headers or body): 408, retryable.
    if (err.code === 'ERR_HTTP_REQUEST_TIMEOUT') {
      const text = JSON.stringify(errorEnvelope('request_timeout', { baseUrl: baseUrl(), message: 'The request was not received in time; send it again, whole' }));
      return void socket.end(rawJsonAnswer(408, 'Request Timeout', always, text));
    }
    // The envelope's status must match the HTTP status: too-large headers are 400 invalid_input too.
    const message = err.code === 'HPE_HEADER_OVERFLOW' ? 'The request headers are too large' : 'The request is not valid HTTP';
    // The request as a whole: no param, its one issue at path '' (as every whole-request refusal).
    const text = JSON.stringify(errorEnvelope('invalid_input', { baseUrl: baseUrl(), message, details: { issues: [{ path: '', message }] } }));
    socket.end(rawJsonAnswer(400, 'Bad Request', always, text));
  };
}

/**
 * Fastify option `frameworkErrors`: failures found while routing (a path that is not valid
 * percent-encoding, a path parameter over 100 characters) get the envelope instead of Fastify's
 * own JSON. They are the client's: 400 invalid_input.
 */
export function frameworkErrorResponder(baseUrl: () => string, always: AlwaysHeaders = {}) {
  return (err: FastifyError, request: FastifyRequest, reply: FastifyReply) => {
    const known: Record<string, string> = {
      FST_ERR_BAD_URL: 'The path is not valid percent-encoding',
      FST_ERR_MAX_PARAM_LENGTH: 'A path parameter is longer than 100 characters',
    };
    const send = (code: ErrorCode, opts: ErrorOptions) =>
      reply.code(ERRORS[code].status).headers(always).type('application/json; charset=utf-8').send(JSON.stringify(errorEnvelope(code, { baseUrl: baseUrl(), ...opts })));
    // On a route whose parameter is known, an over-long one is refused as that parameter, as the
    // route's schema refuses one of 65 to 100 characters: the router stops at 100 before the schema runs.
    const param = err.code === 'FST_ERR_MAX_PARAM_LENGTH' ? longParamOf(request.url) : undefined;
    if (param) return send('invalid_input', { message: `${param.name}: ${param.message}`, param: param.name, details: { issues: [{ path: param.name, message: param.message, code: param.code }] } });
    const message = known[err.code];
    if (!message) return send('internal_error', { message: 'Unexpected error' });
    return send('invalid_input', { message, details: { issues: [{ path: '', message }] } });
  };
}

/**
 * Routes with one path parameter and its schema's refusal (keyword and message, as the type
 * provider reports them): GET /v1/query/requests/{request_id} and its feedback route, whatever
 * the method (as the schema would, the parameter is what is wrong).
 */
const LONG_PARAM_ROUTES: Array<{ path: RegExp; name: string; message: string; code: string }> = [
  { path: /^\/v1\/query\/requests\/[^/]+(?:\/feedback)?$/, name: 'request_id', message: REQUEST_ID_MESSAGE, code: 'invalid_format' },
];

function longParamOf(url: string) {
  const path = url.split('?')[0]!;
  return LONG_PARAM_ROUTES.find((r) => r.path.test(path));
}

export default fp(
  async function errorsPlugin(app: FastifyInstance) {
    app.decorateReply('sendError', function sendError(this: FastifyReply, code: ErrorCode, opts: ErrorOptions & { headers?: Record<string, string> } = {}) {
      const env = errorEnvelope(code, { baseUrl: app.baseUrl(), ...opts });
      if (opts.headers) this.headers(opts.headers);
      // Error bodies bypass the route's response schemas: the envelope is the contract for all of them.
      return this.code(ERRORS[code].status).type('application/json; charset=utf-8').serializer(JSON.stringify).send(env);
    });

    app.setErrorHandler((err: FastifyError | ServiceError, request: FastifyRequest, reply: FastifyReply) => {
      // No route matched: whatever failed on the way (a QUERY without Content-Type, a body too
      // large for a path that does not exist) the answer is about routing.
      if (request.is404) return answerMiss(app, request, reply);
      if (err instanceof ServiceError) {
        const issues = (err.details as { issues?: unknown } | undefined)?.issues;
        return reply.sendError(err.code, {
          message: err.message,
          param: err.param,
          details: err.details ?? (issues ? { issues } : undefined),
          headers: err.headers,
          requestId: err.requestId,
        });
      }
      const known = err.code && Object.hasOwn(FASTIFY_CODES, err.code) ? FASTIFY_CODES[err.code] : undefined;
      if (known?.param === 'Content-Type') return reply.sendError(known.code, contentTypeRefusal(known.message, 'application/json'));
      // The limit the body passed, as POST /v1/files says it (no param: the body as a whole).
      if (known?.code === 'payload_too_large') {
        const limit = request.routeOptions.bodyLimit;
        return reply.sendError(known.code, { message: limit ? `The request body is larger than ${limit} bytes` : known.message, details: limit ? { limit_bytes: limit } : undefined });
      }
      if (known) return reply.sendError(known.code, { message: known.message, details: known.code === 'invalid_input' ? { issues: [{ path: '', message: known.message }] } : undefined });
      if (hasZodFastifySchemaValidationErrors(err)) {
        // A route's zod schema (params, querystring, headers, body) rejected the request.
        const issues = schemaIssues(err.validation, err.validationContext);
        const first = issues[0];
        const where = err.validationContext ?? 'request';
        return reply.sendError('invalid_input', { message: `${first?.path || where}: ${first?.message ?? 'invalid'}`, param: first?.path || undefined, details: { issues } });
      }
      if (err.validation) {
        // A plain JSON-Schema route schema (none today; kept so one never answers 500).
        const issues = err.validation.map((v) => ({ path: v.instancePath.replace(/^\//, '').replace(/\//g, '.'), message: v.message ?? 'invalid' }));
        return reply.sendError('invalid_input', { message: err.message, param: issues[0]?.path || undefined, details: { issues } });
      }
      if (isDatabaseUnavailable(err)) {
        const code = request.routeOptions.config.unavailableCode ?? 'engine_unavailable';
        request.log.warn({ err }, 'database unavailable');
        return reply.sendError(code, { message: `${ERRORS[code].title}; retry shortly`, headers: { 'retry-after': String(DB_RETRY_AFTER_SECONDS) } });
      }
      // Anything else is ours: log everything, show nothing of it.
      request.log.error({ err }, 'unhandled error');
      return reply.sendError('internal_error', { message: 'Unexpected error' });
    });

    app.setNotFoundHandler((request, reply) => answerMiss(app, request, reply));
  },
  { name: 'errors' },
);

// --- route schemas that document without validating ---------------------------------------------

type CompilerInput = { schema: unknown; method: string; url: string; httpPart?: string };
/**
 * Route option `validatorCompiler` for a route whose handler keeps validating some parts itself
 * (POST /v1/query: the query service parses the body and Idempotency-Key with its own rules and
 * messages): those parts are declared for the document only; the others validate with zod.
 */
export function documentOnly(parts: ReadonlyArray<'body' | 'headers' | 'querystring' | 'params'>) {
  return (input: CompilerInput) => (parts.includes(input.httpPart as 'body') ? (data: unknown) => ({ value: data }) : zodValidatorCompiler(input as never));
}
/** Route option `serializerCompiler` for responses whose schema is documentation (the body is built and checked elsewhere). */
export const plainSerializer = () => (data: unknown) => JSON.stringify(data);
