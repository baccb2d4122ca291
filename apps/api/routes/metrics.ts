// GET /metrics: this API process's Prometheus metrics (plugins/metrics.ts). Key-free, like /health:
// it carries no organization's data (no ids, keys or URLs in any label, credits only as totals over
// all organizations); METRICS_ENABLED=false turns it off (404) where even totals are not for everyone.
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';

export const METRICS_CONTENT_TYPE = 'text/plain; version=0.0.4; charset=utf-8';

export default async function metricsRoutes(app: FastifyInstance) {
  app.get(
    '/metrics',
    {
      schema: {
        operationId: 'metrics',
        summary: 'Prometheus metrics of this API process',
        description:
          'Prometheus text exposition format 0.0.4. HTTP requests by route pattern, method and status with a latency histogram (`wqs_http_request_duration_seconds`), query answers by outcome and error code (`wqs_queries_total`), credits (`wqs_credits` from the ledger at each scrape, `wqs_query_credits_total` from delivered receipts), open streams and MCP exchanges, and Node process metrics (`wqs_` prefix). No organization is named in it. Off (404) when the deployment sets `METRICS_ENABLED=false`.',
        tags: ['Service'],
        security: [],
        response: { 200: { description: 'Metrics', content: { 'text/plain; version=0.0.4': { schema: z.string().describe('Prometheus text format') } } } },
      },
    },
    async (_request, reply) => {
      const text = await app.metrics.registry.metrics();
      return reply.type(METRICS_CONTENT_TYPE).header('cache-control', 'no-store').send(text);
    },
  );
}
