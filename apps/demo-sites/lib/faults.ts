// Fault injection for tests: latency and/or forced status per host + path prefix.
export interface Fault {
  id: number;
  host: string; // demo host or '*'
  path_prefix: string;
  method?: string;
  latency_ms: number;
  status?: number;
  times?: number; // remaining matches; undefined = until reset
  retry_after_s?: number;
}

const int = (v: unknown, min: number, max: number) => typeof v === 'number' && Number.isInteger(v) && v >= min && v <= max;

export class FaultStore {
  private faults: Fault[] = [];
  private nextId = 1;

  list(): Fault[] {
    return this.faults.map((f) => ({ ...f }));
  }

  clear(): void {
    this.faults = [];
    this.nextId = 1;
  }

  /** Validates a POST /__demo/faults body; returns the stored fault or an error message. */
  add(body: unknown): Fault | string {
    if (!body || typeof body !== 'object') return 'body must be a JSON object';
    const b = body as Record<string, unknown>;
    if (typeof b.host !== 'string' || !b.host) return '"host" is required';
    const pathPrefix = b.path_prefix ?? '/';
    if (typeof pathPrefix !== 'string' || !pathPrefix.startsWith('/')) return '"path_prefix" must start with "/"';
    if (b.latency_ms !== undefined && !int(b.latency_ms, 0, 600_000)) return '"latency_ms" must be an integer 0..600000';
    if (b.status !== undefined && !int(b.status, 100, 599)) return '"status" must be an HTTP status code';
    if (b.times !== undefined && !int(b.times, 1, 1_000_000)) return '"times" must be a positive integer';
    if (b.retry_after_s !== undefined && !int(b.retry_after_s, 0, 86_400)) return '"retry_after_s" must be a non-negative integer';
    if (b.method !== undefined && typeof b.method !== 'string') return '"method" must be a string';
    if (b.latency_ms === undefined && b.status === undefined) return 'give "latency_ms" and/or "status"';
    const f: Fault = {
      id: this.nextId++,
      host: b.host.toLowerCase(),
      path_prefix: pathPrefix,
      method: typeof b.method === 'string' ? b.method.toUpperCase() : undefined,
      latency_ms: (b.latency_ms as number | undefined) ?? 0,
      status: b.status as number | undefined,
      times: b.times as number | undefined,
      retry_after_s: b.retry_after_s as number | undefined,
    };
    this.faults.push(f);
    return { ...f };
  }

  /** Finds the first matching fault and consumes one of its `times`. */
  take(host: string, method: string, path: string): Fault | undefined {
    const f = this.faults.find((x) => (x.host === '*' || x.host === host) && path.startsWith(x.path_prefix) && (!x.method || x.method === method));
    if (!f) return undefined;
    if (f.times !== undefined) {
      f.times--;
      if (f.times <= 0) this.faults = this.faults.filter((x) => x !== f);
    }
    return { ...f };
  }
}
