// One query, as a saga: reserve → execute on the site → format → settle (+ finalize).
// Any failure after the reservation and before settlement runs the compensating release; the
// terminal envelope (HTTP status + body) is written to PostgreSQL so replays never depend on
// Temporal's history. Every request-row write is conditional: an interrupted request never
// reserves, runs or gets an envelope written over it.
import {
  ActivityFailure,
  ApplicationFailure,
  TimeoutFailure,
  log,
  patched,
  proxyActivities,
  proxyLocalActivities,
  setHandler,
  sleep,
} from '@temporalio/workflow';
import {
  LEDGER_FAILURES,
  type BillingActivities,
  type ExecuteActivities,
  type Finalize,
  type ReadQueryActivities,
  type ReadQueryOutcome,
  type ReserveOutcome,
  type WriteOutcome,
} from '../activities/types.ts';
import { receiptOf, successFinalize } from '../shared/query-envelope.ts';
import { shapeOutput } from '../shared/format/shape.ts';
import { ERRORS, errorEnvelope, isErrorCode, type ErrorCode } from '../shared/errors.ts';
import {
  ACTION_NOT_STARTED_MESSAGE,
  ACTION_START_MARGIN_MS,
  progressQuery,
  type Progress,
  type QueryWorkflowInput,
  type Receipt,
  type ReceiptBillingStatus,
  type Stage,
  type TerminalEnvelope,
} from '../shared/workflow-contract.ts';

// Short database steps are local activities: no task-queue round trip, retried until they succeed
// (the envelope must land), except ledger states no retry can change.
const billing = proxyLocalActivities<BillingActivities>({
  startToCloseTimeout: '10 seconds',
  retry: { initialInterval: '200 milliseconds', backoffCoefficient: 2, maximumInterval: '5 seconds', nonRetryableErrorTypes: [...LEDGER_FAILURES] },
});

// Reserving is bounded: a ledger that cannot be reached within a few seconds answers
// billing_unavailable (nothing charged) instead of holding the caller until the deadline.
// Attempts are counted, not only timed: each attempt's statements are cut off by the reserve
// step's own statement timeout (a local activity's timeouts do not stop a query that hangs).
const reserving = proxyLocalActivities<BillingActivities>({
  scheduleToCloseTimeout: '10 seconds',
  startToCloseTimeout: '4 seconds',
  retry: { initialInterval: '200 milliseconds', backoffCoefficient: 2, maximumInterval: '1 second', maximumAttempts: 3 },
});

/** patched() id of the local execute step for read-only HTTP operations (see below). */
export const HTTP_EXECUTE_LOCAL = 'http-execute-local';
/** patched() id of the fused read-only step (reserve, execute, settle in one local activity). */
export const HTTP_READ_FUSED = 'http-read-fused';
/** patched() id of the fused read-only step for browser operations (one activity on the browser queue). */
export const BROWSER_READ_FUSED = 'browser-read-fused';
/** patched() id of the pause before the ordinary execute step takes over a failed fused attempt. */
export const HTTP_READ_FUSED_RETRY_WAIT = 'http-read-fused-retry-wait';
/** patched() id of the release when a retried first workflow task finds the deadline passed after its lost attempt reserved. */
export const LATE_START_RELEASES = 'late-start-releases';
/** patched() id of the answer for an action whose execute step provably never started: execution_timeout, not action_unconfirmed. */
export const ACTION_NEVER_STARTED = 'action-never-started';
/** The local execute step's own first retry interval: the site sees the same spacing either way. */
const FIRST_RETRY_MS = 500;

/** How far past the deadline a local execute step's own timeouts lie (see below). */
const LOCAL_TIMEOUT_MARGIN_MS = 5_000;

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

/** An ApplicationFailure's fields as a failure: its type when it is a catalog code, else internal_error. */
function catalogFailure(type: string | null | undefined, message: string, details: readonly unknown[]): Failure {
  return type && isErrorCode(type) ? { code: type, message, details: details[0] } : { code: 'internal_error' };
}

