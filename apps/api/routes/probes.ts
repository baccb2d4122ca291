// Liveness and readiness, separate (for orchestrators' probes); GET /health stays the spec's
// readiness envelope (routes/root.ts). /livez never touches PostgreSQL or Temporal: a failing
// dependency must not get a healthy process restarted. /readyz takes the process out of rotation
// while a dependency is unreachable or while it drains.
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { Db } from '../../../shared/db/pool.ts';
import { HealthEnvelope } from '../../../shared/openapi/schemas.ts';

type Check = { status: 'ok' | 'down' };

/** PostgreSQL and Temporal checked at once, in the /health envelope's shape (GET /health, GET /readyz with `draining`). */
export async function readiness(db: Db, temporalHealthy: () => Promise<boolean>, startedAt: number, draining?: boolean) {
  const started = Date.now();
  const [postgres, temporal] = await Promise.all([
    db
      .query('SELECT 1')
      .then((): Check => ({ status: 'ok' }))
      .catch((): Check => ({ status: 'down' })),
    temporalHealthy()
      .then((ok): Check => ({ status: ok ? 'ok' : 'down' }))
      .catch((): Check => ({ status: 'down' })),
  ]);
  const ok = postgres.status === 'ok' && temporal.status === 'ok' && draining !== true;
  return {
    ok,
    body: {
      status: ok ? ('ok' as const) : ('degraded' as const),
      service: 'workflow-query-service',
      timestamp: new Date().toISOString(),
      uptime_seconds: Math.floor((Date.now() - startedAt) / 1000),
      // /health (no `draining`) keeps the shape it always had; /readyz adds whether the process drains.
      checks: { postgres, temporal, ...(draining === undefined ? {} : { draining }), duration_ms: Date.now() - started },
    },
  };
}

export default async function probeRoutes(
  fastify: FastifyInstance,
  opts: { startedAt: number; temporalHealthy: () => Promise<boolean>; lifecycle: { readonly draining: boolean } },
) {
  const app = fastify.withTypeProvider<ZodTypeProvider>();
  const service = { tags: ['Service'], security: [] };

  app.get(
    '/livez',
    {
      schema: {
        operationId: 'liveness',
        summary: 'Liveness: the process is up and its event loop answers (no dependency is checked)',
        ...service,
        response: { 200: z.strictObject({ status: z.literal('ok') }).meta({ id: 'Liveness' }) },
      },
    },
    async (_request, reply) => reply.header('cache-control', 'no-store').send({ status: 'ok' as const }),
  );

  app.get(
    '/readyz',
    {
      schema: {
        operationId: 'readiness',
        summary: 'Readiness: PostgreSQL and Temporal reachable and the process not draining',
        description: 'The /health envelope; `checks.draining` is true while the process shuts down (then 503).',
        ...service,
        response: {
          200: { description: 'Ready', content: { 'application/json': { schema: HealthEnvelope } } },
          503: { description: 'Not ready (the health envelope, not the error envelope)', content: { 'application/json': { schema: HealthEnvelope } } },
        },
      },
    },
    async (_request, reply) => {
      const r = await readiness(app.db, opts.temporalHealthy, opts.startedAt, opts.lifecycle.draining);
      return reply.code(r.ok ? 200 : 503).header('cache-control', 'no-store').send(r.body);
    },
  );
}
