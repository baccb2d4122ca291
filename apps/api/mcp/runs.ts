// Runs through MCP: the same QueryService path as POST /v1/query (validation, admission,
// idempotency, billing, receipts), waited on for at most `wait_seconds`.
import { ERRORS, ServiceError, serviceErrorEnvelope, type ErrorBody } from '../../../shared/errors.ts';
import { resolveOperation } from '../../../shared/db/catalog.ts';
import type { Db } from '../../../shared/db/pool.ts';
import type { TerminalEnvelope } from '../../../shared/workflow-contract.ts';
import type { QueryService, RequestRow } from '../services/query-service.ts';
import { findRunForOrg } from '../../../shared/db/requests.ts';
import { WAIT_SECONDS, type RunResult } from './schemas.ts';
import { boundRun } from './bound.ts';
import { toolFailure } from './failures.ts';
import type { OrgSlots } from '../services/org-slots.ts';

export interface McpContext {
  db: Db;
  queries: QueryService;
  baseUrl: string;
  orgId: string;
  /** `?read_only=true`: no tool that changes websites, and actions are refused. */
  readOnly: boolean;
  /** Told of every terminal envelope a tool hands over (metrics); `replayed` when it was delivered before. */
  onDelivered?: (env: TerminalEnvelope, replayed: boolean) => void;
  /**
   * svc_get_run waits of each organization in this process (MCP_GET_RUN_WAITS_PER_ORG). A run tool
   * waits on the run it started (one running slot each); svc_get_run can wait on the same run any
   * number of times, each wait a subscription and, after a few seconds, a Temporal long-poll.
   */
  getRunWaits?: OrgSlots;
}

export interface RunArgs {
  api: string;
  operation: string;
  input: Record<string, unknown>;
  version?: number;
  /** Which of a handle's workflows (per-workflow tools name theirs); omitted, a private one wins as in queries. */
  visibility?: 'public' | 'private';
  include?: string[];
  exclude?: string[];
  wait_seconds?: number;
  max_chars?: number;
  idempotency_key?: string;
}

/** Which operations a tool may run. */
export type RunKind = 'read' | 'action' | 'any';

/** Called with the workflow's stage while a run is waited on (MCP progress notifications). */
export type OnStage = (stage: string, message: string) => void;

export interface ToolAnswer {
  result: RunResult;
  isError: boolean;
}

/** What an answer names of its run (a request row, or svc_get_run's narrower read of one). */
type RunIdentity = Pick<RequestRow, 'id' | 'api' | 'operation'>;

const RUNNING_STATES = new Set(['reserving', 'processing', 'refund_pending']);
const FINISHED_STATES = new Set(['succeeded', 'failed', 'rejected']);

/**
 * What the calling tool's arguments are: svc_run_workflow's and svc_run_action's own (`api`,
 * `operation`, `input`, `include`, `exclude`, `idempotency_key`, …), or a per-workflow tool's,
 * which are the operation's input itself.
 */
export type ToolArguments = 'run' | 'input';

export async function runOperation(
  ctx: McpContext,
  args: RunArgs,
  kind: RunKind,
  onStage?: OnStage,
  left?: AbortSignal,
  tool: ToolArguments = 'run',
): Promise<ToolAnswer> {
  const a = await runUnbounded(ctx, args, kind, onStage, left);
  return { ...a, result: boundRun(inToolTerms(a.result, tool), args.max_chars) };
}

/**
 * A path of the query the tool sent (`param`, `details.issues[].path`) as the tool's own argument:
 * `response.include.2` is `include.2` and `Idempotency-Key` is `idempotency_key` for the run tools;
 * `input.city` is `city` for a per-workflow tool. '' when the path names no argument of the tool:
 * the per-workflow tool's arguments as a whole (`input`), or what the tool fixes itself (its `api`,
 * `operation`, `version`, `visibility`).
 */
export function toolPath(path: string, tool: ToolArguments): string {
  if (tool === 'run') {
    if (path === 'Idempotency-Key') return 'idempotency_key';
    const shaped = /^response\.((?:include|exclude)(?:\..*)?)$/s.exec(path);
    return shaped ? shaped[1]! : path;
  }
  if (path === 'input') return '';
  if (path.startsWith('input.')) return path.slice('input.'.length);
  if (['api', 'operation', 'version', 'visibility'].includes(path)) return '';
  return path;
}

