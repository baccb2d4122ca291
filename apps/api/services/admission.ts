// Plan limits, decided atomically per organization: the counts and the new claim happen in one
// statement holding the organization's admission lock (admission_state, migration 1700000003000),
// so a burst can never overshoot the plan's concurrency, per-minute or unresolved-key limits. The
// lock is per organization: one organization never waits for another.
import { ServiceError } from '../../../shared/errors.ts';
import { tx, type Db } from '../../../shared/db/pool.ts';
import { admissionState, admitClaim, countCall, uncountCall, type AdmissionState, type ClaimFields, type PlanLimits, type RequestRow } from '../../../shared/db/requests.ts';
import type { Config } from '../../../shared/config.ts';

export interface RateInfo {
  limit: number;
  remaining: number;
  reset: number;
}

export function rateHeaders(rate: RateInfo): Record<string, string> {
  return {
    'x-ratelimit-limit': String(rate.limit),
    'x-ratelimit-remaining': String(rate.remaining),
    'x-ratelimit-reset': String(rate.reset),
  };
}

type Limits = Pick<Config, 'PLAN_CONCURRENCY' | 'PLAN_UNRESOLVED_KEYED' | 'PLAN_REQUESTS_PER_MINUTE'>;

export class Admission {
  constructor(private readonly deps: { db: Db; config: Limits }) {}

  private get limits(): PlanLimits {
    const { PLAN_CONCURRENCY, PLAN_UNRESOLVED_KEYED, PLAN_REQUESTS_PER_MINUTE } = this.deps.config;
    return { requestsPerMinute: PLAN_REQUESTS_PER_MINUTE, concurrency: PLAN_CONCURRENCY, unresolvedKeyed: PLAN_UNRESOLVED_KEYED };
  }

  /** The rate headers without admitting anything (replays, which are not new work). */
  async peek(orgId: string): Promise<RateInfo> {
    return this.guard(async () => this.rate(await admissionState(this.deps.db, orgId, this.limits, { keyed: false, lock: false }), false));
  }

  /**
   * A prompt about to be routed (embeddings, perhaps a model: work before any claim): checked and
   * counted in the minute as one step under the organization's lock, so prompts sent at once can
   * never all pass a check none of them has been counted in yet. Returns the second it was counted
   * in: a prompt that goes on to claim hands it to admitAndClaim (its row is counted instead), one
   * refused after routing stays counted (refusals are free of credits, not of limits).
   */
  async admitRouting(orgId: string): Promise<{ rate: RateInfo; counted: number }> {
    return this.guard(() =>
      tx(this.deps.db, async (c) => {
        const rate = this.admit(await admissionState(c, orgId, this.limits, { keyed: false, lock: true }));
        return { rate, counted: await countCall(c, orgId) };
      }),
    );
  }

  /**
   * Count and claim as one step under the organization's lock. `request` is undefined when the
   * organization already holds the claim's Idempotency-Key (a concurrent identical request won).
   * The common case is one statement (one round trip). `counted`: the second admitRouting counted
   * this call in; the claim's row is counted in its place (taken back in the same transaction), so
   * a routed prompt is one request of the minute.
   */
  async admitAndClaim(fields: ClaimFields, counted?: number): Promise<{ rate: RateInfo; request: RequestRow | undefined }> {
    return this.guard(async () => {
      if (counted === undefined) {
        const { state, request } = await admitClaim(this.deps.db, fields, this.limits);
        return { rate: this.admit(state), request };
      }
      return tx(this.deps.db, async (c) => {
        const { state, request } = await admitClaim(c, fields, this.limits, 1);
        const rate = this.admit(state);
        if (request) await uncountCall(c, fields.orgId, counted);
        return { rate, request };
      });
    });
  }

  /** Take back a prompt's count when it failed on the service's side (a 5xx is not the caller's call). */
  async uncount(orgId: string, counted: number): Promise<void> {
    await this.guard(() => uncountCall(this.deps.db, orgId, counted));
  }

  /** A database failure is admission_unavailable; a limit is its own catalog error. */
  private async guard<T>(fn: () => Promise<T>): Promise<T> {
    try {
      return await fn();
    } catch (err) {
      if (err instanceof ServiceError) throw err;
      throw new ServiceError('admission_unavailable', 'Requests cannot be admitted right now', { headers: { 'retry-after': '5' } });
    }
  }

  /**
   * The organization's plan-minute figures; `admitting`: for a request about to be counted
   * (remaining leaves it out), not for a look at the window (a replay, which is not counted).
   */
  private rate(s: AdmissionState, admitting: boolean): RateInfo {
    const limit = this.deps.config.PLAN_REQUESTS_PER_MINUTE;
    // Counted per whole second: with nothing counted yet, the oldest is the second this request lands in.
    const reset = s.oldest ? Math.ceil((s.oldest.getTime() + 60_000) / 1000) : Math.floor(Date.now() / 1000) + 60;
    return { limit, remaining: Math.max(0, limit - s.lastMinute - (admitting ? 1 : 0)), reset };
  }

  /** The rate of a request being admitted, or the error of the limit that refused it (the rule itself is admission_state's). */
  private admit(s: AdmissionState): RateInfo {
    const { PLAN_CONCURRENCY, PLAN_UNRESOLVED_KEYED, PLAN_REQUESTS_PER_MINUTE } = this.deps.config;
    const rate = this.rate(s, true);
    const headers = rateHeaders(rate);
    switch (s.refusal) {
      case null:
        return rate;
      case 'rate_limited':
        throw new ServiceError('rate_limited', `The plan allows ${PLAN_REQUESTS_PER_MINUTE} requests per minute`, {
          headers: { ...headers, 'x-ratelimit-remaining': '0', 'retry-after': String(Math.max(1, rate.reset - Math.floor(Date.now() / 1000))) },
        });
      case 'organization_concurrency_limit':
        throw new ServiceError('organization_concurrency_limit', `The plan allows ${PLAN_CONCURRENCY} requests running at once`, {
          headers: { ...headers, 'retry-after': '1' },
        });
      case 'unresolved_query_limit':
        // Not retryable as such (resolve the open requests first), but 429 carries Retry-After: when one of them may have ended.
        throw new ServiceError('unresolved_query_limit', `${s.unresolved} keyed requests are unresolved; check them with GET /v1/query/requests/{request_id} first`, {
          headers: { ...headers, 'retry-after': '5' },
        });
      default:
        throw new Error(`admission_state answered an unknown refusal: ${String(s.refusal satisfies never)}`); // admission_unavailable
    }
  }
}
