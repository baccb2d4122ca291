// Watching one run: its state, its progress, and its terminal envelope. Two different troubles are
// told apart: a run that closed without an envelope (terminated, timed out) is interrupted and its
// reservation goes back; Temporal that cannot be reached says nothing about the run, which may still
// finish, so the caller hears 503 engine_unavailable and the request status tells the rest.
import { WorkflowFailedError, WorkflowNotFoundError, type Client } from '@temporalio/client';
import { ServiceError, errorEnvelope } from '../../../shared/errors.ts';
import { LedgerStateError, release } from '../../../shared/db/credits.ts';
import { findById, storedEnvelope, transition, type RequestRow } from '../../../shared/db/requests.ts';
import type { Db } from '../../../shared/db/pool.ts';
import type { Config } from '../../../shared/config.ts';
import type { LocalResults } from '../../../shared/local-results.ts';
import { ResultListener, type ProgressHeard } from './result-listener.ts';
import { progressQuery, type Progress, type Receipt, type TerminalEnvelope } from '../../../shared/workflow-contract.ts';
import type { queryWorkflow } from '../../../workflows/query-workflow.ts';

export type RunState = 'running' | 'closed' | 'missing';

/** Temporal statuses of a run that has ended for good. */
const CLOSED_STATUSES: ReadonlySet<string> = new Set(['COMPLETED', 'FAILED', 'CANCELLED', 'TERMINATED', 'TIMED_OUT', 'CONTINUED_AS_NEW']);

export class RunWatch {
  private resultListener: ResultListener | undefined;

  constructor(
    private readonly deps: {
      db: Db;
      temporal: () => Promise<Client>;
      baseUrl: () => string;
      config: Pick<Config, 'RESULT_WAIT' | 'RESULT_NOTIFY_FALLBACK_MS' | 'DATABASE_URL'>;
      /** A worker in this process hands envelopes over as they commit (shared/local-results.ts). */
      localResults?: LocalResults;
    },
  ) {}

  /**
   * The state of exactly this run (workflow ids name one claim each); throws engine_unavailable.
   * `closed` only for a status no run comes back from: a run an operator PAUSED (or a status this
   * SDK cannot name) can still reserve, run the site and settle, so it is never treated as stopped
   * (its reservation released and its request interrupted under it), as the reconciler does.
   */
  async state(workflowId: string): Promise<RunState> {
    try {
      const client = await this.deps.temporal();
      const d = await client.workflow.getHandle(workflowId).describe();
      return CLOSED_STATUSES.has(d.status.name) ? 'closed' : 'running';
    } catch (err) {
      if (err instanceof WorkflowNotFoundError) return 'missing';
      throw engineUnavailable(undefined, 'The state of the original request cannot be checked right now');
    }
  }

  /**
   * Record a run that closed (or vanished) without an envelope: its reservation goes back, then the
   * request is interrupted. Only call it when no workflow can act on the request any more.
   */
  async interruptClosed(row: Pick<RequestRow, 'id' | 'org_id'>): Promise<RequestRow | undefined> {
    try {
      await release(this.deps.db, row.org_id, row.id);
    } catch (err) {
      // Settled but not finalized: the charge stands and the receipt will say so.
      if (!(err instanceof LedgerStateError)) throw err;
    }
    const m = await transition(this.deps.db, row.id, 'interrupted', { error_code: 'request_interrupted' });
    return m.moved ? m.row : m.current;
  }

  /**
   * Wait for the terminal envelope; null when it is not there within `timeoutMs`. Temporal
   * unreachable: throws ServiceError engine_unavailable (503, Retry-After). `since` (the claim's
   * time) lets a LISTEN connection older than the claim skip the initial row read. `left` (the
   * caller went away) ends the wait at once with null, its subscription and long-poll with it.
   */
  async awaitResult(workflowId: string, requestId: string, timeoutMs: number, since?: Date, left?: AbortSignal): Promise<TerminalEnvelope | null> {
    if (left?.aborted) return null;
    const local = this.deps.localResults?.wait(requestId);
    if (!local) return this.awaitRecorded(workflowId, requestId, timeoutMs, since, left);
    // A worker in this process hands the envelope over once its write commits. The row's own ways
    // (the notification, the history) go on beside it, for a run another process's worker took,
    // and end as soon as the envelope is handed over.
    const handed = new AbortController();
    const recorded = this.awaitRecorded(workflowId, requestId, timeoutMs, since, left ? AbortSignal.any([left, handed.signal]) : handed.signal);
    try {
      return await Promise.race([local.envelope, recorded]);
    } finally {
      local.cancel();
      handed.abort();
    }
  }

