// Credential checks that reach PostgreSQL (API keys; OAuth access tokens on /mcp), bounded so that
// callers without a valid credential cannot take the pool every organization's requests need: a
// flood of invented keys against a slow database used to hold pooled connections until every
// organization's keyed requests waited past the pool's 5 s. Two bounds, in this process's memory:
//
// - Lookups in flight of credentials this process has not yet seen pass: at most `lookupsInFlight`.
//   Past it a check waits up to `lookupWaitMs` for a slot, then 503 api_key_verification_unavailable
//   with Retry-After (the spec's answer when keys cannot be checked).
// - Failed checks per client address (an IPv4 address, an IPv6 /64): a token bucket. A check that
//   needs a lookup reserves a token first (given back if the credential passes, or if it could not
//   be checked), so one address holds at most `burst` lookups; an empty bucket refuses it before
//   PostgreSQL with 429 authentication_rate_limited.
//
// A credential this process saw pass (its SHA-256, in a bounded LRU) skips both, so one bad client
// behind a shared NAT or proxy address does not lock out a key already in use there. It is still
// looked up on every request: nothing is cached that would delay a revocation. Its lookups are
// bounded by organization instead: at most `lookupsInFlight` of one organization's at once, so a
// holder of a valid key cannot hold the pool against a slow database either, and a revoked key still
// gets its 401 from the lookup. One past it waits as long as a query waits for a pooled connection
// (a customer's burst queues as it did on the pool), then gets the same 503. Checks of the same unknown
// credential at once share one lookup (a client's burst after a restart costs one).
import { POOL_CONNECT_WAIT_MS } from '../../../shared/db/pool.ts';
import { ServiceError } from '../../../shared/errors.ts';
import { sha256 } from '../../../shared/ids.ts';
import { addressBucket } from './client-address.ts';
import { FullBucketSweep, take, tokensAt, type Bucket, type BucketLimits } from './org-rate.ts';
import { Slots } from './slots.ts';

export interface GuardLimits {
  /** Lookups of not-yet-known credentials in flight at once. */
  lookupsInFlight: number;
  /** How long a check waits for a lookup slot before 503. */
  lookupWaitMs: number;
  /** Failed checks per address: the burst, then `perSecond`. */
  failures: BucketLimits;
  /** Addresses with a bucket in memory at most (the oldest is forgotten first). */
  addressesMax: number;
  /** Credentials remembered as having passed (the least recently passed is forgotten first). */
  knownMax: number;
}

type Checked = { ok: true; orgId: string } | { ok: false };

export class CredentialGuard {
  private readonly failures = new Map<string, Bucket>();
  /** SHA-256 of a credential that passed here -> its organization. */
  private readonly known = new Map<string, string>();
  private readonly pending = new Map<string, Promise<Checked>>();
  /** Lookups of credentials not yet seen pass. */
  private readonly unknownSlots: Slots;
  /** Lookups of credentials that passed here, by organization (an idle one is dropped). */
  private readonly orgSlots = new Map<string, Slots>();
  private readonly sweeper: FullBucketSweep;

  /** Refusals so far, by code (for /metrics). */
  readonly refusals = { authentication_rate_limited: 0, api_key_verification_unavailable: 0 };

  constructor(
    readonly limits: GuardLimits,
    private readonly clock: () => number = () => performance.now(),
  ) {
    this.sweeper = new FullBucketSweep(limits.failures, clock());
    this.unknownSlots = new Slots(limits.lookupsInFlight);
  }

  /** Addresses with a bucket in memory. */
  get addresses(): number {
    return this.failures.size;
  }

  /** Lookups of credentials not yet seen pass holding a slot now, and checks waiting for one. */
  get lookups(): { inFlight: number; waiting: number } {
    return { inFlight: this.unknownSlots.inFlight, waiting: this.unknownSlots.waiting.size };
  }

