// The facade of one query's path: validation, resolution and input checks live here; admission,
// idempotency, dispatch and run watching are modules of their own beside it.
// REST (POST /v1/query), SSE and MCP all go through here, so they bill and replay alike.
import type { ErrorObject, ValidateFunction } from 'ajv/dist/2020.js';
import type { Client } from '@temporalio/client';
import { canonicalJson, newRequestId, queryWorkflowId, sha256Hex, IDEMPOTENCY_KEY_PATTERN } from '../../../shared/ids.ts';
import { ERRORS, ServiceError } from '../../../shared/errors.ts';
import { QueryRequest, type ResponseSpec } from '../../../shared/schemas/query.ts';
import { zodIssues } from '../../../shared/schemas/common.ts';
import { resolveOperation, type ResolvedOperation } from '../../../shared/db/catalog.ts';
import { findByKey, type RequestRow } from '../../../shared/db/requests.ts';
import { accessFailureCode, addConnectionPath, checkAccess, type AccessItem } from '../../../shared/db/connections.ts';
import { unknownFieldPaths } from '../../../shared/format/shape.ts';
import { parsePointer } from '../../../shared/format/pointer.ts';
import type { Db } from '../../../shared/db/pool.ts';
import type { Config } from '../../../shared/config.ts';
import type { LocalResults } from '../../../shared/local-results.ts';
import type { Progress, TerminalEnvelope } from '../../../shared/workflow-contract.ts';
import { Admission, rateHeaders, type RateInfo } from './admission.ts';
import { Dispatch } from './dispatch.ts';
import { Idempotency } from './idempotency.ts';
import { RunWatch } from './run-watch.ts';
import { PROMPT_SEARCH_CREDITS, PromptRouting, type PromptPlan, type RouterSource } from './prompt-routing.ts';
import { KeyedSlots } from './slots.ts';
import type { LlmRouter } from '../../../shared/router/llm.ts';
import { compileOrgSchema } from '../../../shared/org-schemas.ts';

export { rateHeaders, type RateInfo, type RequestRow };

/**
 * What a query runs: in prompt mode, the routed operation with the plan routing made for it and
 * the second its call was counted in when it was admitted to routing.
 */
export type Resolved = ResolvedOperation & { prompt?: PromptPlan & { counted: number } };

/** A keyed request's retained answer. */
export type Replay = { kind: 'replay'; request: RequestRow; envelope: TerminalEnvelope; stream: boolean; rate: RateInfo };
/** A claimed request and its workflow's id. */
export type Run = { request: RequestRow; workflowId: string; stream: boolean; op: ResolvedOperation; rate: RateInfo };

export type Submission = Replay | ({ kind: 'started' } & Run);
/**
 * A claim whose workflow is not started yet: `start` starts it (once), or throws
 * engine_unavailable having interrupted the claim (dispatch.ts). A stream says `accepted` between
 * the two, so its first event does not wait for Temporal.
 */
export type Claim = Replay | ({ kind: 'claimed'; start: () => Promise<void> } & Run);

export class QueryService {
  /** Per operation version (immutable): compiled once; an organization's `$id` is never registered (shared/org-schemas.ts). */
  private readonly inputValidators = new Map<string, ValidateFunction>();

  private readonly admission: Admission;
  private readonly watch: RunWatch;
  private readonly idempotency: Idempotency;
  private readonly dispatch: Dispatch;
  private readonly prompts: PromptRouting;
  /** Prompts being routed, per organization (PROMPT_ROUTINGS_PER_ORG). */
  private readonly routing: KeyedSlots;

  constructor(
    private readonly deps: { db: Db; temporal: () => Promise<Client>; config: Config; baseUrl: () => string; router?: RouterSource; llm?: LlmRouter; eagerStart?: boolean; localResults?: LocalResults },
  ) {
    this.prompts = new PromptRouting({ db: deps.db, router: deps.router, llm: deps.llm, maxInputBytes: deps.config.MAX_WORKFLOW_INPUT_BYTES });
    this.routing = new KeyedSlots(deps.config.PROMPT_ROUTINGS_PER_ORG);
    this.admission = new Admission({ db: deps.db, config: deps.config });
    this.watch = new RunWatch(deps);
    this.idempotency = new Idempotency({ db: deps.db, watch: this.watch, staleClaimMs: deps.config.STALE_CLAIM_MS });
    this.dispatch = new Dispatch({ ...deps, watch: this.watch });
  }

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
        // An issue about the body as a whole (path '') names no field: no param.
        param: issues[0]?.path || undefined,
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