  /** awaitResult through the row (and the run's history when unsure). */
  private async awaitRecorded(workflowId: string, requestId: string, timeoutMs: number, since?: Date, left?: AbortSignal): Promise<TerminalEnvelope | null> {
    if (left?.aborted) return null;
    const listener = this.listener();
    if (!listener) return this.awaitHistory(workflowId, requestId, timeoutMs, left);
    const deadline = Date.now() + timeoutMs;
    const sub = listener.subscribe(requestId, since, Math.min(timeoutMs, this.deps.config.RESULT_NOTIFY_FALLBACK_MS), left);
    let heard = sub.trusted ? await sub.heard : undefined;
    if (heard === undefined) {
      // A notification may have come and gone before this connection listened: look once.
      const env = await this.storedEnvelope(requestId);
      if (env) {
        sub.cancel();
        return env;
      }
      heard = await sub.heard;
    }
    if (heard === 'notified') {
      const env = await this.storedEnvelope(requestId);
      if (env) return env;
    }
    // Late, lost or unsure: today's history long-poll, raced with a notification still to come.
    const remaining = deadline - Date.now();
    if (left?.aborted) return null;
    if (remaining <= 0) return (await this.storedEnvelope(requestId)) ?? null;
    const done = new AbortController();
    const history = this.awaitHistory(workflowId, requestId, remaining, left ? AbortSignal.any([done.signal, left]) : done.signal);
    const late = listener.subscribe(requestId, undefined, remaining, left);
    const notified = late.heard.then(async (h) => (h === 'notified' ? ((await this.storedEnvelope(requestId)) ?? history) : history));
    try {
      return await Promise.race([history, notified]);
    } finally {
      late.cancel();
      // A notification answered first: the history long-poll is no longer wanted.
      done.abort();
    }
  }

  /** The envelope the row holds, if the workflow wrote it; a read that fails counts as not yet. */
  private async storedEnvelope(requestId: string): Promise<TerminalEnvelope | null> {
    const row = await storedEnvelope(this.deps.db, requestId).catch(() => undefined);
    return row?.result ? { status: row.response_status ?? 200, body: row.result } : null;
  }

  private listener(): ResultListener | undefined {
    const { RESULT_WAIT, DATABASE_URL } = this.deps.config;
    if (RESULT_WAIT !== 'notify' || !DATABASE_URL) return undefined;
    this.resultListener ??= new ResultListener(DATABASE_URL);
    return this.resultListener;
  }

  /** Start listening ahead of the first query (a failure only means waiters fall back). */
  async startListening(): Promise<void> {
    await this.listener()?.start();
  }

  async close(): Promise<void> {
    await this.resultListener?.close();
  }

  /**
   * Long-poll the run's history for its result, for at most `timeoutMs` or until `stop` aborts. The
   * SDK's `result()` polls again and again until the run closes, so the poll is cancelled whenever
   * this wait ends: a wait that ran out (a 202, an agent's short `wait`) leaves no call behind on the
   * API's Temporal connection for every run still going.
   */
  private async awaitHistory(workflowId: string, requestId: string, timeoutMs: number, stop?: AbortSignal): Promise<TerminalEnvelope | null> {
    const poll = new AbortController();
    let timer: NodeJS.Timeout | undefined;
    let onStop: (() => void) | undefined;
    const ended = new Promise<null>((resolve) => {
      timer = setTimeout(() => resolve(null), timeoutMs);
      onStop = () => resolve(null);
      stop?.addEventListener('abort', onStop, { once: true });
    });
    try {
      if (stop?.aborted) return null;
      const client = await this.deps.temporal().catch(() => {
        throw engineUnavailable(requestId);
      });
      const handle = client.workflow.getHandle<typeof queryWorkflow>(workflowId);
      const env = await Promise.race([client.withAbortSignal(poll.signal, () => handle.result()), ended]);
      return env && (await this.confirmed(requestId, env));
    } catch (err) {
      if (err instanceof ServiceError) throw err;
      if (err instanceof WorkflowFailedError || err instanceof WorkflowNotFoundError) return this.closedWithoutEnvelope(requestId);
      throw engineUnavailable(requestId);
    } finally {
      clearTimeout(timer);
      if (onStop) stop?.removeEventListener('abort', onStop);
      // Cancels the long-poll when the wait ended first (its CANCELLED rejection goes to the race).
      poll.abort();
    }
  }

