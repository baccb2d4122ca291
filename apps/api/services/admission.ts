// Plan limits, decided atomically per organization: the counts and the new claim happen in one
// transaction holding the organization's admission lock, so a burst can never overshoot the plan's
// concurrency, per-minute or unresolved-key limits. The lock is per organization: one organization
// never waits for another.
import { ServiceError } from '../../../shared/errors.ts';
import { tx, type Db, type DbClient } from '../../../shared/db/pool.ts';
import { admissionCounts, countCall, insertClaim, uncountCall, type ClaimFields, type RequestRow } from '../../../shared/db/requests.ts';
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

/** Namespace of the admission advisory locks (first key of the two-key form). */
const ADMISSION_LOCK_CLASS = 600;
const ADMISSION_LOCK_SQL = 'SELECT pg_advisory_xact_lock($1, hashtext($2))';

type Limits = Pick<Config, 'PLAN_CONCURRENCY' | 'PLAN_UNRESOLVED_KEYED' | 'PLAN_REQUESTS_PER_MINUTE'>;

export class Admission {
  constructor(private readonly deps: { db: Db; config: Limits }) {}

  /** The rate headers without admitting anything (replays, which are not new work). */
  async peek(orgId: string): Promise<RateInfo> {
    return this.guard(async () => this.check(this.deps.db, orgId, false, false, false));
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
        await c.query({ name: 'admission_lock', text: ADMISSION_LOCK_SQL, values: [ADMISSION_LOCK_CLASS, orgId] });
        const rate = await this.check(c, orgId, false, true, true);
        return { rate, counted: await countCall(c, orgId) };
      }),
    );
  }

  /**
   * Count and claim as one step under the organization's lock. `request` is undefined when the
   * organization already holds the claim's Idempotency-Key (a concurrent identical request won).
   * `counted`: the second admitRouting counted this call in; the claim's row is counted in its
   * place (taken back in the same transaction), so a routed prompt is one request of the minute.
   */
  async admitAndClaim(fields: ClaimFields, counted?: number): Promise<{ rate: RateInfo; request: RequestRow | undefined }> {
    return this.guard(() =>
      tx(this.deps.db, async (c) => {
        await c.query({ name: 'admission_lock', text: ADMISSION_LOCK_SQL, values: [ADMISSION_LOCK_CLASS, fields.orgId] });
        const rate = await this.check(c, fields.orgId, fields.keyHash !== null, true, true, counted === undefined ? 0 : 1);
        const request = await insertClaim(c, fields);
        if (request && counted !== undefined) await uncountCall(c, fields.orgId, counted);
        return { rate, request };
      }),
    );
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
   * The organization's counts against its plan; `admitting`: for a request about to be counted
   * (remaining leaves it out), not for a look at the window (a replay, which is not counted).
   * `alreadyCounted`: calls of this request already in the window (a routed prompt's).
   */
  private async check(c: Db | DbClient, orgId: string, keyed: boolean, enforce: boolean, admitting: boolean, alreadyCounted = 0): Promise<RateInfo> {
    const { PLAN_CONCURRENCY, PLAN_UNRESOLVED_KEYED, PLAN_REQUESTS_PER_MINUTE } = this.deps.config;
    const counts = await admissionCounts(c, orgId);
    // A prompt's claim: its own call is in the window already (admitRouting), and is this request.
    const n = { ...counts, lastMinute: Math.max(0, counts.lastMinute - alreadyCounted) };
    // Counted per whole second: with nothing counted yet, the oldest is the second this request lands in.
    const reset = n.oldest ? Math.ceil((n.oldest.getTime() + 60_000) / 1000) : Math.floor(Date.now() / 1000) + 60;
    const rate: RateInfo = { limit: PLAN_REQUESTS_PER_MINUTE, remaining: Math.max(0, PLAN_REQUESTS_PER_MINUTE - n.lastMinute - (admitting ? 1 : 0)), reset };
    if (!enforce) return rate;
    const headers = rateHeaders(rate);
    if (n.lastMinute >= PLAN_REQUESTS_PER_MINUTE) {
      throw new ServiceError('rate_limited', `The plan allows ${PLAN_REQUESTS_PER_MINUTE} requests per minute`, {
        headers: { ...headers, 'x-ratelimit-remaining': '0', 'retry-after': String(Math.max(1, reset - Math.floor(Date.now() / 1000))) },
      });
    }
    if (n.running >= PLAN_CONCURRENCY) {
      throw new ServiceError('organization_concurrency_limit', `The plan allows ${PLAN_CONCURRENCY} requests running at once`, {
        headers: { ...headers, 'retry-after': '1' },
      });
    }
    if (keyed && n.unresolved >= PLAN_UNRESOLVED_KEYED) {
      // Not retryable as such (resolve the open requests first), but 429 carries Retry-After: when one of them may have ended.
      throw new ServiceError('unresolved_query_limit', `${n.unresolved} keyed requests are unresolved; check them with GET /v1/query/requests/{request_id} first`, {
        headers: { ...headers, 'retry-after': '5' },
      });
    }
    return rate;
  }
}
