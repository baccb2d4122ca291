// The path of one query before and after Temporal: validation, resolution, input checks,
// admission, the idempotency claim, dispatch, and waiting for the terminal envelope.
// REST (POST /v1/query), SSE and MCP all go through here, so they bill and replay alike.
import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import { WorkflowIdConflictPolicy, WorkflowIdReusePolicy, WorkflowNotFoundError, type Client, type WorkflowHandle } from '@temporalio/client';
import { canonicalJson, newRequestId, queryWorkflowId, sha256Hex, IDEMPOTENCY_KEY_PATTERN } from '../../../shared/ids.ts';
import { ServiceError, errorEnvelope } from '../../../shared/errors.ts';
import { QueryRequest, type ResponseSpec } from '../../../shared/schemas/query.ts';
import { zodIssues } from '../../../shared/schemas/common.ts';
import { resolveOperation, type ResolvedOperation } from '../../../shared/db/catalog.ts';
import { release } from '../../../shared/db/credits.ts';
import { accessFailureCode, checkAccess, type AccessItem } from '../../../shared/db/connections.ts';
import { unknownFieldPaths } from '../../../shared/format/shape.ts';
import { actionsReplaySafe } from '../../../shared/recipes/replay.ts';
import type { Db } from '../../../shared/db/pool.ts';
import type { Config } from '../../../shared/config.ts';
import { QUERY_WORKFLOW_TYPE, progressQuery, type Progress, type QueryWorkflowInput, type TerminalEnvelope } from '../../../shared/workflow-contract.ts';

const addFormats = addFormatsModule as unknown as (ajv: Ajv2020) => Ajv2020;

export interface RequestRow {
  id: string;
  org_id: string;
  idempotency_key_hash: string | null;
  fingerprint: string | null;
  workflow_id: string;
  api: string | null;
  operation: string | null;
  status: string;
  billing_status: 'not_started' | 'pending' | 'settled' | 'released';
  reserved_credits: number;
  charged_credits: number | null;
  response_status: number | null;
  result: Record<string, unknown> | null;
  result_expires_at: Date | null;
  error_code: string | null;
  feedback: number | null;
  performs_actions: boolean;
  is_public_api: boolean;
  created_at: Date;
  completed_at: Date | null;
}

export type Submission =
  | { kind: 'replay'; request: RequestRow; envelope: TerminalEnvelope; stream: boolean; rate: RateInfo }
  | { kind: 'started'; request: RequestRow; workflowId: string; stream: boolean; op: ResolvedOperation; rate: RateInfo };

export interface RateInfo {
  limit: number;
  remaining: number;
  reset: number;
}

export class QueryService {
  private readonly ajv = addFormats(new Ajv2020({ allErrors: true, strict: false }));
  private readonly inputValidators = new Map<string, ReturnType<Ajv2020['compile']>>();

  constructor(
    private readonly deps: { db: Db; temporal: () => Promise<Client>; config: Config; baseUrl: () => string },
  ) {}

  /** Validate the body's shape (strict): invalid_input with every failing path. */
  parseBody(body: unknown): QueryRequest {
    if (body === undefined || body === null || typeof body !== 'object' || Array.isArray(body)) {
      throw new ServiceError('invalid_input', 'The body must be a JSON object (QueryRequest)', {
        details: { issues: [{ path: '', message: 'expected a JSON object' }] },
      });
    }
    const parsed = QueryRequest.safeParse(body);
    if (!parsed.success) {
      const issues = zodIssues(parsed.error);
      throw new ServiceError('invalid_input', `Invalid request: ${issues.map((i) => `${i.path || '(body)'} ${i.message}`).join('; ')}`, {
        param: issues[0]?.path,
        details: { issues },
      });
    }
    return parsed.data;
  }

  checkIdempotencyKey(key: string | string[] | undefined): string | undefined {
    if (key === undefined) return undefined;
    const value = Array.isArray(key) ? key[0] : key;
    if (value === undefined || !IDEMPOTENCY_KEY_PATTERN.test(value) || Array.isArray(key)) {
      throw new ServiceError('invalid_input', 'Idempotency-Key must be 1 to 255 printable ASCII characters without spaces', {
        param: 'Idempotency-Key',
        details: { issues: [{ path: 'Idempotency-Key', message: 'must match ^[!-~]+$ and be at most 255 characters' }] },
      });
    }
    return value;
  }