  /**
   * Resolve api/operation/version for the organization and check the input against the version's
   * input_schema. In prompt mode the router chooses the operation and fills the input, which then
   * meets the same checks as a direct query's.
   */
  async resolve(orgId: string, q: QueryRequest): Promise<Resolved> {
    if (q.prompt !== undefined) {
      // Routing costs work whether or not anything runs (embeddings, perhaps a model), so a prompt
      // meets the plan's limits and is counted in the minute before it is routed, in one step (a
      // burst of prompts cannot all pass a check none of them is counted in yet). One refused after
      // routing (unroutable, an input missing or invalid) stays counted: refusals are free of
      // credits, not of limits. A failure on the service's side gives its count back.
      // At most PROMPT_ROUTINGS_PER_ORG of one organization's prompts are routed at once here; one
      // more waits its turn, then is refused before it is counted.
      return this.routing.run(
        orgId,
        this.deps.config.PROMPT_ROUTING_WAIT_MS,
        async () => {
          const { counted } = await this.admission.admitRouting(orgId);
          try {
            const { op, plan } = await this.prompts.plan(orgId, q);
            this.checkInput(op, plan.input);
            this.checkResponse(op, q.response);
            await this.checkAccess(orgId, op);
            return { ...op, prompt: { ...plan, counted } };
          } catch (err) {
            if (!(err instanceof ServiceError) || ERRORS[err.code].status >= 500) await this.admission.uncount(orgId, counted).catch(() => undefined);
            throw err;
          }
        },
        () => {
          const perOrg = this.deps.config.PROMPT_ROUTINGS_PER_ORG;
          return new ServiceError('organization_concurrency_limit', `The organization has ${perOrg} prompts being routed on this server; send this one again after Retry-After`, {
            headers: { 'retry-after': '1' },
            details: { prompts_routing: perOrg },
          });
        },
      );
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
      add_url: `${base}${addConnectionPath(i)}`,
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
      validate = compileOrgSchema(op.inputSchema);
      this.inputValidators.set(key, validate);
    }
    if (validate(input)) return;
    const issues = (validate.errors ?? []).map((e) => ({ path: inputIssuePath(e), message: e.message ?? 'invalid', code: e.keyword }));
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

  /** The organization's plan-minute figures (X-RateLimit-*), as a refusal of this route carries them. */
  rate(orgId: string): Promise<RateInfo> {
    return this.admission.peek(orgId);
  }

  /**
   * A keyed request meets its key before it is resolved or routed: the same key and body replay
   * what ran (even if the catalog, the input schema or the organization's connections changed
   * since, so that resolving it now would fail, or a prompt would route elsewhere or not at all),
   * and a different body is idempotency_key_conflict rather than whatever resolving it would say;
   * a retry while the original runs is request_in_progress. Null: nothing retained under the key,
   * go on (resolve or route, then submit).
   */
  async meetKey(orgId: string, q: QueryRequest, idempotencyKey: string | undefined): Promise<Replay | null> {
    if (!idempotencyKey) return null;
    const fingerprint = fingerprintOf(q);
    const existing = await findByKey(this.deps.db, orgId, sha256Hex(idempotencyKey), fingerprint);
    if (!existing) return null;
    const outcome = await this.idempotency.existing(existing, fingerprint);
    if (outcome.kind !== 'replay') return null;
    return { ...outcome, stream: q.stream === true, rate: await this.admission.peek(orgId) };
  }

  /** Claim and start the workflow (see `claim`). */
  async submit(orgId: string, q: QueryRequest, resolved: Resolved, idempotencyKey: string | undefined): Promise<Submission> {
    const c = await this.claim(orgId, q, resolved, idempotencyKey);
    if (c.kind === 'replay') return c;
    await c.start();
    const { start: _, ...run } = c;
    return { ...run, kind: 'started' };
  }

  /**
   * Claim (when keyed) and return the start of its workflow; admission and the claim are one
   * atomic step per organization. Called after meetKey found nothing to replay; a keyed request
   * meeting a claim made since gets what the idempotency table says.
   */
  async claim(orgId: string, q: QueryRequest, resolved: Resolved, idempotencyKey: string | undefined): Promise<Claim> {
    const stream = q.stream === true;
    const fingerprint = fingerprintOf(q);
    const keyHash = idempotencyKey ? sha256Hex(idempotencyKey) : null;
    const { q: run, op } = runOf(q, resolved);
    this.dispatch.checkSize(orgId, run, op);
    // A routed prompt is in the minute already: its first claim takes that count over.
    const counted = resolved.prompt?.counted;

    for (let attempt = 0; attempt < 3; attempt++) {
      // meetKey has just found nothing under the key, so the first attempt claims at once (a
      // concurrent claim since then makes the claim come back empty, and the next attempt looks).
      if (keyHash && attempt > 0) {
        const existing = await findByKey(this.deps.db, orgId, keyHash, fingerprint);
        if (existing) {
          const outcome = await this.idempotency.existing(existing, fingerprint);
          if (outcome.kind === 'replay') return { ...outcome, stream, rate: await this.admission.peek(orgId) };
          continue; // the old claim expired and was released: claim afresh
        }
      }
      const requestId = newRequestId();
      const workflowId = queryWorkflowId(orgId, requestId, keyHash);
      const { rate, request } = await this.admission.admitAndClaim({
        id: requestId,
        orgId,
        keyHash,
        fingerprint: keyHash ? fingerprint : null,
        workflowId,
        api: op.handle,
        operation: op.operation,
        operationId: op.operationId,
        version: op.version,
        performsActions: op.performsActions,
        isPublicApi: op.visibility === 'public',
        routing: resolved.prompt?.routing,
      }, counted);
      if (!request) continue; // a concurrent identical request claimed the key first (the count stays to hand over)
      let started: Promise<void> | undefined;
      const start = () => (started ??= this.dispatch.start(request, run, op));
      return { kind: 'claimed', request, workflowId, stream, op, rate, start };
    }
    // Three claims lost to concurrent requests with the key: the last one lost to the request that
    // holds the key now. Its answer is the lifecycle table's for that request, as after any lost
    // claim: request_in_progress pointing at it (Location, Retry-After), a replay, a conflict or
    // request_interrupted.
    if (keyHash) {
      const holder = await findByKey(this.deps.db, orgId, keyHash, fingerprint);
      if (holder) {
        const outcome = await this.idempotency.existing(holder, fingerprint);
        if (outcome.kind === 'replay') return { ...outcome, stream, rate: await this.admission.peek(orgId) };
      }
    }
    // The key was freed again since the last lost claim (its holder was rejected with
    // billing_unavailable, or its retained result expired): no request holds it, so there is none
    // to point at and Location is left out. Retrying now claims it afresh.
    throw new ServiceError('request_in_progress', 'The original request is still running; retry with the same key', {
      headers: { 'retry-after': '1' },
    });
  }

  /** Wait for the terminal envelope; null when it is not there within `timeoutMs` or once `left` aborts; throws engine_unavailable. */
  awaitResult(workflowId: string, requestId: string, timeoutMs: number, since?: Date, left?: AbortSignal): Promise<TerminalEnvelope | null> {
    return this.watch.awaitResult(workflowId, requestId, timeoutMs, since, left);
  }

  /** A finished run's envelope as the request row has it (run-watch.ts `confirmed`); throws engine_unavailable. */
  confirmed(requestId: string, env: TerminalEnvelope): Promise<TerminalEnvelope> {
    return this.watch.confirmed(requestId, env);
  }

  /** The result listener (RESULT_WAIT=notify) connects at start-up, not on the first query. */
  startListening(): Promise<void> {
    return this.watch.startListening();
  }

  close(): Promise<void> {
    return this.watch.close();
  }

  progress(workflowId: string): Promise<Progress | null> {
    return this.watch.progress(workflowId);
  }

  /** SSE progress from PostgreSQL notices instead of workflow queries (see RunWatch.watchProgress). */
  watchProgress: RunWatch['watchProgress'] = (requestId, hear) => this.watch.watchProgress(requestId, hear);

  /** The overall deadline of one query, in whole seconds (170 unless configured otherwise). */
  get deadlineSeconds(): number {
    return Math.round(this.deps.config.QUERY_DEADLINE_MS / 1000);
  }

  /** The overall deadline left for a request accepted at `createdAt`. */
  remainingMs(createdAt: Date): number {
    return createdAt.getTime() + this.deps.config.QUERY_DEADLINE_MS - Date.now();
  }
}

/**
 * The dotted path of the input field an ajv error is about: `input`, then the instance pointer's
 * segments unescaped (a key `a/b` is `input.a/b`, never `input.a~1b`), then the property the
 * keyword names when the error is about one property of an object rather than the object
 * (unknown, missing, unevaluated, or a property name that breaks `propertyNames`).
 */
function inputIssuePath(e: ErrorObject): string {
  const segs = parsePointer(e.instancePath) ?? e.instancePath.split('/').filter(Boolean);
  const params = e.params as Record<string, unknown>;
  const named =
    e.keyword === 'additionalProperties' ? params.additionalProperty
    : e.keyword === 'unevaluatedProperties' ? params.unevaluatedProperty
    : e.keyword === 'required' || e.keyword === 'dependentRequired' || e.keyword === 'dependencies' ? params.missingProperty
    : e.keyword === 'propertyNames' ? params.propertyName
    : (e as ErrorObject & { propertyName?: string }).propertyName;
  return ['input', ...segs, ...(named === undefined ? [] : [String(named)])].join('.');
}

/**
 * The body as sent is the request's identity (not `stream`): in prompt mode the prompt, its scope
 * and attachments, never the input routing filled.
 */
function fingerprintOf(q: QueryRequest): string {
  const { stream: _ignored, ...identity } = q;
  return sha256Hex(canonicalJson(identity));
}

/**
 * What the workflow runs. A prompt runs as the direct query routing made of it (the routed
 * operation at its default version, the filled input, the caller's response shaping), and costs
 * the prompt-search fee on top of the operation's price: one reservation and one settlement of the
 * sum, so the fee is charged once with a successful run and released with a failed one.
 */
function runOf(q: QueryRequest, resolved: Resolved): { q: QueryRequest; op: ResolvedOperation } {
  const { prompt, ...op } = resolved;
  if (!prompt) return { q, op };
  return {
    q: { api: op.handle, operation: op.operation, version: op.version, input: prompt.input, response: q.response, stream: q.stream },
    op: { ...op, costCredits: op.costCredits + PROMPT_SEARCH_CREDITS },
  };
}
