// One call of `fn` in flight at a time, shared by every caller that arrives meanwhile; the next call
// after it settled starts afresh, so no answer is older than one call. For reads that anonymous
// callers can set off (GET /, /health, /readyz, /metrics): each running its own let them hold every
// pooled connection organizations' requests need.

export function singleFlight<T>(fn: () => Promise<T>): () => Promise<T> {
  let inFlight: Promise<T> | null = null;
  return () =>
    (inFlight ??= fn().finally(() => {
      inFlight = null;
    }));
}
