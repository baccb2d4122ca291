// What the API, the worker and the workflow agree on. Workflow-safe: no Node built-ins.
import { defineQuery } from '@temporalio/workflow';
import type { ResponseSpec } from './schemas/query.ts';
import type { ErrorEnvelope } from './errors.ts';

export const QUERY_WORKFLOW_TYPE = 'queryWorkflow';

export interface ApiReference {
  api: string;
  name: string;
  logo_url: string | null;
  category: string;
}

export interface QueryWorkflowInput {
  requestId: string;
  orgId: string;
  api: string;
  operation: string;
  operationId: number;
  version: number;
  input: Record<string, unknown>;
  costCredits: number;
  performsActions: boolean;
  /** Every action step carries the query's reference, so a lost attempt may run again safely. */
  actionsReplaySafe: boolean;
  response?: ResponseSpec;
  apiReference: ApiReference;
  /** Epoch ms after which the query answers execution_timeout; fixed when the API accepted it. */
  deadlineAt: number;
  /** Terminal envelopes are retained this long. */
  retentionMs: number;
  /** Heartbeat timeout of the execute activity: how fast a dead worker's task moves elsewhere. */
  heartbeatTimeoutMs: number;
  /** Public base URL, for doc_url links in error envelopes. */
  baseUrl: string;
  /** The recipe's engine. Absent in runs started before it was sent (they keep the old path). */
  engine?: 'http' | 'browser';
  /** Task queue of browser execute activities; absent: the workflow's own queue. */
  browserTaskQueue?: string;
}

/**
 * An action's execute step begins its work on the website at least this long before the query's
 * deadline, or never: a task no worker took by then times out on the server (SCHEDULE_TO_START),
 * and a worker refuses to begin later (its wait for a browser page gives up then). Either way the
 * action certainly did not happen, and the answer is execution_timeout, not action_unconfirmed. The
 * margin is what lets the worker's refusal reach the server before the server's own timeout at the
 * deadline, which could only report an attempt whose outcome is unknown.
 */
export const ACTION_START_MARGIN_MS = 3_000;

/** The message of an action that never began (the server's timeout and the worker's refusal say the same). */
export const ACTION_NOT_STARTED_MESSAGE = "The action did not start within the query's deadline; nothing was done on the website";

export type Stage = 'accepted' | 'preparing' | 'executing' | 'formatting' | 'settling' | 'done';

export interface Progress {
  seq: number;
  stage: Stage;
  message: string;
  api_reference?: ApiReference;
  /** Set once the workflow has its terminal envelope. */
  terminal?: TerminalEnvelope;
}

export type ReceiptBillingStatus = 'not_started' | 'pending' | 'settled' | 'released';

/** What a query cost: in every result and in every error after the request was accepted. */
export interface Receipt {
  request_id: string;
  api: string;
  operation: string;
  billing: { status: ReceiptBillingStatus; reserved_credits: number; charged_credits: number | null };
}

/** The body of a successful query (spec: QueryResult). */
export interface QueryResult {
  success: true;
  data: { output: unknown; receipt: Receipt };
}

/** The HTTP answer of a finished query: what is retained and replayed. */
export interface TerminalEnvelope {
  status: number;
  body: QueryResult | ErrorEnvelope;
}

export const progressQuery = defineQuery<Progress>('progress');
