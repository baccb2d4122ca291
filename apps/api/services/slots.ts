// A counting semaphore whose waiters give up after a while: the bound on lookups of unknown
// credentials (credential-guard.ts), on keyless catalog reads (keyless-gate.ts) and on an
// organization's feedback writes (routes/feedback.ts) and prompts being routed (query-service.ts).

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

/**
 * `Slots` for each key (an organization, a client address): a key's are made when first needed
 * and dropped once idle, so the map holds only keys with something in flight or waiting.
 */
export class KeyedSlots {
  private readonly byKey = new Map<string, Slots>();
  constructor(private readonly perKey: number) {}

  /** Keys with something in flight or waiting. */
  get keys(): number {
    return this.byKey.size;
  }

  /** Callers waiting for their key's turn, over all keys. */
  get waiting(): number {
    let n = 0;
    for (const slots of this.byKey.values()) n += slots.waiting.size;
    return n;
  }

  /** `fn()` holding one of `key`'s slots; `refused()` is thrown when none came within `waitMs`. */
  async run<T>(key: string, waitMs: number, fn: () => Promise<T>, refused: () => Error): Promise<T> {
    let slots = this.byKey.get(key);
    if (!slots) this.byKey.set(key, (slots = new Slots(this.perKey)));
    try {
      if (!(await slots.acquire(waitMs))) throw refused();
      try {
        return await fn();
      } finally {
        slots.release();
      }
    } finally {
      if (slots.idle && this.byKey.get(key) === slots) this.byKey.delete(key);
    }
  }
}
