// One query, as a saga: reserve → execute on the site → format → settle.
// Any failure after the reservation runs the compensating release; the terminal envelope
// (HTTP status + body) is written to PostgreSQL so replays never depend on Temporal's history.
import {
  ActivityFailure,
  ApplicationFailure,
  TimeoutFailure,
  proxyActivities,
  proxyLocalActivities,
  setHandler,
} from '@temporalio/workflow';
import type { BillingActivities, ExecuteActivities } from '../activities/types.ts';
import { shapeOutput } from '../shared/format/shape.ts';
import { ERRORS, errorEnvelope, isErrorCode, type ErrorCode } from '../shared/errors.ts';
import { progressQuery, type Progress, type QueryWorkflowInput, type Stage, type TerminalEnvelope } from '../shared/workflow-contract.ts';

// Short database steps are local activities: no task-queue round trip, retried until they succeed.
const billing = proxyLocalActivities<BillingActivities>({
  startToCloseTimeout: '10 seconds',
  retry: { initialInterval: '200 milliseconds', backoffCoefficient: 2, maximumInterval: '5 seconds' },
});

/** Codes a retry cannot fix: the execute activity fails at once on these. */
const NON_RETRYABLE = Object.entries(ERRORS)
  .filter(([, d]) => !d.retryable)
  .map(([code]) => code);
/** For actions, no failure the site reported is retried: only a lost attempt (worker gone). */
const ALL_CODES = Object.keys(ERRORS);

interface Failure {
  code: ErrorCode;
  message?: string;
  details?: unknown;
}

/** Turn whatever an activity threw into a catalog code; a website never becomes internal_error. */
function toFailure(err: unknown, performsActions: boolean): Failure {
  let cause: unknown = err;
  if (err instanceof ActivityFailure) cause = err.cause;
  if (cause instanceof TimeoutFailure) {
    // An action cut off mid-way may have happened: say so rather than inviting a blind retry.
    if (performsActions) return { code: 'action_unconfirmed', message: 'The action did not finish in time and its outcome is unknown; check the website before trying again' };
    return { code: 'execution_timeout', message: 'The workflow did not finish within its time limit' };
  }
  if (cause instanceof ApplicationFailure && isErrorCode(cause.type)) {
    const [details] = (cause.details ?? []) as unknown[];
    return { code: cause.type, message: cause.message, details };
  }
  return { code: 'internal_error' };
}

export async function queryWorkflow(q: QueryWorkflowInput): Promise<TerminalEnvelope> {
  const progress: Progress = { seq: 0, stage: 'accepted', message: 'Query accepted' };
  const advance = (stage: Stage, message: string, withRef = false) => {
    progress.seq += 1;
    progress.stage = stage;
    progress.message = message;
    progress.api_reference = withRef ? q.apiReference : undefined;
  };
  setHandler(progressQuery, () => progress);

  let reserved = 0;
  const receipt = (status: 'not_started' | 'pending' | 'settled' | 'released', charged: number | null) => ({
    request_id: q.requestId,
    api: q.api,
    operation: q.operation,
    billing: { status, reserved_credits: reserved, charged_credits: charged },
  });

  const finish = async (
    envelope: TerminalEnvelope,
    status: 'succeeded' | 'rejected' | 'failed',
    errorCode: string | null,
  ): Promise<TerminalEnvelope> => {
    await billing.finalizeRequest({ requestId: q.requestId, status, envelope, errorCode, retentionMs: q.retentionMs });
    progress.seq += 1;
    progress.stage = 'done';
    progress.message = errorCode ? `Failed: ${errorCode}` : 'Completed';
    progress.api_reference = undefined;
    progress.terminal = envelope;
    return envelope;
  };

  const fail = (f: Failure, billingStatus: 'not_started' | 'released') => {
    const env = errorEnvelope(f.code, {
      message: f.message,
      details: f.details,
      requestId: q.requestId,
      receipt: receipt(billingStatus, 0),
      baseUrl: q.baseUrl,
    });
    return finish({ status: ERRORS[f.code].status, body: env as unknown as Record<string, unknown> }, billingStatus === 'not_started' ? 'rejected' : 'failed', f.code);
  };

  // A query that waited past its deadline before any worker picked it up never reserves.
  if (Date.now() >= q.deadlineAt) return fail({ code: 'execution_timeout', message: 'The query could not start within its deadline' }, 'not_started');

  advance('preparing', 'Reserving credits');
  const r = await billing.reserveCredits({ orgId: q.orgId, requestId: q.requestId, amount: q.costCredits });
  if (!r.ok) {
    return fail(
      { code: 'insufficient_credits', message: `This query costs ${q.costCredits} credits; ${r.available} are available`, details: { required: q.costCredits, available: r.available } },
      'not_started',
    );
  }
  reserved = r.reserved;

  try {
    const remainingMs = Math.max(1, q.deadlineAt - Date.now());
    const site = proxyActivities<ExecuteActivities>({
      scheduleToCloseTimeout: remainingMs,
      startToCloseTimeout: remainingMs,
      heartbeatTimeout: q.heartbeatTimeoutMs,
      retry: q.performsActions
        ? // An action may have happened even when its answer was lost: never repeat it blindly.
          // Only a lost attempt of a reference-carrying recipe runs again (the site dedupes it).
          { maximumAttempts: q.actionsReplaySafe ? 3 : 1, initialInterval: '1 second', nonRetryableErrorTypes: ALL_CODES }
        : { initialInterval: '500 milliseconds', backoffCoefficient: 2, maximumInterval: '5 seconds', nonRetryableErrorTypes: NON_RETRYABLE },
    });
    advance('executing', `Running ${q.api} ${q.operation}`, true);
    const output = await site.executeOperation({
      requestId: q.requestId,
      orgId: q.orgId,
      operationId: q.operationId,
      version: q.version,
      input: q.input,
      deadlineAt: q.deadlineAt,
    });
    advance('formatting', 'Formatting the output', true);
    const shaped = q.response ? shapeOutput(output, q.response) : output;
    advance('settling', 'Settling credits');
    const { charged } = await billing.settleCredits({ orgId: q.orgId, requestId: q.requestId, amount: q.costCredits });
    return finish({ status: 200, body: { success: true, data: { output: shaped, receipt: receipt('settled', charged) } } }, 'succeeded', null);
  } catch (err) {
    const failure = toFailure(err, q.performsActions);
    // Compensation: the reservation goes back whatever failed; its own errors never hide the original.
    await billing.markRefundPending({ requestId: q.requestId });
    await billing.releaseCredits({ orgId: q.orgId, requestId: q.requestId });
    return fail(failure, 'released');
  }
}