/**
 * A run answer's error in terms of the tool's arguments (see toolPath): a path that names no
 * argument leaves `param` out, as for a whole-body refusal over HTTP. The run tools' texts quote
 * `response.include` / `response.exclude` as the arguments `include` / `exclude`.
 */
export function inToolTerms(result: RunResult, tool: ToolArguments): RunResult {
  const error = result.error as (ErrorBody & Record<string, unknown>) | undefined;
  if (!error) return result;
  // The texts too: the run tools' `include`, `exclude` and `idempotency_key` are arguments, not
  // `response.include` or a header; a per-workflow tool's `input.city` is its argument `city`.
  const text = (m: string) =>
    tool === 'run' ? m.replace(/\bresponse\.(include|exclude)\b/g, '$1').replace(/\bIdempotency-Key\b/g, 'idempotency_key') : m.replace(/\binput\.(?=[^\s.])/g, '');
  const { param, ...rest } = error;
  const mapped: ErrorBody & Record<string, unknown> = { ...rest, message: text(error.message) };
  const at = typeof param === 'string' ? toolPath(param, tool) : undefined;
  if (at) mapped.param = at;
  const details = error.details as { issues?: unknown } | undefined;
  if (details && typeof details === 'object' && Array.isArray(details.issues)) {
    mapped.details = {
      ...details,
      issues: details.issues.map((i: unknown) => {
        if (!i || typeof i !== 'object') return i;
        const issue = i as { path?: unknown; message?: unknown };
        return {
          ...issue,
          ...(typeof issue.path === 'string' ? { path: toolPath(issue.path, tool) } : {}),
          ...(typeof issue.message === 'string' ? { message: text(issue.message) } : {}),
        };
      }),
    };
  }
  return { ...result, error: mapped, ...(result.message !== undefined ? { message: text(result.message) } : {}) };
}

async function runUnbounded(ctx: McpContext, args: RunArgs, kind: RunKind, onStage?: OnStage, left?: AbortSignal): Promise<ToolAnswer> {
  const svc = ctx.queries;
  const none = { request_id: null, api: args.api, operation: args.operation, truncated: false };
  try {
    // Both go to the query's rules as sent: include with exclude is refused there (invalid_input,
    // as POST /v1/query answers), never run with one of them silently dropped.
    const response = args.include || args.exclude ? { ...(args.include ? { include: args.include } : {}), ...(args.exclude ? { exclude: args.exclude } : {}) } : undefined;
    const q = svc.parseBody({
      api: args.api,
      operation: args.operation,
      input: args.input,
      ...(args.version !== undefined ? { version: args.version } : {}),
      ...(args.visibility !== undefined ? { visibility: args.visibility } : {}),
      ...(response ? { response } : {}),
    });
    const key = args.idempotency_key === undefined ? undefined : svc.checkIdempotencyKey(args.idempotency_key);
    // The wrong tool is refused first (before input, access or admission checks): nothing is claimed or charged.
    const named = await resolveOperation(ctx.db, ctx.orgId, { api: q.api!, operation: q.operation!, version: q.version, visibility: q.visibility }).catch(() => undefined);
    if (named?.ok) {
      const refusal = refuse(named.op.performsActions, kind, ctx.readOnly, `${named.op.handle} ${named.op.operation}`);
      if (refusal) return { isError: true, result: { ...none, status: 'refused', message: refusal } };
    }
    // Then the key (replay, conflict or in progress, as POST /v1/query), then resolution.
    const met = await svc.meetKey(ctx.orgId, q, key);
    let sub;
    if (met) {
      // The tool's rules hold for a replay too (the operation it names may be unresolvable now).
      const refusal = refuse(met.request.performs_actions, kind, ctx.readOnly, `${met.request.api} ${met.request.operation}`);
      if (refusal) return { isError: true, result: { ...none, status: 'refused', message: refusal } };
      sub = met;
    } else {
      const op = await svc.resolve(ctx.orgId, q);
      const refusal = refuse(op.performsActions, kind, ctx.readOnly, `${op.handle} ${op.operation}`);
      if (refusal) return { isError: true, result: { ...none, status: 'refused', message: refusal } };
      sub = await svc.submit(ctx.orgId, q, op, key);
    }
    if (sub.kind === 'replay') {
      ctx.onDelivered?.(sub.envelope, true);
      return fromEnvelope(sub.request, sub.envelope, true);
    }
    const waitMs = (args.wait_seconds ?? WAIT_SECONDS.default) * 1000;
    const env = await waitWithProgress(svc, sub.workflowId, sub.request.id, Math.min(waitMs, svc.remainingMs(sub.request.created_at) + 5_000), onStage, left);
    // The client left: the SDK sends nothing for this call, so nothing is delivered.
    if (!env || left?.aborted) return running(sub.request);
    ctx.onDelivered?.(env, false);
    return fromEnvelope(sub.request, env, false);
  } catch (err) {
    return fromError(err, ctx.baseUrl, none);
  }
}

