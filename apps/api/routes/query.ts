// POST /v1/query: a validated, authenticated request handed to the query service.
import type { FastifyInstance, FastifyReply } from 'fastify';
import { z } from 'zod';
import { ERRORS, ServiceError, errorEnvelope } from '../../../shared/errors.ts';
import { BEARER, bodyExamples, errors, named } from '../../../shared/openapi/document.ts';
import { StreamResult, streamFrameSchema } from '../../../shared/openapi/schemas.ts';
import { IdempotencyKeyHeader, QueryRequest, QueryResult } from '../../../shared/schemas/query.ts';
import { documentOnly, plainSerializer } from '../plugins/errors.ts';
import type { TerminalEnvelope } from '../../../shared/workflow-contract.ts';
import { rateHeaders, type Claim, type QueryService, type RateInfo, type RequestRow } from '../services/query-service.ts';

/** Headers every query answer carries, derived from its envelope. */
export function envelopeHeaders(sub: { request: RequestRow; rate: RateInfo }, env: { status: number; body: unknown }, replayed: boolean): Record<string, string> {
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

/** Answers already counted in wqs_queries_total (the route's onSend counts the others: errors thrown before a run). */
const counted = new WeakSet<object>();

export function sendEnvelope(reply: FastifyReply, sub: { request: RequestRow; rate: RateInfo }, env: TerminalEnvelope, replayed: boolean) {
  reply.server.metrics.recordQuery('json', env, replayed);
  counted.add(reply.request);
  return reply.code(env.status).headers(envelopeHeaders(sub, env, replayed)).type('application/json; charset=utf-8').send(env.body);
}

/**
 * Aborts when the caller goes away before its answer is written. (A POST's request stream closes
 * as soon as its body is read, so Fastify's `request.signal` cannot tell; the response's can.)
 */
function callerLeft(reply: FastifyReply): { signal: AbortSignal; dispose(): void } {
  const ac = new AbortController();
  const onClose = () => {
    if (!reply.raw.writableFinished) ac.abort();
  };
  if (reply.raw.destroyed) ac.abort();
  else reply.raw.once('close', onClose);
  return { signal: ac.signal, dispose: () => reply.raw.off('close', onClose) };
}

/** The caller left before its answer: the run goes on (billed as usual, its result kept for its key
 *  and its request status). Counted as closed, and as 499 (client closed request) in the HTTP
 *  histogram here: Fastify writes nothing to a closed response and runs no onResponse hook for it. */
function sendLeft(reply: FastifyReply) {
  reply.server.metrics.recordClosed('json');
  reply.server.metrics.observeHttp(reply.request, 499, reply.elapsedTime / 1000);
  counted.add(reply.request);
  return reply.code(499).send();
}

/** The query deadline passed while waiting: the run may still finish; its status says how. */
export function deadlineEnvelope(requestId: string, baseUrl: string, deadlineSeconds: number): TerminalEnvelope {
  const body = errorEnvelope('execution_timeout', {
    requestId,
    baseUrl,
    message: `The query did not finish within ${deadlineSeconds} seconds; check GET /v1/query/requests/{request_id} before retrying`,
  });
  return { status: ERRORS.execution_timeout.status, body };
}

const header = (description: string) => ({ type: 'string', description });
const QUERY_HEADERS = {
  'X-Request-Id': header('request id'),
  'Idempotency-Replayed': { type: 'boolean', description: 'true for a replayed retained result' },
  Location: header('/v1/query/requests/{request_id}'),
  'X-Svc-Billing-Status': { type: 'string', enum: ['settled', 'pending'], description: 'sent when the receipt is `settled` or `pending`' },
  'X-Svc-Cost-Credits': { type: 'number', description: 'credits charged (0 when nothing was)' },
  'X-Svc-API': header('handle that ran'),
  'X-RateLimit-Limit': { type: 'integer', description: 'requests per minute' },
  'X-RateLimit-Remaining': { type: 'integer', description: 'left in the current minute' },
  'X-RateLimit-Reset': { type: 'integer', description: 'Unix time (seconds) when the oldest request leaves the window' },
};

const EXAMPLES = {
  direct: { summary: 'Direct mode', value: { api: '@books', operation: 'search_books', input: { query: 'dune' }, response: { include: ['books.title'] } } },
  direct_exclude: { summary: 'Direct mode, exclude', value: { api: '@books', operation: 'search_books', input: { query: 'dune' }, response: { exclude: ['books.url'] } } },
  direct_schema: {
    summary: 'Direct mode, schema and mapping',
    value: { api: '@books', operation: 'search_books', input: { query: 'dune' }, response: { schema: { type: 'object', properties: { first: { type: 'string' } } }, mapping: [{ target: '/first', source: '/books/0/title' }] } },
  },
  prompt: { summary: 'Prompt mode', value: { prompt: 'What is the weather in London right now?', allowed_apis: ['@weather'] } },
  stream: { summary: 'Streamed', value: { api: '@weather', operation: 'current_weather', input: { city: 'Oslo' }, stream: true } },
};

/** The error envelope as sent (a JSON string); anything else counts as an unknown code. */
function errorBody(payload: unknown): unknown {
  if (typeof payload !== 'string') return undefined;
  try {
    return JSON.parse(payload);
  } catch {
    return undefined;
  }
}

export default async function queryRoutes(app: FastifyInstance, opts: { queries: QueryService }) {
  const svc = opts.queries;

  /** A stream slot, or the 429 every refusal of this route is: with the plan's X-RateLimit-*. */
  async function streamSlot(orgId: string): Promise<() => void> {
    try {
      return app.takeStreamSlot(orgId);
    } catch (err) {
      if (!(err instanceof ServiceError)) throw err;
      const rate = await svc.rate(orgId).catch(() => null);
      if (!rate) throw err;
      throw new ServiceError(err.code, err.message, { details: err.details, headers: { ...rateHeaders(rate), ...err.headers } });
    }
  }
  app.post(
    '/v1/query',
    {
      // The key before the body is read: a caller without one gets 401 whatever it sent (not 400, 413 or 415).
      onRequest: app.authenticate,
      // Every JSON answer counted once: an error thrown before a run (401, 400, 402, …) is only seen here.
      // No answer is stored by a cache on the way: results (those of connected accounts too) are the caller's alone.
      onSend: async (request, reply, payload) => {
        if (!counted.has(request) && reply.statusCode >= 400) app.metrics.recordQuery('json', { status: reply.statusCode, body: errorBody(payload) }, false);
        reply.header('cache-control', 'no-store');
        return payload;
      },
      // Body and Idempotency-Key are the query service's to check (strict unknown fields, mode
      // rules, invalid_provider_input against the operation's schema): declared for the document.
      validatorCompiler: documentOnly(['body', 'headers']),
      // The answer is the workflow's envelope, already billed: never turned into a 500 here.
      serializerCompiler: plainSerializer,
      schema: {
        operationId: 'query',
        summary: 'Run an operation (direct mode) or route a prompt (prompt mode)',
        description:
          'Direct mode: `api` + `operation` + `input` (optionally `version`). Prompt mode: `prompt` (optionally `api`, `allowed_apis`, `blocked_apis`, `attachments`): the prompt is routed to one operation and its input filled from the prompt, then it runs exactly like direct mode (the receipt names the operation that ran; GET /v1/query/requests/{request_id} shows `routing`). No clear match: 422 `prompt_unroutable` with `details.candidates`; a required input the prompt does not give: 422 `prompt_input_missing` with `details.missing`; both free. `response` shapes `data.output`: `format`, `include`, `exclude`, `schema`, `mapping` (mapping requires schema; include excludes the others; exclude excludes schema and mapping). A direct call costs the operation price (1 credit in the demo catalog); a successful prompt run costs 5 credits plus that price, shown as one total in the receipt and `X-Svc-Cost-Credits`.',
        tags: ['Query'],
        security: BEARER,
        headers: z.looseObject({ 'Idempotency-Key': IdempotencyKeyHeader.optional().describe('opaque, unique per logical query, scoped to the organization') }),
        body: named('QueryRequest', QueryRequest),
        ...bodyExamples(EXAMPLES),
        response: {
          200: {
            description:
              'QueryResult, or with `stream: true` a server-sent event stream (`progress` events, then exactly one `result` or `error` event; HTTP status stays 200)',
            headers: QUERY_HEADERS,
            content: {
              'application/json': { schema: named('QueryResult', QueryResult) },
              'text/event-stream': { schema: streamFrameSchema(StreamResult) },
            },
          },
        },
        ...errors(400, 401, 402, 403, 404, 408, 409, 410, 413, 415, 422, 429, 501, 502, 503, 504),
      },
    },
    async (request, reply) => {
      const org = request.auth!;
      const key = svc.checkIdempotencyKey(request.headers['idempotency-key']);
      const q = svc.parseBody(request.body);
      // A keyed request meets its key first (replay, conflict or in progress).
      const met = await svc.meetKey(org.orgId, q, key);
      // A stream of a new run takes one of the organization's stream slots before anything runs
      // (429 when none is left). A replay's stream is its one final event: it needs none.
      const slot = !met && q.stream === true ? await streamSlot(org.orgId) : undefined;
      let sub: Claim;
      try {
        // Otherwise resolve (or route) and claim.
        sub = met ?? (await svc.claim(org.orgId, q, await svc.resolve(org.orgId, q), key));
      } catch (err) {
        slot?.();
        throw err;
      }
      // A claimed query is counted in the plan's minute (its X-RateLimit-*): it gives back the
      // request-bucket token authenticate took, so it is limited once (a start that fails after it
      // too). Replays and refusals before the claim keep it.
      if (sub.kind === 'claimed') app.orgRate.giveBack(org.orgId);
      // A stream starts the workflow after its `accepted` event; a JSON answer starts it here (a
      // start that fails is 503 engine_unavailable with the claim interrupted, nothing charged).
      if (sub.stream && (slot || sub.kind === 'replay')) return app.streamQuery(reply, sub, slot ?? (() => {}));
      slot?.();
      if (sub.kind === 'replay') return sendEnvelope(reply, sub, sub.envelope, true);
      await sub.start();
      // Give the workflow its whole deadline plus a margin for settlement, unless the caller leaves first.
      const left = callerLeft(reply);
      try {
        const env = await svc.awaitResult(sub.workflowId, sub.request.id, svc.remainingMs(sub.request.created_at) + 5_000, sub.request.created_at, left.signal);
        if (left.signal.aborted) return sendLeft(reply);
        return sendEnvelope(reply, sub, env ?? deadlineEnvelope(sub.request.id, app.baseUrl(), svc.deadlineSeconds), false);
      } finally {
        left.dispose();
      }
    },
  );
}
