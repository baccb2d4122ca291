// Each organization's request rate in one API process: a token bucket per organization, so one
// organization hammering request status, feedback, uploads, tool listings, MCP exchanges (or
// queries refused before admission) cannot take the process and the PostgreSQL pool every
// organization shares. In-process and synchronous: a Map lookup and some arithmetic per request,
// nothing from PostgreSQL. Only authenticated requests reach it (keyed by the organization the
// credential resolved to), so it can never tell an unauthenticated caller anything.
import { ServiceError } from '../../../shared/errors.ts';

export interface BucketLimits {
  /** Tokens added per second (the sustained rate). */
  perSecond: number;
  /** Tokens the bucket holds at most (the burst); a bucket nobody used is full. */
  burst: number;
}

/** A bucket as last written: its tokens at `at` (ms, monotonic). Negative tokens are a debt. */
export interface Bucket {
  tokens: number;
  at: number;
}

/** The bucket's tokens at `now`: what it held plus what the rate added since, never above the burst. */
export function tokensAt(bucket: Bucket | undefined, now: number, limits: BucketLimits): number {
  if (!bucket) return limits.burst;
  return Math.min(limits.burst, bucket.tokens + (Math.max(0, now - bucket.at) * limits.perSecond) / 1000);
}

export type TakeResult =
  | { ok: true; tokens: number }
  /** `waitMs`: until the bucket holds what this request needs. */
  | { ok: false; tokens: number; waitMs: number };

/**
 * Take `cost` tokens at `now` (pure: the bucket to store, and the answer). A request needs its whole
 * cost in the bucket, except that a cost above the burst needs a full bucket and leaves a debt
 * (otherwise it could never pass): the rate pays the debt back before anything else passes.
 */
export function take(bucket: Bucket | undefined, cost: number, now: number, limits: BucketLimits): { bucket: Bucket; result: TakeResult } {
  const tokens = tokensAt(bucket, now, limits);
  const need = Math.min(cost, limits.burst);
  if (tokens < need) return { bucket: { tokens, at: now }, result: { ok: false, tokens, waitMs: ((need - tokens) * 1000) / limits.perSecond } };
  return { bucket: { tokens: tokens - cost, at: now }, result: { ok: true, tokens: tokens - cost } };
}

/**
 * A full bucket is the same as none: a map of buckets drops them in sweeps, at most once per time a
 * bucket takes to fill (OrgRate's organizations, the credential guard's client addresses).
 */
export class FullBucketSweep {
  private readonly everyMs: number;
  private next: number;

  constructor(
    private readonly limits: BucketLimits,
    now: number,
  ) {
    this.everyMs = Math.max(1_000, (limits.burst * 1000) / limits.perSecond);
    this.next = now + this.everyMs;
  }

  /** When a sweep is due at `now`, forget every bucket of `buckets` that is full by then. */
  sweep(buckets: Map<string, Bucket>, now: number): void {
    if (now < this.next) return;
    for (const [key, bucket] of buckets) if (tokensAt(bucket, now, this.limits) >= this.limits.burst) buckets.delete(key);
    this.next = now + this.everyMs;
  }
}

/** Buckets of every organization that used this process lately; a full bucket is forgotten. */
export class OrgRate {
  private readonly buckets = new Map<string, Bucket>();
  private readonly sweeper: FullBucketSweep;

  constructor(
    readonly limits: BucketLimits,
    private readonly clock: () => number = () => performance.now(),
  ) {
    this.sweeper = new FullBucketSweep(limits, clock());
  }

  /** Organizations with a bucket in memory (tests, and a bound anyone can reason about). */
  get size(): number {
    return this.buckets.size;
  }

  /** Take `cost` tokens of the organization's bucket, or throw 429 organization_rate_limit. */
  admit(orgId: string, cost = 1): void {
    const now = this.clock();
    this.sweeper.sweep(this.buckets, now);
    const { bucket, result } = take(this.buckets.get(orgId), cost, now, this.limits);
    this.buckets.set(orgId, bucket);
    if (!result.ok) throw this.refusal(result, cost);
  }

  /**
   * Give back tokens a request took (a query the plan's per-minute quota has counted: it is
   * limited there, not twice). Never above the burst.
   */
  giveBack(orgId: string, n = 1): void {
    const bucket = this.buckets.get(orgId);
    if (!bucket) return;
    const now = this.clock();
    bucket.tokens = Math.min(this.limits.burst, tokensAt(bucket, now, this.limits) + n);
    bucket.at = now;
  }

  private refusal(result: { tokens: number; waitMs: number }, cost: number): ServiceError {
    const { perSecond, burst } = this.limits;
    const retryAfter = Math.max(1, Math.ceil(result.waitMs / 1000));
    // X-RateLimit-* of this bucket: its size, what is left, and the second this request would pass
    // (as on the plan's 429, Reset is now + Retry-After).
    return new ServiceError(
      'organization_rate_limit',
      `The organization sent more than this API process takes from one organization (${perSecond} a second, bursts of ${burst}${cost > 1 ? `; this exchange has ${cost} messages` : ''}); retry after ${retryAfter} s`,
      {
        headers: {
          'retry-after': String(retryAfter),
          'x-ratelimit-limit': String(burst),
          'x-ratelimit-remaining': String(Math.max(0, Math.floor(result.tokens))),
          'x-ratelimit-reset': String(Math.floor(Date.now() / 1000) + retryAfter),
        },
        details: { per_second: perSecond, burst, cost },
      },
    );
  }
}
