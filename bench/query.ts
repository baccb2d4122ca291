// POST /v1/query through the full stack (API → Temporal → worker → demo site) for a demo HTTP
// operation, beside the same site request made directly, in the same run.
import { Agent, request } from 'undici';
import { load, print, ratio } from './stats.ts';

export interface QueryBenchInput {
  baseUrl: string;
  apiKey: string;
  siteOrigin: string;
  total?: number;
}

export async function benchQuery({ baseUrl, apiKey, siteOrigin, total = 200 }: QueryBenchInput) {
  const body = JSON.stringify({ api: '@weather', operation: 'current_weather', input: { city: 'London' } });
  const viaService = async () => {
    const res = await fetch(`${baseUrl}/v1/query`, {
      method: 'POST',
      headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
      body,
    });
    await res.arrayBuffer();
    return res.status === 200;
  };
  // The same request the recipe makes, straight to the site (keep-alive, as the engine does).
  const agent = new Agent({ connections: 32 });
  const direct = async () => {
    const res = await request(`${siteOrigin}/api/v1/current?city=London`, { headers: { host: 'weather.example.test' }, dispatcher: agent });
    await res.body.arrayBuffer();
    return res.statusCode === 200;
  };
  const figures = {
    service_c1: await load(viaService, { total, concurrency: 1, warmup: 10 }),
    direct_c1: await load(direct, { total, concurrency: 1, warmup: 10 }),
    service_c16: await load(viaService, { total: total * 2, concurrency: 16, warmup: 16 }),
    direct_c16: await load(direct, { total: total * 2, concurrency: 16, warmup: 16 }),
  };
  await agent.close();
  print('POST /v1/query (HTTP operation) vs the same site request made directly', figures);
  return {
    ...figures,
    ratios: {
      p50_c1: ratio(figures.service_c1.p50_ms, figures.direct_c1.p50_ms),
      p99_c1: ratio(figures.service_c1.p99_ms, figures.direct_c1.p99_ms),
      p50_c16: ratio(figures.service_c16.p50_ms, figures.direct_c16.p50_ms),
      qps_c16_direct_over_service: ratio(figures.direct_c16.qps, figures.service_c16.qps),
    },
  };
}
