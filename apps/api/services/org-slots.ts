// Per-organization counts of something one API process holds for callers (uploads being received,
// waits on a run): each organization has its own few, so one organization's burst never takes
// what every organization's requests share (memory, connections, Temporal long-polls).
// In-process and synchronous: the check and the take are one step.

import { OrgByteBudget } from './byte-budget.ts';

export class OrgSlots {
  /** One unit per slot: the per-organization counter the upload bytes use. */
  private readonly held: OrgByteBudget;
  constructor(readonly perOrg: number) {
    this.held = new OrgByteBudget(perOrg);
  }

  /** A release function (idempotent), or undefined when the organization already holds perOrg. */
  take(orgId: string): (() => void) | undefined {
    return this.held.take(orgId, 1);
  }
}