/** Turn whatever an activity threw into a catalog code; a website never becomes internal_error. */
function toFailure(err: unknown, performsActions: boolean): Failure {
  let cause: unknown = err;
  if (err instanceof ActivityFailure) cause = err.cause;
  if (cause instanceof TimeoutFailure) {
    // An action cut off mid-way may have happened: say so rather than inviting a blind retry. (One
    // that provably never started is told apart before this: neverStarted().)
    if (performsActions) return { code: 'action_unconfirmed', message: 'The action did not finish in time and its outcome is unknown; check the website before trying again' };
    return { code: 'execution_timeout', message: 'The workflow did not finish within its time limit' };
  }
  if (cause instanceof ApplicationFailure) return catalogFailure(cause.type, cause.message, cause.details ?? []);
  return { code: 'internal_error' };
}

/**
 * The execute activity timed out before any worker took it, on its first attempt: so it never ran.
 * SCHEDULE_TO_START means no worker took this attempt (the server records a task as started when a
 * worker takes it, and never hands out one it timed out). A later attempt's SCHEDULE_TO_START follows
 * an attempt lost mid-run (only those are retried for actions), whose failure the server gives as the
 * timeout's cause (the raw failure's `cause`; the SDK's TimeoutFailure drops it): no cause, no
 * earlier attempt.
 */
function neverStarted(err: unknown): boolean {
  const cause = err instanceof ActivityFailure ? err.cause : undefined;
  return cause instanceof TimeoutFailure && cause.timeoutType === 'SCHEDULE_TO_START' && !cause.failure?.cause;
}