/** svc_get_run: a run's retained result (24 hours), waiting up to wait_seconds while it still runs. */
export async function getRun(
  ctx: McpContext,
  args: { request_id: string; wait_seconds?: number; max_chars?: number },
  onStage?: OnStage,
  left?: AbortSignal,
): Promise<ToolAnswer> {
  const a = await getRunUnbounded(ctx, args, onStage, left);
  return { ...a, result: boundRun(a.result, args.max_chars) };
}

async function getRunUnbounded(ctx: McpContext, args: { request_id: string; wait_seconds?: number }, onStage?: OnStage, left?: AbortSignal): Promise<ToolAnswer> {
  const none = { request_id: args.request_id, api: null, operation: null, truncated: false };
  try {
    // The stored result comes with the row only while it is kept: an expired one is never read.
    const row = await findRunForOrg(ctx.db, ctx.orgId, args.request_id);
    // Another organization's request is indistinguishable from a missing one.
    if (!row) throw new ServiceError('request_not_found', `No request ${args.request_id} for this organization`, { param: 'request_id' });
    if (row.has_result) {
      // Expired by PostgreSQL's clock (result not read) or by this process's.
      if (!row.result || (row.result_expires_at && row.result_expires_at.getTime() <= Date.now())) {
        throw new ServiceError('request_not_found', `The result of ${row.id} was kept for 24 hours and has been deleted`, { param: 'request_id' });
      }
      const stored = { status: row.response_status ?? 200, body: row.result };
      ctx.onDelivered?.(stored, true);
      return fromEnvelope(row, stored, false);
    }
    // Finished, and its result is gone: retention deleted it (shared/db/requests.ts deleteExpiredResults).
    if (row.completed_at && FINISHED_STATES.has(row.status)) {
      throw new ServiceError('request_not_found', `The result of ${row.id} was kept for 24 hours and has been deleted`, { param: 'request_id' });
    }
    if (!RUNNING_STATES.has(row.status)) {
      throw new ServiceError('request_interrupted', `Request ${row.id} stopped unfinished (${row.status}); nothing more will come`, { requestId: row.id });
    }
    const release = ctx.getRunWaits ? ctx.getRunWaits.take(ctx.orgId) : () => {};
    if (!release) {
      throw new ServiceError(
        'organization_concurrency_limit',
        `The organization already has ${ctx.getRunWaits!.perOrg} svc_get_run calls waiting on runs; wait for one of them to answer before waiting on ${row.id} again`,
        { requestId: row.id, headers: { 'retry-after': '1' }, details: { waiting: ctx.getRunWaits!.perOrg } },
      );
    }
    let env: TerminalEnvelope | null;
    try {
      const waitMs = (args.wait_seconds ?? WAIT_SECONDS.default) * 1000;
      env = await waitWithProgress(ctx.queries, row.workflow_id, row.id, waitMs, onStage, left);
    } finally {
      release();
    }
    if (!env || left?.aborted) return running(row);
    // The first delivery of a run an earlier call left running.
    ctx.onDelivered?.(env, false);
    return fromEnvelope(row, env, false);
  } catch (err) {
    return fromError(err, ctx.baseUrl, none);
  }
}

