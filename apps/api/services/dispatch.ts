// Starting a query's workflow. A start that fails may still have reached Temporal (a deadline or
// an unavailable server after sending), so a failed start never deletes its claim: either the run
// exists and is watched, or the claim is interrupted while still `reserving`, after which a run
// that does start late refuses to reserve (the reserve step checks the row under a lock).
import { WorkflowIdConflictPolicy, WorkflowIdReusePolicy, WorkflowExecutionAlreadyStartedError, type Client } from '@temporalio/client';
import { ServiceError } from '../../../shared/errors.ts';
import { transition, type RequestRow } from '../../../shared/db/requests.ts';
import { actionsReplaySafe } from '../../../shared/recipes/replay.ts';
import type { ResolvedOperation } from '../../../shared/db/catalog.ts';
import type { QueryRequest } from '../../../shared/schemas/query.ts';
import type { Db } from '../../../shared/db/pool.ts';
import { browserTaskQueue, resultRetentionMs, type Config } from '../../../shared/config.ts';
import { QUERY_WORKFLOW_TYPE, type QueryWorkflowInput } from '../../../shared/workflow-contract.ts';
import type { queryWorkflow } from '../../../workflows/query-workflow.ts';
import type { RunWatch } from './run-watch.ts';

/** The recipe's engine (validated at publication); anything else leaves the workflow on its general path. */
function engineOf(recipe: unknown): QueryWorkflowInput['engine'] {
  const e = (recipe as { engine?: unknown } | null)?.engine;
  return e === 'http' || e === 'browser' ? e : undefined;
}

type DispatchConfig = Pick<
  Config,
  'QUERY_DEADLINE_MS' | 'RESULT_RETENTION_HOURS' | 'RESULT_RETENTION_MS' | 'EXECUTE_HEARTBEAT_TIMEOUT_MS' | 'TEMPORAL_TASK_QUEUE' | 'TEMPORAL_BROWSER_TASK_QUEUE' | 'MAX_WORKFLOW_INPUT_BYTES' | 'TEMPORAL_START_TIMEOUT_MS'
>;

export class Dispatch {
  constructor(private readonly deps: { db: Db; temporal: () => Promise<Client>; config: DispatchConfig; baseUrl: () => string; watch: RunWatch; eagerStart?: boolean }) {}

  workflowInput(request: Pick<RequestRow, 'id' | 'org_id' | 'created_at'>, q: QueryRequest, op: ResolvedOperation): QueryWorkflowInput {
    const { config, baseUrl } = this.deps;
    return {
      requestId: request.id,
      orgId: request.org_id,
      api: op.handle,
      operation: op.operation,
      operationId: op.operationId,
      version: op.version,
      input: q.input as Record<string, unknown>,
      costCredits: op.costCredits,
      performsActions: op.performsActions,
      actionsReplaySafe: op.performsActions && actionsReplaySafe(op.recipe),
      response: q.response,
      apiReference: { api: op.handle, name: op.apiName, logo_url: op.logoSha256 ? `${baseUrl()}/v1/icons/${op.logoSha256}` : null, category: op.category },
      deadlineAt: request.created_at.getTime() + config.QUERY_DEADLINE_MS,
      retentionMs: resultRetentionMs(config),
      heartbeatTimeoutMs: config.EXECUTE_HEARTBEAT_TIMEOUT_MS,
      baseUrl: baseUrl(),
      engine: engineOf(op.recipe),
      ...(engineOf(op.recipe) === 'browser' ? { browserTaskQueue: browserTaskQueue(config) } : {}),
    };
  }

