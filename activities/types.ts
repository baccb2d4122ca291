// Activity signatures, imported by the workflow (types, and the few workflow-safe values here).
import type { RequestStatusValue } from '../shared/schemas/query.ts';
import type { TerminalEnvelope } from '../shared/workflow-contract.ts';
import type { SuccessInput } from '../shared/query-envelope.ts';

export type ReserveOutcome =
  | { ok: true; reserved: number }
  | { ok: false; reason: 'insufficient_credits'; available: number }
  /** The request left `reserving` (interrupted by the API, or rejected): the run must stop unpaid. */
  | { ok: false; reason: 'request_closed'; status: string };

/** Did a conditional write move the row; `status` is the row's status afterwards. */
export interface WriteOutcome {
  moved: boolean;
  status: string;
}

/**
 * ApplicationFailure types of ledger steps that can never succeed (non-retryable): the workflow
 * handles each instead of retrying for ever.
 */
export const LEDGER_FAILURES = ['no_reservation', 'already_released', 'already_settled'] as const;
export type LedgerFailure = (typeof LEDGER_FAILURES)[number];

export interface Finalize {
  requestId: string;
  status: Extract<RequestStatusValue, 'succeeded' | 'rejected' | 'failed'>;
  envelope: TerminalEnvelope;
  errorCode: string | null;
  retentionMs: number;
  /** Free the Idempotency-Key with the envelope (a retryable answer that ran and charged nothing). */
  freeKey?: boolean;
}

export interface BillingActivities {
  /** Reserves once, and only while the request is `reserving`. */
  reserveCredits(a: { orgId: string; requestId: string; amount: number }): Promise<ReserveOutcome>;
  settleCredits(a: { orgId: string; requestId: string; amount: number }): Promise<{ charged: number }>;
  /** Settle, then write the terminal envelope, in one transaction. */
  settleAndFinalize(a: { orgId: string; amount: number; finalize: Finalize }): Promise<{ charged: number; finalized: WriteOutcome }>;
  releaseCredits(a: { orgId: string; requestId: string }): Promise<{ released: number }>;
  markRefundPending(a: { requestId: string }): Promise<WriteOutcome>;
  /** Writes the terminal envelope once; never over an interrupted request. */
  finalizeRequest(a: Finalize): Promise<WriteOutcome>;
}

export interface ExecuteActivities {
  /** Runs the operation version's recipe on its site; output validated against output_schema. */
  executeOperation(a: {
    requestId: string;
    orgId: string;
    operationId: number;
    version: number;
    input: Record<string, unknown>;
    deadlineAt: number;
    /**
     * Actions only (a normal activity): epoch ms after which the step must not begin its work on the
     * website (ACTION_START_MARGIN_MS before the deadline). Absent for read-only steps and in runs
     * started before it was sent: no such bound then.
     */
    startBy?: number;
    /**
     * What the API resolved for this version: false means the workflow runs it as read-only
     * (retried, perhaps as a local step). Absent in runs started before it was sent.
     */
    performsActions?: boolean;
  }): Promise<unknown>;
}

/**
 * Health of an operation, as stored in operations.health_status and shown in the catalog:
 * `unknown` never checked; `healthy` every verified example of the default version returned its
 * documented output; `degraded` some did; `failing` none did; `unverifiable` not checked
 * automatically (performs actions, needs a connection, or has no examples).
 */
export type HealthStatus = 'unknown' | 'healthy' | 'degraded' | 'failing' | 'unverifiable';

/** One operation the health check looks at: its default version and whether it may be run. */
export interface HealthTarget {
  operationId: number;
  api: string;
  operation: string;
  version: number;
  exampleTitles: string[];
  /** Why the examples are not run (performs actions, needs a connection, no examples); null when they are. */
  skipReason: string | null;
  /** The recipe's engine: a browser operation's examples run on the browser task queue. Absent in
   *  targets listed before this field (recorded histories replay on the main queue, as they ran). */
  engine?: 'http' | 'browser';
}

export interface HealthExampleResult {
  ok: boolean;
  /** Error code of a failed run, or `output_mismatch`. */
  code?: string;
  detail?: string;
  ms: number;
}

