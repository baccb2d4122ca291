// Liveness and readiness, separate (for orchestrators' probes); GET /health stays the spec's
// readiness envelope (routes/root.ts). /livez never touches PostgreSQL or Temporal: a failing
// dependency must not get a healthy process restarted. /readyz takes the process out of rotation
// while a dependency is unreachable or while it drains.
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { QueryConfig } from 'pg';
import type { Db } from '../../../shared/db/pool.ts';
import { HealthEnvelope } from '../../../shared/openapi/schemas.ts';
import { singleFlight } from '../../../shared/single-flight.ts';

type Check = { status: 'ok' | 'down' };
export type Dependencies = { postgres: Check; temporal: Check; duration_ms: number };

/**
 * How long each dependency may take to answer before it counts as down: under the readiness
 * probe's 3 s timeout (deploy/helm), so a probe gets the envelope rather than no answer, and a hung
 * PostgreSQL or Temporal cannot hold the shared check (below) for longer.
 */
export const DEPENDENCY_CHECK_TIMEOUT_MS = 2_000;

/** `p`, or a rejection once `ms` have passed (the timer never holds the process open). */
function within<T>(p: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms);
    timer.unref();
  });
  return Promise.race([p, timeout]).finally(() => clearTimeout(timer));
}

/**
 * PostgreSQL and Temporal checked at once, shared by every GET /health and GET /readyz of this API
 * process. Both need no key, so each request running its own check let anonymous callers (or a
 * slow database) take every connection of the pool organizations' requests use (40 probes of a
 * slow PostgreSQL held all 20, and keyed requests failed with 503). A request that arrives while a
 * check is in flight shares it; the next one starts once it settled, so an answer is never older
 * than one check. Each dependency is bounded by DEPENDENCY_CHECK_TIMEOUT_MS: PostgreSQL's
 * query_timeout gives the connection back (the pool drops it) rather than leaving it to the
 * statement timeout; Temporal's deadline is set by the caller's temporalHealthy (server.ts) and
 * bounded here as well.
 */
export function dependencyCheck(db: Db, temporalHealthy: () => Promise<boolean>, timeoutMs = DEPENDENCY_CHECK_TIMEOUT_MS): () => Promise<Dependencies> {
  return singleFlight(async (): Promise<Dependencies> => {
    const started = Date.now();
    const [postgres, temporal] = await Promise.all([
      within(db.query({ text: 'SELECT 1', query_timeout: timeoutMs } as QueryConfig), timeoutMs)
        .then((): Check => ({ status: 'ok' }))
        .catch((): Check => ({ status: 'down' })),
      within(temporalHealthy(), timeoutMs)
        .then((ok): Check => ({ status: ok ? 'ok' : 'down' }))
        .catch((): Check => ({ status: 'down' })),
    ]);
    return { postgres, temporal, duration_ms: Date.now() - started };
  });
}

/**
 * The /health envelope from a (shared) dependency check. `draining` (GET /readyz only) is read once
 * the check settled, never taken from a shared one: a drain that began meanwhile shows at once.
 */
export async function readiness(dependencies: () => Promise<Dependencies>, startedAt: number, isDraining?: () => boolean) {
  const { postgres, temporal, duration_ms } = await dependencies();
  const draining = isDraining?.();
  const ok = postgres.status === 'ok' && temporal.status === 'ok' && draining !== true;
  return {
    ok,
    body: {
      status: ok ? ('ok' as const) : ('degraded' as const),
      service: 'workflow-query-service',
      timestamp: new Date().toISOString(),
      uptime_seconds: Math.floor((Date.now() - startedAt) / 1000),
      // /health (no `draining`) keeps the shape it always had; /readyz adds whether the process drains.
      checks: { postgres, temporal, ...(draining === undefined ? {} : { draining }), duration_ms },
    },
  };
}

export default async function probeRoutes(
  fastify: FastifyInstance,
  opts: { startedAt: number; dependencies: () => Promise<Dependencies>; lifecycle: { readonly draining: boolean } },
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
      const r = await readiness(opts.dependencies, opts.startedAt, () => opts.lifecycle.draining);
      return reply.code(r.ok ? 200 : 503).header('cache-control', 'no-store').send(r.body);
    },
  );
}