  /** Resolve api/operation/version for the organization and check the input against the version's input_schema. */
  async resolve(orgId: string, q: QueryRequest): Promise<ResolvedOperation> {
    if (q.prompt !== undefined) {
      throw new ServiceError('feature_unavailable', 'Prompt mode is not available on this deployment yet; send api, operation and input (direct mode)', {
        param: 'prompt',
      });
    }
    let res;
    try {
      res = await resolveOperation(this.deps.db, orgId, { api: q.api!, operation: q.operation!, version: q.version, visibility: q.visibility });
    } catch {
      throw new ServiceError('catalog_unavailable', 'The catalog cannot be read right now', { headers: { 'retry-after': '5' } });
    }
    if (!res.ok) {
      if (res.code === 'unknown_api_slug')
        throw new ServiceError('unknown_api_slug', `No workflow ${q.api} is available to this organization`, { param: 'api' });
      if (res.code === 'unknown_operation')
        throw new ServiceError('unknown_operation', `${q.api} has no operation named ${q.operation}; see GET /v1/catalog/detail?api=${q.api}`, {
          param: 'operation',
        });
      throw new ServiceError('workflow_version_unavailable', `Version ${q.version} of ${q.api} ${q.operation} is not available`, {
        param: 'version',
        details: { available_versions: res.available },
      });
    }
    const op = res.op;
    this.checkInput(op, q.input);
    this.checkResponse(op, q.response);
    await this.checkAccess(orgId, op);
    return op;
  }

  /**
   * Connected accounts and access keys, before anything is dispatched or reserved (no charge, no
   * request row). Always the calling organization's connections: a public workflow never uses its
   * creator's. Missing → access_required; needing sign-in → auth_required; disconnected → auth_revoked.
   */
  private async checkAccess(orgId: string, op: ResolvedOperation) {
    if (!op.access?.length) return;
    let items: AccessItem[];
    try {
      items = await checkAccess(this.deps.db, orgId, op.access);
    } catch {
      throw new ServiceError('admission_unavailable', 'Connected accounts cannot be checked right now', { headers: { 'retry-after': '5' } });
    }
    const code = accessFailureCode(items);
    if (!code) return;
    const base = this.deps.baseUrl();
    const access = items.map((i) => ({
      ...i,
      add_url: `${base}/console/connections/new?${new URLSearchParams({ kind: i.kind, name: i.name, site: i.site })}`,
    }));
    const names = (status: string) => items.filter((i) => i.status === status).map((i) => `${i.name} (${i.site})`).join(', ');
    const message =
      code === 'access_required'
        ? `${op.handle} ${op.operation} needs the organization's ${names('missing')}; add it and retry. Nothing was charged`
        : code === 'auth_required'
          ? `The connected ${names('needs_reauth')} must sign in again; nothing was charged`
          : `The connected ${names('revoked')} was disconnected; connect it again. Nothing was charged`;
    throw new ServiceError(code, message, { details: { access } });
  }

  private checkInput(op: ResolvedOperation, input: unknown) {
    const key = `${op.operationId}@${op.version}`;
    let validate = this.inputValidators.get(key);
    if (!validate) {
      validate = this.ajv.compile(op.inputSchema);
      this.inputValidators.set(key, validate);
    }
    if (validate(input)) return;
    const issues = (validate.errors ?? []).map((e) => {
      const base = ['input', ...e.instancePath.split('/').filter(Boolean)];
      if (e.keyword === 'additionalProperties') base.push(String((e.params as { additionalProperty: string }).additionalProperty));
      if (e.keyword === 'required') base.push(String((e.params as { missingProperty: string }).missingProperty));
      return { path: base.join('.'), message: e.message ?? 'invalid', code: e.keyword };
    });
    throw new ServiceError('invalid_provider_input', `The input does not satisfy ${op.handle} ${op.operation} v${op.version}: ${issues.map((i) => `${i.path} ${i.message}`).join('; ')}`, {
      param: issues[0]?.path ?? 'input',
      details: { issues },
    });
  }

