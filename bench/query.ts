// POST /v1/query through the full stack (API → Temporal → worker → demo site) for a demo HTTP
// operation, beside the same site request made directly, in the same run. The load comes from a
// process of its own (load-process.ts), as callers' requests do.
import { print, ratio, type Summary } from './stats.ts';
import { loadInChild, withoutLoadGenerator } from './load-process.ts';
import { cpuBetween, snapshot } from './procs.ts';

export interface QueryBenchInput {
  baseUrl: string;
  apiKey: string;
  siteOrigin: string;
  /** A second API on the same stack that learns results the other way (RESULT_WAIT), measured beside. */
  other?: { baseUrl: string; label: string };
  label?: string;
  total?: number;
}

export async function benchQuery({ baseUrl, apiKey, siteOrigin, other, label = 'service', total = 200 }: QueryBenchInput) {
  const body = JSON.stringify({ api: '@weather', operation: 'current_weather', input: { city: 'London' } });
  // Every figure from a load generator in a process of its own (load-process.ts), as callers are.
  const via = (base: string) => (n: number, concurrency: number) =>
    loadInChild({
      url: `${base}/v1/query`,
      method: 'POST',
      headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
      body,
      expectStatus: 200,
      total: n,
      concurrency,
      warmup: concurrency === 1 ? 10 : concurrency,
    });
  const viaService = via(baseUrl);
  const viaOther = other ? via(other.baseUrl) : undefined;
  // The same request the recipe makes, straight to the site (keep-alive, as the engine does).
  const direct = (n: number, concurrency: number) =>
    loadInChild({
      url: `${siteOrigin}/api/v1/current?city=London`,
      method: 'GET',
      headers: { host: 'weather.example.test' },
      expectStatus: 200,
      total: n,
      concurrency,
      warmup: concurrency === 1 ? 10 : concurrency,
    });
  const figures: Record<string, Summary> = {
    service_c1: (await viaService(total, 1)).summary,
  };
  if (viaOther) figures[`${other!.label}_c1`] = (await viaOther(total, 1)).summary;
  figures.direct_c1 = (await direct(total, 1)).summary;
  // Where the CPU goes at c=16: on two cores, CPU per query is what bounds queries per second.
  const before = snapshot();
  const c16 = await viaService(total * 2, 16);
  figures.service_c16 = c16.summary;
  const cpu_c16 = withoutLoadGenerator(cpuBetween(before, snapshot(), total * 2 + 16), c16, total * 2 + 16);
  if (viaOther) figures[`${other!.label}_c16`] = (await viaOther(total * 2, 16)).summary;
  figures.direct_c16 = (await direct(total * 2, 16)).summary;
  print(`POST /v1/query (HTTP operation; service = ${label}${other ? `, beside ${other.label}` : ''}) vs the same site request made directly`, figures);
  print('CPU by process during service_c16 (warm-up included in the per-query figure)', cpu_c16);
  return {
    ...figures,
    cpu_c16,
    ratios: {
      p50_c1: ratio(figures.service_c1!.p50_ms, figures.direct_c1.p50_ms),
      p99_c1: ratio(figures.service_c1!.p99_ms, figures.direct_c1.p99_ms),
      p50_c16: ratio(figures.service_c16.p50_ms, figures.direct_c16.p50_ms),
      qps_c16_direct_over_service: ratio(figures.direct_c16.qps, figures.service_c16.qps),
      ...(other
        ? {
            [`p50_c1_${other.label}_over_service`]: ratio(figures[`${other.label}_c1`]!.p50_ms, figures.service_c1!.p50_ms),
            [`p99_c1_${other.label}_over_service`]: ratio(figures[`${other.label}_c1`]!.p99_ms, figures.service_c1!.p99_ms),
            [`qps_c16_service_over_${other.label}`]: ratio(figures.service_c16.qps, figures[`${other.label}_c16`]!.qps),
          }
        : {}),
    },
  };
}