function refuse(performsActions: boolean, kind: RunKind, readOnly: boolean, name: string): string | undefined {
  if (performsActions && readOnly) {
    return `${name} changes something on a website, and this MCP server was opened read-only (read_only=true); it was not run and nothing was charged.`;
  }
  if (performsActions && kind === 'read') {
    return `${name} changes something on a website; svc_run_workflow runs read-only operations only. Use svc_run_action, and only if the user asked for this action. It was not run and nothing was charged.`;
  }
  if (!performsActions && kind === 'action') {
    return `${name} only reads; svc_run_action runs operations that change a website. Use svc_run_workflow instead. It was not run and nothing was charged.`;
  }
  return undefined;
}

/**
 * Wait for the terminal envelope; meanwhile report the stages the run reaches. From PostgreSQL
 * notices first (the reservation's commit says `executing`), as SSE streams hear them: a workflow
 * query per second per open call would be a workflow task each on the worker. Polling the
 * workflow's progress query is the fallback, when this API is not listening or notices may be lost.
 * `left` (the client closed the exchange) ends the wait at once.
 */
async function waitWithProgress(svc: QueryService, workflowId: string, requestId: string, ms: number, onStage?: OnStage, left?: AbortSignal): Promise<TerminalEnvelope | null> {
  // Temporal unreachable while waiting is answered as still running: svc_get_run reads the record later.
  if (!onStage) return svc.awaitResult(workflowId, requestId, ms, undefined, left).catch(() => null);
  let lastSeq = -1;
  let done = false;
  let poll: ReturnType<typeof setInterval> | undefined;
  const startPolling = () => {
    if (poll || done) return;
    poll = setInterval(() => {
      void svc.progress(workflowId).then((p) => {
        if (done || !p || p.seq === lastSeq) return;
        lastSeq = p.seq;
        onStage(p.stage, p.message);
      });
    }, 1_000);
  };
  const unwatch = svc.watchProgress(requestId, (h) => {
    if (done) return;
    if (h === 'unsure') startPolling();
    else onStage(h, 'Running the workflow');
  });
  if (!unwatch) startPolling();
  try {
    return await svc.awaitResult(workflowId, requestId, ms, undefined, left).catch(() => null);
  } finally {
    done = true;
    unwatch?.();
    if (poll) clearInterval(poll);
  }
}

function running(row: RunIdentity): ToolAnswer {
  return {
    isError: false,
    result: {
      status: 'running',
      request_id: row.id,
      api: row.api,
      operation: row.operation,
      truncated: false,
      message: `Still running. Call svc_get_run with request_id "${row.id}" to get the result (kept for 24 hours); do not start the run again.`,
    },
  };
}

/** The run's full answer; `boundRun` fits it into max_chars afterwards. */
function fromEnvelope(row: RunIdentity, env: TerminalEnvelope, replayed: boolean): ToolAnswer {
  const body = env.body as { success?: boolean; data?: { output?: unknown; receipt?: RunResult['receipt'] }; error?: ErrorBody };
  const base = { request_id: row.id, api: row.api, operation: row.operation, ...(replayed ? { replayed: true } : {}) };
  if (body.success === true && body.data) {
    const result: RunResult = { ...base, status: 'succeeded', output: body.data.output, truncated: false, receipt: body.data.receipt };
    return { isError: false, result };
  }
  const error = body.error;
  return {
    isError: true,
    result: {
      ...base,
      status: 'failed',
      truncated: false,
      ...(error ? { error: { ...error } } : {}),
      ...(error?.receipt ? { receipt: error.receipt as RunResult['receipt'] } : {}),
      message: error?.message,
    },
  };
}

function fromError(err: unknown, baseUrl: string, none: Omit<RunResult, 'status'>): ToolAnswer {
  if (err instanceof ServiceError) {
    const env = serviceErrorEnvelope(err, { baseUrl });
    const retryAfter = err.headers?.['retry-after'];
    const message = retryAfter && ERRORS[err.code].retryable ? `${err.message} (retry after ${retryAfter} s)` : err.message;
    return { isError: true, result: { ...none, request_id: err.requestId ?? none.request_id, status: 'failed', error: { ...env.error }, message } };
  }
  // Anything else (a database that went away, a bug) becomes a catalog error, never its own text.
  return fromError(toolFailure(err), baseUrl, none);
}
