// GET /v1/query/requests/{request_id}: the request's status, receipt, retained result and rating.
import type { FastifyInstance, FastifyReply } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { BEARER, errors, named } from '../../../shared/openapi/document.ts';
import { REQUEST_ID_PATTERN } from '../../../shared/ids.ts';
import { ServiceError } from '../../../shared/errors.ts';
import { feedbackUnavailableReason, loadRatingContext, type RatingContext } from '../../../shared/db/feedback.ts';
import { RequestStatusResponse } from '../../../shared/openapi/schemas.ts';
import type { RequestStatusValue } from '../../../shared/schemas/query.ts';
import { findStatusForOrg, type StatusRow } from '../../../shared/db/requests.ts';

/** The columns the status shows besides the retained result (a full row has them all). */
type StatusFields = Omit<StatusRow, 'fingerprint' | 'result_text'>;

export function receiptOf(r: StatusFields) {
  return {
    request_id: r.id,
    api: r.api,
    operation: r.operation,
    billing: {
      status: r.billing_status,
      reserved_credits: Number(r.reserved_credits),
      charged_credits: r.billing_status === 'pending' ? null : Number(r.charged_credits ?? 0),
    },
  };
}

/** The status with `result` as given: `retained` says whether the result (and its status and expiry) are shown. */
function statusOf<R>(r: StatusFields, orgId: string, rating: RatingContext, retained: boolean, result: R) {
  const reason = feedbackUnavailableReason(rating, orgId);
  return {
    request_id: r.id,
    status: r.status as RequestStatusValue,
    result,
    response_status: retained ? r.response_status : null,
    result_expires_at: retained && r.result_expires_at ? r.result_expires_at.toISOString() : null,
    error_code: r.error_code,
    receipt: receiptOf(r),
    feedback: rating.value,
    can_rate: reason === null,
    feedback_unavailable_reason: reason,
    routing: r.routing,
  };
}

const withinRetention = (r: { result_expires_at: Date | null }) => !r.result_expires_at || r.result_expires_at.getTime() > Date.now();

/** The status as an object, its retained result parsed (the console's request page reads the row with findStatusForOrg). */
export function requestStatusOf(r: StatusRow, orgId: string, rating: RatingContext) {
  // Only keyed requests retain their result (findStatusForOrg reads it only for them).
  const retained = r.fingerprint !== null && r.result_text !== null && withinRetention(r);
  return statusOf(r, orgId, rating, retained, retained ? (JSON.parse(r.result_text!) as Record<string, unknown>) : null);
}

/**
 * The route's 200 body as JSON text. Everything but the result is checked and encoded by the
 * response schema as the route's serializer did; the retained result is spliced in as
 * PostgreSQL's text of the jsonb value (always valid JSON; only its spacing differs from
 * JSON.stringify's), so a large result is neither parsed nor serialized again on each poll.
 */
function statusBody(r: StatusRow, orgId: string, rating: RatingContext): string {
  const resultText = r.fingerprint !== null && r.result_text !== null && withinRetention(r) ? r.result_text : null;
  // The schema's result is an object: anything else was (and is) a 500, never sent.
  if (resultText !== null && !resultText.startsWith('{')) throw new Error(`retained result of ${r.id} is not a JSON object`);
  const { data } = RequestStatusResponse.encode({ success: true, data: statusOf(r, orgId, rating, resultText !== null, null) });
  // request_id, status and result lead the schema's order; the rest keeps it.
  const { request_id, status, result: _placeholder, ...rest } = data;
  const head = JSON.stringify({ success: true, data: { request_id, status } });
  return `${head.slice(0, -2)},"result":${resultText ?? 'null'},${JSON.stringify(rest).slice(1)}}`;
}

/** The refusal of a request_id (also one too long to route: apps/api/plugins/errors.ts). */
export const REQUEST_ID_MESSAGE = 'must match ^req_[A-Za-z0-9_-]{10,64}$';

/** The path parameter of every request route. */
export const RequestIdParams = z.strictObject({
  request_id: z.string().regex(REQUEST_ID_PATTERN, REQUEST_ID_MESSAGE),
});

export default async function requestRoutes(app: FastifyInstance) {
  app.withTypeProvider<ZodTypeProvider>().route({
    method: 'GET',
    url: '/v1/query/requests/:request_id',
    schema: {
      operationId: 'getRequest',
      summary: 'Request status, billing receipt, retained result and rating',
      tags: ['Query'],
      security: BEARER,
      params: RequestIdParams,
      response: { 200: named('RequestStatusResponse', RequestStatusResponse) },
      ...errors(400, 401, 404, 410, 429, 503),
    },
    // The key first: a caller without one learns nothing about ids or bodies.
    preValidation: app.authenticate,
    // A retained result is the caller's alone (a connected account's too): never stored by a cache.
    onSend: async (_request, reply, payload) => {
      reply.header('cache-control', 'no-store');
      return payload;
    },
    handler: async (request, reply) => {
      const id = request.params.request_id;
      const orgId = request.auth!.orgId;
      const row = await findStatusForOrg(app.db, orgId, id);
      const rating = row ? await loadRatingContext(app.db, orgId, id) : null;
      // Another organization's request is indistinguishable from a missing one.
      if (!row || !rating) throw new ServiceError('request_not_found', `No request ${id} for this organization`, { param: 'request_id' });
      // JSON text with a JSON type is sent as it is (the schema encoded all of it but the result);
      // the reply is untyped here because the typed one takes only the schema's object.
      const text: FastifyReply = reply;
      return text.type('application/json; charset=utf-8').send(statusBody(row, orgId, rating));
    },
  });
}
