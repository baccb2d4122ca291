// Per-organization counts of something one API process holds for callers (uploads being received,
// waits on a run): each organization has its own few, so one organization's burst never takes
// what every organization's requests share (memory, connections, Temporal long-polls).
// In-process and synchronous: the check and the take are one step.

export class OrgSlots {
  private readonly held = new Map<string, number>();
  constructor(readonly perOrg: number) {}

  /** A release function (idempotent), or undefined when the organization already holds perOrg. */
  take(orgId: string): (() => void) | undefined {
    const n = this.held.get(orgId) ?? 0;
    if (n >= this.perOrg) return undefined;
    this.held.set(orgId, n + 1);
    let done = false;
    return () => {
      if (done) return;
      done = true;
      const left = (this.held.get(orgId) ?? 1) - 1;
      if (left > 0) this.held.set(orgId, left);
      else this.held.delete(orgId);
    };
  }
}
