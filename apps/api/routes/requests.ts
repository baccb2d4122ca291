// GET /v1/query/requests/{request_id}: the request's status, receipt, retained result and rating.
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { BEARER, errors, named } from '../../../shared/openapi/document.ts';
import { REQUEST_ID_PATTERN } from '../../../shared/ids.ts';
import { ServiceError } from '../../../shared/errors.ts';
import { feedbackUnavailableReason, loadRatingContext, type RatingContext } from '../../../shared/db/feedback.ts';
import { RequestStatusResponse } from '../../../shared/openapi/schemas.ts';
import type { RequestStatusValue } from '../../../shared/schemas/query.ts';
import type { RequestRow } from '../services/query-service.ts';

export function receiptOf(r: RequestRow) {
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

export function requestStatusOf(r: RequestRow, orgId: string, rating: RatingContext) {
  // Only keyed requests retain their result (the fingerprint is stored only with a key).
  const keyed = r.fingerprint !== null;
  const retained = keyed && r.result !== null && (!r.result_expires_at || r.result_expires_at.getTime() > Date.now());
  const reason = feedbackUnavailableReason(rating, orgId);
  return {
    request_id: r.id,
    status: r.status as RequestStatusValue,
    // A copy: the retained envelope as the plain JSON object the response schema describes.
    result: retained && r.result ? { ...r.result } : null,
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

/** The path parameter of every request route. */
export const RequestIdParams = z.strictObject({
  request_id: z.string().regex(REQUEST_ID_PATTERN, 'must match ^req_[A-Za-z0-9_-]{10,64}$'),
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
    handler: async (request) => {
      const id = request.params.request_id;
      const orgId = request.auth!.orgId;
      const r = await app.db.query<RequestRow>('SELECT * FROM requests WHERE id = $1 AND org_id = $2', [id, orgId]);
      const rating = r.rows[0] ? await loadRatingContext(app.db, orgId, id) : null;
      // Another organization's request is indistinguishable from a missing one.
      if (!r.rows[0] || !rating) throw new ServiceError('request_not_found', `No request ${id} for this organization`, { param: 'request_id' });
      return { success: true as const, data: requestStatusOf(r.rows[0], orgId, rating) };
    },
  });
}
