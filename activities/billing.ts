// Billing and request-record activities: short, idempotent database steps (run as local activities).
// Ledger states a retry cannot change become non-retryable ApplicationFailures with an explicit type.
import { ApplicationFailure } from '@temporalio/activity';
import type { Db } from '../shared/db/pool.ts';
import { LedgerStateError, release, reserve, settle, settleAndFinalize, type LedgerDb } from '../shared/db/credits.ts';
import { finalize, transition, type Finalized, type Moved } from '../shared/db/requests.ts';
import type { LocalResults } from '../shared/local-results.ts';
import type { BillingActivities, Finalize, WriteOutcome } from './types.ts';

async function ledgerStep<T>(step: () => Promise<T>): Promise<T> {
  try {
    return await step();
  } catch (err) {
    if (err instanceof LedgerStateError) throw ApplicationFailure.create({ type: err.kind, message: err.message, nonRetryable: true });
    throw err;
  }
}

const outcome = (m: Moved | Finalized): WriteOutcome => ({ moved: m.moved, status: m.moved ? m.row.status : (m.current?.status ?? 'missing') });

/**
 * `ledger`: the pool reservations run on (its statements end within seconds: credits.ts).
 * `local`: an API in this process waiting for envelopes (apps/dev/stack.ts). Each envelope this
 * worker's own statement wrote is handed to it once committed (shared/local-results.ts).
 */
export function createBillingActivities(db: Db, ledger: LedgerDb, local?: LocalResults): BillingActivities {
  const handOn = (f: Finalize, m: Finalized) => {
    if (!local || !m.moved) return;
    try {
      local.publish(f.requestId, f.envelope.status, m.storedBody);
    } catch {
      // The write committed: the API hears of it from PostgreSQL instead.
    }
  };
  return {
    reserveCredits: ({ orgId, requestId, amount }) => reserve(ledger, orgId, requestId, amount),
    settleCredits: ({ orgId, requestId, amount }) => ledgerStep(() => settle(db, orgId, requestId, amount)),
    async settleAndFinalize({ orgId, amount, finalize: f }) {
      const r = await ledgerStep(() => settleAndFinalize(db, orgId, amount, f));
      handOn(f, r.finalized); // after COMMIT: settleAndFinalize returned
      return { charged: r.charged, finalized: outcome(r.finalized) };
    },
    releaseCredits: ({ orgId, requestId }) => ledgerStep(() => release(db, orgId, requestId)),
    markRefundPending: async ({ requestId }) => outcome(await transition(db, requestId, 'refund_pending')),
    // The terminal envelope is written once; a re-run of this step after a crash changes nothing.
    async finalizeRequest(f) {
      const m = await finalize(db, f); // one statement: committed when it returns
      handOn(f, m);
      return outcome(m);
    },
  };
}
