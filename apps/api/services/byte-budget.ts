// Bytes one API process holds for callers of every organization together (upload bodies being
// received and stored): per-organization bounds alone multiply by the number of organizations,
// and sign-up makes that number the caller's to choose. In-process and synchronous: the check and
// the take are one step.

export class ByteBudget {
  private held = 0;
  constructor(readonly maxBytes: number) {}

  /** A release function (idempotent), or undefined when `bytes` more would pass maxBytes. */
  take(bytes: number): (() => void) | undefined {
    if (this.held + bytes > this.maxBytes) return undefined;
    this.held += bytes;
    let done = false;
    return () => {
      if (done) return;
      done = true;
      this.held -= bytes;
    };
  }
}

/**
 * Bytes held per organization, each at most `perOrg`: one organization's share of a ByteBudget, so
 * that a few organizations (sign-up is open) cannot hold all of it between them.
 */
export class OrgByteBudget {
  private readonly held = new Map<string, number>();
  constructor(readonly perOrg: number) {}

  /** A release function (idempotent), or undefined when `bytes` more would pass the organization's share. */
  take(orgId: string, bytes: number): (() => void) | undefined {
    const n = this.held.get(orgId) ?? 0;
    if (n + bytes > this.perOrg) return undefined;
    this.held.set(orgId, n + bytes);
    let done = false;
    return () => {
      if (done) return;
      done = true;
      const left = (this.held.get(orgId) ?? bytes) - bytes;
      if (left > 0) this.held.set(orgId, left);
      else this.held.delete(orgId);
    };
  }
}
