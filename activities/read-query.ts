// The happy path of a read-only query in ONE activity: reserve, execute once, shape, settle +
// finalize. For HTTP operations it is a local activity: three local activities cost three
// dispatches from the workflow and three markers in its history; one costs one (issue 11). For
// browser operations it is a normal activity on the browser task queue (with the execute step's
// heartbeats): one workflow task schedules it, and the answer is written before its completion
// reaches the workflow, instead of a local reserve, the activity, then a local settle. It composes the very step functions the
// separate activities are, so the ledger and the site see exactly the same calls. Anything other
// than the happy path stops here and tells the workflow where, and the workflow goes on with its
// ordinary steps (retries, compensation, ledger states): every saga branch keeps one home.
//
// Safe to run again from the start (a worker lost mid-task): reserving and settling are once per
// request, and the site step only reads.
import { ApplicationFailure } from '@temporalio/common';
import { shapeOutput } from '../shared/format/shape.ts';
import { successFinalize } from '../shared/query-envelope.ts';
import type { BillingActivities, ExecuteActivities, ReadQueryActivities, StepError } from './types.ts';

type Steps = Pick<BillingActivities, 'reserveCredits' | 'settleAndFinalize'> & ExecuteActivities;

function stepError(err: unknown): StepError {
  if (err instanceof ApplicationFailure) {
    return { type: err.type ?? null, message: err.message, details: (err.details ?? []) as unknown[], nonRetryable: err.nonRetryable === true };
  }
  // Anything else is retryable: the workflow's own execute step decides what happens next.
  return { type: null, message: err instanceof Error ? err.message : String(err), details: [], nonRetryable: false };
}

export function createReadQueryActivity(steps: Steps): ReadQueryActivities {
  return {
    async runReadQuery({ reserve, execute, success }) {
      let r;
      try {
        r = await steps.reserveCredits(reserve);
      } catch {
        return { stop: 'reserve' };
      }
      if (!r.ok) return { stop: 'reserved', reserve: r };
      let output: unknown;
      try {
        output = await steps.executeOperation(execute);
      } catch (err) {
        return { stop: 'execute', reserved: r.reserved, error: stepError(err) };
      }
      let shaped: unknown;
      try {
        shaped = success.response ? shapeOutput(output, success.response) : output;
      } catch {
        // The workflow's own shaping step answers response_delivery_failed, charged.
        return { stop: 'executed', reserved: r.reserved, output };
      }
      const finalize = successFinalize(success, r.reserved, shaped);
      try {
        const s = await steps.settleAndFinalize({ orgId: reserve.orgId, amount: success.costCredits, finalize });
        return { stop: 'done', reserved: r.reserved, finalize, finalized: s.finalized };
      } catch {
        // A ledger state (released under the run) or an unreachable ledger: the workflow's settle
        // step retries and handles each, with the output it is handed here.
        return { stop: 'executed', reserved: r.reserved, output };
      }
    },
  };
}
