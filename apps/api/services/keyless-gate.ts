// Reads of PostgreSQL that anyone may ask for without a key (catalog search, detail, suggest,
// sitemap; icons), bounded so that they cannot take the pool every organization's requests need.
// A keyed request counts against its organization's bucket (org-rate.ts); a keyless one has nobody
// to count against, and a cold search costs about 6 ms of PostgreSQL: many at once, from one
// address or many, used to fill the API's 20 pooled connections, and every organization's queries
// waited behind them. Two bounds, in this process's memory:
//
// - At most `inFlight` keyless reads at once in the process (of its 20 pooled connections).
// - At most `perAddress` of them from one client address (an IPv4 address, an IPv6 /64:
//   client-address.ts), so one address cannot hold them all and starve every other reader.
//
// A read past either bound waits, in turn, for up to `waitMs` in all, then gets the route's 503
// catalog_unavailable with Retry-After. Nothing is refused while there is room, so a client reading
// one page after another (a person, a crawler, the bench) never meets the bounds.
import { ServiceError } from '../../../shared/errors.ts';
import { addressBucket } from './client-address.ts';
import { KeyedSlots, Slots } from './slots.ts';

export interface KeylessLimits {
  /** Keyless reads at once in this process. */
  inFlight: number;
  /** Keyless reads at once from one client address. */
  perAddress: number;
  /** How long a read waits for its turn before 503. */
  waitMs: number;
}

export class KeylessGate {
  private readonly all: Slots;
  private readonly byAddress: KeyedSlots;
  /** Reads refused after waiting their turn too long (for /metrics). */
  refused = 0;

  constructor(
    readonly limits: KeylessLimits,
    private readonly clock: () => number = () => performance.now(),
  ) {
    this.all = new Slots(limits.inFlight);
    this.byAddress = new KeyedSlots(limits.perAddress);
  }

  /** Reads holding a slot now, and reads waiting for one (for their address's, or the process's). */
  get reads(): { inFlight: number; waiting: number } {
    return { inFlight: this.all.inFlight, waiting: this.byAddress.waiting + this.all.waiting.size };
  }

  /** Addresses with a read in flight or waiting. */
  get addresses(): number {
    return this.byAddress.keys;
  }

  /** `read()` within the bounds, for the client at `ip`; 503 catalog_unavailable when its turn did not come in time. */
  run<T>(ip: string | undefined, read: () => Promise<T>): Promise<T> {
    const deadline = this.clock() + this.limits.waitMs;
    const refusal = () => this.refusal();
    // The address's turn first, then the process's, within one wait.
    return this.byAddress.run(addressBucket(ip), this.limits.waitMs, async () => {
      if (!(await this.all.acquire(Math.max(0, deadline - this.clock())))) throw refusal();
      try {
        return await read();
      } finally {
        this.all.release();
      }
    }, refusal);
  }

  private refusal(): ServiceError {
    this.refused++;
    return new ServiceError('catalog_unavailable', 'Too many catalog reads without a key are waiting; retry shortly', { headers: { 'retry-after': '1' } });
  }
}
