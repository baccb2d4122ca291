// POST /v1/query: a validated, authenticated request handed to the query service.
import type { FastifyInstance, FastifyReply } from 'fastify';
import { ERRORS, ServiceError, errorEnvelope } from '../../../shared/errors.ts';
import type { TerminalEnvelope } from '../../../shared/workflow-contract.ts';
import { rateHeaders, type QueryService, type Submission } from '../services/query-service.ts';

/** Headers every query answer carries, derived from its envelope. */
export function envelopeHeaders(sub: Submission, env: { status: number; body: unknown }, replayed: boolean): Record<string, string> {
  const h: Record<string, string> = {
    'x-request-id': sub.request.id,
    location: `/v1/query/requests/${sub.request.id}`,
    'idempotency-replayed': String(replayed),
    ...rateHeaders(sub.rate),
  };
  if (sub.request.api) h['x-svc-api'] = sub.request.api;
  const data = (env.body as { data?: { receipt?: { billing?: { status: string; charged_credits: number | null } } } }).data;
  const billing = data?.receipt?.billing ?? (env.body as { error?: { receipt?: { billing?: { status: string; charged_credits: number | null } } } }).error?.receipt?.billing;
  if (billing && (billing.status === 'settled' || billing.status === 'pending')) h['x-svc-billing-status'] = billing.status;
  h['x-svc-cost-credits'] = String(billing?.charged_credits ?? 0);
  if (env.status === 503) h['retry-after'] = '5'; // billing_unavailable, engine_unavailable: the run did not happen
  return h;
}

export function sendEnvelope(reply: FastifyReply, sub: Submission, env: TerminalEnvelope, replayed: boolean) {
  return reply.code(env.status).headers(envelopeHeaders(sub, env, replayed)).type('application/json; charset=utf-8').send(env.body);
}

/** The query deadline passed while waiting: the run may still finish; its status says how. */
export function deadlineEnvelope(requestId: string, baseUrl: string): TerminalEnvelope {
  const body = errorEnvelope('execution_timeout', {
    requestId,
    baseUrl,
    message: 'The query did not finish within 170 seconds; check GET /v1/query/requests/{request_id} before retrying',
  });
  return { status: ERRORS.execution_timeout.status, body };
}

export default async function queryRoutes(app: FastifyInstance, opts: { queries: QueryService }) {
  const svc = opts.queries;
  app.post('/v1/query', { preHandler: app.authenticate }, async (request, reply) => {
    const org = request.auth!;
    const key = svc.checkIdempotencyKey(request.headers['idempotency-key']);
    const q = svc.parseBody(request.body);
    const op = await svc.resolve(org.orgId, q);
    if (q.stream && !app.hasDecorator('streamQuery')) {
      throw new ServiceError('feature_unavailable', 'Streaming (stream: true) is not available on this deployment yet; send the request without stream', {
        param: 'stream',
      });
    }
    const sub = await svc.submit(org.orgId, q, op, key);
    if (sub.stream) return (app as unknown as { streamQuery: (r: FastifyReply, s: Submission) => Promise<void> }).streamQuery(reply, sub);
    if (sub.kind === 'replay') return sendEnvelope(reply, sub, sub.envelope, true);
    // Give the workflow its whole deadline plus a margin for settlement; the client may leave meanwhile.
    const env = (await svc.awaitResult(sub.workflowId, sub.request.id, svc.remainingMs(sub.request.created_at) + 5_000)) ?? deadlineEnvelope(sub.request.id, app.baseUrl());
    return sendEnvelope(reply, sub, env, false);
  });
}