  /**
   * Refuse, before anything is claimed or dispatched, a query whose workflow input Temporal would
   * refuse (its payload limit is 2 MiB): 413 payload_too_large, never a retryable start failure.
   */
  checkSize(orgId: string, q: QueryRequest, op: ResolvedOperation): void {
    const probe = this.workflowInput({ id: 'req_0000000000000000000000000', org_id: orgId, created_at: new Date() }, q, op);
    const bytes = Buffer.byteLength(JSON.stringify(probe));
    const max = this.deps.config.MAX_WORKFLOW_INPUT_BYTES;
    if (bytes <= max) return;
    throw new ServiceError('payload_too_large', `The query's input and response options take ${bytes} bytes; a query may carry at most ${max}`, {
      param: 'input',
      details: { bytes, max_bytes: max },
    });
  }

  /** Start the claim's run; returns once it runs (or may run and will be watched). */
  async start(request: RequestRow, q: QueryRequest, op: ResolvedOperation): Promise<void> {
    const { config } = this.deps;
    const input = this.workflowInput(request, q, op);
    let client: Client;
    try {
      client = await this.deps.temporal();
    } catch {
      // Nothing was sent: no run can exist.
      return this.refuse(request, 'connect');
    }
    try {
      await client.withDeadline(Date.now() + config.TEMPORAL_START_TIMEOUT_MS, () =>
        client.workflow.start<typeof queryWorkflow>(QUERY_WORKFLOW_TYPE, {
          taskQueue: config.TEMPORAL_TASK_QUEUE,
          workflowId: request.workflow_id,
          args: [input],
          // The id names this claim only: it never runs twice; "already started" means our own earlier attempt.
          workflowIdReusePolicy: WorkflowIdReusePolicy.REJECT_DUPLICATE,
          workflowIdConflictPolicy: WorkflowIdConflictPolicy.FAIL,
          // The organization is the run's fairness key, inherited by its activities: where a task
          // queue has a backlog (a few Chromium pages shared by every organization), Temporal
          // dispatches round-robin between organizations, so one organization's burst cannot make
          // another's query wait behind all of it (needs matching.enableFairness on the server).
          priority: { fairnessKey: request.org_id },
          // In one process with the worker (the embedded stack): the first task comes back in the
          // start response, skipping the task-queue match. The server falls back to the queue
          // when that worker has no free slot.
          requestEagerStart: this.deps.eagerStart === true,
        }),
      );
    } catch (err) {
      // The id is this claim's own: an existing run is ours (an earlier attempt got through).
      if (err instanceof WorkflowExecutionAlreadyStartedError) return;
      // Ambiguous: the server may have accepted the start. Look before deciding.
      const state = await this.deps.watch.state(request.workflow_id).catch(() => 'unknown' as const);
      if (state === 'running' || state === 'closed') return;
      return this.refuse(request, err instanceof Error ? err.name : 'unknown');
    }
  }

  /**
   * The run did not start (or cannot be seen): interrupt the claim while it is still `reserving`,
   * so a start that lands later cannot reserve, and free its key so a retry claims afresh (a new
   * request id, hence a new workflow id). A claim that already reserved has a run: watch it.
   */
  private async refuse(request: RequestRow, reason: string): Promise<void> {
    let moved = false;
    try {
      // The key is freed in the same statement: a retry reading the row in between would otherwise
      // see it `interrupted` (409 request_interrupted, "never runs again") and then the key run anew.
      const m = await transition(this.deps.db, request.id, 'interrupted', { error_code: 'engine_unavailable', idempotency_key_hash: null }, ['reserving']);
      if (!m.moved && m.current && m.current.status !== 'interrupted') return; // it reserved: the run exists
      moved = true;
    } catch {
      // The record cannot be written either: the claim stays `reserving` and goes stale; a late
      // run could still reserve, so promise nothing about charges.
    }
    throw new ServiceError(
      'engine_unavailable',
      moved
        ? 'Workflows cannot be started right now; the query did not run and nothing was charged'
        : 'Workflows cannot be started right now; check GET /v1/query/requests/{request_id} before retrying',
      { headers: { 'retry-after': '5', location: `/v1/query/requests/${request.id}` }, requestId: request.id, details: { reason } },
    );
  }
}
