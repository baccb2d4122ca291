// RESULT_WAIT=notify against RESULT_WAIT=history, interleaved: two APIs on one stack, and the
// requests alternate between them within the same load, so a machine whose load drifts during the
// run (other processes on the same cores) weighs on both alike. At c=16 the two share the
// throughput, so compare their latencies, not their rates.
import { summarize } from './stats.ts';

export interface ResultWaitBenchInput {
  apiKey: string;
  /** label → base URL of an API */
  apis: Record<string, string>;
  total?: number;
}

export async function benchResultWait({ apiKey, apis, total = 300 }: ResultWaitBenchInput) {
  const body = JSON.stringify({ api: '@weather', operation: 'current_weather', input: { city: 'London' } });
  const labels = Object.keys(apis);
  const call = async (label: string) => {
    const res = await fetch(`${apis[label]}/v1/query`, {
      method: 'POST',
      headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
      body,
    });
    await res.arrayBuffer();
    return res.status === 200;
  };
  const run = async (concurrency: number) => {
    for (let i = 0; i < 10; i++) await call(labels[i % labels.length]!);
    const lat: Record<string, number[]> = Object.fromEntries(labels.map((l) => [l, []]));
    const errors: Record<string, number> = Object.fromEntries(labels.map((l) => [l, 0]));
    let next = 0;
    const started = performance.now();
    await Promise.all(
      Array.from({ length: concurrency }, async () => {
        while (next < total) {
          const label = labels[next++ % labels.length]!;
          const t = performance.now();
          const ok = await call(label).catch(() => false);
          lat[label]!.push(performance.now() - t);
          if (!ok) errors[label]! += 1;
        }
      }),
    );
    const elapsed = (performance.now() - started) / 1000;
    return Object.fromEntries(labels.map((l) => [`${l}_c${concurrency}`, summarize(lat[l]!, errors[l]!, elapsed)]));
  };
  const figures = { ...(await run(1)), ...(await run(16)) };
  console.log('\n## RESULT_WAIT, interleaved (requests alternate between two APIs on one stack)');
  console.table(figures);
  return figures;
}
