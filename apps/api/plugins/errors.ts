// One central error handler: every failure on every route is the spec's envelope with a precise code.
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { ERRORS, ServiceError, errorEnvelope, type ErrorCode, type ErrorOptions } from '../../../shared/errors.ts';

declare module 'fastify' {
  interface FastifyReply {
    sendError(code: ErrorCode, opts?: ErrorOptions & { headers?: Record<string, string> }): FastifyReply;
  }
  interface FastifyInstance {
    baseUrl(): string;
  }
}

const FASTIFY_CODES: Record<string, { code: ErrorCode; message: string }> = {
  FST_ERR_CTP_INVALID_JSON_BODY: { code: 'invalid_input', message: 'The body is not valid JSON' },
  FST_ERR_CTP_EMPTY_JSON_BODY: { code: 'invalid_input', message: 'A JSON body is required' },
  FST_ERR_CTP_BODY_TOO_LARGE: { code: 'payload_too_large', message: 'The request body is too large' },
  FST_ERR_CTP_INVALID_MEDIA_TYPE: { code: 'unsupported_media_type', message: 'The body must be sent as application/json' },
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: { code: 'invalid_input', message: 'Content-Length does not match the body' },
};

export default fp(
  async function errorsPlugin(app: FastifyInstance) {
    app.decorateReply('sendError', function sendError(this: FastifyReply, code: ErrorCode, opts: ErrorOptions & { headers?: Record<string, string> } = {}) {
      const env = errorEnvelope(code, { baseUrl: app.baseUrl(), ...opts });
      if (opts.headers) this.headers(opts.headers);
      return this.code(ERRORS[code].status).type('application/json; charset=utf-8').send(env);
    });

    app.setErrorHandler((err: FastifyError | ServiceError, request: FastifyRequest, reply: FastifyReply) => {
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
      const known = err.code ? FASTIFY_CODES[err.code] : undefined;
      if (known) return reply.sendError(known.code, { message: known.message, details: known.code === 'invalid_input' ? { issues: [{ path: '', message: known.message }] } : undefined });
      if (err.validation) {
        // Fastify's own schema validation (route params/querystrings declared with JSON Schema).
        const issues = err.validation.map((v) => ({ path: v.instancePath.replace(/^\//, '').replace(/\//g, '.'), message: v.message ?? 'invalid' }));
        return reply.sendError('invalid_input', { message: err.message, param: issues[0]?.path, details: { issues } });
      }
      // Anything else is ours: log everything, show nothing of it.
      request.log.error({ err }, 'unhandled error');
      return reply.sendError('internal_error', { message: 'Unexpected error' });
    });

    app.setNotFoundHandler((request, reply) => {
      const url = request.url.split('?')[0]!;
      const allowed = (['GET', 'POST', 'PUT', 'PATCH', 'DELETE'] as const).filter((m) => app.findRoute({ method: m, url }) !== null);
      if (allowed.length > 0) {
        return reply.sendError('method_not_allowed', {
          message: `${request.method} is not allowed on ${url}; use ${allowed.join(', ')}`,
          headers: { allow: allowed.join(', ') },
        });
      }
      return reply.sendError('route_not_found', { message: `No route for ${request.method} ${url}` });
    });
  },
  { name: 'errors' },
);
