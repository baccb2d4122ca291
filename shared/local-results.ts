// The terminal envelope handed from the worker to the API when both run in one process (`npm
// start`, the bench: apps/dev/stack.ts), the way eager start hands the first workflow task the
// other way. The row in PostgreSQL stays the record: the worker publishes only an envelope its own
// statement wrote and committed, as PostgreSQL stored it (the text it sent, object keys in jsonb's
// order), so the caller's answer is byte for byte what a NOTIFY and a read of the row would have
// given, and what a replay gives later. It saves that read and the notification's trip through
// PostgreSQL and the event loop, behind the worker's own work on the same thread (issue 11).
// Processes of their own (compose, Helm) have no hub: the API hears PostgreSQL's NOTIFY as before.
import type { TerminalEnvelope } from './workflow-contract.ts';

/** Deeper than this, nothing is handed over (the row is read instead): the copy below recurses. */
const MAX_DEPTH = 200;

/**
 * `value` with every object's keys in jsonb's order: shorter keys first, keys of one length by
 * their UTF-8 bytes. undefined when it nests deeper than MAX_DEPTH.
 */
export function inJsonbKeyOrder(value: unknown, depth = 0): unknown {
  if (value === null || typeof value !== 'object') return value;
  if (depth >= MAX_DEPTH) return undefined;
  if (Array.isArray(value)) {
    const out = new Array<unknown>(value.length);
    for (let i = 0; i < value.length; i++) {
      const v = inJsonbKeyOrder(value[i], depth + 1);
      if (v === undefined) return undefined;
      out[i] = v;
    }
    return out;
  }
  const keys = Object.keys(value).sort(jsonbKeyOrder);
  // Keys come from JSON.parse, so `__proto__` may be one of them: define, never assign.
  const out: Record<string, unknown> = {};
  for (const k of keys) {
    const v = inJsonbKeyOrder((value as Record<string, unknown>)[k], depth + 1);
    if (v === undefined) return undefined;
    Object.defineProperty(out, k, { value: v, enumerable: true, writable: true, configurable: true });
  }
  return out;
}

// eslint-disable-next-line no-control-regex
const ASCII = /^[\x00-\x7f]*$/;

function jsonbKeyOrder(a: string, b: string): number {
  if (ASCII.test(a) && ASCII.test(b)) return a.length - b.length || (a < b ? -1 : a > b ? 1 : 0);
  const x = Buffer.from(a, 'utf8');
  const y = Buffer.from(b, 'utf8');
  return x.length - y.length || Buffer.compare(x, y);
}

interface Waiter {
  resolve(env: TerminalEnvelope): void;
}

export class LocalResults {
  private readonly waiters = new Map<string, Set<Waiter>>();

  /** Wait for `requestId`'s envelope from a worker in this process; cancel() when the wait ends otherwise. */
  wait(requestId: string): { envelope: Promise<TerminalEnvelope>; cancel(): void } {
    let waiter!: Waiter;
    const envelope = new Promise<TerminalEnvelope>((resolve) => {
      waiter = { resolve };
    });
    let set = this.waiters.get(requestId);
    if (!set) this.waiters.set(requestId, (set = new Set()));
    set.add(waiter);
    const cancel = () => {
      set.delete(waiter);
      if (set.size === 0 && this.waiters.get(requestId) === set) this.waiters.delete(requestId);
    };
    return { envelope, cancel };
  }

  /** Whether anybody in this process waits for `requestId`. */
  wanted(requestId: string): boolean {
    return this.waiters.has(requestId);
  }

  /**
   * The envelope `requestId`'s row got, committed: `storedBody` is the JSON text the statement
   * stored. Nothing happens when nobody waits for it.
   */
  publish(requestId: string, status: number, storedBody: string): void {
    const set = this.waiters.get(requestId);
    if (!set) return;
    const body = inJsonbKeyOrder(JSON.parse(storedBody));
    if (body === undefined) return;
    this.waiters.delete(requestId);
    for (const w of set) w.resolve({ status, body: body as TerminalEnvelope['body'] });
  }
}