  private checkResponse(op: ResolvedOperation, response: ResponseSpec | undefined) {
    const field = response?.include ? 'include' : response?.exclude ? 'exclude' : undefined;
    if (!field) return;
    const bad = unknownFieldPaths(response![field]!, op.outputSchema);
    if (bad.length === 0) return;
    const issues = bad.map((b) => ({ path: `response.${field}.${b.index}`, message: `"${b.path}" is not a selectable field of ${op.handle} ${op.operation}` }));
    throw new ServiceError('invalid_input', issues.map((i) => i.message).join('; '), { param: issues[0]!.path, details: { issues } });
  }

  /** Plan limits: running slots, unresolved keyed requests, and the per-minute window for headers. */
  async admit(orgId: string, keyed: boolean, enforce = true): Promise<RateInfo> {
    const { PLAN_CONCURRENCY, PLAN_UNRESOLVED_KEYED, PLAN_REQUESTS_PER_MINUTE } = this.deps.config;
    let row;
    try {
      const r = await this.deps.db.query(
        `SELECT count(*) FILTER (WHERE status IN ('reserving', 'processing', 'refund_pending'))::int AS running,
                count(*) FILTER (WHERE status IN ('reserving', 'processing', 'refund_pending') AND idempotency_key_hash IS NOT NULL)::int AS unresolved,
                count(*) FILTER (WHERE created_at > now() - interval '60 seconds')::int AS last_minute,
                min(created_at) FILTER (WHERE created_at > now() - interval '60 seconds') AS oldest
           FROM requests
          WHERE org_id = $1 AND (status IN ('reserving', 'processing', 'refund_pending') OR created_at > now() - interval '60 seconds')`,
        [orgId],
      );
      row = r.rows[0];
    } catch {
      throw new ServiceError('admission_unavailable', 'Requests cannot be admitted right now', { headers: { 'retry-after': '5' } });
    }
    const reset = Math.ceil(((row.oldest ? (row.oldest as Date).getTime() : Date.now()) + 60_000) / 1000);
    const rate: RateInfo = { limit: PLAN_REQUESTS_PER_MINUTE, remaining: Math.max(0, PLAN_REQUESTS_PER_MINUTE - row.last_minute - 1), reset };
    const headers = rateHeaders(rate);
    if (!enforce) return rate;
    if (row.last_minute >= PLAN_REQUESTS_PER_MINUTE) {
      throw new ServiceError('rate_limited', `The plan allows ${PLAN_REQUESTS_PER_MINUTE} requests per minute`, {
        headers: { ...headers, 'x-ratelimit-remaining': '0', 'retry-after': String(Math.max(1, reset - Math.floor(Date.now() / 1000))) },
      });
    }
    if (row.running >= PLAN_CONCURRENCY) {
      throw new ServiceError('organization_concurrency_limit', `The plan allows ${PLAN_CONCURRENCY} requests running at once`, {
        headers: { ...headers, 'retry-after': '1' },
      });
    }
    if (keyed && row.unresolved >= PLAN_UNRESOLVED_KEYED) {
      throw new ServiceError('unresolved_query_limit', `${row.unresolved} keyed requests are unresolved; check them with GET /v1/query/requests/{request_id} first`, {
        headers,
      });
    }
    return rate;
  }

  /**
   * Claim (when keyed) and dispatch. Idempotency, row by row of the spec's table:
   * replay a finished request; 409 while it runs; 409 on a different body; 409 for a stale claim.
   */
  async submit(orgId: string, q: QueryRequest, op: ResolvedOperation, idempotencyKey: string | undefined): Promise<Submission> {
    const stream = q.stream === true;
    const { stream: _ignored, ...identity } = q;
    const fingerprint = sha256Hex(canonicalJson(identity));
    const keyHash = idempotencyKey ? sha256Hex(idempotencyKey) : null;

    for (let attempt = 0; attempt < 3; attempt++) {
      if (keyHash) {
        const existing = await this.findByKey(orgId, keyHash);
        if (existing) {
          const outcome = await this.existingOutcome(existing, fingerprint);
          if (outcome) return { ...outcome, stream, rate: await this.admit(orgId, true, false) };
          continue; // the old claim expired and was released: claim afresh
        }
      }
      const rate = await this.admit(orgId, keyHash !== null);
      const requestId = newRequestId();
      const workflowId = queryWorkflowId(orgId, requestId, keyHash);
      const ins = await this.deps.db.query(
        `INSERT INTO requests (id, org_id, idempotency_key_hash, fingerprint, workflow_id, api, operation, operation_id, version,
                               performs_actions, is_public_api, status)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, 'reserving')
         ON CONFLICT DO NOTHING RETURNING *`,
        [requestId, orgId, keyHash, keyHash ? fingerprint : null, workflowId, op.handle, op.operation, op.operationId, op.version, op.performsActions, op.visibility === 'public'],
      );
      if (ins.rowCount === 0) continue; // a concurrent identical request claimed the key first
      const request = ins.rows[0] as RequestRow;
      await this.dispatch(request, workflowId, orgId, q, op);
      return { kind: 'started', request, workflowId, stream, op, rate };
    }
    throw new ServiceError('request_in_progress', 'The original request is still running; retry with the same key', {
      headers: { 'retry-after': '1' },
    });
  }

