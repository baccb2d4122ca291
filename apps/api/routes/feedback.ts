// POST /v1/query/requests/{request_id}/feedback: rate a request (1 or -1) or remove the rating (null).
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import type { Config } from '../../../shared/config.ts';
import { ServiceError } from '../../../shared/errors.ts';
import { setFeedback } from '../../../shared/db/feedback.ts';
import { FeedbackBody, FeedbackResponse } from '../../../shared/openapi/schemas.ts';
import { BEARER, errors, named } from '../../../shared/openapi/document.ts';
import { RequestIdParams } from './requests.ts';
import { KeyedSlots } from '../services/slots.ts';

const REASON_TEXT = {
  own_api: 'your organization owns this workflow',
  private_api: 'the workflow is private; ratings are for public workflows',
  request_incomplete: 'only a succeeded request can be rated',
  expired: 'the rating window (30 days after completion) is over',
  not_independent: 'your organization has already rated 3 other requests of this workflow in the last 30 days',
} as const;

type FeedbackLimits = Pick<Config, 'FEEDBACK_WRITES_PER_ORG' | 'FEEDBACK_WRITE_WAIT_MS'>;

/**
 * Each organization's feedback calls in this process, at most FEEDBACK_WRITES_PER_ORG at once past
 * this point (each takes a pooled connection: its lookup, and for a change the organization's lock
 * in a transaction). One gate per process, shared by this route and the console's rating form
 * (apps/api/app.ts): a burst is bounded whichever door its calls come through. One more waits its turn in memory, holding no connection, up to
 * FEEDBACK_WRITE_WAIT_MS, then is 429 organization_concurrency_limit: the organization's own
 * burst, so its own retryable refusal, not a 503 about the service. An idle organization's slots
 * are dropped.
 */
export class FeedbackGate {
  private readonly byOrg: KeyedSlots;
  constructor(readonly limits: FeedbackLimits) {
    this.byOrg = new KeyedSlots(limits.FEEDBACK_WRITES_PER_ORG);
  }

  /** Organizations with a call in flight or waiting. */
  get organizations(): number {
    return this.byOrg.keys;
  }

  run<T>(orgId: string, write: () => Promise<T>): Promise<T> {
    const { FEEDBACK_WRITES_PER_ORG: perOrg, FEEDBACK_WRITE_WAIT_MS: waitMs } = this.limits;
    return this.byOrg.run(orgId, waitMs, write, () =>
      new ServiceError('organization_concurrency_limit', `The organization has ${perOrg} feedback calls in progress on this server; send this one again after Retry-After`, {
        headers: { 'retry-after': '1' },
        details: { feedback_in_flight: perOrg },
      }),
    );
  }
}

export default async function feedbackRoutes(app: FastifyInstance, opts: { gate: FeedbackGate }) {
  const { gate } = opts;
  app.withTypeProvider<ZodTypeProvider>().route({
    method: 'POST',
    url: '/v1/query/requests/:request_id/feedback',
    schema: {
      operationId: 'rateRequest',
      summary: 'Rate a request',
      tags: ['Query'],
      security: BEARER,
      description: 'One rating per request: a new value replaces the old one, null removes it. Only succeeded requests of public workflows the organization does not own, within 30 days of completion; `can_rate` and `feedback_unavailable_reason` on the request status say when not. One API process handles at most FEEDBACK_WRITES_PER_ORG (2) feedback calls of one organization at once; one more waits its turn up to FEEDBACK_WRITE_WAIT_MS (2 s), then is 429 organization_concurrency_limit with Retry-After.',
      params: RequestIdParams,
      body: named('FeedbackBody', FeedbackBody),
      response: { 200: named('FeedbackResponse', FeedbackResponse) },
      ...errors(400, 401, 404, 408, 409, 410, 413, 415, 429, 503),
    },
    // The key first, before the body is read: a caller without one learns nothing about ids or bodies.
    onRequest: app.authenticate,
    handler: async (request) => {
      const id = request.params.request_id;
      const orgId = request.auth!.orgId;
      const r = await gate.run(orgId, () => setFeedback(app.db, orgId, id, request.body.value));
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
