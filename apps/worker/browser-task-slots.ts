// The browser worker's activity task slots. A browser task the worker takes while every page is
// busy would wait inside this process, and there Temporal's fairness key (the organization) no
// longer orders it: one organization's runs holding spare slots would each be served before another
// organization's run, which stays in Temporal's queue until a slot frees and then waits for a page
// behind them. So the worker takes a query (or a builder's test run) only when a page is there for
// it: at most as many as the pages health checks do not hold, always at least one (with one page
// that health holds, the next query waits here and the page's next turn is the query's: the
// pages' Semaphore serves the party holding the fewest). Health examples get task slots on top,
// lane by lane: one waiting for a page (health never holds every page) never keeps a query out
// while a page is free. The waiting happens in Temporal's fair backlog.
import type { ActivitySlotInfo, CustomSlotSupplier, SlotPermit } from '@temporalio/worker';
import type { Semaphore } from '../../activities/engines/fair-semaphore.ts';
import { HEALTH_PARTY } from '../../activities/engines/interpreter.ts';

/** The activity types health checks run on the browser queue: party `health`, task slots of their own. */
const HEALTH_ACTIVITIES = new Set(['runHealthExample']);

export class BrowserTaskSlots implements CustomSlotSupplier<ActivitySlotInfo> {
  readonly type = 'custom' as const;
  /** Permits out: tasks running and polls waiting for one. */
  private issued = 0;
  /** Of those, health examples. */
  private health = 0;
  private readonly waiting: Array<{ grant: () => void }> = [];

  constructor(private readonly pages: Semaphore) {
    pages.onChange(() => this.wake());
  }

  /** Whether another task that may be a query can be taken: one per page health does not hold, at least one. */
  private open(): boolean {
    return this.issued - this.health < Math.max(1, this.pages.limit - this.pages.heldBy(HEALTH_PARTY));
  }

  reserveSlot(_ctx: unknown, abortSignal: AbortSignal): Promise<SlotPermit> {
    if (this.waiting.length === 0 && this.open()) {
      this.issued++;
      return Promise.resolve({});
    }
    return new Promise<SlotPermit>((resolve, reject) => {
      if (abortSignal.aborted) return reject(abortSignal.reason);
      const w = {
        grant: () => {
          abortSignal.removeEventListener('abort', onAbort);
          resolve({});
        },
      };
      const onAbort = () => {
        const i = this.waiting.indexOf(w);
        if (i >= 0) this.waiting.splice(i, 1);
        reject(abortSignal.reason);
      };
      abortSignal.addEventListener('abort', onAbort, { once: true });
      this.waiting.push(w);
    });
  }

  tryReserveSlot(): SlotPermit | null {
    if (this.waiting.length > 0 || !this.open()) return null;
    this.issued++;
    return {};
  }

  markSlotUsed(ctx: { slotInfo: ActivitySlotInfo }): void {
    if (HEALTH_ACTIVITIES.has(ctx.slotInfo.activityType)) {
      this.health++;
      this.wake();
    }
  }

  releaseSlot(ctx: { slotInfo?: ActivitySlotInfo }): void {
    this.issued--;
    if (ctx.slotInfo && HEALTH_ACTIVITIES.has(ctx.slotInfo.activityType)) this.health--;
    this.wake();
  }

  private wake(): void {
    while (this.waiting.length > 0 && this.open()) {
      this.issued++;
      this.waiting.shift()!.grant();
    }
  }

  /** For tests and metrics: permits out, and health examples among them. */
  get counts(): { issued: number; health: number } {
    return { issued: this.issued, health: this.health };
  }
}
