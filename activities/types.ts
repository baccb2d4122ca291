// Activity signatures, imported by the workflow with `import type` only.
import type { RequestStatusValue } from '../shared/schemas/query.ts';
import type { TerminalEnvelope } from '../shared/workflow-contract.ts';

export type ReserveOutcome = { ok: true; reserved: number } | { ok: false; reason: 'insufficient_credits'; available: number };

export interface BillingActivities {
  reserveCredits(a: { orgId: string; requestId: string; amount: number }): Promise<ReserveOutcome>;
  settleCredits(a: { orgId: string; requestId: string; amount: number }): Promise<{ charged: number }>;
  releaseCredits(a: { orgId: string; requestId: string }): Promise<{ released: number }>;
  markRefundPending(a: { requestId: string }): Promise<void>;
  finalizeRequest(a: {
    requestId: string;
    status: RequestStatusValue;
    envelope: TerminalEnvelope;
    errorCode: string | null;
    retentionMs: number;
  }): Promise<void>;
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
  }): Promise<unknown>;
}

export type QueryActivities = BillingActivities & ExecuteActivities;
