// A query's receipt and success envelope. The workflow builds them, and so does the fused read-only
// step (activities/read-query.ts), from these same functions: both write the same answer.
import type { Finalize } from '../activities/types.ts';
import type { ResponseSpec } from './schemas/query.ts';
import type { Receipt, ReceiptBillingStatus } from './workflow-contract.ts';

/** What a success envelope is made of; all of it from the workflow's input. */
export interface SuccessInput {
  requestId: string;
  api: string;
  operation: string;
  costCredits: number;
  retentionMs: number;
  response?: ResponseSpec;
}

export function receiptOf(s: Pick<SuccessInput, 'requestId' | 'api' | 'operation'>, reserved: number, status: ReceiptBillingStatus, charged: number | null): Receipt {
  return { request_id: s.requestId, api: s.api, operation: s.operation, billing: { status, reserved_credits: reserved, charged_credits: charged } };
}

/** The settled 200 of a query that ran: the price, never more than was reserved. */
export function successFinalize(s: SuccessInput, reserved: number, shapedOutput: unknown): Finalize {
  const charge = Math.min(s.costCredits, reserved);
  return {
    requestId: s.requestId,
    status: 'succeeded',
    errorCode: null,
    retentionMs: s.retentionMs,
    envelope: { status: 200, body: { success: true, data: { output: shapedOutput, receipt: receiptOf(s, reserved, 'settled', charge) } } },
  };
}