  private async dispatch(request: RequestRow, workflowId: string, orgId: string, q: QueryRequest, op: ResolvedOperation) {
    const input: QueryWorkflowInput = {
      requestId: request.id,
      orgId,
      api: op.handle,
      operation: op.operation,
      operationId: op.operationId,
      version: op.version,
      input: q.input as Record<string, unknown>,
      costCredits: op.costCredits,
      performsActions: op.performsActions,
      actionsReplaySafe: op.performsActions && actionsReplaySafe(op.recipe),
      response: q.response,
      apiReference: { api: op.handle, name: op.apiName, logo_url: op.logoSha256 ? `${this.deps.baseUrl()}/v1/icons/${op.logoSha256}` : null, category: op.category },
      deadlineAt: request.created_at.getTime() + this.deps.config.QUERY_DEADLINE_MS,
      retentionMs: this.deps.config.RESULT_RETENTION_HOURS * 3_600_000,
      heartbeatTimeoutMs: this.deps.config.EXECUTE_HEARTBEAT_TIMEOUT_MS,
      baseUrl: this.deps.baseUrl(),
    };
    try {
      const client = await this.deps.temporal();
      await client.workflow.start(QUERY_WORKFLOW_TYPE, {
        taskQueue: this.deps.config.TEMPORAL_TASK_QUEUE,
        workflowId,
        args: [input],
        // Only the database claim decides whether a key may run again (after its retention);
        // Temporal never runs two workflows of one id at once.
        workflowIdReusePolicy: WorkflowIdReusePolicy.ALLOW_DUPLICATE,
        workflowIdConflictPolicy: WorkflowIdConflictPolicy.FAIL,
      });
    } catch (err) {
      // Nothing was dispatched: free the claim so a retry can run, and say the engine is down.
      await this.deps.db.query('DELETE FROM requests WHERE id = $1 AND result IS NULL', [request.id]).catch(() => {});
      throw new ServiceError('engine_unavailable', 'Workflows cannot be started right now; nothing was charged', {
        headers: { 'retry-after': '5' },
        details: { reason: err instanceof Error ? err.name : 'unknown' },
      });
    }
  }

  private async findByKey(orgId: string, keyHash: string): Promise<RequestRow | undefined> {
    const r = await this.deps.db.query('SELECT * FROM requests WHERE org_id = $1 AND idempotency_key_hash = $2', [orgId, keyHash]);
    return r.rows[0];
  }

  /** What a keyed retry gets for an existing claim; undefined when the claim expired and was released. */
  private async existingOutcome(existing: RequestRow, fingerprint: string): Promise<Omit<Extract<Submission, { kind: 'replay' }>, 'stream' | 'rate'> | undefined> {
    if (existing.result && existing.result_expires_at && existing.result_expires_at.getTime() <= Date.now()) {
      await this.deps.db.query('UPDATE requests SET idempotency_key_hash = NULL WHERE id = $1', [existing.id]);
      return undefined;
    }
    if (existing.fingerprint !== fingerprint) {
      throw new ServiceError('idempotency_key_conflict', 'This Idempotency-Key was already used with a different request body', {
        param: 'Idempotency-Key',
      });
    }
    if (existing.result) return { kind: 'replay', request: existing, envelope: { status: existing.response_status!, body: existing.result } };
    if (existing.status === 'interrupted') throw interrupted(existing);

    const state = await this.workflowState(existing.workflow_id);
    if (state === 'running') throw inProgress(existing);
    // Closed or missing: the envelope may have landed between our reads.
    const fresh = (await this.deps.db.query('SELECT * FROM requests WHERE id = $1', [existing.id])).rows[0] as RequestRow;
    if (fresh.result) return { kind: 'replay', request: fresh, envelope: { status: fresh.response_status!, body: fresh.result } };
    if (state === 'missing' && Date.now() - existing.created_at.getTime() < this.deps.config.STALE_CLAIM_MS) throw inProgress(existing);
    // A stale claim: the original stopped unfinished. It is never dispatched again.
    await this.markInterrupted(existing.org_id, existing.id, state === 'closed');
    throw interrupted(existing);
  }

