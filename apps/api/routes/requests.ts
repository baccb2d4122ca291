// GET /v1/query/requests/{request_id}: the request's status, receipt and retained result.
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { BEARER, errors, named } from '../../../shared/openapi/document.ts';
import { RequestStatusResponse } from '../../../shared/openapi/schemas.ts';
import { REQUEST_ID_PATTERN } from '../../../shared/ids.ts';
import { ServiceError } from '../../../shared/errors.ts';
import type { RequestRow } from '../services/query-service.ts';

export function receiptOf(r: RequestRow) {
  return {
    request_id: r.id,
    api: r.api,
    operation: r.operation,
    billing: {
      status: r.billing_status,
      reserved_credits: r.reserved_credits,
      charged_credits: r.billing_status === 'pending' ? null : (r.charged_credits ?? 0),
    },
  };
}

const FEEDBACK_WINDOW_MS = 30 * 24 * 3_600_000;

/** Why a rating cannot be sent now, or null when it can. */
export function feedbackUnavailableReason(r: RequestRow, orgId: string, apiOwnerOrg: string | null): string | null {
  if (apiOwnerOrg === orgId) return 'own_api';
  if (!r.is_public_api) return 'private_api';
  if (r.status !== 'succeeded') return 'request_incomplete';
  if (r.completed_at && Date.now() - r.completed_at.getTime() > FEEDBACK_WINDOW_MS) return 'expired';
  return null;
}

export function requestStatusOf(r: RequestRow, orgId: string, apiOwnerOrg: string | null) {
  // Only keyed requests retain their result (the fingerprint is stored only with a key).
  const keyed = r.fingerprint !== null;
  const retained = keyed && r.result !== null && (!r.result_expires_at || r.result_expires_at.getTime() > Date.now());
  const reason = feedbackUnavailableReason(r, orgId, apiOwnerOrg);
  return {
    request_id: r.id,
    status: r.status,
    result: retained ? r.result : null,
    response_status: retained ? r.response_status : null,
    result_expires_at: retained && r.result_expires_at ? r.result_expires_at.toISOString() : null,
    error_code: r.error_code,
    receipt: receiptOf(r),
    feedback: r.feedback === 1 || r.feedback === -1 ? r.feedback : null,
    can_rate: reason === null,
    feedback_unavailable_reason: reason,
  };
}

/** Validates `request_id` (400 invalid_input param request_id) and documents the route (apps/api/README.md). */
const REQUEST_STATUS_SCHEMA = {
  operationId: 'getRequest',
  summary: 'Request status, billing and retained result',
  tags: ['Query'],
  security: BEARER,
  params: z.strictObject({ request_id: z.string().regex(REQUEST_ID_PATTERN, 'must match ^req_[A-Za-z0-9_-]{10,64}$') }),
  response: { 200: named('RequestStatusResponse', RequestStatusResponse) },
  ...errors(400, 401, 404, 410, 429, 503),
};

export default async function requestRoutes(app: FastifyInstance) {
  app.get<{ Params: { request_id: string } }>('/v1/query/requests/:request_id', { preValidation: app.authenticate, schema: REQUEST_STATUS_SCHEMA }, async (request) => {
    const id = request.params.request_id;
    if (!REQUEST_ID_PATTERN.test(id)) {
      throw new ServiceError('invalid_input', 'request_id must match ^req_[A-Za-z0-9_-]{10,64}$', {
        param: 'request_id',
        details: { issues: [{ path: 'request_id', message: 'must match ^req_[A-Za-z0-9_-]{10,64}$' }] },
      });
    }
    const r = await app.db.query(
      `SELECT r.*, a.owner_org_id AS api_owner_org FROM requests r
         LEFT JOIN operations o ON o.id = r.operation_id LEFT JOIN apis a ON a.id = o.api_id
        WHERE r.id = $1 AND r.org_id = $2`,
      [id, request.auth!.orgId],
    );
    // Another organization's request is indistinguishable from a missing one.
    if (r.rowCount === 0) throw new ServiceError('request_not_found', `No request ${id} for this organization`, { param: 'request_id' });
    const row = r.rows[0] as RequestRow & { api_owner_org: string | null };
    return { success: true, data: requestStatusOf(row, request.auth!.orgId, row.api_owner_org) };
  });
}
