// Held pages, for tests that need a website to stay busy until they say so: `GET /__probe/hold?key=K`
// (any demo host) answers at once, unless K is armed (`POST /__demo/holds {key}`); then it is held
// open until `POST /__demo/holds/release {key}`. Each key counts its requests and how many were held
// open at once, so a test can see from the site how many pages are waiting on it.
// Keyed, so one test's hold is its own: unlike faults, holds survive `/__demo/reset` (which another
// test may send at any time). A held request ends by itself after `max_ms` (default 120 s), so a
// test that never releases cannot keep a connection open for ever.

export interface HoldState {
  key: string;
  armed: boolean;
  released: boolean;
  /** Requests for the key (held or not). */
  requests: number;
  /** Requests held open now. */
  waiting: number;
  /** Most requests held open at once. */
  max_waiting: number;
  max_ms: number;
}

const KEY_RE = /^[A-Za-z0-9_-]{1,100}$/;
const DEFAULT_MAX_MS = 120_000;

interface Hold extends HoldState {
  wake: Set<() => void>;
}

export class HoldStore {
  private readonly holds = new Map<string, Hold>();

  private get(key: string): Hold {
    let h = this.holds.get(key);
    if (!h) {
      h = { key, armed: false, released: false, requests: 0, waiting: 0, max_waiting: 0, max_ms: DEFAULT_MAX_MS, wake: new Set() };
      this.holds.set(key, h);
    }
    return h;
  }

  private view(h: Hold): HoldState {
    const { wake: _w, ...state } = h;
    return state;
  }

  /** The key's state; null when nothing is known of it. */
  state(key: string): HoldState | null {
    const h = this.holds.get(key);
    return h ? this.view(h) : null;
  }

  /** Arms `key` afresh (counts from zero): its requests are held until released. */
  arm(body: unknown): HoldState | string {
    const b = (body ?? {}) as Record<string, unknown>;
    if (typeof b.key !== 'string' || !KEY_RE.test(b.key)) return '"key" must be 1–100 letters, digits, "-" or "_"';
    if (b.max_ms !== undefined && !(typeof b.max_ms === 'number' && Number.isInteger(b.max_ms) && b.max_ms >= 1 && b.max_ms <= 600_000)) return '"max_ms" must be an integer 1..600000';
    const old = this.holds.get(b.key);
    if (old) for (const w of old.wake) w();
    this.holds.delete(b.key);
    const h = this.get(b.key);
    h.armed = true;
    h.max_ms = (b.max_ms as number | undefined) ?? DEFAULT_MAX_MS;
    return this.view(h);
  }

  /** Answers every held request of `key`, and every later one at once. */
  release(body: unknown): HoldState | string {
    const b = (body ?? {}) as Record<string, unknown>;
    if (typeof b.key !== 'string' || !KEY_RE.test(b.key)) return '"key" must be 1–100 letters, digits, "-" or "_"';
    const h = this.get(b.key);
    h.released = true;
    for (const w of h.wake) w();
    return this.view(h);
  }

  /**
   * Counts a request for `key` and resolves when it may be answered: at once unless the key is
   * armed and not released; else on release, after `max_ms`, or when `gone` fires (the client left).
   */
  async pass(key: string, gone: AbortSignal): Promise<'not_held' | 'released' | 'expired' | 'gone'> {
    const h = this.get(key);
    h.requests++;
    if (!h.armed || h.released) return 'not_held';
    h.waiting++;
    h.max_waiting = Math.max(h.max_waiting, h.waiting);
    let outcome: 'released' | 'expired' | 'gone' = 'released';
    await new Promise<void>((resolve) => {
      const done = (o: typeof outcome) => () => {
        outcome = o;
        clearTimeout(timer);
        gone.removeEventListener('abort', onGone);
        h.wake.delete(onRelease);
        resolve();
      };
      const onRelease = done('released');
      const onGone = done('gone');
      const timer = setTimeout(done('expired'), h.max_ms);
      h.wake.add(onRelease);
      gone.addEventListener('abort', onGone, { once: true });
      if (gone.aborted) onGone();
    });
    h.waiting--;
    return outcome;
  }

  static validKey(key: string | null): key is string {
    return key !== null && KEY_RE.test(key);
  }
}