/** The ApplicationFailure type of a failed ledger step, when it is one of the explicit ledger states. */
function ledgerFailure(err: unknown): string | undefined {
  const cause = err instanceof ActivityFailure ? err.cause : err;
  return cause instanceof ApplicationFailure && (LEDGER_FAILURES as readonly string[]).includes(cause.type ?? '') ? (cause.type ?? undefined) : undefined;
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
  const receipt = (status: ReceiptBillingStatus, charged: number | null): Receipt => receiptOf(q, reserved, status, charged);
  const errorOf = (f: Failure, billingStatus: ReceiptBillingStatus, charged = 0): TerminalEnvelope => ({
    status: ERRORS[f.code].status,
    body: errorEnvelope(f.code, { message: f.message, details: f.details, requestId: q.requestId, receipt: receipt(billingStatus, charged), baseUrl: q.baseUrl }),
  });

  const done = (envelope: TerminalEnvelope, errorCode: string | null): TerminalEnvelope => {
    progress.seq += 1;
    progress.stage = 'done';
    progress.message = errorCode ? `Failed: ${errorCode}` : 'Completed';
    progress.api_reference = undefined;
    progress.terminal = envelope;
    return envelope;
  };

  /** The request was interrupted (by an ambiguous start or a stale-claim check): it stops unpaid, its row untouched. */
  const interrupted = (billingStatus: ReceiptBillingStatus) =>
    done(
      errorOf({ code: 'request_interrupted', message: 'The request was interrupted before it could run; nothing was charged' }, billingStatus),
      'request_interrupted',
    );

  /** What the written (or not written) envelope means for the answer. */
  const settled = (w: WriteOutcome, f: Finalize, billingStatus: ReceiptBillingStatus): TerminalEnvelope => {
    if (w.moved || w.status === f.status) return done(f.envelope, f.errorCode);
    if (w.status === 'interrupted') return interrupted(billingStatus);
    log.error('terminal envelope not written', { requestId: q.requestId, status: w.status, wanted: f.status });
    return done(f.envelope, f.errorCode);
  };

  const finish = async (envelope: TerminalEnvelope, status: Finalize['status'], errorCode: string | null, billingStatus: ReceiptBillingStatus, freeKey = false) => {
    const f: Finalize = { requestId: q.requestId, status, envelope, errorCode, retentionMs: q.retentionMs, ...(freeKey ? { freeKey } : {}) };
    return settled(await billing.finalizeRequest(f), f, billingStatus);
  };

  const reject = (f: Failure) => finish(errorOf(f, 'not_started'), 'rejected', f.code, 'not_started');

  /**
   * Compensation: the reservation goes back whatever failed; its own errors never hide the original.
   * `freeKey`: nothing ran, so once the reservation is back the key is freed with the envelope.
   */
  const compensate = async (f: Failure, freeKey = false) => {
    await billing.markRefundPending({ requestId: q.requestId });
    try {
      await billing.releaseCredits({ orgId: q.orgId, requestId: q.requestId });
    } catch (err) {
      // Only a settled request refuses a release, and settlement comes after every step that can
      // fail here: a bug to log, not a loop. The charge stands and the receipt says so.
      if (ledgerFailure(err) !== 'already_settled') throw err;
      log.error('release refused: the request was already settled', { requestId: q.requestId, code: f.code });
      const charged = Math.min(q.costCredits, reserved);
      return finish(errorOf(f, 'settled', charged), 'failed', f.code, 'settled');
    }
    return finish(errorOf(f, 'released'), 'failed', f.code, 'released', freeKey);
  };

  // A query that waited past its deadline before any worker picked it up never reserves. This runs
  // again whenever the first workflow task does: a worker lost mid-task (its local steps may have
  // reserved, even run the site) is retried on another, whose clock may now be past the deadline.
  if (Date.now() >= q.deadlineAt) {
    const f: Failure = { code: 'execution_timeout', message: 'The query could not start within its deadline' };
    const fin: Finalize = { requestId: q.requestId, status: 'rejected', envelope: errorOf(f, 'not_started'), errorCode: f.code, retentionMs: q.retentionMs };
    const w = await billing.finalizeRequest(fin);
    // The lost attempt had reserved (the row is past `reserving`, unfinished): the rejection cannot
    // be written, so give the reservation back and fail, as a timeout after reserving does. Runs
    // from before this patch kept the row `processing` with its credits reserved.
    if ((w.status === 'processing' || w.status === 'refund_pending') && patched(LATE_START_RELEASES)) {
      reserved = q.costCredits;
      return compensate({ code: 'execution_timeout', message: 'The workflow did not finish within its time limit' });
    }
    return settled(w, fin, 'not_started');
  }

  /** A refused reservation: the run stops unpaid. */
  const refused = (r: Extract<ReserveOutcome, { ok: false }>) => {
    if (r.reason === 'request_closed') return interrupted('not_started');
    return reject({
      code: 'insufficient_credits',
      message: `This query costs ${q.costCredits} credits; ${r.available} are available`,
      details: { required: q.costCredits, available: r.available },
    });
  };

  const executeArgs = () => ({
    requestId: q.requestId,
    orgId: q.orgId,
    operationId: q.operationId,
    version: q.version,
    input: q.input,
    deadlineAt: q.deadlineAt,
    performsActions: q.performsActions,
  });

  /**
   * Timeouts of a local step that runs the site: the step stops itself at deadlineAt (execute.ts,
   * on the worker's clock); these count from each dispatch and are only a backstop, set past the
   * deadline so a timeout never turns into another attempt.
   */
  const pastDeadline = () => {
    const backstop = Math.max(1, q.deadlineAt - Date.now()) + LOCAL_TIMEOUT_MARGIN_MS;
    return { scheduleToCloseTimeout: backstop, startToCloseTimeout: backstop };
  };

  /** A read-only HTTP operation's local execute step, with its retry policy. */
  const localSite = () =>
    proxyLocalActivities<ExecuteActivities>({
      ...pastDeadline(),
      retry: { initialInterval: FIRST_RETRY_MS, backoffCoefficient: 2, maximumInterval: '5 seconds', nonRetryableErrorTypes: NON_RETRYABLE },
    });

  /**
   * The ordinary execute step as a normal activity: actions, browser work (on its own task queue,
   * so its workers scale apart) and the fused browser step's fallback. Heartbeats notice a dead worker.
   */
  const remoteSite = () => {
    const remainingMs = Math.max(1, q.deadlineAt - Date.now());
    // An action begins on the website ACTION_START_MARGIN_MS before the deadline or never: a task no
    // worker took by then times out SCHEDULE_TO_START, and the worker refuses to begin after `startBy`.
    // (Neither adds a command: runs from before replay as they were.)
    const action = q.performsActions;
    return proxyActivities<ExecuteActivities>({
      scheduleToCloseTimeout: remainingMs,
      startToCloseTimeout: remainingMs,
      ...(action ? { scheduleToStartTimeout: Math.max(1, remainingMs - ACTION_START_MARGIN_MS) } : {}),
      heartbeatTimeout: q.heartbeatTimeoutMs,
      // Browser work goes to its own task queue (its workers scale apart); unset means this one.
      taskQueue: q.engine === 'browser' ? q.browserTaskQueue : undefined,
      retry: action
        ? // An action may have happened even when its answer was lost: never repeat it blindly.
          // Only a lost attempt of a reference-carrying recipe runs again (the site dedupes it).
          { maximumAttempts: q.actionsReplaySafe ? 3 : 1, initialInterval: '1 second', nonRetryableErrorTypes: ALL_CODES }
        : { initialInterval: '500 milliseconds', backoffCoefficient: 2, maximumInterval: '5 seconds', nonRetryableErrorTypes: NON_RETRYABLE },
    });
  };

  /** The site ran: shape, then settle and finalize. From here the query is charged whatever happens. */
  const settleOutput = async (output: unknown): Promise<TerminalEnvelope> => {
    // Shaping is validated before dispatch and should never fail; if it does, the caller gets a
    // non-retryable error carrying the settled receipt (not the unshaped output, which may hold
    // fields the caller excluded), never a free retryable failure that invites running the work again.
    advance('formatting', 'Formatting the output', true);
    let shaped: { ok: true; output: unknown } | { ok: false };
    try {
      shaped = { ok: true, output: q.response ? shapeOutput(output, q.response) : output };
    } catch (err) {
      log.error('shaping failed after the site ran', { requestId: q.requestId, error: String(err) });
      shaped = { ok: false };
    }

    advance('settling', 'Settling credits');
    const charge = Math.min(q.costCredits, reserved);
    const f: Finalize = shaped.ok
      ? successFinalize(q, reserved, shaped.output)
      : {
          requestId: q.requestId,
          status: 'failed',
          errorCode: 'response_delivery_failed',
          retentionMs: q.retentionMs,
          envelope: errorOf({ code: 'response_delivery_failed', message: 'The workflow ran and was charged, but its output could not be formatted; do not retry blindly' }, 'settled', charge),
        };
    try {
      const s = await billing.settleAndFinalize({ orgId: q.orgId, amount: q.costCredits, finalize: f });
      return settled(s.finalized, f, 'settled');
    } catch (err) {
      const kind = ledgerFailure(err);
      if (kind === 'already_released') {
        // Someone gave the reservation back while the site ran (a stale-claim check): the request is
        // interrupted and uncharged, whatever the site did.
        log.error('settlement found the reservation released', { requestId: q.requestId });
        return interrupted('released');
      }
      if (kind === 'no_reservation') {
        // The reservation this run made is not in the ledger: a bug to log; nothing can be charged.
        log.error('settlement found no reservation', { requestId: q.requestId });
        reserved = 0;
        return finish(errorOf({ code: 'internal_error' }, 'not_started'), 'failed', 'internal_error', 'not_started');
      }
      throw err;
    }
  };

  // A read-only HTTP operation's happy path is ONE local activity (reserve, execute once, shape,
  // settle + finalize: activities/read-query.ts): one dispatch and one marker instead of three.
  // Wherever it stops short, the ordinary steps below take over from that point. Inputs from before
  // the `engine` field never reach patched(), and histories from before this patch replay below.
  // A read-only browser operation's happy path is the same step as ONE normal activity on the
  // browser queue (heartbeats, its workers scale apart): the answer is written from there, so the
  // caller has it before the activity's completion reaches the workflow. Runs from before this
  // patch, and inputs from before the `engine` field, replay on the ordinary steps.
  const fusedHere =
    !q.performsActions && ((q.engine === 'http' && patched(HTTP_READ_FUSED)) || (q.engine === 'browser' && q.browserTaskQueue !== undefined && patched(BROWSER_READ_FUSED)));
  if (fusedHere) {
    advance('executing', `Running ${q.api} ${q.operation}`, true);
    // One attempt: a failure of the step itself hands over to the ordinary steps, which retry.
    const fused =
      q.engine === 'browser'
        ? proxyActivities<ReadQueryActivities>({
            scheduleToCloseTimeout: Math.max(1, q.deadlineAt - Date.now()),
            heartbeatTimeout: q.heartbeatTimeoutMs,
            taskQueue: q.browserTaskQueue,
            retry: { maximumAttempts: 1 },
          })
        : proxyLocalActivities<ReadQueryActivities>({ ...pastDeadline(), retry: { maximumAttempts: 1 } });
    let o: ReadQueryOutcome;
    try {
      o = await fused.runReadQuery({
        reserve: { orgId: q.orgId, requestId: q.requestId, amount: q.costCredits },
        execute: executeArgs(),
        success: { requestId: q.requestId, api: q.api, operation: q.operation, costCredits: q.costCredits, retentionMs: q.retentionMs, response: q.response },
      });
    } catch {
      o = { stop: 'reserve' }; // nothing known: reserving again is once per request
    }
    if (o.stop === 'reserved') return refused(o.reserve);
    if (o.stop !== 'reserve') {
      reserved = o.reserved;
      if (o.stop === 'done') return settled(o.finalized, o.finalize, 'settled');
      if (o.stop === 'executed') return settleOutput(o.output);
      // The site step failed once: a code no retry can change is final; anything else goes on
      // with the ordinary local execute step and its retry policy.
      const e = o.error;
      if (e.nonRetryable || (e.type !== null && NON_RETRYABLE.includes(e.type))) {
        return compensate(catalogFailure(e.type, e.message, e.details));
      }
      // The site failed once already: wait as the step's own retry would before trying again. A
      // browser run waits too (its fallback's first attempt would go at once); only runs with the
      // browser patch's marker come here, so it needs no marker of its own.
      if (q.engine === 'browser' || patched(HTTP_READ_FUSED_RETRY_WAIT)) await sleep(FIRST_RETRY_MS);
      let output: unknown;
      try {
        output = await (q.engine === 'browser' ? remoteSite() : localSite()).executeOperation(executeArgs());
      } catch (err) {
        return compensate(toFailure(err, false));
      }
      return settleOutput(output);
    }
  }

  advance('preparing', 'Reserving credits');
  let r;
  try {
    r = await reserving.reserveCredits({ orgId: q.orgId, requestId: q.requestId, amount: q.costCredits });
  } catch {
    // The ledger could not be reached in time. The reservation may still have committed with its
    // answer lost: rejecting is conditional on `reserving`, and a request found `processing` is released.
    const f: Failure = { code: 'billing_unavailable', message: 'Credits cannot be reserved right now; nothing was charged' };
    const env = errorOf(f, 'not_started');
    // Nothing ran and nothing was charged: the key is freed, so retrying it (as the 503 invites) runs.
    const fin: Finalize = { requestId: q.requestId, status: 'rejected', envelope: env, errorCode: f.code, retentionMs: q.retentionMs, freeKey: true };
    const w = await billing.finalizeRequest(fin);
    if (w.status !== 'processing') return settled(w, fin, 'not_started');
    reserved = q.costCredits;
    // The reservation committed but nothing ran: released, the request charges nothing, and its key
    // is freed as the rejection's would have been, so a retry runs instead of replaying the 503.
    return compensate(f, true);
  }
  if (!r.ok) return refused(r);
  reserved = r.reserved;

  let output: unknown;
  try {
    // A read-only HTTP operation runs as a local activity: the whole query (reserve, execute,
    // settle + finalize) fits in one workflow task, with no task-queue round trip per step. Safe
    // to run again on another worker after a crash (it changes nothing on the site); actions and
    // browser work stay normal activities with heartbeats. Inputs from before the `engine` field
    // never reach patched(), so their histories replay on the old path.
    const local = q.engine === 'http' && !q.performsActions && patched(HTTP_EXECUTE_LOCAL);
    const action = q.performsActions; // never local
    const site = local ? localSite() : remoteSite();
    advance('executing', `Running ${q.api} ${q.operation}`, true);
    output = await site.executeOperation(action ? { ...executeArgs(), startBy: q.deadlineAt - ACTION_START_MARGIN_MS } : executeArgs());
  } catch (err) {
    // An action no worker ever took certainly did not happen: the ordinary timeout, not "check the
    // website". (A worker that refused to begin it says execution_timeout itself.) Runs that met this
    // before the patch answered action_unconfirmed.
    if (q.performsActions && neverStarted(err) && patched(ACTION_NEVER_STARTED)) {
      return compensate({ code: 'execution_timeout', message: ACTION_NOT_STARTED_MESSAGE });
    }
    return compensate(toFailure(err, q.performsActions));
  }
  return settleOutput(output);
}
