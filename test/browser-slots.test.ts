// The browser pool's slots (activities/engines/browser-engine.ts Semaphore) shared out between
// organizations: a pure unit, no browser. Runs a worker has already taken from the task queue wait
// here for a Chromium page; one organization's queued runs must not keep another's behind all of them.
import { describe, expect, it } from 'vitest';
import { Semaphore } from '../activities/engines/browser-engine.ts';

const never = () => new AbortController().signal;

/** `take(party, name)` acquires a slot for `party`; `order` lists the names in the order they got one. */
function taker(s: Semaphore) {
  const order: string[] = [];
  const take = (party: string, name: string) =>
    s.acquire(never(), party).then((release) => {
      order.push(name);
      return release;
    });
  return { order, take };
}

describe('browser slots between organizations', () => {
  it("a freed slot goes to the organization holding the fewest, not to the next of the busy one's queue", async () => {
    const s = new Semaphore(2);
    const { order, take } = taker(s);
    const a1 = await take('org_a', 'a1');
    const a2 = await take('org_a', 'a2');
    // Queued in this order: three more of A, then one of B, then one of C.
    const a3 = take('org_a', 'a3');
    const a4 = take('org_a', 'a4');
    const a5 = take('org_a', 'a5');
    const b1 = take('org_b', 'b1');
    const c1 = take('org_c', 'c1');
    await Promise.resolve();
    expect(order).toEqual(['a1', 'a2']);
    a1();
    (await b1)();
    // B held nothing, then C held nothing: each got the next freed slot before A's queue went on.
    const c1Release = await c1;
    expect(order).toEqual(['a1', 'a2', 'b1', 'c1']);
    a2();
    // Among A's own runs, first come first served.
    (await a3)();
    const a4Release = await a4;
    expect(order.at(-1)).toBe('a4');
    a4Release();
    c1Release();
    await a5;
    expect(order).toEqual(['a1', 'a2', 'b1', 'c1', 'a3', 'a4', 'a5']);
    expect(s.inUse).toBe(1);
  }, 10_000);

  it('a waiter that gives up leaves the queue; the slot goes to the next', async () => {
    const s = new Semaphore(1);
    const held = await s.acquire(never(), 'org_a');
    const gone = new AbortController();
    const leaving = s.acquire(gone.signal, 'org_b');
    const staying = s.acquire(never(), 'org_c');
    gone.abort(new Error('deadline'));
    await expect(leaving).rejects.toThrow('deadline');
    held();
    (await staying)();
    expect(s.inUse).toBe(0);
  }, 10_000);

  it('a capped party (health checks) never holds every slot: a query arriving during a sweep starts at once', async () => {
    const s = new Semaphore(2, { health: 1 });
    const { order, take } = taker(s);
    const h1 = await take('health', 'h1');
    // The second example waits though a slot is free: health may hold one of two.
    const h2 = take('health', 'h2');
    await Promise.resolve();
    expect(order).toEqual(['h1']);
    expect(s.inUse).toBe(1);
    // A query takes the free slot at once, ahead of the waiting example.
    const q1 = await take('org_a', 'q1');
    expect(order).toEqual(['h1', 'q1']);
    // The first example ends: the second takes its slot.
    h1();
    const h2Release = await h2;
    expect(order).toEqual(['h1', 'q1', 'h2']);
    q1();
    h2Release();
    expect(s.inUse).toBe(0);
  }, 10_000);

  it('a capped party waiting at its cap does not hold back others; freed slots go to whoever may take them', async () => {
    const s = new Semaphore(3, { health: 1 });
    const { order, take } = taker(s);
    const a1 = await take('org_a', 'a1');
    const a2 = await take('org_a', 'a2');
    const h1 = await take('health', 'h1');
    const h2 = take('health', 'h2');
    const b1 = take('org_b', 'b1');
    await Promise.resolve();
    // A slot of A's frees: B (holding none) gets it; health stays at its cap.
    a1();
    const b1Release = await b1;
    expect(order).toEqual(['a1', 'a2', 'h1', 'b1']);
    a2();
    // A free slot with only a capped waiter: it stays free, and a new party takes it at once.
    const c1 = await take('org_c', 'c1');
    expect(order.at(-1)).toBe('c1');
    h1();
    (await h2)();
    b1Release();
    c1();
    expect(s.inUse).toBe(0);
  }, 10_000);

  it('with one slot, health checks may still take it', async () => {
    const s = new Semaphore(1, { health: 1 });
    (await s.acquire(never(), 'health'))();
    expect(s.inUse).toBe(0);
  }, 10_000);
});
