// The fair semaphore both engines take their slots from: a browser page (browser-engine.ts) and an
// HTTP execution (index.ts). No engine imports, so the HTTP path never loads playwright-core.
import { HEALTH_PARTY } from './interpreter.ts';

/**
 * A counting semaphore whose waiters give up when their signal aborts, fair between parties (the
 * organizations whose runs wait): a freed slot goes to the party holding the fewest slots, then to
 * the one served longest ago, then first come first served within a party. So one organization's
 * runs queued in this worker never keep another's waiting run behind all of them (Temporal's
 * fairness keys order the task queue; this orders what a worker has already taken from it).
 * A party may be capped below the limit (`caps`): health checks never hold every page, so a
 * query never waits behind a sweep of examples. `everyCap` caps every party not named in `caps`:
 * one organization (or a few) never holds every HTTP execution slot, so another's run starts at
 * once however many runs the first keeps waiting.
 */
export class Semaphore {
  private active = 0;
  private readonly held = new Map<string, number>();
  private readonly lastServed = new Map<string, number>();
  private served = 0;
  private readonly waiters: Array<{ party: string; wake: () => void }> = [];
  private readonly listeners = new Set<() => void>();
  constructor(
    readonly limit: number,
    private readonly caps: Readonly<Record<string, number>> = {},
    private readonly everyCap?: number,
  ) {}

  async acquire(signal: AbortSignal, party = ''): Promise<() => void> {
    if (signal.aborted) throw signal.reason ?? new Error('aborted');
    if (this.active < this.limit && !this.atCap(party) && this.next() < 0) {
      this.grant(party);
      this.changed();
      return this.releaser(party);
    }
    await new Promise<void>((resolve, reject) => {
      const waiter = {
        party,
        wake: () => {
          signal.removeEventListener('abort', onAbort);
          resolve();
        },
      };
      const onAbort = () => {
        const i = this.waiters.indexOf(waiter);
        if (i >= 0) this.waiters.splice(i, 1);
        reject(signal.reason ?? new Error('aborted'));
      };
      this.waiters.push(waiter);
      signal.addEventListener('abort', onAbort, { once: true });
    });
    return this.releaser(party);
  }

  /** Slots `party` holds now. */
  heldBy(party: string): number {
    return this.held.get(party) ?? 0;
  }

  /** Calls `fn` after every grant and release (the browser worker's task slots follow the pages health checks hold). */
  onChange(fn: () => void): () => void {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }

  private changed(): void {
    for (const fn of this.listeners) fn();
  }

  private atCap(party: string): boolean {
    const cap = this.caps[party] ?? this.everyCap;
    return cap !== undefined && (this.held.get(party) ?? 0) >= cap;
  }

  private grant(party: string): void {
    this.active++;
    this.held.set(party, (this.held.get(party) ?? 0) + 1);
    this.lastServed.set(party, ++this.served);
  }

  /** The waiter a freed slot goes to: not at its cap; fewest slots held, then served longest ago, then the earliest. */
  private next(): number {
    let best = -1;
    for (let i = 0; i < this.waiters.length; i++) {
      const a = this.waiters[i]!.party;
      if (this.atCap(a)) continue;
      if (best < 0) {
        best = i;
        continue;
      }
      const b = this.waiters[best]!.party;
      if (a === b) continue;
      const ha = this.held.get(a) ?? 0;
      const hb = this.held.get(b) ?? 0;
      if (ha < hb || (ha === hb && (this.lastServed.get(a) ?? 0) < (this.lastServed.get(b) ?? 0))) best = i;
    }
    return best;
  }

  private releaser(party: string): () => void {
    let done = false;
    return () => {
      if (done) return;
      done = true;
      this.active--;
      const left = (this.held.get(party) ?? 1) - 1;
      if (left > 0) this.held.set(party, left);
      else this.held.delete(party);
      // Usually one grant; more when slots stayed free while every waiter was at its cap.
      for (let i = this.next(); i >= 0 && this.active < this.limit; i = this.next()) {
        const [w] = this.waiters.splice(i, 1);
        this.grant(w!.party);
        w!.wake();
      }
      if (this.waiters.length === 0) {
        // Nobody waits: what is remembered of parties holding nothing is not needed any more.
        for (const p of this.lastServed.keys()) if (!this.held.has(p)) this.lastServed.delete(p);
      }
      this.changed();
    };
  }

  get inUse(): number {
    return this.active;
  }
}

/**
 * The semaphore of a pool's Chromium pages. Health checks leave a page for queries whenever there
 * is more than one.
 */
export function browserPageSlots(concurrency: number): Semaphore {
  const pages = Math.max(1, concurrency);
  return new Semaphore(pages, { [HEALTH_PARTY]: Math.max(1, pages - 1) });
}