  /**
   * `lookup`'s answer for `credential` sent from `ip`, within the bounds above. Throws 429
   * authentication_rate_limited or 503 api_key_verification_unavailable (also when `lookup` throws).
   */
  async check<T extends Checked>(ip: string, credential: string, lookup: () => Promise<T>): Promise<T> {
    const hash = sha256(credential).toString('base64');
    const address = addressBucket(ip);
    const orgId = this.known.get(hash);
    if (orgId !== undefined) {
      let slots = this.orgSlots.get(orgId);
      if (!slots) this.orgSlots.set(orgId, (slots = new Slots(this.limits.lookupsInFlight)));
      let result: T;
      try {
        result = await this.lookupInSlot(slots, lookup, Math.max(this.limits.lookupWaitMs, POOL_CONNECT_WAIT_MS));
      } finally {
        if (slots.idle && this.orgSlots.get(orgId) === slots) this.orgSlots.delete(orgId);
      }
      if (result.ok) this.remember(hash, result.orgId);
      else {
        this.known.delete(hash);
        this.failed(ip);
      }
      return result;
    }
    const now = this.clock();
    const limits = this.limits.failures;
    if (tokensAt(this.failures.get(address), now, limits) < 1) throw this.refusal(this.failures.get(address)!, now);
    const shared = this.pending.get(hash) as Promise<T> | undefined;
    if (shared) {
      const result = await shared;
      if (!result.ok) this.failed(ip);
      return result;
    }
    this.put(address, take(this.failures.get(address), 1, now, limits).bucket);
    const flight = this.lookupInSlot(this.unknownSlots, lookup, this.limits.lookupWaitMs).then(
      (result) => {
        if (result.ok) {
          this.giveBack(address);
          this.remember(hash, result.orgId);
        }
        return result;
      },
      (err: unknown) => {
        this.giveBack(address); // not the caller's failure: the database's, or the slots'
        throw err;
      },
    );
    this.pending.set(hash, flight);
    try {
      return await flight;
    } finally {
      this.pending.delete(hash);
    }
  }

  /** Count a failed check that needed no lookup (a malformed key) against the address. */
  failed(ip: string): void {
    const address = addressBucket(ip);
    this.put(address, take(this.failures.get(address), 1, this.clock(), this.limits.failures).bucket);
  }

  private async lookupInSlot<T>(slots: Slots, lookup: () => Promise<T>, waitMs: number): Promise<T> {
    if (!(await slots.acquire(waitMs))) {
      this.refusals.api_key_verification_unavailable++;
      throw new ServiceError('api_key_verification_unavailable', 'Too many credential checks are waiting on the database; retry shortly', {
        headers: { 'retry-after': '1' },
      });
    }
    try {
      return await unavailableOnError(lookup);
    } finally {
      slots.release();
    }
  }

  private remember(hash: string, orgId: string): void {
    this.known.delete(hash);
    this.known.set(hash, orgId);
    if (this.known.size > this.limits.knownMax) this.known.delete(this.known.keys().next().value!);
  }

  private giveBack(address: string): void {
    const bucket = this.failures.get(address);
    if (bucket) this.put(address, { tokens: tokensAt(bucket, this.clock(), this.limits.failures) + 1, at: this.clock() });
  }

  /** Store an address's bucket as the most recent; a full one is the same as none. Bounded: sweeps, then the oldest goes. */
  private put(address: string, bucket: Bucket): void {
    const { failures: limits, addressesMax } = this.limits;
    this.failures.delete(address);
    if (bucket.tokens >= limits.burst) return;
    this.failures.set(address, bucket);
    this.sweeper.sweep(this.failures, this.clock());
    if (this.failures.size > addressesMax) this.failures.delete(this.failures.keys().next().value!);
  }

  private refusal(bucket: Bucket, now: number): ServiceError {
    const { perSecond, burst } = this.limits.failures;
    this.refusals.authentication_rate_limited++;
    const retryAfter = Math.max(1, Math.ceil((1 - tokensAt(bucket, now, this.limits.failures)) / perSecond));
    return new ServiceError(
      'authentication_rate_limited',
      `Too many failed credential checks from this address (bursts of ${burst}, then ${perSecond} a second); retry after ${retryAfter} s`,
      { headers: { 'retry-after': String(retryAfter) }, details: { per_second: perSecond, burst } },
    );
  }
}

async function unavailableOnError<T>(lookup: () => Promise<T>): Promise<T> {
  try {
    return await lookup();
  } catch {
    throw new ServiceError('api_key_verification_unavailable', 'Credentials cannot be checked right now; retry shortly', { headers: { 'retry-after': '5' } });
  }
}
