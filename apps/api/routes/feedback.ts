// POST /v1/query/requests/{request_id}/feedback: rate a request (1 or -1) or remove the rating (null).
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { ServiceError } from '../../../shared/errors.ts';
import { setFeedback } from '../../../shared/db/feedback.ts';
import { FeedbackBody, FeedbackResponse } from '../../../shared/openapi/schemas.ts';
import { BEARER, errors, named } from '../../../shared/openapi/document.ts';
import { RequestIdParams } from './requests.ts';

const REASON_TEXT = {
  own_api: 'your organization owns this workflow',
  private_api: 'the workflow is private; ratings are for public workflows',
  request_incomplete: 'only a succeeded request can be rated',
  expired: 'the rating window (30 days after completion) is over',
  not_independent: 'your organization has already rated 3 other requests of this workflow in the last 30 days',
} as const;

export default async function feedbackRoutes(app: FastifyInstance) {
  app.withTypeProvider<ZodTypeProvider>().route({
    method: 'POST',
    url: '/v1/query/requests/:request_id/feedback',
    schema: {
      operationId: 'rateRequest',
      summary: 'Rate a request',
      tags: ['Query'],
      security: BEARER,
      description: 'One rating per request: a new value replaces the old one, null removes it. Only succeeded requests of public workflows the organization does not own, within 30 days of completion; `can_rate` and `feedback_unavailable_reason` on the request status say when not.',
      params: RequestIdParams,
      body: named('FeedbackBody', FeedbackBody),
      response: { 200: named('FeedbackResponse', FeedbackResponse) },
      ...errors(400, 401, 404, 408, 409, 410, 413, 415, 429, 503),
    },
    // The key first, before the body is read: a caller without one learns nothing about ids or bodies.
    onRequest: app.authenticate,
    handler: async (request) => {
      const id = request.params.request_id;
      const r = await setFeedback(app.db, request.auth!.orgId, id, request.body.value);
      if (r === null) throw new ServiceError('request_not_found', `No request ${id} for this organization`, { param: 'request_id' });
      if (!r.ok) {
        throw new ServiceError('feedback_unavailable', `This request cannot be rated: ${REASON_TEXT[r.reason]}`, {
          param: 'value',
          details: { reason: r.reason },
        });
      }
      return { success: true as const, data: { request_id: r.request_id, value: r.value } };
    },
  });
}
