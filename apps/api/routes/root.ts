// Service discovery, readiness, key validation and the error guide.
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { ERRORS, ERROR_GUIDE_PATH, type ErrorCode } from '../../../shared/errors.ts';
import { BEARER, errors, named } from '../../../shared/openapi/document.ts';
import { AuthResponse, ErrorGuideResponse, HealthEnvelope, ServiceInfo } from '../../../shared/openapi/schemas.ts';
import { readiness, type Dependencies } from './probes.ts';
import { escapeHtml } from '../../../shared/format/html.ts';
import { singleFlight } from '../../../shared/single-flight.ts';

const Html = z.string().describe('an HTML page');

export default async function rootRoutes(fastify: FastifyInstance, opts: { version: string; startedAt: number; dependencies: () => Promise<Dependencies> }) {
  const app = fastify.withTypeProvider<ZodTypeProvider>();
  const service = { tags: ['Service'], security: [] };
  // The count of public workflows, shared by the requests that arrive while it is read: GET / needs
  // no key, and each anonymous request reading its own could take every connection of the pool
  // organizations' requests use (as /health's check could: routes/probes.ts). The next request
  // after it settled reads afresh.
  const publicWorkflows = singleFlight(() =>
    app.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM apis WHERE visibility = 'public' AND status = 'active'`).then(
      (r) => r.rows[0]?.n ?? 0,
      () => 0,
    ),
  );
  app.get('/', { schema: { operationId: 'serviceDiscovery', summary: 'Service discovery', ...service, response: { 200: ServiceInfo }, ...errors(429) } }, async () => {
    const registered = await publicWorkflows();
    return {
      success: true as const,
      data: {
        service: 'workflow-query-service',
        version: opts.version,
        product: 'Workflow Query Service',
        status: 'ok',
        build_available: false,
        registered_providers: registered,
        endpoint: '/v1/query' as const,
        documentation: { openapi: '/openapi.json', errors: ERROR_GUIDE_PATH },
      },
    };
  });

  app.get(
    '/health',
    {
      schema: {
        operationId: 'health',
        summary: 'Readiness',
        ...service,
        response: {
          200: { description: 'Healthy', content: { 'application/json': { schema: HealthEnvelope } } },
          503: { description: 'Degraded (the health envelope, not the error envelope)', content: { 'application/json': { schema: HealthEnvelope } } },
        },
      },
    },
    async (_request, reply) => {
      const { ok, body } = await readiness(opts.dependencies, opts.startedAt);
      return reply.code(ok ? 200 : 503).header('cache-control', 'no-store').send(body);
    },
  );

  app.get(
    '/v1/auth',
    { preValidation: app.authenticate, schema: { operationId: 'checkKey', summary: 'Validate the key', tags: ['Service'], security: BEARER, response: { 200: named('AuthResponse', AuthResponse) }, ...errors(401, 429, 503) } },
    async () => ({ success: true as const, data: {} }),
  );

  // The error guide every doc_url points into: one anchored entry per code.
  app.get(ERROR_GUIDE_PATH, { schema: { operationId: 'errorGuide', summary: 'The error guide (one anchored entry per code)', ...service, response: { 200: { description: 'HTML', content: { 'text/html': { schema: Html } } } } } }, async (_request, reply) => {
    const rows = Object.entries(ERRORS)
      .map(
        ([code, d]) =>
          `<tr id="${code}"><td><code>${code}</code></td><td>${d.status}</td><td>${d.type}</td><td>${d.retryable ? 'yes' : 'no'}</td><td>${escapeHtml(d.title)}</td></tr>`,
      )
      .join('\n');
    const html = `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Error guide — Workflow Query Service</title>
<style>body{font:15px/1.5 system-ui,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem}table{border-collapse:collapse;width:100%}td,th{border-bottom:1px solid #ddd;padding:.4rem;text-align:left;vertical-align:top}tr:target{background:#fff6d5}</style></head>
<body><h1>Error guide</h1><p>Every failure is <code>{success:false, error:{type, code, message, status, retryable, doc_url, …}}</code>. Branch on <code>code</code>; when <code>retryable</code> is true, wait for <code>Retry-After</code> when present; after a 5xx, check a keyed request's status before retrying.</p>
<table><thead><tr><th>Code</th><th>HTTP</th><th>Type</th><th>Retryable</th><th>Meaning</th></tr></thead><tbody>
${rows}
</tbody></table></body></html>`;
    return reply.type('text/html; charset=utf-8').send(html);
  });
  app.get(
    `${ERROR_GUIDE_PATH}.json`,
    { schema: { operationId: 'errorCatalog', summary: 'The error catalog as JSON', ...service, response: { 200: named('ErrorGuideResponse', ErrorGuideResponse) } } },
    async () => ({
      success: true as const,
      data: { items: (Object.keys(ERRORS) as ErrorCode[]).map((code) => ({ code, ...ERRORS[code] })) },
    }),
  );
}
