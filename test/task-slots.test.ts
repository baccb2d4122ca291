// Pure units of the slot accounting behind fairness between organizations, no worker, no browser:
// the Semaphore's cap on every party (HTTP runs, activities/engines/index.ts) and the browser
// worker's activity task slots (apps/worker/browser-task-slots.ts), which follow the pages.
import { describe, expect, it } from 'vitest';
import type { ActivitySlotInfo } from '@temporalio/worker';
import { BrowserTaskSlots } from '../apps/worker/browser-task-slots.ts';
import { Semaphore, browserPageSlots } from '../activities/engines/fair-semaphore.ts';

const never = () => new AbortController().signal;
const ctx = {} as never;
const task = (activityType: string): { slotInfo: ActivitySlotInfo } => ({ slotInfo: { type: 'activity', activityType } });
const settled = async <T>(p: Promise<T>) => {
  let done = false;
  void p.then(() => (done = true), () => (done = true));
  await new Promise((r) => setImmediate(r));
  return done;
};

describe('HTTP slots: every organization capped below the total', () => {
  it("one organization's waiting runs never keep a newcomer waiting; a freed slot skips an organization at its share", async () => {
    const s = new Semaphore(4, {}, 2);
    const a1 = await s.acquire(never(), 'org_a');
    await s.acquire(never(), 'org_a');
    const a3 = s.acquire(never(), 'org_a'); // at A's share: waits though two slots are free
    expect(await settled(a3)).toBe(false);
    await s.acquire(never(), 'org_b'); // B starts at once
    const c1 = await s.acquire(never(), 'org_c'); // so does C: all four slots used
    const b2 = s.acquire(never(), 'org_b');
    c1(); // A is at its share: the slot goes to B's waiter, behind which A's queued first
    expect(await settled(b2)).toBe(true);
    expect(await settled(a3)).toBe(false);
    a1();
    expect(await settled(a3)).toBe(true);
    expect(s.inUse).toBe(4);
  });

  it('a waiter whose deadline passes leaves with its reason', async () => {
    const s = new Semaphore(1, {}, 1);
    await s.acquire(never(), 'org_a');
    await expect(s.acquire(AbortSignal.timeout(20), 'org_b')).rejects.toThrow();
    expect(s.inUse).toBe(1);
  });
});

describe("browser worker's task slots", () => {
  it('one task per page; a free page always has a slot; health examples get slots of their own', async () => {
    const pages = browserPageSlots(2); // health may hold one of the two
    const slots = new BrowserTaskSlots(pages);
    // Two polls (one per page), the third waits.
    await slots.reserveSlot(ctx, never());
    await slots.reserveSlot(ctx, never());
    const third = slots.reserveSlot(ctx, never());
    expect(await settled(third)).toBe(false);
    expect(slots.tryReserveSlot()).toBeNull();
    // The first poll brings a health example: it has a slot of its own, so a poll opens for a query.
    slots.markSlotUsed(task('runHealthExample'));
    expect(await settled(third)).toBe(true);
    // It takes a page: one page left for queries, and two query slots out (the second poll, the third).
    const h = await pages.acquire(never(), 'health');
    const fourth = slots.reserveSlot(ctx, never());
    slots.markSlotUsed(task('executeOperation'));
    const q = await pages.acquire(never(), 'org_a');
    expect(await settled(fourth)).toBe(false);
    // The health example ends and gives its page and its slot back: the free page already has the
    // third poll waiting for a task.
    h();
    slots.releaseSlot(task('runHealthExample'));
    expect(await settled(fourth)).toBe(false);
    expect(slots.counts).toEqual({ issued: 2, health: 0 });
    // The query ends: its slot goes to the fourth.
    q();
    slots.releaseSlot(task('executeOperation'));
    expect(await settled(fourth)).toBe(true);
    expect(slots.counts).toEqual({ issued: 2, health: 0 });
  });

  it('with one page held by health checks, one query may still wait in the worker for it (the next turn is its)', async () => {
    const pages = browserPageSlots(1);
    const slots = new BrowserTaskSlots(pages);
    await slots.reserveSlot(ctx, never());
    slots.markSlotUsed(task('runHealthExample'));
    await pages.acquire(never(), 'health');
    await slots.reserveSlot(ctx, never()); // one for a query
    expect(slots.tryReserveSlot()).toBeNull();
  });

  it('a poll the SDK no longer needs gives up with the reason it was given', async () => {
    const slots = new BrowserTaskSlots(browserPageSlots(1));
    await slots.reserveSlot(ctx, never());
    const c = new AbortController();
    const waiting = slots.reserveSlot(ctx, c.signal);
    const reason = new Error('not needed');
    c.abort(reason);
    await expect(waiting).rejects.toBe(reason);
    slots.releaseSlot({}); // the first, never used
    expect(slots.counts).toEqual({ issued: 0, health: 0 });
  });
});
