// Streamed queries: time to the first SSE event and to the terminal event, beside the JSON call
// for the same operation in the same run (calls interleaved so both see the same machine state).
// A second scenario slows the site by 500 ms to show what the stream gives a waiting client.
import { createParser } from 'eventsource-parser';
import { percentile, print, ratio } from './stats.ts';

export interface SseBenchInput {
  baseUrl: string;
  apiKey: string;
  siteOrigin?: string;
  total?: number;
}

interface Sample {
  json_ms: number;
  sse_headers_ms: number;
  sse_first_event_ms: number;
  sse_executing_ms: number;
  sse_terminal_ms: number;
}

const round = (x: number) => Math.round(x * 100) / 100;

export async function benchSse({ baseUrl, apiKey, siteOrigin, total = 100 }: SseBenchInput) {
  const body = { api: '@weather', operation: 'current_weather', input: { city: 'London' } };
  const headers = { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' };

  const json = async () => {
    const t = performance.now();
    const res = await fetch(`${baseUrl}/v1/query`, { method: 'POST', headers, body: JSON.stringify(body) });
    await res.arrayBuffer();
    if (res.status !== 200) throw new Error(`JSON call answered ${res.status}`);
    return performance.now() - t;
  };

  const sse = async () => {
    const t = performance.now();
    const res = await fetch(`${baseUrl}/v1/query`, { method: 'POST', headers: { ...headers, accept: 'text/event-stream' }, body: JSON.stringify({ ...body, stream: true }) });
    const headersAt = performance.now() - t;
    let first = NaN;
    let executing = NaN;
    let terminal = NaN;
    let ok = false;
    const parser = createParser({
      onEvent: (e) => {
        const at = performance.now() - t;
        if (Number.isNaN(first)) first = at;
        if (e.event === 'progress' && Number.isNaN(executing) && JSON.parse(e.data).stage === 'executing') executing = at;
        if (e.event === 'result' || e.event === 'error') {
          terminal = at;
          ok = e.event === 'result';
        }
      },
    });
    const decoder = new TextDecoder();
    for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) parser.feed(decoder.decode(chunk, { stream: true }));
    if (!ok) throw new Error('stream did not end with a result event');
    return { sse_headers_ms: headersAt, sse_first_event_ms: first, sse_executing_ms: executing, sse_terminal_ms: terminal };
  };

  const run = async (n: number, warmup: number): Promise<Sample[]> => {
    for (let i = 0; i < warmup; i++) {
      await json();
      await sse();
    }
    const samples: Sample[] = [];
    for (let i = 0; i < n; i++) {
      // Alternate which goes first so neither always runs on a warmer path.
      if (i % 2 === 0) samples.push({ json_ms: await json(), ...(await sse()) });
      else {
        const s = await sse();
        samples.push({ ...s, json_ms: await json() });
      }
    }
    return samples;
  };

  const summarize = (samples: Sample[]) => {
    const keys = ['json_ms', 'sse_headers_ms', 'sse_first_event_ms', 'sse_executing_ms', 'sse_terminal_ms'] as const;
    const out: Record<string, { p50: number; p95: number; mean: number }> = {};
    for (const k of keys) {
      const xs = samples.map((s) => s[k]).sort((a, b) => a - b);
      out[k] = { p50: round(percentile(xs, 50)), p95: round(percentile(xs, 95)), mean: round(xs.reduce((a, b) => a + b, 0) / xs.length) };
    }
    return {
      n: samples.length,
      ...out,
      ratios: {
        terminal_over_json_p50: ratio(out.sse_terminal_ms!.p50, out.json_ms!.p50),
        first_event_over_json_p50: ratio(out.sse_first_event_ms!.p50, out.json_ms!.p50),
        terminal_over_json_p95: ratio(out.sse_terminal_ms!.p95, out.json_ms!.p95),
      },
    };
  };

  const result: Record<string, unknown> = { fast_site: summarize(await run(total, 5)) };

  if (siteOrigin) {
    const fault = (path: string, payload: unknown) =>
      fetch(`${siteOrigin}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(payload) }).then((r) => r.arrayBuffer());
    await fault('/__demo/faults', { host: 'weather.example.test', path_prefix: '/api/v1/current', latency_ms: 500 });
    try {
      result.site_plus_500ms = summarize(await run(Math.max(10, Math.floor(total / 5)), 1));
    } finally {
      await fault('/__demo/reset', {});
    }
  }

  if (siteOrigin) result.open_streams = await openStreamsCost({ baseUrl, headers, body, siteOrigin, sse, json });

  const table: Record<string, Record<string, unknown>> = {};
  for (const [scenario, s] of Object.entries(result).filter(([k]) => k !== 'open_streams') as Array<[string, Record<string, Record<string, unknown>>]>) {
    for (const k of ['json_ms', 'sse_headers_ms', 'sse_first_event_ms', 'sse_executing_ms', 'sse_terminal_ms']) table[`${scenario} ${k}`] = s[k]!;
  }
  print('Streamed query (SSE): first event and terminal event vs the JSON call, same run', table);
  print('What N open streams cost while their site is slow (CPU of this process: API + worker in-process), beside N JSON calls', result.open_streams as Record<string, Record<string, unknown>>);
  return result;
}

/**
 * N streams held open while the site takes 3 s, beside N JSON calls doing the same work: the CPU
 * the API and the worker spend meanwhile (both run in this process). Polling the workflow's
 * progress query every 150 ms made each open stream a stream of workflow queries; the difference
 * between the two rows is what streaming costs.
 */
async function openStreamsCost(o: { baseUrl: string; headers: Record<string, string>; body: unknown; siteOrigin: string; sse: () => Promise<unknown>; json: () => Promise<number> }, n = 16, siteMs = 3_000) {
  const fault = (path: string, payload: unknown) =>
    fetch(`${o.siteOrigin}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(payload) }).then((r) => r.arrayBuffer());
  const measure = async (fn: () => Promise<unknown>) => {
    await fault('/__demo/faults', { host: 'weather.example.test', path_prefix: '/api/v1/current', latency_ms: siteMs, times: n });
    const cpu0 = process.cpuUsage();
    const t0 = performance.now();
    await Promise.all(Array.from({ length: n }, fn));
    const wall = performance.now() - t0;
    const cpu = process.cpuUsage(cpu0);
    await fault('/__demo/reset', {});
    return { n, wall_ms: round(wall), cpu_ms: round((cpu.user + cpu.system) / 1000), cpu_ms_per_stream_second: round((cpu.user + cpu.system) / 1000 / n / (wall / 1000)) };
  };
  const jsonRow = await measure(o.json);
  const sseRow = await measure(o.sse);
  return { [`json_x${n}`]: jsonRow, [`sse_x${n}`]: sseRow, sse_over_json_cpu: { ratio: ratio(sseRow.cpu_ms, jsonRow.cpu_ms) } };
}
