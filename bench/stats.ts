// Load generation and summary statistics shared by the benchmarks.
export interface Summary {
  n: number;
  p50_ms: number;
  p95_ms: number;
  p99_ms: number;
  mean_ms: number;
  qps: number;
  errors: number;
}

export function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return NaN;
  const i = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[i]!;
}

const round = (x: number) => Math.round(x * 100) / 100;

/** Percentiles, mean and rate of `latencies` (ms; sorted in place) over `elapsedS` seconds. */
export function summarize(latencies: number[], errors: number, elapsedS: number): Summary {
  latencies.sort((a, b) => a - b);
  return {
    n: latencies.length,
    p50_ms: round(percentile(latencies, 50)),
    p95_ms: round(percentile(latencies, 95)),
    p99_ms: round(percentile(latencies, 99)),
    mean_ms: round(latencies.reduce((a, b) => a + b, 0) / latencies.length),
    qps: round(latencies.length / elapsedS),
    errors,
  };
}

/** Run `fn` `total` times with `concurrency` in flight; latency of each call and overall rate. */
export async function load(fn: (i: number) => Promise<boolean>, opts: { total: number; concurrency: number; warmup?: number }): Promise<Summary> {
  for (let i = 0; i < (opts.warmup ?? 0); i++) await fn(-1 - i);
  const latencies: number[] = [];
  let errors = 0;
  let next = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: opts.concurrency }, async () => {
      while (next < opts.total) {
        const i = next++;
        const t = performance.now();
        const ok = await fn(i).catch(() => false);
        latencies.push(performance.now() - t);
        if (!ok) errors++;
      }
    }),
  );
  return summarize(latencies, errors, (performance.now() - started) / 1000);
}

export const ratio = (a: number, b: number) => round(a / b);

export function print(title: string, rows: Record<string, Summary | Record<string, unknown>>) {
  console.log(`\n## ${title}`);
  console.table(rows);
}

/**
 * Several ways of doing the same thing at concurrency 1, interleaved (one call of each in turn,
 * `total` rounds, starting from a different one each round): a slow drift of the machine or the
 * browser lands on all of them alike, so small differences between them are measurable. `qps` is
 * each one's own calls over its own time.
 */
export async function interleaved(fns: Record<string, () => Promise<boolean>>, opts: { total: number; warmup?: number; pauseMs?: number }): Promise<Record<string, Summary>> {
  const names = Object.keys(fns);
  for (let i = 0; i < (opts.warmup ?? 0); i++) for (const n of names) await fns[n]!();
  const lat: Record<string, number[]> = Object.fromEntries(names.map((n) => [n, []]));
  const errors: Record<string, number> = Object.fromEntries(names.map((n) => [n, 0]));
  for (let round = 0; round < opts.total; round++) {
    for (let k = 0; k < names.length; k++) {
      const name = names[(round + k) % names.length]!;
      // Untimed: work a call leaves behind (a browser context closing, the next one being made)
      // lands on no other call.
      if (opts.pauseMs) await new Promise((r) => setTimeout(r, opts.pauseMs));
      const t = performance.now();
      const ok = await fns[name]!().catch(() => false);
      lat[name]!.push(performance.now() - t);
      if (!ok) errors[name]! += 1;
    }
  }
  return Object.fromEntries(names.map((n) => [n, summarize(lat[n]!, errors[n]!, lat[n]!.reduce((a, b) => a + b, 0) / 1000)]));
}

