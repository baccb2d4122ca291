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
