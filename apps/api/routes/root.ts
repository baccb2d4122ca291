// Service discovery, readiness, key validation and the error guide.
import type { FastifyInstance } from 'fastify';
import { ERRORS, ERROR_GUIDE_PATH } from '../../../shared/errors.ts';

const escapeHtml = (s: string) => s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

export default async function rootRoutes(app: FastifyInstance, opts: { version: string; startedAt: number; temporalHealthy: () => Promise<boolean> }) {
  app.get('/', async () => {
    const r = await app.db.query(`SELECT count(*)::int AS n FROM apis WHERE visibility = 'public' AND status = 'active'`).catch(() => null);
    return {
      success: true,
      data: {
        service: 'workflow-query-service',
        version: opts.version,
        product: 'Workflow Query Service',
        status: 'ok',
        build_available: false,
        registered_providers: r?.rows[0]?.n ?? 0,
        endpoint: '/v1/query',
        documentation: { openapi: '/openapi.json', errors: ERROR_GUIDE_PATH },
      },
    };
  });

  app.get('/health', async (_request, reply) => {
    const started = Date.now();
    const [pg, temporal] = await Promise.all([
      app.db
        .query('SELECT 1')
        .then(() => ({ status: 'ok' as const }))
        .catch(() => ({ status: 'down' as const })),
      opts
        .temporalHealthy()
        .then((ok) => ({ status: ok ? ('ok' as const) : ('down' as const) }))
        .catch(() => ({ status: 'down' as const })),
    ]);
    const ok = pg.status === 'ok' && temporal.status === 'ok';
    const body = {
      status: ok ? 'ok' : 'degraded',
      service: 'workflow-query-service',
      timestamp: new Date().toISOString(),
      uptime_seconds: Math.floor((Date.now() - opts.startedAt) / 1000),
      checks: { postgres: pg, temporal, duration_ms: Date.now() - started },
    };
    return reply.code(ok ? 200 : 503).header('cache-control', 'no-store').send(body);
  });

  app.get('/v1/auth', { preHandler: app.authenticate }, async () => ({ success: true, data: {} }));

  // The error guide every doc_url points into: one anchored entry per code.
  app.get(ERROR_GUIDE_PATH, async (_request, reply) => {
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
  app.get(`${ERROR_GUIDE_PATH}.json`, async () => ({
    success: true,
    data: { items: Object.entries(ERRORS).map(([code, d]) => ({ code, ...d })) },
  }));
}
