// Stub activities of the query workflow, for runs of the real workflow code on the real Temporal
// server where the workflow is the unit: each stub records its call (by request id) and does what
// the run's scenario says, or the ordinary successful thing. Used by test/query-workflow.test.ts and
// by scripts/record-histories.ts (the saga's branches a real stack cannot produce on demand).
import type { BillingActivities, ExecuteActivities, Finalize, ReadQueryActivities, ReserveOutcome, WriteOutcome } from '../../activities/types.ts';
import { createReadQueryActivity } from '../../activities/read-query.ts';
import { newRequestId } from '../../shared/ids.ts';
import type { QueryWorkflowInput } from '../../shared/workflow-contract.ts';

export type Stubs = BillingActivities & ExecuteActivities & ReadQueryActivities;
/** The steps a run is told apart by; the fused read-only step is made of them (it records nothing itself). */
type StepName = keyof (BillingActivities & ExecuteActivities);
export interface Call {
  step: StepName;
  args: any;
}

/** How one run's stubs behave; anything left out succeeds the ordinary way. */
export interface Scenario {
  reserve?: (attempt: number) => Promise<ReserveOutcome>;
  execute?: () => Promise<unknown>;
  finalize?: (f: Finalize) => WriteOutcome;
  settle?: (f: Finalize) => Promise<{ charged: number; finalized: WriteOutcome }>;
  release?: () => Promise<{ released: number }>;
}

// Keyed by request id: every activity carries it, so concurrent or late calls never mix.
export const scenarios = new Map<string, Scenario>();
export const calls = new Map<string, Call[]>();
const record = (requestId: string, step: StepName, args: unknown) => {
  const list = calls.get(requestId) ?? [];
  list.push({ step, args: structuredClone(args) });
  calls.set(requestId, list);
  return scenarios.get(requestId) ?? {};
};

export const OUTPUT = { city: 'London', temperature_c: 11.5, conditions: 'Light rain' };

const steps: BillingActivities & ExecuteActivities = {
  async reserveCredits(a) {
    const s = record(a.requestId, 'reserveCredits', a);
    const attempt = calls.get(a.requestId)!.filter((c) => c.step === 'reserveCredits').length;
    return s.reserve ? s.reserve(attempt) : { ok: true, reserved: a.amount };
  },
  async settleCredits(a) {
    record(a.requestId, 'settleCredits', a);
    return { charged: a.amount };
  },
  async settleAndFinalize(a) {
    const s = record(a.finalize.requestId, 'settleAndFinalize', a);
    return s.settle ? s.settle(a.finalize) : { charged: a.amount, finalized: { moved: true, status: a.finalize.status } };
  },
  async releaseCredits(a) {
    const s = record(a.requestId, 'releaseCredits', a);
    return s.release ? s.release() : { released: COST };
  },
  async markRefundPending(a) {
    record(a.requestId, 'markRefundPending', a);
    return { moved: true, status: 'refund_pending' };
  },
  async finalizeRequest(a) {
    const s = record(a.requestId, 'finalizeRequest', a);
    return s.finalize ? s.finalize(a) : { moved: true, status: a.status };
  },
  async executeOperation(a) {
    const s = record(a.requestId, 'executeOperation', a);
    return s.execute ? s.execute() : OUTPUT;
  },
};

/** The stub steps, and the fused read-only step composed of them exactly as the worker composes the real ones. */
export const stubs: Stubs = { ...steps, ...createReadQueryActivity(steps) };

export const COST = 2;
export const BASE_URL = 'https://wqs.example.test';
export const ORG = 'org_0123456789abcdef01234567';

export function sagaInput(over: Partial<QueryWorkflowInput> = {}): QueryWorkflowInput {
  return {
    requestId: newRequestId(),
    orgId: ORG,
    api: '@weather',
    operation: 'current_weather',
    operationId: 7,
    version: 3,
    input: { city: 'London' },
    costCredits: COST,
    performsActions: false,
    actionsReplaySafe: false,
    apiReference: { api: '@weather', name: 'Weather', logo_url: null, category: 'weather' },
    deadlineAt: Date.now() + 60_000,
    retentionMs: 3_600_000,
    heartbeatTimeoutMs: 30_000,
    baseUrl: BASE_URL,
    ...over,
  };
}