  /** Record a run that ended without an envelope; a reservation it left behind goes back. */
  private async markInterrupted(orgId: string, requestId: string, workflowClosed: boolean) {
    if (workflowClosed) await release(this.deps.db, orgId, requestId);
    await this.deps.db.query(
      `UPDATE requests SET status = 'interrupted', error_code = 'request_interrupted', updated_at = now() WHERE id = $1 AND result IS NULL`,
      [requestId],
    );
  }

  private async workflowState(workflowId: string): Promise<'running' | 'closed' | 'missing'> {
    try {
      const client = await this.deps.temporal();
      const d = await client.workflow.getHandle(workflowId).describe();
      return d.status.name === 'RUNNING' ? 'running' : 'closed';
    } catch (err) {
      if (err instanceof WorkflowNotFoundError) return 'missing';
      throw new ServiceError('engine_unavailable', 'The state of the original request cannot be checked right now', { headers: { 'retry-after': '5' } });
    }
  }

  /** Wait for the terminal envelope; null when it is not there within `timeoutMs`. */
  async awaitResult(workflowId: string, requestId: string, timeoutMs: number): Promise<TerminalEnvelope | null> {
    const client = await this.deps.temporal();
    const handle: WorkflowHandle = client.workflow.getHandle(workflowId);
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<null>((resolve) => {
      timer = setTimeout(() => resolve(null), timeoutMs);
    });
    try {
      const result = await Promise.race([handle.result() as Promise<TerminalEnvelope>, timeout]);
      return result;
    } catch {
      // The workflow ended without an envelope (terminated, or history unavailable): read the record.
      const r = await this.deps.db.query('SELECT org_id, workflow_id, response_status, result FROM requests WHERE id = $1', [requestId]);
      const row = r.rows[0];
      if (row?.result) return { status: row.response_status, body: row.result };
      if (row && (await this.workflowState(row.workflow_id).catch(() => 'running')) === 'closed') await this.markInterrupted(row.org_id, requestId, true);
      return {
        status: 500,
        body: errorEnvelope('response_delivery_failed', { requestId, baseUrl: this.deps.baseUrl(), message: 'The workflow ended but its result could not be delivered; check the request status' }) as unknown as Record<string, unknown>,
      };
    } finally {
      clearTimeout(timer);
    }
  }

  async progress(workflowId: string): Promise<Progress | null> {
    try {
      const client = await this.deps.temporal();
      return await client.workflow.getHandle(workflowId).query(progressQuery);
    } catch {
      return null;
    }
  }

  /** The overall deadline left for a request accepted at `createdAt`. */
  remainingMs(createdAt: Date): number {
    return createdAt.getTime() + this.deps.config.QUERY_DEADLINE_MS - Date.now();
  }
}

function inProgress(r: RequestRow): ServiceError {
  return new ServiceError('request_in_progress', 'The original request is still running; retry with the same key after Retry-After', {
    headers: { 'retry-after': '2', location: `/v1/query/requests/${r.id}` },
    requestId: r.id,
  });
}

function interrupted(r: RequestRow): ServiceError {
  return new ServiceError('request_interrupted', 'The original request stopped unfinished and will not run again under this key; use a new key', {
    requestId: r.id,
    headers: { location: `/v1/query/requests/${r.id}` },
  });
}

export function rateHeaders(rate: RateInfo): Record<string, string> {
  return {
    'x-ratelimit-limit': String(rate.limit),
    'x-ratelimit-remaining': String(rate.remaining),
    'x-ratelimit-reset': String(rate.reset),
  };
}