export interface HealthActivities {
  /**
   * Operations of active, available APIs with their default version, least recently checked first;
   * with `limit`, at most that many, and with `checkedBefore` (ms), only those not checked since.
   */
  listHealthTargets(a: { apis?: string[]; limit?: number; checkedBefore?: number }): Promise<HealthTarget[]>;
  /**
   * Runs one verified example of a read-only operation and compares its output with the documented
   * one. Site failures are results (ok: false), not errors; retryable ones throw until `attempts`.
   */
  /**
   * `timeoutMs` bounds the run once it reaches the website. With `pageWaitMs`, waiting for a browser
   * page before that is bounded apart, by `pageWaitMs`; without it (runs scheduled before it
   * existed), the wait counts against `timeoutMs`.
   */
  runHealthExample(a: { operationId: number; version: number; index: number; timeoutMs: number; attempts: number; pageWaitMs?: number }): Promise<HealthExampleResult>;
  /**
   * Stores one operation's outcome unless a newer check already did, or `version` (when given) is no
   * longer its default (a check of the version a publish replaced); `verified` also moves verified_at.
   * A null status writes only the check's time and detail: the status stored before stands.
   */
  recordHealth(a: { operationId: number; version?: number; status: HealthStatus | null; detail: string; checkedAt: number; verified: boolean }): Promise<{ recorded: boolean }>;
}

/** Arguments of executeOperation. */
export type ExecuteArgs = Parameters<ExecuteActivities['executeOperation']>[0];

/** A step's failure as the fused step reports it (an ApplicationFailure's fields, or none). */
export interface StepError {
  type: string | null;
  message: string;
  details: unknown[];
  nonRetryable: boolean;
}

/**
 * Where the fused read-only step stopped. Each stop hands the rest of the saga back to the
 * workflow, which goes on with its ordinary steps from there (so every branch keeps one home).
 */
export type ReadQueryOutcome =
  /** Reserving threw (ledger unreachable): nothing is known, the workflow reserves with its own retries. */
  | { stop: 'reserve' }
  /** The reservation was refused (too few credits, request closed). */
  | { stop: 'reserved'; reserve: Extract<ReserveOutcome, { ok: false }> }
  /** Reserved, then the site step failed once. */
  | { stop: 'execute'; reserved: number; error: StepError }
  /** Reserved and executed; shaping or settling did not finish here. */
  | { stop: 'executed'; reserved: number; output: unknown }
  /** Reserved, executed, settled and finalized. */
  | { stop: 'done'; reserved: number; finalize: Finalize; finalized: WriteOutcome };

export interface ReadQueryActivities {
  /**
   * A read-only HTTP query's whole happy path in one local activity: reserve, execute once, shape,
   * settle and finalize, each through the same functions the separate steps use.
   */
  runReadQuery(a: {
    reserve: { orgId: string; requestId: string; amount: number };
    execute: ExecuteArgs;
    /** What the success envelope is built from (shared/query-envelope.ts). */
    success: SuccessInput;
  }): Promise<ReadQueryOutcome>;
}

export type QueryActivities = BillingActivities & ExecuteActivities & ReadQueryActivities;

/** One verified example of a draft definition, as a builder test run executes it. */
export interface DraftExample {
  operation: string;
  index: number;
  title: string;
  recipe: unknown;
  outputSchema: Record<string, unknown>;
  access: Array<{ kind: 'account' | 'access_key'; name: string; site: string }>;
  input: Record<string, unknown>;
  expected: unknown;
  /** The recipe acts on a website. Absent in runs started before it was sent. */
  performsActions?: boolean;
}

/** What a test run shows per example: the output beside the expected one, and the schema check. */
export interface DraftExampleResult {
  operation: string;
  index: number;
  title: string;
  input: Record<string, unknown>;
  expected: unknown;
  /** null when the run failed (see `error`). */
  output: unknown;
  equal: boolean;
  /** null when there was no output to check. */
  schema_ok: boolean | null;
  schema_errors: Array<{ path: string; message: string }>;
  error: { code: string; message: string } | null;
  passed: boolean;
  ms: number;
}

/** An example that produced no output (a failure, or not run): the activity's and the workflow's one shape. Workflow-safe. */
export function failedExample(example: DraftExample, code: string, message: string, ms = 0): DraftExampleResult {
  return {
    operation: example.operation,
    index: example.index,
    title: example.title,
    input: example.input,
    expected: example.expected,
    output: null,
    equal: false,
    schema_ok: null,
    schema_errors: [],
    error: { code, message },
    passed: false,
    ms,
  };
}

export interface BuilderActivities {
  /** Runs one example of a DRAFT recipe with the query engines, guards and the org's own connections. Never throws for a site's failure. */
  runDraftExample(a: { orgId: string; testRunId: string; example: DraftExample }): Promise<DraftExampleResult>;
  /** Stores the test run's outcome (the row publish checks). */
  recordTestRun(a: { testRunId: string; status: 'passed' | 'failed' | 'error'; results: DraftExampleResult[] }): Promise<void>;
}
