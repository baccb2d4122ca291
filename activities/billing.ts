// Billing and request-record activities: short, idempotent database steps (run as local activities).
import type { Db } from '../shared/db/pool.ts';
import { release, reserve, settle } from '../shared/db/credits.ts';
import type { BillingActivities } from './types.ts';

export function createBillingActivities(db: Db): BillingActivities {
  return {
    reserveCredits: ({ orgId, requestId, amount }) => reserve(db, orgId, requestId, amount),
    settleCredits: ({ orgId, requestId, amount }) => settle(db, orgId, requestId, amount),
    releaseCredits: ({ orgId, requestId }) => release(db, orgId, requestId),
    async markRefundPending({ requestId }) {
      await db.query(`UPDATE requests SET status = 'refund_pending', updated_at = now() WHERE id = $1 AND status IN ('reserving', 'processing')`, [
        requestId,
      ]);
    },
    async finalizeRequest({ requestId, status, envelope, errorCode, retentionMs }) {
      // The terminal envelope is written once; a re-run of this step after a crash changes nothing.
      await db.query(
        `UPDATE requests
            SET status = $2, response_status = $3, result = $4, error_code = $5,
                result_expires_at = now() + ($6::bigint * interval '1 millisecond'),
                completed_at = now(), updated_at = now()
          WHERE id = $1 AND result IS NULL`,
        [requestId, status, envelope.status, JSON.stringify(envelope.body), errorCode, retentionMs],
      );
    },
  };
}
