// POST /v1/query through the full stack (API → Temporal → worker → demo site) for a demo HTTP
// operation, beside the same site request made directly, in the same run.
import { Agent, request } from 'undici';
import { load, print, ratio, type Summary } from './stats.ts';
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
  const via = (base: string) => async () => {
    const res = await fetch(`${base}/v1/query`, {
      method: 'POST',
      headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
      body,
    });
    await res.arrayBuffer();
    return res.status === 200;
  };
  const viaService = via(baseUrl);
  const viaOther = other ? via(other.baseUrl) : undefined;
  // The same request the recipe makes, straight to the site (keep-alive, as the engine does).
  const agent = new Agent({ connections: 32 });
  const direct = async () => {
    const res = await request(`${siteOrigin}/api/v1/current?city=London`, { headers: { host: 'weather.example.test' }, dispatcher: agent });
    await res.body.arrayBuffer();
    return res.statusCode === 200;
  };
  const figures: Record<string, Summary> = {
    service_c1: await load(viaService, { total, concurrency: 1, warmup: 10 }),
  };
  if (viaOther) figures[`${other!.label}_c1`] = await load(viaOther, { total, concurrency: 1, warmup: 10 });
  figures.direct_c1 = await load(direct, { total, concurrency: 1, warmup: 10 });
  // Where the CPU goes at c=16: on two cores, CPU per query is what bounds queries per second.
  const before = snapshot();
  figures.service_c16 = await load(viaService, { total: total * 2, concurrency: 16, warmup: 16 });
  const cpu_c16 = cpuBetween(before, snapshot(), total * 2 + 16);
  if (viaOther) figures[`${other!.label}_c16`] = await load(viaOther, { total: total * 2, concurrency: 16, warmup: 16 });
  figures.direct_c16 = await load(direct, { total: total * 2, concurrency: 16, warmup: 16 });
  await agent.close();
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
