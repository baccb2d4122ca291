// A counting semaphore whose waiters give up after a while: the bound on lookups of unknown
// credentials (credential-guard.ts) and on keyless catalog reads (keyless-gate.ts).

/** A counting semaphore whose waiters give up after a while. */
export class Slots {
  inFlight = 0;
  readonly waiting = new Set<() => void>();
  constructor(private readonly max: number) {}

  /** true once a slot is this caller's; false after `waitMs` without one. */
  acquire(waitMs: number): Promise<boolean> {
    if (this.inFlight < this.max) {
      this.inFlight++;
      return Promise.resolve(true);
    }
    return new Promise((resolve) => {
      const granted = () => {
        clearTimeout(timer);
        resolve(true);
      };
      const timer = setTimeout(() => {
        this.waiting.delete(granted);
        resolve(false);
      }, waitMs);
      this.waiting.add(granted);
    });
  }

  /** Hand the slot to the next waiter, if any, else free it. */
  release(): void {
    const next = this.waiting.values().next();
    if (next.done) this.inFlight--;
    else {
      this.waiting.delete(next.value);
      next.value();
    }
  }

  get idle(): boolean {
    return this.inFlight === 0 && this.waiting.size === 0;
  }
}