  /**
   * The answer a finished run returned, checked against the request row, which is the record. The
   * two can differ: a workflow task whose completion was lost (Temporal or PostgreSQL restarting)
   * runs again from the start, and its local activities with it. A re-run reserve then finds the
   * row its own first attempt already finalized (say `rejected` billing_unavailable, key freed) and
   * the run returns request_interrupted. So the row's envelope wins; and request_interrupted is only
   * told once the row says `interrupted` (one conditional UPDATE), never while its key could still
   * be freed and run again. Call it only for a run that can no longer act (it returned).
   */
  async confirmed(requestId: string, env: TerminalEnvelope): Promise<TerminalEnvelope> {
    const row = await findById(this.deps.db, requestId);
    if (!row) return env;
    if (row.result) return { status: row.response_status ?? 200, body: row.result };
    if (errorCodeOf(env) !== 'request_interrupted') return env;
    const now = row.status === 'interrupted' ? row : await this.interruptClosed(row);
    if (now?.result) return { status: now.response_status ?? 200, body: now.result };
    if (now?.status === 'interrupted') return env;
    // Neither an envelope nor interrupted (no known path leads here): promise nothing.
    throw engineUnavailable(requestId);
  }

  /** The run closed but returned no envelope: the record may have it; otherwise the request is interrupted. */
  private async closedWithoutEnvelope(requestId: string): Promise<TerminalEnvelope> {
    let row = await findById(this.deps.db, requestId);
    if (row?.result) return { status: row.response_status ?? 200, body: row.result };
    if (row) row = await this.interruptClosed(row);
    if (row?.result) return { status: row.response_status ?? 200, body: row.result };
    // Interrupted only when the row says so: a row that did not move is not told interrupted.
    if (row && row.status !== 'interrupted') throw engineUnavailable(requestId);
    const receipt: Receipt | undefined = row?.api && row.operation
      ? {
          request_id: requestId,
          api: row.api,
          operation: row.operation,
          billing: { status: row.billing_status, reserved_credits: row.reserved_credits, charged_credits: row.charged_credits ?? 0 },
        }
      : undefined;
    return {
      status: 409,
      body: errorEnvelope('request_interrupted', {
        requestId,
        receipt,
        baseUrl: this.deps.baseUrl(),
        message:
          row?.billing_status === 'settled'
            ? 'The run stopped unfinished (terminated or timed out) after it was charged; it will not run again'
            : 'The run stopped unfinished (terminated or timed out) and will not run again; nothing was charged',
      }),
    };
  }

  /** Progress notices of one request (RESULT_WAIT=notify); undefined when the caller must poll `progress` instead. */
  watchProgress(requestId: string, hear: (h: ProgressHeard) => void): (() => void) | undefined {
    return this.listener()?.watchProgress(requestId, hear);
  }

  async progress(workflowId: string): Promise<Progress | null> {
    try {
      const client = await this.deps.temporal();
      return await client.workflow.getHandle<typeof queryWorkflow>(workflowId).query(progressQuery);
    } catch {
      return null;
    }
  }
}

/** The catalog code of an error envelope (undefined for a success). */
function errorCodeOf(env: TerminalEnvelope): string | undefined {
  return env.body.success ? undefined : env.body.error.code;
}

export function engineUnavailable(requestId: string | undefined, message = 'The run cannot be followed right now; it may still finish. Check GET /v1/query/requests/{request_id} before retrying'): ServiceError {
  return new ServiceError('engine_unavailable', message, {
    requestId,
    headers: { 'retry-after': '5', ...(requestId ? { location: `/v1/query/requests/${requestId}`, 'x-request-id': requestId } : {}) },
  });
}
